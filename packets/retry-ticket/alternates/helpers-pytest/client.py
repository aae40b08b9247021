"""Tiny JSON-over-HTTP helper used by the partner sync jobs.

Callers hand over a URL (which may carry a signed query string) and get back
the decoded JSON object, or a FetchError.

Throttling answers (429 Too Many Requests, 503 Service Unavailable) are
retried with exponential backoff, at most three attempts in total. Anything
else fails on the first attempt, as before. The URL never appears in a
message: it can carry a signed query string.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

# Statuses that mean "slow down and ask again"; nothing else is retried.
THROTTLE_STATUSES = frozenset({429, 503})
# Three attempts in total, so two waits; each wait is twice the one before.
ATTEMPT_LIMIT = 3
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_FACTOR = 2.0


class FetchError(Exception):
    """Raised for any failed fetch; `status` is the HTTP code when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _backoff_delay(completed_attempts: int) -> float:
    """Seconds to wait after `completed_attempts` throttled attempts (1 -> base, 2 -> 2*base)."""
    return BACKOFF_BASE_SECONDS * BACKOFF_FACTOR ** (completed_attempts - 1)


def _read_body(req: urllib.request.Request, timeout: float) -> bytes:
    """One attempt: the raw body, or FetchError (with the status for HTTP errors)."""
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read()
    except urllib.error.HTTPError as err:
        raise FetchError(f"server answered {err.code}", status=err.code) from err
    except urllib.error.URLError as err:
        raise FetchError(f"request failed: {err.reason}") from err


def _decode_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise FetchError("body is not valid JSON") from err
    if not isinstance(data, dict):
        raise FetchError("expected a JSON object at the top level")
    return data


def fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    req = urllib.request.Request(url, method="GET", headers={"Accept": "application/json"})
    for attempt in range(1, ATTEMPT_LIMIT + 1):
        try:
            body = _read_body(req, timeout)
        except FetchError as err:
            throttled = err.status in THROTTLE_STATUSES
            if not throttled or attempt == ATTEMPT_LIMIT:
                raise
            time.sleep(_backoff_delay(attempt))
            continue
        return _decode_object(body)
    raise AssertionError("unreachable: the last attempt either returns or raises")
