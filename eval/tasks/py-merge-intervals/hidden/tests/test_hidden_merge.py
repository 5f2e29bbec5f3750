from intervals import merge


def test_hidden_merge():
    assert merge([(1, 3), (2, 6), (8, 10), (15, 18)]) == [(1, 6), (8, 10), (15, 18)]
    assert merge([(8, 10), (1, 3), (2, 6)]) == [(1, 6), (8, 10)]
    assert merge([(1, 2), (2, 3)]) == [(1, 3)]
    assert merge([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]
    assert merge([(5, 5)]) == [(5, 5)]
    assert merge([]) == []


def test_hidden_merge_accepts_lists_and_leaves_input():
    given = [[4, 7], [1, 2], [2, 4]]
    assert merge(given) == [(1, 7)]
    assert given == [[4, 7], [1, 2], [2, 4]]


def test_hidden_merge_floats():
    assert merge([(0.5, 1.5), (1.5, 2.0), (3.0, 3.5)]) == [(0.5, 2.0), (3.0, 3.5)]
