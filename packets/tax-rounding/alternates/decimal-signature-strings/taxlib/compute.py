"""Tax arithmetic on integer cents."""
from decimal import ROUND_HALF_UP, Decimal, localcontext


def add_tax(cents: int, rate_bps: int) -> int:
    """Return ``cents`` plus tax at ``rate_bps`` basis points (725 bps = 7.25%)."""
    product = cents * rate_bps
    with localcontext() as ctx:
        ctx.prec = max(28, len(str(product)) + 5)  # enough digits that nothing is rounded early
        tax = (Decimal(product) / 10_000).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return cents + int(tax)
