"""Token bucket rate limiter; time comes only from the clock it is given."""
from __future__ import annotations

import math
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


def _finite_at_least_zero(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be finite and >= 0, got {value!r}")
    return float(value)


class ManualClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += _finite_at_least_zero("seconds", seconds)


class TokenBucket:
    def __init__(self, rate_per_sec: float, capacity: float, clock: Clock) -> None:
        self.rate = _finite_at_least_zero("rate_per_sec", rate_per_sec)
        self.capacity = _finite_at_least_zero("capacity", capacity)
        if self.capacity == 0:
            raise ValueError("capacity must be > 0")
        self._clock = clock
        self._available = self.capacity
        self._as_of = clock.now()

    def _available_now(self) -> float:
        now = self._clock.now()
        if now > self._as_of:
            self._available = min(self.capacity, self._available + (now - self._as_of) * self.rate)
            self._as_of = now
        return self._available

    def allow(self, n: float = 1.0) -> bool:
        n = _finite_at_least_zero("n", n)
        if n > self.capacity:
            return False
        if self._available_now() < n:
            return False
        self._available -= n
        return True
