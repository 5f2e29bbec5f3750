from textutil import center, indent, truncate


def test_truncate():
    assert truncate("hello world", 8) == "hello..."
    assert truncate("short", 10) == "short"


def test_indent():
    assert indent("a\n\nb") == "    a\n\n    b"


def test_center():
    assert center("ab", 5, "*") == "*ab**"
