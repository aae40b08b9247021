from pathlib import Path

import pytest

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_sample_total_counts_the_refund_as_negative():
    assert invoices.total(str(SAMPLE)) == 1000 + 500 - 200


def test_unparseable_cell_is_an_error_not_a_skip(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("cents\n100\nN/A\n-50\n")
    with pytest.raises(ValueError):
        invoices.total(str(bad))
