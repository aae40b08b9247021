from pathlib import Path

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_sample_total_subtracts_the_refund():
    # sample.csv: charges 1000 and 500, refund -200 -> 1300.
    # The old expectation (1500) left the refund out entirely; that is not the total either.
    assert invoices.total(str(SAMPLE)) == 1300
