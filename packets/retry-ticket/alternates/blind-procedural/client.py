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

THROTTLED = (429, 503)  # the only answers worth another try
ATTEMPTS = 3            # hard cap, first attempt included
FIRST_WAIT = 0.25       # seconds before the 1st retry; doubled before each later one


class FetchError(Exception):
    """Raised for any failed fetch; `status` is the HTTP code when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    req = urllib.request.Request(url, method="GET", headers={"Accept": "application/json"})
    attempt = 1
    wait = FIRST_WAIT
    while True:
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                body = resp.read()
            break
        except urllib.error.HTTPError as err:
            if err.code in THROTTLED and attempt < ATTEMPTS:
                time.sleep(wait)
                wait *= 2
                attempt += 1
                continue
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
