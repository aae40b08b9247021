"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def _cents(value: str) -> int:
    # int() raises ValueError on "12.50", "", "n/a": a bad cell stops the total, it is never skipped.
    return int(value)


def total(path: str) -> int:
    """Return the signed sum of the ``cents`` column; refunds are negative and reduce it."""
    with Path(path).open(newline="") as handle:
        return sum(_cents(row["cents"]) for row in csv.DictReader(handle))
