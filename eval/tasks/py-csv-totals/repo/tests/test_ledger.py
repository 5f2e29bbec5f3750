from decimal import Decimal

from ledger import report


def test_report_orders_by_amount():
    lines = report({"rent": Decimal("900"), "food": Decimal("250.5")})
    assert lines == ["rent: 900.00", "food: 250.50"]
