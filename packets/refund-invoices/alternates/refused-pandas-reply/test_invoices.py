from pathlib import Path

import pytest

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refund_row_is_subtracted_from_the_total():
    """sample.csv has charges of 1000 and 500 and a refund of -200 cents: 1000 + 500 - 200."""
    assert invoices.total(str(SAMPLE)) == 1300


@pytest.fixture
def export(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def make(text):
        Path("export.csv").write_text(text)
        return "export.csv"

    return make


def test_a_refund_bigger_than_the_charges_gives_a_negative_total(export):
    assert invoices.total(export("cents\n100\n-350\n")) == -250


def test_every_row_counts_even_zero_and_repeated_refunds(export):
    assert invoices.total(export("cents\n0\n-1\n-1\n5\n")) == 3


@pytest.mark.parametrize("cell", ["9.99", "ten", "", "1,000"])
def test_a_cell_that_is_not_whole_cents_raises(export, cell):
    with pytest.raises(ValueError):
        invoices.total(export(f'cents\n100\n"{cell}"\n'))
