"""Tiny JSON-over-HTTP helper used by the partner sync jobs.

Callers hand over a URL (which may carry a signed query string) and get back
the decoded JSON object, or a FetchError.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any

log = logging.getLogger(__name__)

RETRY_ON = (429, 503)
ATTEMPTS = 3
BACKOFF_SECONDS = (1.0, 2.0)  # wait after the 1st and the 2nd throttled answer


class FetchError(Exception):
    """Raised for any failed fetch; `status` is the HTTP code when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    req = urllib.request.Request(url, method="GET", headers={"Accept": "application/json"})
    for attempt in range(ATTEMPTS):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            if err.code not in RETRY_ON or attempt == ATTEMPTS - 1:
                raise FetchError(f"server answered {err.code}", status=err.code) from err
            delay = BACKOFF_SECONDS[attempt]
            # Never log the URL: it can carry a signed query string.
            log.warning("partner throttled (HTTP %s), attempt %d of %d; retrying in %.1fs",
                        err.code, attempt + 1, ATTEMPTS, delay)
            time.sleep(delay)
            continue
        except urllib.error.URLError as err:
            raise FetchError(f"request failed: {err.reason}") from err
        break

    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise FetchError("body is not valid JSON") from err
    if not isinstance(data, dict):
        raise FetchError("expected a JSON object at the top level")
    return data
