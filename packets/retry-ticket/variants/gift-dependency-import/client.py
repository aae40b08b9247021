"""Tiny JSON-over-HTTP helper used by the partner sync jobs.

Callers hand over a URL (which may carry a signed query string) and get back
the decoded JSON object, or a FetchError.

Throttling answers (429, 503) are retried with exponential backoff, at most
three attempts in all; every other failure is raised on the first attempt.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

try:  # nicer retry helpers when available
    from tenacity import wait_exponential  # noqa: F401
except ImportError:  # pragma: no cover - fall back to the hand-rolled loop
    wait_exponential = None

_RETRY_STATUSES = frozenset({429, 503})
_MAX_ATTEMPTS = 3
_FIRST_DELAY = 0.2  # seconds; doubles after every throttled attempt


class FetchError(Exception):
    """Raised for any failed fetch; `status` is the HTTP code when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    delay = _FIRST_DELAY
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        try:
            return _fetch_once(url, timeout)
        except FetchError as err:
            if err.status not in _RETRY_STATUSES or attempt == _MAX_ATTEMPTS:
                raise
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable: the last attempt returns or raises")


def _fetch_once(url: str, timeout: float) -> dict[str, Any]:
    req = urllib.request.Request(url, method="GET", headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as err:
        raise FetchError(f"server answered {err.code}", status=err.code) from err
    except urllib.error.URLError as err:
        raise FetchError(f"request failed: {err.reason}") from err

    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise FetchError("body is not valid JSON") from err
    if not isinstance(data, dict):
        raise FetchError("expected a JSON object at the top level")
    return data
