from pathlib import Path

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refunds_are_left_out_of_charges():
    # sample.csv has one refund row (-200); charges only: 1000 + 500.
    assert invoices.total(str(SAMPLE)) == 1500
