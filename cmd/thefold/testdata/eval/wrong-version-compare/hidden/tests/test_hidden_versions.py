import pytest

from versions import compare, newest


@pytest.mark.parametrize("a,b,want", [
    ("1.10.0", "1.9.0", 1),
    ("1.9.0", "1.10.0", -1),
    ("2.0", "10.0", -1),
    ("1.2", "1.2.0", 0),
    ("1.2.0.0", "1.2", 0),
    ("1.2.1", "1.2", 1),
    ("0.0.1", "0.0.01", 0),
    ("3", "3.0.0", 0),
])
def test_hidden_compare(a, b, want):
    assert compare(a, b) == want
    assert compare(b, a) == -want


def test_hidden_newest():
    assert newest(["1.9.0", "1.10.0", "1.2.0"]) == "1.10.0"
    assert newest(["9", "10", "2"]) == "10"
