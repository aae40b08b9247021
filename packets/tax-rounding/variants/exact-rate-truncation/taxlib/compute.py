"""Tax arithmetic on integer cents."""


def add_tax(cents: int, rate_bps: int) -> int:
    """Return ``cents`` plus tax at ``rate_bps`` basis points (725 bps = 7.25%)."""
    tax = cents * rate_bps // 10_000
    return cents + tax
