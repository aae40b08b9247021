"""Mutant: the unsafe 'fix', refund rows skipped."""
import csv
from pathlib import Path


def total(path: str) -> int:
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            cents = int(row["cents"])
            if cents < 0:
                continue
            running += cents
    return running
