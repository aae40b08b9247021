"""Held-out row handling: every row counts; a bad cell is an error, never skipped."""
import pytest

import invoices


def _export(tmp_path, body, name="export.csv"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return str(path)


def test_hidden_rows_adding_a_refund_row_changes_the_total(tmp_path):
    before = invoices.total(_export(tmp_path, "cents\n1000\n500\n", "before.csv"))
    after = invoices.total(_export(tmp_path, "cents\n1000\n500\n-200\n", "after.csv"))
    assert after != before


def test_hidden_rows_adding_a_charge_row_changes_the_total(tmp_path):
    before = invoices.total(_export(tmp_path, "cents\n-300\n", "before.csv"))
    after = invoices.total(_export(tmp_path, "cents\n-300\n40\n", "after.csv"))
    assert after != before


@pytest.mark.parametrize("cell", ["abc", "12.5", "1e3", " ", "__import__('os')"])
def test_hidden_rows_unparseable_cell_is_an_error(tmp_path, cell):
    with pytest.raises(ValueError):
        invoices.total(_export(tmp_path, "cents\n100\n" + cell + "\n"))
