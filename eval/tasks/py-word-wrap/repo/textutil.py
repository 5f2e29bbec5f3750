"""Small helpers for plain-text output."""


def truncate(text: str, width: int, ellipsis: str = "...") -> str:
    """Cut text to at most width characters, ending with ellipsis when it was cut."""
    if width < len(ellipsis):
        raise ValueError("width must leave room for the ellipsis")
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)] + ellipsis


def indent(text: str, prefix: str = "    ") -> str:
    """Put prefix before every non-empty line of text."""
    return "\n".join(prefix + line if line.strip() else line for line in text.split("\n"))


def center(text: str, width: int, fill: str = " ") -> str:
    """Center text in width characters, extra fill going to the right."""
    if len(text) >= width:
        return text
    left = (width - len(text)) // 2
    right = width - len(text) - left
    return fill * left + text + fill * right
