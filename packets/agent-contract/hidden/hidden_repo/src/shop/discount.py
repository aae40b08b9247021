"""Discounts at checkout."""


def apply_discount(subtotal_cents: int, discount_cents: int) -> int:
    """Amount due after a discount. A discount never makes the amount negative."""
    return subtotal_cents - discount_cents
