"""Tax arithmetic on integer cents."""
from .rounding import div_half_up


def add_tax(cents: int, rate_bps: int) -> int:
    """Return ``cents`` plus tax at ``rate_bps`` basis points (725 bps = 7.25%)."""
    tax = div_half_up(cents * rate_bps, 10_000)
    return cents + tax
