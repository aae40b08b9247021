"""Download one file over HTTP to DEST.

This is the client the nightly job uses today. Bytes land in PART as they
arrive; PART is renamed to DEST only once it holds the whole file, so a crash
half-way leaves a PART the next call resumes from with a Range request.
"""

from __future__ import annotations

from pathlib import Path
import http.client
import re
import urllib.error
import urllib.request

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"        # the finished file
PART = HERE / "data.bin.part"   # bytes received so far, until the file is complete

CHUNK = 64 * 1024


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: only the given URL is opened (a 3xx becomes an HTTPError)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _range_start_and_total(content_range: str | None) -> tuple[int, int]:
    """Parse `bytes START-END/TOTAL` from a 206."""
    match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", (content_range or "").strip())
    if not match:
        raise ResumeError(f"206 without a usable Content-Range: {content_range!r}")
    return int(match.group(1)), int(match.group(3))


def _announced_length(response) -> int:
    length = response.headers.get("Content-Length")
    if length is None or not length.strip().isdigit():
        raise ResumeError("200 without a Content-Length: cannot tell when the file is complete")
    return int(length)


def _copy_body(response, mode: str) -> None:
    """Write the body into PART chunk by chunk ("ab" appends, "wb" starts over)."""
    with open(PART, mode) as part:
        try:
            while chunk := response.read(CHUNK):
                part.write(chunk)
                part.flush()
        except (OSError, http.client.HTTPException) as exc:
            raise ResumeError(f"connection dropped: {exc}") from exc


def fetch(url: str) -> Path:
    offset = PART.stat().st_size if PART.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if PART.exists() else {}
    request = urllib.request.Request(url, headers=headers, method="GET")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            if response.status == 206:
                start, total = _range_start_and_total(response.headers.get("Content-Range"))
                if start != offset:
                    raise ResumeError(f"asked for bytes from {offset}, server sent from {start}")
                _copy_body(response, "ab")
            elif response.status == 200:
                total = _announced_length(response)
                _copy_body(response, "wb")  # the whole file: start over, never append
            else:
                raise ResumeError(f"unexpected status {response.status}")
    except urllib.error.HTTPError as exc:
        raise ResumeError(f"unexpected status {exc.code}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise ResumeError(f"request failed: {exc}") from exc

    size = PART.stat().st_size
    if size != total:
        raise ResumeError(f"{PART.name} holds {size} of {total} bytes; call again to resume")
    PART.replace(DEST)
    return DEST
