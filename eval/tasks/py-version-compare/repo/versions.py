"""Release version strings such as "1.10.2"."""


def compare(a: str, b: str) -> int:
    """Return -1 if version a is older than b, 0 if they are the same, 1 if a is newer."""
    if a == b:
        return 0
    return -1 if a < b else 1


def newest(versions: list[str]) -> str:
    """Return the newest of a non-empty list of versions."""
    best = versions[0]
    for v in versions[1:]:
        if compare(v, best) > 0:
            best = v
    return best
