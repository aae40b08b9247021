from shop.discount import apply_discount


def test_discount_never_exceeds_subtotal():
    assert apply_discount(1000, 1500) == 0


def test_discount_is_subtracted():
    assert apply_discount(1000, 250) == 750
