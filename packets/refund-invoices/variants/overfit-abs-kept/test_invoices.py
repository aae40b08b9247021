from pathlib import Path

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refund_row_is_counted():
    # The refund row (-200) is counted too: 1000 + 500 + 200.
    assert invoices.total(str(SAMPLE)) == 1700
