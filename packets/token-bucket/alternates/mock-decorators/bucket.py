"""A token-bucket rate limiter driven by an injected clock."""
from __future__ import annotations

import math
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...


def _check(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 0.0) -> None:
        if not math.isfinite(float(start)):
            raise ValueError(f"start must be finite, got {start!r}")
        self._reading = float(start)

    def now(self) -> float:
        return self._reading

    def advance(self, seconds: float) -> None:
        self._reading += _check("seconds", seconds)


class TokenBucket:
    def __init__(self, rate_per_sec: float, capacity: float, clock: Clock) -> None:
        self._rate = _check("rate_per_sec", rate_per_sec)
        self._capacity = _check("capacity", capacity)
        if self._capacity == 0:
            raise ValueError("capacity must be greater than 0")
        self._clock = clock
        self._tokens = self._capacity
        self._last = clock.now()

    def allow(self, n: float = 1.0) -> bool:
        n = _check("n", n)
        now = self._clock.now()
        if now > self._last:
            self._tokens = min(self._capacity, self._tokens + self._rate * (now - self._last))
            self._last = now
        if n > self._capacity or n > self._tokens:
            return False
        self._tokens -= n
        return True
