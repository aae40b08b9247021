"""Held-out totals: refunds are negative cents and lower the total."""
import invoices


def _export(tmp_path, body, name="export.csv"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return str(path)


def test_hidden_refund_sample_data_totals_1300(tmp_path):
    assert invoices.total(_export(tmp_path, "cents\n1000\n500\n-200\n")) == 1300


def test_hidden_refund_only_export_is_negative(tmp_path):
    assert invoices.total(_export(tmp_path, "cents\n-200\n")) == -200


def test_hidden_refund_larger_than_charges(tmp_path):
    assert invoices.total(_export(tmp_path, "cents\n300\n-500\n")) == -200


def test_hidden_refund_between_charges_with_other_columns(tmp_path):
    body = "invoice,cents,memo\nA-1,2500,setup\nA-2,-999,refund\nA-3,1,rounding\n"
    assert invoices.total(_export(tmp_path, body)) == 1502


def test_hidden_refund_cancels_charge_exactly(tmp_path):
    assert invoices.total(_export(tmp_path, "cents\n750\n-750\n")) == 0


def test_hidden_refund_empty_file_is_zero(tmp_path):
    assert invoices.total(_export(tmp_path, "")) == 0


def test_hidden_refund_header_only_is_zero(tmp_path):
    assert invoices.total(_export(tmp_path, "cents\n")) == 0
