from pathlib import Path

import pytest

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refund_is_negative_cents_and_lowers_the_total():
    # 1000 + 500 - 200: the -200 refund is taken off, not added.
    assert invoices.total(str(SAMPLE)) == 1300


def test_non_integer_cents_is_a_value_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("cents\n100\n12.5\n")
    with pytest.raises(ValueError):
        invoices.total(str(bad))
