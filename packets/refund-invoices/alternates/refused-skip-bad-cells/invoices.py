"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def total(path: str) -> int:
    """Return the sum of the ``cents`` column of the CSV file at ``path``."""
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            running += int(row["cents"])  # signed: a refund (negative cents) lowers the total
    return running
