"""A token-bucket rate limiter driven by an injected clock (no real time, no sleeping)."""

from __future__ import annotations

import math
from typing import Protocol

# Relative slack (times capacity) when comparing token amounts, so that float
# drift such as ten withdrawals of 0.1 from a bucket of 1.0 still all succeed.
_SLACK = 1e-9


def _check(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


class Clock(Protocol):
    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 0.0) -> None:
        if not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        self._reading = float(start)

    def now(self) -> float:
        return self._reading

    def advance(self, seconds: float) -> None:
        _check("seconds", seconds)
        self._reading += seconds


class TokenBucket:
    """Holds up to `capacity` tokens and gains `rate_per_sec` tokens per elapsed second."""

    def __init__(self, rate_per_sec: float, capacity: float, clock: Clock) -> None:
        _check("rate_per_sec", rate_per_sec)
        _check("capacity", capacity)
        if capacity == 0:
            raise ValueError("capacity must be greater than 0")
        self._rate = float(rate_per_sec)
        self._capacity = float(capacity)
        self._clock = clock
        self._tokens = self._capacity
        self._last = clock.now()

    def _refill(self) -> None:
        now = self._clock.now()
        if now <= self._last:
            return  # no time passed, or the clock stepped back: add nothing
        self._tokens = min(self._capacity, self._tokens + self._rate * (now - self._last))
        self._last = now

    def allow(self, n: float = 1.0) -> bool:
        _check("n", n)
        self._refill()
        if n > self._capacity:
            return False
        if n > self._tokens + _SLACK * self._capacity:
            return False
        self._tokens = max(0.0, self._tokens - n)
        return True
