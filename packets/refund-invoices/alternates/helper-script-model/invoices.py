"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path


def total(path: str) -> int:
    """Return the sum of the ``cents`` column of the CSV file at ``path``.

    Refunds are negative cents, so they lower the total. Every row counts; a
    cell that is not an integer raises ValueError (int() does that for us).
    """
    running = 0
    with Path(path).open(newline="") as handle:
        for line_no, row in enumerate(csv.DictReader(handle), start=2):
            try:
                running += int(row["cents"])
            except ValueError:
                raise ValueError(f"{path}, line {line_no}: cents {row['cents']!r} is not an integer") from None
    return running
