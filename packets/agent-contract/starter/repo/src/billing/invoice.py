"""Invoice totals."""


def invoice_total(lines: list[tuple[int, int]]) -> int:
    """Sum of quantity * unit price (cents) over the invoice lines."""
    return sum(quantity * unit_cents for quantity, unit_cents in lines)
