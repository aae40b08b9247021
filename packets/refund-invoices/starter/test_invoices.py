from pathlib import Path

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_charges_only():
    assert invoices.total(str(SAMPLE)) == 1500
