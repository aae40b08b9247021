"""Proration for plan changes in the middle of a billing period."""


def prorate(amount_cents: int, days_used: int, days_in_period: int) -> int:
    """Charge for the days actually used.

    Billing policy: a partial period never charges a fraction of a cent in the
    company's favour, so partial amounts round DOWN to the whole cent.
    """
    if days_in_period <= 0:
        raise ValueError("days_in_period must be positive")
    if not 0 <= days_used <= days_in_period:
        raise ValueError("days_used must be between 0 and days_in_period")
    return round(amount_cents * days_used / days_in_period)
