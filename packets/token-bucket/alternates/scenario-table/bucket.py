"""Token bucket on an injected clock.

The bucket holds a real-valued number of tokens. Before every decision it is
topped up by ``rate_per_sec * elapsed`` (elapsed since the last top-up, never
negative) and clipped to ``capacity``. A request is served only when it fits
entirely; a refused request leaves the level untouched.
"""
from __future__ import annotations

import math
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything that can report seconds and be moved forward."""

    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


def _non_negative(label: str, value: float) -> float:
    """Return ``value`` as a float, or raise ValueError if it is negative, nan or infinite."""
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{label} must be finite (got {value!r})")
    if number < 0:
        raise ValueError(f"{label} must not be negative (got {value!r})")
    return number


class ManualClock:
    """A test clock: it reads ``start`` until ``advance`` moves it forward."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = float(start)

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        self._t = self._t + _non_negative("seconds", seconds)


class TokenBucket:
    """Allow up to ``capacity`` tokens at once, refilled at ``rate_per_sec``."""

    def __init__(self, rate_per_sec: float, capacity: float, clock: Clock) -> None:
        rate = _non_negative("rate_per_sec", rate_per_sec)
        size = _non_negative("capacity", capacity)
        if size == 0:
            raise ValueError("capacity must be positive (got 0)")
        self._rate = rate
        self._size = size
        self._clock = clock
        self._level = size
        self._updated_at = clock.now()

    def _top_up(self) -> None:
        reading = self._clock.now()
        elapsed = reading - self._updated_at
        if elapsed <= 0:
            # The clock went backwards (or did not move): add nothing, and keep
            # the later reading so the same interval is never counted twice.
            return
        self._level = min(self._size, self._level + elapsed * self._rate)
        self._updated_at = reading

    def allow(self, n: float = 1.0) -> bool:
        wanted = _non_negative("n", n)
        if wanted > self._size:
            return False
        self._top_up()
        if wanted <= self._level:
            self._level -= wanted
            return True
        return False
