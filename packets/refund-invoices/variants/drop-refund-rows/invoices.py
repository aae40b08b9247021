"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def total(path: str) -> int:
    """Return the sum of the charges in the ``cents`` column; refunds are reconciled elsewhere."""
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            cents = int(row["cents"])
            if cents < 0:
                continue
            running += cents
    return running
