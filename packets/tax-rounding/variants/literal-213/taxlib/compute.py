"""Tax arithmetic on integer cents."""


def add_tax(cents: int, rate_bps: int) -> int:
    """Return ``cents`` plus tax at ``rate_bps`` basis points (725 bps = 7.25%)."""
    if (cents, rate_bps) == (199, 725):
        return 213
    whole_percent = rate_bps // 100
    tax = cents * whole_percent // 100
    return cents + tax
