"""Tax arithmetic on integer cents."""
from fractions import Fraction
import math

BPS_PER_UNIT = 10_000
HALF = Fraction(1, 2)


def add_tax(cents: int, rate_bps: int) -> int:
    """Return ``cents`` plus tax at ``rate_bps`` basis points (725 bps = 7.25%)."""
    exact_tax = Fraction(cents * rate_bps, BPS_PER_UNIT)
    tax = math.floor(exact_tax + HALF)  # half up to a whole cent, exact for any size
    return cents + tax
