"""Download one file over HTTP to DEST, resuming from PART after a crash.

This is the client the nightly job uses. Bytes are written to PART as they
arrive and PART is renamed to DEST only when it holds the whole file (the
length the server announced), so a crash at any point leaves a PART that the
next call resumes with `Range: bytes=<size of PART>-`.

    206 starting at our offset  -> appended to PART
    206 starting anywhere else  -> ResumeError, PART untouched
    200                         -> the whole file: PART truncated, start over
    anything else               -> ResumeError, PART untouched, no DEST
    connection drops mid-body   -> ResumeError, what arrived stays in PART
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

BLOCK = 32 * 1024
CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+)")


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


def _bytes_on_disk() -> int:
    """How much of the file an earlier call left in PART (0 when none)."""
    return PART.stat().st_size if PART.exists() else 0


def _plan(response, offset: int) -> tuple[str, int]:
    """(file mode for PART, announced total length) for this response."""
    if response.status == 200:
        length = response.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise ResumeError("200 without a Content-Length: cannot tell when the file is complete")
        return "wb", int(length)
    if response.status == 206:
        header = response.headers.get("Content-Range") or ""
        match = CONTENT_RANGE.fullmatch(header.strip())
        if offset == 0 or match is None or int(match.group(1)) != offset:
            raise ResumeError(f"asked for bytes from {offset}, the server answered Content-Range {header!r}")
        return "ab", int(match.group(2))
    raise ResumeError(f"unexpected status {response.status}")


def fetch(url: str) -> Path:
    offset = _bytes_on_disk()
    request = urllib.request.Request(url, method="GET")
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise ResumeError(f"unexpected status {exc.code}") from exc

    with response:
        mode, total = _plan(response, offset)
        with PART.open(mode) as part:
            try:
                for block in iter(lambda: response.read(BLOCK), b""):
                    part.write(block)
            except (OSError, http.client.IncompleteRead) as exc:
                part.flush()
                raise ResumeError(f"connection dropped after {part.tell()} bytes of {total}") from exc

    received = _bytes_on_disk()
    if received != total:
        raise ResumeError(f"connection dropped at {received} of {total} bytes; call fetch() again to resume")
    PART.replace(DEST)
    return DEST
