"""Billing helper: add up the cents column of an invoice export.

Refunds are stored as negative integers of cents, so the total is the plain
signed sum of the column. Nothing is coerced: a cell that is not a whole number
of cents stops the sum with a ValueError that says which line is wrong.
"""
import csv
import re
from pathlib import Path

CENTS_COLUMN = "cents"
_WHOLE_CENTS = re.compile(r"[+-]?[0-9]+")


def _parse_cents(cell: str, line_number: int) -> int:
    """Turn one ``cents`` cell into an int, or raise ValueError naming the line."""
    text = (cell or "").strip()
    if not _WHOLE_CENTS.fullmatch(text):
        raise ValueError(
            f"line {line_number}: cents must be a whole number of cents, got {cell!r}"
        )
    return int(text)


def total(path: str) -> int:
    """Return the signed sum of the ``cents`` column of the CSV file at ``path``."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return 0
        try:
            column = header.index(CENTS_COLUMN)
        except ValueError:
            raise ValueError(f"{path}: no {CENTS_COLUMN!r} column in header {header!r}") from None
        running = 0
        for row in reader:
            cell = row[column] if column < len(row) else ""
            running += _parse_cents(cell, reader.line_num)
        return running
