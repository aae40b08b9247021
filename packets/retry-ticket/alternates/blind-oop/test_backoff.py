"""Extra checks for the throttling retry (pytest style). The shipped tests stay as they are."""

from __future__ import annotations

import io
import json
import urllib.error
from unittest import mock

import pytest

import client

SIGNED_URL = "http://partner.test/items?sig=SECRET-SIGNATURE"


class Reply:
    def __init__(self, body: bytes) -> None:
        self._body = io.BytesIO(body)

    def read(self) -> bytes:
        return self._body.read()

    def __enter__(self) -> "Reply":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def status(code: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://partner.test/x", code, "status", None, io.BytesIO(b"{}"))


def ok(payload: dict) -> Reply:
    return Reply(json.dumps(payload).encode())


@pytest.fixture
def partner():
    """Patch urlopen and sleep; yields (set_answers, opened, slept)."""
    with mock.patch("urllib.request.urlopen") as opened, mock.patch("client.time.sleep") as slept:
        def answer(*answers: object) -> None:
            opened.side_effect = list(answers)

        yield answer, opened, slept


def waits(slept: mock.Mock) -> list[float]:
    return [c.args[0] for c in slept.call_args_list]


@pytest.mark.parametrize("code", [429, 503])
def test_throttled_once_then_success(partner, code):
    answer, opened, slept = partner
    answer(status(code), ok({"ok": 1}))
    assert client.fetch_json(SIGNED_URL) == {"ok": 1}
    assert opened.call_count == 2
    assert len(waits(slept)) == 1 and waits(slept)[0] > 0


@pytest.mark.parametrize("codes", [(503, 503, 503), (429, 429, 429), (429, 503, 429)])
def test_gives_up_after_three_attempts_with_growing_waits(partner, codes):
    answer, opened, slept = partner
    answer(*(status(c) for c in codes), ok({"never": "reached"}))
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json(SIGNED_URL)
    assert caught.value.status == codes[-1]
    assert opened.call_count == 3
    first, second = waits(slept)
    assert 0 < first < second


@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 500, 502, 504])
def test_other_http_errors_raise_on_first_attempt(partner, code):
    answer, opened, slept = partner
    answer(status(code))
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json(SIGNED_URL)
    assert caught.value.status == code
    assert opened.call_count == 1
    slept.assert_not_called()


def test_connection_error_is_not_retried(partner):
    answer, opened, slept = partner
    answer(urllib.error.URLError("name or service not known"))
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json(SIGNED_URL)
    assert caught.value.status is None
    assert opened.call_count == 1
    slept.assert_not_called()


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"\xff\xfe"])
def test_bad_body_is_not_retried(partner, body):
    answer, opened, slept = partner
    answer(Reply(body))
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json(SIGNED_URL)
    assert caught.value.status is None
    assert opened.call_count == 1
    slept.assert_not_called()


def test_url_is_never_printed_logged_or_put_in_the_error(partner, capsys, caplog):
    answer, _, _ = partner
    answer(status(503), status(503), status(503))
    caplog.set_level("DEBUG")
    with pytest.raises(client.FetchError) as caught:
        client.fetch_json(SIGNED_URL)
    out, err = capsys.readouterr()
    for text in (out, err, caplog.text, str(caught.value)):
        assert "SECRET-SIGNATURE" not in text
