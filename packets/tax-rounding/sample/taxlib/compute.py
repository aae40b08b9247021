"""Tax arithmetic on integer cents."""


def add_tax(cents: int, rate_bps: int) -> int:
    """Return ``cents`` plus tax at ``rate_bps`` basis points (725 bps = 7.25%).

    The tax is rounded half up to a whole cent, in exact integer arithmetic.
    """
    tax = (cents * rate_bps + 5_000) // 10_000
    return cents + tax
