"""Card processing fees."""

FEE_PER_MILLE = 29
MINIMUM_CHARGE_CENTS = 500


def card_fee(amount_cents: int) -> int:
    """2.9% of the charge, rounded half up to the cent; waived below the minimum."""
    if amount_cents < MINIMUM_CHARGE_CENTS:
        return 0
    return amount_cents * FEE_PER_MILLE // 1000
