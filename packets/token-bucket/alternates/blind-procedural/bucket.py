"""Token-bucket rate limiting on an injected clock."""

import math
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...


def _non_negative(label, x):
    """Raise ValueError unless x is a finite number that is not below zero."""
    if math.isnan(x) or math.isinf(x) or x < 0:
        raise ValueError("%s: expected a finite, non-negative number, not %r" % (label, x))
    return float(x)


def _refilled(tokens, capacity, rate, elapsed):
    """Tokens after `elapsed` seconds; time running backwards adds nothing."""
    if elapsed <= 0:
        return tokens
    return min(capacity, tokens + rate * elapsed)


def _covers(tokens, n, capacity):
    """True when `tokens` is enough for `n`, allowing for float rounding."""
    return tokens >= n or math.isclose(tokens, n, rel_tol=1e-9, abs_tol=capacity * 1e-12)


class ManualClock:
    def __init__(self, start: float = 0.0) -> None:
        if not math.isfinite(start):
            raise ValueError("start: expected a finite number, not %r" % (start,))
        self.t = float(start)

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += _non_negative("seconds", seconds)


class TokenBucket:
    def __init__(self, rate_per_sec: float, capacity: float, clock: Clock) -> None:
        self.rate = _non_negative("rate_per_sec", rate_per_sec)
        self.capacity = _non_negative("capacity", capacity)
        if self.capacity == 0:
            raise ValueError("capacity: must be above zero")
        self.clock = clock
        self.tokens = self.capacity
        self.stamp = clock.now()

    def allow(self, n: float = 1.0) -> bool:
        n = _non_negative("n", n)
        reading = self.clock.now()
        self.tokens = _refilled(self.tokens, self.capacity, self.rate, reading - self.stamp)
        self.stamp = max(self.stamp, reading)
        if n > self.capacity or not _covers(self.tokens, n, self.capacity):
            return False
        self.tokens = max(0.0, self.tokens - n)
        return True
