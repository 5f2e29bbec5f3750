"""Closed intervals of numbers, as (start, end) tuples with start <= end."""


def overlaps(a, b):
    """Whether intervals a and b share at least one point."""
    return a[0] <= b[1] and b[0] <= a[1]


def length(interval):
    """How long an interval is."""
    return interval[1] - interval[0]
