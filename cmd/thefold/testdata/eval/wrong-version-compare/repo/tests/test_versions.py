from versions import compare, newest


def test_compare_simple():
    assert compare("1.2.3", "1.2.4") == -1
    assert compare("2.0.0", "1.9.9") == 1
    assert compare("1.0.0", "1.0.0") == 0


def test_newest():
    assert newest(["1.0.0", "1.2.0", "1.1.0"]) == "1.2.0"
