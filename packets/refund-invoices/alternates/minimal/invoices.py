"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def total(path: str) -> int:
    """Return the sum of the ``cents`` column of the CSV file at ``path``.

    A refund is a negative number of cents and lowers the total. A cell that is
    not an integer raises ``ValueError``.
    """
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            running += int(row["cents"])
    return running
