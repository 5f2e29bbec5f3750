"""Durations written the way our config files write them: "1h30m", "2d", "45s"."""

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def format_duration(seconds: int) -> str:
    """Write a number of seconds (not negative) as "1d2h3m4s", leaving out zero units."""
    if seconds < 0:
        raise ValueError("a duration is not negative")
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in _UNITS:
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)
