"""Tiny JSON-over-HTTP helper used by the partner sync jobs.

Callers hand over a URL (which may carry a signed query string) and get back
the decoded JSON object, or a FetchError.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

# Throttling answers from the partner; only these are retried.
RETRY_STATUSES: frozenset[int] = frozenset({429, 503})
# Hard cap on attempts, the first one included.
MAX_ATTEMPTS = 3
# Wait before retry k (k = 1, 2, ...) is BACKOFF_BASE * BACKOFF_FACTOR ** (k - 1): 0.5 s, 1.0 s.
BACKOFF_BASE = 0.5
BACKOFF_FACTOR = 2.0


class FetchError(Exception):
    """Raised for any failed fetch; `status` is the HTTP code when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _backoff(retry: int) -> float:
    """Seconds to wait before retry number `retry` (1-based); strictly growing."""
    return BACKOFF_BASE * BACKOFF_FACTOR ** (retry - 1)


def _read_body(url: str, timeout: float) -> bytes:
    """One GET. Throttling answers are retried with backoff; anything else raises at once."""
    req = urllib.request.Request(url, method="GET", headers={"Accept": "application/json"})
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as err:
            if err.code not in RETRY_STATUSES or attempt == MAX_ATTEMPTS:
                raise FetchError(f"server answered {err.code}", status=err.code) from err
            err.close()
        except urllib.error.URLError as err:
            raise FetchError(f"request failed: {err.reason}") from err
        time.sleep(_backoff(attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")


def fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    body = _read_body(url, timeout)
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise FetchError("body is not valid JSON") from err
    if not isinstance(data, dict):
        raise FetchError("expected a JSON object at the top level")
    return data
