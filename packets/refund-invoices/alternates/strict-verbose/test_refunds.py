"""Refunds are negative cents: they lower the total and are never dropped or flipped."""
import pytest

import invoices


@pytest.fixture
def write_csv(tmp_path):
    def _write(*cells, header="cents"):
        path = tmp_path / "export.csv"
        path.write_text("\n".join([header, *cells]) + "\n", encoding="utf-8")
        return str(path)
    return _write


@pytest.mark.parametrize(
    "cells, expected",
    [
        (["1000", "500", "-200"], 1300),   # the shipped sample: one refund lowers the total
        (["-200"], -200),                  # a refund alone is a negative total
        (["300", "-300"], 0),              # a full refund cancels its charge
        (["100", "-250", "-50"], -200),    # refunds larger than charges stay negative
        (["0", "7"], 7),
    ],
)
def test_refund_negative_cents_lower_the_total(write_csv, cells, expected):
    assert invoices.total(write_csv(*cells)) == expected


@pytest.mark.parametrize("bad", ["12.5", "abc", "", "1e3", "--4"])
def test_non_integer_cents_raise_value_error(write_csv, bad):
    with pytest.raises(ValueError):
        invoices.total(write_csv("100", bad, "-20"))


def test_extra_columns_are_ignored(tmp_path):
    path = tmp_path / "wide.csv"
    path.write_text("id,cents,memo\n1,900,charge\n2,-400,refund\n", encoding="utf-8")
    assert invoices.total(str(path)) == 500
