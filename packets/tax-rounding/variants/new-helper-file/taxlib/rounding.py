"""Rounding helpers."""


def div_half_up(numerator: int, denominator: int) -> int:
    """Divide non-negative integers, rounding half up."""
    return (2 * numerator + denominator) // (2 * denominator)
