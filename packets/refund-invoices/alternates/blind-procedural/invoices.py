"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def total(path: str) -> int:
    """Return the sum of the ``cents`` column of the CSV file at ``path``.

    A refund is a negative number of cents and is added with its sign, so it
    lowers the total.  A cell that is not an integer raises ValueError.
    """
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            cell = row["cents"]
            digits = (cell or "").strip().lstrip("+-")
            if not (digits.isascii() and digits.isdigit()):
                raise ValueError("not an integer number of cents: %r" % (cell,))
            running += int(cell)
    return running
