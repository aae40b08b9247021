from pathlib import Path

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refund_row_lowers_the_sample_total():
    # sample.csv: two charges (1000, 500) and one refund (-200).
    # A refund is negative cents and must be subtracted: 1000 + 500 - 200.
    assert invoices.total(str(SAMPLE)) == 1300


def test_refund_only_export_totals_negative(tmp_path):
    export = tmp_path / "refunds.csv"
    export.write_text("cents\n-200\n-50\n", encoding="utf-8")
    assert invoices.total(str(export)) == -250, "refunds alone must not turn into a charge"
