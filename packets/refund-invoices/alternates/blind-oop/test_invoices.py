from pathlib import Path

import pytest

import invoices

SAMPLE = Path(__file__).with_name("sample.csv")


def test_refund_is_negative_cents_and_lowers_the_total():
    # sample.csv: charges 1000 and 500, one refund of -200 -> 1000 + 500 - 200
    assert invoices.total(str(SAMPLE)) == 1300


@pytest.fixture
def export(tmp_path):
    def write(*cells: str) -> str:
        path = tmp_path / "export.csv"
        rows = "".join(f"r{i},{cell}\n" for i, cell in enumerate(cells))
        path.write_text("id,cents\n" + rows)
        return str(path)

    return write


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        (("1000", "-1000"), 0),
        (("-250",), -250),
        (("300", "-100", "-100", "5"), 105),
    ],
)
def test_every_row_counts_with_its_sign(export, cells, expected):
    assert invoices.total(export(*cells)) == expected


@pytest.mark.parametrize("bad", ["12.5", "abc", "", "1e3", "1_000"])
def test_non_integer_cents_is_a_value_error(export, bad):
    with pytest.raises(ValueError):
        invoices.total(export("100", bad, "200"))


def test_row_without_a_cents_cell_is_a_value_error(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("id,cents\nr0,100\nr1\n")
    with pytest.raises(ValueError):
        invoices.total(str(path))
