"""Mutant: the shipped bug, every row made positive."""
import csv
from pathlib import Path


def total(path: str) -> int:
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            running += abs(int(row["cents"]))
    return running
