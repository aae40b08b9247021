"""Hidden: nothing but 429 and 503 earns a second attempt."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from unittest import mock

import pytest

import client
from hidden_partner import Partner, closed_port_url, ok, recorded_sleeps, status


def _fails_once(answer) -> client.FetchError:
    """The partner gives `answer`, then a healthy one the client must never
    reach: FetchError after one attempt and no wait. Returns the error."""
    with Partner([answer], then=ok()) as partner, recorded_sleeps(client) as waits:
        with pytest.raises(client.FetchError) as caught:
            client.fetch_json(partner.url())
    assert partner.hits == 1
    assert waits == []
    return caught.value


# The status the partner answers and the one the error must carry are two
# columns: a canary twin that expects another status changes only the
# second, never what the partner answers (a changed answer of 503 is
# retried, which is a different test, not a contradiction).
@pytest.mark.parametrize("code, expected", [(400, 400), (401, 401), (403, 403), (404, 404), (500, 500), (502, 502)])
def test_scope_http_status_fails_once(code: int, expected: int) -> None:
    assert _fails_once(status(code)).status == expected


def test_scope_bad_json_fails_once() -> None:
    _fails_once((200, b"<html>maintenance</html>"))


def test_scope_json_array_fails_once() -> None:
    _fails_once((200, b"[1, 2, 3]"))


def test_scope_dns_failure_fails_once() -> None:
    failure = urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
    with mock.patch("urllib.request.urlopen", side_effect=failure) as opened, recorded_sleeps(client) as waits:
        with pytest.raises(client.FetchError) as caught:
            client.fetch_json("http://partner.invalid/v1/feed")
    assert caught.value.status is None
    assert opened.call_count == 1
    assert waits == []


def test_scope_connection_refused_fails_once() -> None:
    real = urllib.request.urlopen
    with mock.patch("urllib.request.urlopen", wraps=real) as opened, recorded_sleeps(client) as waits:
        with pytest.raises(client.FetchError):
            client.fetch_json(closed_port_url())
    assert opened.call_count <= 1
    assert waits == []
