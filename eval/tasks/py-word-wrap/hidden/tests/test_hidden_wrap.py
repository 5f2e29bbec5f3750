import pytest

from textutil import wrap


def test_hidden_wrap_greedy():
    text = "The quick brown fox jumps over the lazy dog"
    assert wrap(text, 10) == ["The quick", "brown fox", "jumps over", "the lazy", "dog"]
    assert wrap(text, 100) == [text]
    for line in wrap(text, 12):
        assert len(line) <= 12


def test_hidden_wrap_whitespace():
    assert wrap("  many   spaces\there\n\nand lines  ", 11) == ["many spaces", "here and", "lines"]
    assert wrap("", 5) == []
    assert wrap("   \n\t ", 5) == []


def test_hidden_wrap_long_words():
    assert wrap("a supercalifragilistic word", 8) == ["a", "supercalifragilistic", "word"]
    assert wrap("exactly ten", 7) == ["exactly", "ten"]


def test_hidden_wrap_bad_width():
    with pytest.raises(ValueError):
        wrap("text", 0)
    with pytest.raises(ValueError):
        wrap("text", -3)
