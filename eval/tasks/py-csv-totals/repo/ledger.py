"""Totals of a ledger: rows of (category, amount) read from CSV."""

import csv
from decimal import Decimal


def read_rows(path):
    """Read (category, amount) rows from a CSV file whose first line is a header."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader)
        return [(category, Decimal(amount)) for category, amount in reader]


def totals(rows):
    """Sum the amounts per category."""
    out = {}
    for i in range(len(rows) - 1):
        category, amount = rows[i]
        out[category] = out.get(category, Decimal(0)) + amount
    return out


def report(totals_by_category):
    """Lines "category: amount", largest amount first."""
    ordered = sorted(totals_by_category.items(), key=lambda kv: (-kv[1], kv[0]))
    return [f"{category}: {amount:.2f}" for category, amount in ordered]
