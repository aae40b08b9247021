from pathlib import Path

import pytest

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refund_of_200_cents_lowers_the_sample_total_to_1300():
    assert invoices.total(str(SAMPLE)) == 1300


def test_refund_is_negative_cents(tmp_path):
    export = tmp_path / "one_refund.csv"
    export.write_text("cents\n-450\n")
    assert invoices.total(str(export)) == -450


def test_bad_cell_names_the_line(tmp_path):
    export = tmp_path / "bad.csv"
    export.write_text("cents\n10\nabc\n")
    with pytest.raises(ValueError, match="line 3"):
        invoices.total(str(export))
