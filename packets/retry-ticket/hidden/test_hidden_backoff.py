"""Hidden: retries stop after three attempts and the waits between them grow.

The `test_cap_*` and `test_delays_grow_*` checks only judge a client that
retries at all (a client that never retries is judged by the retry tests).
"""

from __future__ import annotations

import client
from hidden_partner import Partner, ok, recorded_sleeps, status

# The partner keeps throttling for ten answers, then gives in: a client with no
# attempt cap gets a 200 on the eleventh try instead of hanging the test.
PERSISTENT = [status(503)] * 10
PERSISTENT_429 = [status(429)] * 10


def _exhaust(script):
    with Partner(script, then=ok()) as partner, recorded_sleeps(client) as waits:
        try:
            result = client.fetch_json(partner.url())
        except client.FetchError as err:
            result = err
    return partner.hits, waits, result


def _assert_growing(hits: int, waits: list[float]) -> None:
    if hits < 2:
        return  # no retry at all: not this check's business
    between = waits[: hits - 1]
    assert len(between) == hits - 1, f"{hits} attempts but only {len(waits)} waits: {waits}"
    assert all(w > 0 for w in between), f"zero or negative wait: {between}"
    assert all(a < b for a, b in zip(between, between[1:])), f"waits do not grow: {between}"


def test_cap_at_most_three_attempts_on_503() -> None:
    hits, _, result = _exhaust(PERSISTENT)
    assert hits <= 3, f"{hits} attempts against a partner that kept answering 503 ({result!r})"


def test_cap_at_most_three_attempts_on_429() -> None:
    hits, _, result = _exhaust(PERSISTENT_429)
    assert hits <= 3, f"{hits} attempts against a partner that kept answering 429 ({result!r})"


def test_delays_grow_before_success() -> None:
    with Partner([status(503), status(503), ok()]) as partner, recorded_sleeps(client) as waits:
        try:
            client.fetch_json(partner.url())
        except client.FetchError:
            pass
    _assert_growing(partner.hits, waits)


def test_delays_grow_when_exhausted() -> None:
    hits, waits, _ = _exhaust(PERSISTENT)
    _assert_growing(hits, waits)


def test_delays_grow_on_429() -> None:
    hits, waits, _ = _exhaust(PERSISTENT_429)
    _assert_growing(hits, waits)


def test_retries_within_the_cap_when_throttled() -> None:
    """brief: "with a hard cap of **3 attempts in total**"

    A cap is a ceiling: a client that gives up after 2 attempts keeps it too.
    What the brief fixes: a throttled call is retried, never past 3 attempts,
    and the last throttled answer is raised."""
    hits, _, result = _exhaust(PERSISTENT)
    assert isinstance(result, client.FetchError)
    assert 2 <= hits <= 3, f"{hits} attempts against a partner that kept answering 503"


def test_exhausted_error_keeps_status() -> None:
    _, _, result = _exhaust(PERSISTENT)
    assert isinstance(result, client.FetchError)
    assert result.status == 503


def test_no_sleep_after_the_last_attempt() -> None:
    """brief: "Back off exponentially between attempts (each wait longer than the one before)"

    A wait comes between two attempts: none after the last one."""
    hits, waits, _ = _exhaust(PERSISTENT)
    assert hits >= 2 and len(waits) == hits - 1, f"{hits} attempts, waits {waits}"


def test_backoff_each_wait_longer() -> None:
    """brief: "Back off exponentially between attempts (each wait longer than the one before)"

    The brief asks for growing waits, not for a factor: 1 s then 1.2 s passes."""
    hits, waits, _ = _exhaust(PERSISTENT)
    assert hits >= 2 and waits, f"a call that stays throttled is retried after a wait: {hits} attempts, {waits}"
    between = waits[: hits - 1]
    assert all(a < b for a, b in zip(between, between[1:])), f"waits do not grow: {between}"


def test_total_wait_is_modest() -> None:
    """brief: "The waits stay short: seconds, not minutes, in all."
    """
    _, waits, _ = _exhaust(PERSISTENT)
    assert sum(waits[:2]) <= 30.0
