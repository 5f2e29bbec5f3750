import pytest

from durations import format_duration, parse_duration


@pytest.mark.parametrize("text,want", [
    ("1h30m", 5400),
    ("2d", 172800),
    ("90s", 90),
    ("0s", 0),
    ("1d1h1m1s", 90061),
    ("  15m ", 900),
    ("100h", 360000),
])
def test_hidden_parse(text, want):
    assert parse_duration(text) == want


@pytest.mark.parametrize("text", ["", "   ", "5", "h", "1x", "1m1h", "1h1h", "1.5h", "-1s", "1 h", "1hh"])
def test_hidden_parse_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_hidden_round_trip():
    for seconds in (0, 1, 59, 60, 3599, 3600, 86399, 86400, 1234567):
        assert parse_duration(format_duration(seconds)) == seconds
