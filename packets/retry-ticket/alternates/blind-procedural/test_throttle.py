"""More retry cases (unittest). test_client.py and test_retry.py are left as shipped."""

import io
import json
import unittest
import urllib.error
from unittest import mock

import client

URL = "http://partner.test/a?signature=do-not-leak-me"


class FakeReply:
    def __init__(self, body):
        self._body = io.BytesIO(body)

    def read(self):
        return self._body.read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def http_error(code):
    return urllib.error.HTTPError("http://partner.test/x", code, "status", None, io.BytesIO(b"{}"))


def run_fetch(answers):
    """Call fetch_json with urlopen answering `answers` in turn.

    Returns (result or raised FetchError, number of urlopen calls, list of sleep seconds).
    """
    with mock.patch("urllib.request.urlopen", side_effect=answers) as opened, \
            mock.patch("client.time.sleep") as slept:
        try:
            outcome = client.fetch_json(URL)
        except client.FetchError as err:
            outcome = err
    return outcome, opened.call_count, [c.args[0] for c in slept.call_args_list]


class ThrottledAnswers(unittest.TestCase):
    def test_429_is_retried_like_503(self):
        outcome, calls, waits = run_fetch([http_error(429), FakeReply(b'{"n": 2}')])
        self.assertEqual(outcome, {"n": 2})
        self.assertEqual(calls, 1 + 1)
        self.assertEqual(len(waits), 1)
        self.assertGreater(waits[0], 0)

    def test_still_throttled_after_three_attempts_raises_with_status(self):
        for code in (429, 503):
            with self.subTest(code=code):
                answers = [http_error(code)] * 3 + [FakeReply(b"{}")]
                outcome, calls, waits = run_fetch(answers)
                self.assertIsInstance(outcome, client.FetchError)
                self.assertEqual(outcome.status, code)
                self.assertEqual(calls, 3)
                self.assertEqual(len(waits), 2)
                self.assertTrue(0 < waits[0] < waits[1])

    def test_mixed_throttling_counts_towards_the_same_cap(self):
        outcome, calls, _ = run_fetch([http_error(503), http_error(429), http_error(503)])
        self.assertEqual(outcome.status, 503)
        self.assertEqual(calls, 3)


class FailFast(unittest.TestCase):
    def test_other_statuses_are_raised_on_the_first_attempt(self):
        for code in (400, 403, 404, 418, 500, 502, 504):
            with self.subTest(code=code):
                outcome, calls, waits = run_fetch([http_error(code), FakeReply(b"{}")])
                self.assertIsInstance(outcome, client.FetchError)
                self.assertEqual(outcome.status, code)
                self.assertEqual((calls, waits), (1, []))

    def test_connection_error_is_raised_on_the_first_attempt(self):
        outcome, calls, waits = run_fetch([urllib.error.URLError("connection refused"), FakeReply(b"{}")])
        self.assertIsInstance(outcome, client.FetchError)
        self.assertIsNone(outcome.status)
        self.assertEqual((calls, waits), (1, []))

    def test_body_that_is_not_an_object_is_raised_on_the_first_attempt(self):
        for body in (b"<html>", b'"text"', b"[]"):
            with self.subTest(body=body):
                outcome, calls, waits = run_fetch([FakeReply(body), FakeReply(b"{}")])
                self.assertIsInstance(outcome, client.FetchError)
                self.assertEqual((calls, waits), (1, []))


class NoLeak(unittest.TestCase):
    def test_signed_url_is_not_logged_or_in_the_message(self):
        with self.assertNoLogs(level="DEBUG"):
            outcome, _, _ = run_fetch([http_error(503)] * 3)
        self.assertNotIn("do-not-leak-me", str(outcome))


if __name__ == "__main__":
    unittest.main()
