from decimal import Decimal

from ledger import read_rows, totals


def test_hidden_totals_count_every_row():
    assert totals([("food", Decimal("12.50"))]) == {"food": Decimal("12.50")}
    rows = [("food", Decimal("10")), ("rent", Decimal("900")), ("food", Decimal("2.25"))]
    assert totals(rows) == {"food": Decimal("12.25"), "rent": Decimal("900")}
    assert totals([]) == {}


def test_hidden_read_rows_skips_blank_lines(tmp_path):
    p = tmp_path / "ledger.csv"
    p.write_text("category,amount\nfood,10.00\n\nrent,900\nfood,2.50\n\n")
    rows = read_rows(p)
    assert rows == [("food", Decimal("10.00")), ("rent", Decimal("900")), ("food", Decimal("2.50"))]
    assert totals(rows) == {"food": Decimal("12.50"), "rent": Decimal("900")}
