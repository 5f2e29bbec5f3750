from intervals import length, overlaps


def test_overlaps():
    assert overlaps((1, 3), (2, 5))
    assert overlaps((1, 2), (2, 3))
    assert not overlaps((1, 2), (3, 4))


def test_length():
    assert length((2, 7)) == 5
