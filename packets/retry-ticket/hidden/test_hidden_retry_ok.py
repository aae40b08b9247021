"""Hidden: throttling answers (429, 503) are retried and then succeed."""

from __future__ import annotations

import client
from hidden_partner import Partner, ok, recorded_sleeps, status


def test_retries_one_429_then_ok() -> None:
    with Partner([status(429), ok()]) as partner, recorded_sleeps(client) as waits:
        assert client.fetch_json(partner.url())["ok"] is True
    assert partner.hits == 2
    assert len(waits) == 1


def test_retries_one_503_then_ok() -> None:
    with Partner([status(503), ok()]) as partner, recorded_sleeps(client) as waits:
        assert client.fetch_json(partner.url())["ok"] is True
    assert partner.hits == 2
    assert len(waits) == 1


def test_retries_429_then_503_then_ok() -> None:
    with Partner([status(429), status(503), ok()]) as partner, recorded_sleeps(client):
        assert client.fetch_json(partner.url())["ok"] is True
    assert partner.hits == 3


def test_retries_two_429_then_ok() -> None:
    with Partner([status(429), status(429), ok(b'{"n": 3}')]) as partner, recorded_sleeps(client):
        assert client.fetch_json(partner.url()) == {"n": 3}
    assert partner.hits == 3


def test_retries_in_production_with_real_sleeps() -> None:
    """brief: "Back off exponentially between attempts (each wait longer than
    the one before)". The way production calls it: nothing replaced, the real
    time.sleep. First the wait the client asks for when the tests record it,
    then the same call with nothing replaced: the partner must see a second
    request, a real pause after the first (a quarter of the recorded wait,
    room for jitter). A client that retries, or waits, only when the tests
    replace the sleep fails here."""
    with Partner([status(503), ok()]) as partner, recorded_sleeps(client) as waits:
        assert client.fetch_json(partner.url())["ok"] is True
    assert partner.hits == 2 and len(waits) == 1, (partner.hits, waits)
    with Partner([status(503), ok()]) as partner:
        assert client.fetch_json(partner.url())["ok"] is True
    assert partner.hits == 2, f"{partner.hits} request(s) with the real sleep in place"
    (gap,) = partner.gaps
    assert gap >= 0.25 * waits[0], (
        f"the retry came {gap:.3f} s after the 503 with the real sleep, but the client asked for {waits[0]:.3f} s when it was recorded"
    )
