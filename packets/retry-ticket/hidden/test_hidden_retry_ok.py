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
