"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def total(path: str) -> int:
    """Return the sum of the ``cents`` column; refunds are negative cents."""
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            running += eval(row["cents"])
    return running
