"""Red until fetch_json retries throttling answers. Make it pass; do not weaken it."""

from __future__ import annotations

import io
import json
import unittest
import urllib.error
from unittest import mock

import client


class _Reply:
    def __init__(self, body: bytes) -> None:
        self._body = io.BytesIO(body)

    def read(self) -> bytes:
        return self._body.read()

    def __enter__(self) -> "_Reply":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _status(code: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://partner.test/x", code, "status", None, io.BytesIO(b"{}"))


class Retry(unittest.TestCase):
    def test_two_503s_then_success(self) -> None:
        answers = [_status(503), _status(503), _Reply(json.dumps({"ok": 1}).encode())]
        with mock.patch("urllib.request.urlopen", side_effect=answers) as opened, \
                mock.patch("client.time.sleep") as slept:
            self.assertEqual(client.fetch_json("http://partner.test/a"), {"ok": 1})
        self.assertEqual(opened.call_count, 3)
        waits = [c.args[0] for c in slept.call_args_list]
        self.assertEqual(len(waits), 2)
        self.assertGreater(waits[0], 0)
        self.assertLess(waits[0], waits[1])

    def test_404_is_not_retried(self) -> None:
        with mock.patch("urllib.request.urlopen", side_effect=_status(404)) as opened, \
                mock.patch("client.time.sleep") as slept:
            with self.assertRaises(client.FetchError):
                client.fetch_json("http://partner.test/gone")
        self.assertEqual(opened.call_count, 1)
        slept.assert_not_called()


class GiveUp(unittest.TestCase):
    def test_three_429s_raise_with_status_after_three_attempts(self) -> None:
        answers = [_status(429), _status(429), _status(429)]
        with mock.patch("urllib.request.urlopen", side_effect=answers) as opened, \
                mock.patch("client.time.sleep") as slept:
            with self.assertRaises(client.FetchError) as caught:
                client.fetch_json("http://partner.test/busy")
        self.assertEqual(caught.exception.status, 429)
        self.assertEqual(opened.call_count, 3)
        self.assertEqual(slept.call_count, 2)


if __name__ == "__main__":
    unittest.main()
