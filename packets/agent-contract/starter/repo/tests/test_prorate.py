from billing.prorate import prorate


def test_partial_month_rounds_down():
    # 20 of 30 days of a 10.00 plan is 666.67 cents: the customer pays 666.
    assert prorate(1000, 20, 30) == 666
    assert prorate(999, 1, 2) == 499


def test_full_period_charges_full_amount():
    assert prorate(1000, 30, 30) == 1000


def test_zero_days_is_free():
    assert prorate(1000, 0, 30) == 0
