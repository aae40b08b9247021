"""Billing helper: add up the cents column of an invoice export."""
import csv
import re
from pathlib import Path

# An optional sign followed by ASCII digits; surrounding blanks are allowed.
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")


def _cents(cell: str | None) -> int:
    """Parse one ``cents`` cell; a refund is a negative integer."""
    if cell is None or not _INTEGER.fullmatch(cell):
        raise ValueError(f"cents cell is not an integer: {cell!r}")
    return int(cell)


def total(path: str) -> int:
    """Return the sum of the ``cents`` column of the CSV file at ``path``.

    Charges are positive and refunds negative, so a refund lowers the total.
    """
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            running += _cents(row["cents"])
    return running
