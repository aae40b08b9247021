"""Extra retry cases, pytest style: a scripted partner through monkeypatch."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request

import pytest

import client


class _Body:
    def __init__(self, payload: bytes) -> None:
        self._payload = io.BytesIO(payload)

    def read(self) -> bytes:
        return self._payload.read()

    def __enter__(self) -> "_Body":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _http(code: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://partner.test/q", code, "status", None, io.BytesIO(b""))


@pytest.fixture
def partner(monkeypatch):
    """Script the answers urlopen gives; record every sleep instead of sleeping."""
    state = {"answers": [], "calls": 0, "sleeps": []}

    def fake_urlopen(req, timeout=None):
        state["calls"] += 1
        answer = state["answers"].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setattr(client.time, "sleep", lambda seconds: state["sleeps"].append(seconds))
    return state


def test_429_then_success_waits_once(partner):
    partner["answers"] = [_http(429), _Body(b'{"page": 2}')]
    assert client.fetch_json("http://partner.test/q") == {"page": 2}
    assert partner["calls"] == 2
    assert len(partner["sleeps"]) == 1 and partner["sleeps"][0] > 0


@pytest.mark.parametrize("code", [429, 503])
def test_throttled_three_times_gives_up_with_status(partner, code):
    partner["answers"] = [_http(code)] * 3 + [_Body(b"{}")]
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json("http://partner.test/q")
    assert caught.value.status == code
    assert partner["calls"] == 3
    first, second = partner["sleeps"]
    assert 0 < first < second


@pytest.mark.parametrize("code", [400, 401, 403, 404, 500, 502, 504])
def test_other_statuses_fail_on_the_first_attempt(partner, code):
    partner["answers"] = [_http(code), _Body(b"{}")]
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json("http://partner.test/q")
    assert caught.value.status == code
    assert partner["calls"] == 1
    assert partner["sleeps"] == []


def test_connection_error_is_not_retried(partner):
    partner["answers"] = [urllib.error.URLError("name does not resolve"), _Body(b"{}")]
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json("http://partner.test/q")
    assert caught.value.status is None
    assert partner["calls"] == 1


@pytest.mark.parametrize("payload", [b"not json", b"[1, 2]", b"\xff\xfe"])
def test_bad_body_is_not_retried(partner, payload):
    partner["answers"] = [_Body(payload), _Body(b"{}")]
    with pytest.raises(client.FetchError):
        client.fetch_json("http://partner.test/q")
    assert partner["calls"] == 1


def test_error_messages_never_carry_the_url(partner):
    secret = "http://partner.test/q?sig=TOPSECRET"
    partner["answers"] = [_http(503), _http(503), _http(503)]
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json(secret)
    assert "TOPSECRET" not in str(caught.value)
