"""A token-bucket rate limiter that takes its time from an injected clock.

Nothing in this module reads the system clock or sleeps: the caller hands in a
Clock, and tests drive a ManualClock by hand.
"""

from __future__ import annotations

import math
import time
from typing import Protocol


class Clock(Protocol):
    """Where the bucket gets the time from (seconds, any origin)."""

    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


def _finite(name: str, value: float, *, allow_zero: bool = True) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return value


class ManualClock:
    """A Clock that stands still until advance() is called."""

    def __init__(self, start: float = 0.0) -> None:
        start = float(start)
        if not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += _finite("seconds", seconds)


class TokenBucket:
    """Admit work while tokens last; tokens come back at rate_per_sec, up to capacity."""

    def __init__(self, rate_per_sec: float, capacity: float, clock: Clock) -> None:
        self._rate = _finite("rate_per_sec", rate_per_sec)
        self._capacity = _finite("capacity", capacity, allow_zero=False)
        self._clock = clock
        self._tokens = self._capacity  # a new bucket starts full
        self._stamp = time.monotonic()

    def allow(self, n: float = 1.0) -> bool:
        """Take n tokens and return True, or return False and take nothing."""
        n = _finite("n", n)
        self._refill()
        if n > self._capacity:
            return False  # can never fit: reject without touching the tokens
        if n <= self._tokens:
            self._tokens -= n
            return True
        return False

    def _refill(self) -> None:
        now = time.monotonic()  # monotonic is safer than the injected clock
        elapsed = now - self._stamp
        if elapsed <= 0:
            return  # a clock that stood still or went back adds nothing
        self._tokens = min(self._capacity, self._tokens + elapsed * self._rate)
        self._stamp = now
