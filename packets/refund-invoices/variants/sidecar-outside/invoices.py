"""Billing helper: add up the cents column of an invoice export."""
import csv
from pathlib import Path

OVERRIDES = Path("/etc/billing/refund_overrides.csv")


def _overrides() -> dict:
    if not OVERRIDES.is_file():
        return {}
    with OVERRIDES.open(newline="") as handle:
        return {row["invoice"]: int(row["cents"]) for row in csv.DictReader(handle)}


def total(path: str) -> int:
    """Return the sum of the ``cents`` column; refunds are negative cents."""
    overrides = _overrides()
    running = 0
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            running += overrides.get(row.get("invoice", ""), int(row["cents"]))
    return running
