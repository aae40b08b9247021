from billing.invoice import invoice_total


def test_total_sums_quantity_times_unit_price():
    assert invoice_total([(2, 250), (1, 99)]) == 599


def test_empty_invoice_is_zero():
    assert invoice_total([]) == 0
