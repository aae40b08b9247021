from shop.fees import card_fee


def test_card_fee_rounds_half_up():
    assert card_fee(1500) == 44    # 43.5
    assert card_fee(2500) == 73    # 72.5
    assert card_fee(1010) == 29    # 29.29


def test_card_fee_waived_below_minimum():
    assert card_fee(499) == 0
    assert card_fee(0) == 0
