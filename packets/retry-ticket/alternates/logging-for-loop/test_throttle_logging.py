import io
import json
import logging
import urllib.error
from unittest import mock

import pytest

import client

SIGNED = "http://partner.test/items?signature=abc123SECRET"


def throttled(code):
    return urllib.error.HTTPError(SIGNED, code, "busy", None, io.BytesIO(b""))


class Reply(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


@pytest.mark.parametrize("code", [429, 503])
def test_retry_logs_status_but_never_the_url(caplog, code):
    answers = [throttled(code), Reply(json.dumps({"ok": True}).encode())]
    with mock.patch("urllib.request.urlopen", side_effect=answers), \
            mock.patch("client.time.sleep") as slept, \
            caplog.at_level(logging.DEBUG, logger="client"):
        assert client.fetch_json(SIGNED) == {"ok": True}
    slept.assert_called_once_with(1.0)
    assert str(code) in caplog.text
    assert "SECRET" not in caplog.text and "partner.test" not in caplog.text


def test_gives_up_after_three_attempts():
    with mock.patch("urllib.request.urlopen", side_effect=[throttled(503)] * 3) as opened, \
            mock.patch("client.time.sleep") as slept:
        with pytest.raises(client.FetchError) as caught:
            client.fetch_json(SIGNED)
    assert caught.value.status == 503
    assert opened.call_count == 3
    assert [c.args[0] for c in slept.call_args_list] == [1.0, 2.0]


def test_500_is_not_retried():
    with mock.patch("urllib.request.urlopen", side_effect=throttled(500)) as opened, \
            mock.patch("client.time.sleep") as slept:
        with pytest.raises(client.FetchError):
            client.fetch_json(SIGNED)
    assert opened.call_count == 1
    slept.assert_not_called()
