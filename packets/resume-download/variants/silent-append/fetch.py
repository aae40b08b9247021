"""Download one file over HTTP to DEST, resuming from PART after a crash.

Bytes land in PART as they arrive. PART becomes DEST only once it holds the
whole file, so a crash at any point leaves something the next call can
resume from with a Range request.
"""

from __future__ import annotations

from pathlib import Path
import re
import urllib.error
import urllib.request

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"        # the finished file
PART = HERE / "data.bin.part"   # bytes received so far, until the file is complete

CHUNK = 64 * 1024


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


def _range_start_and_total(header: str | None) -> tuple[int, int | None]:
    match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", (header or "").strip())
    if not match:
        raise ResumeError(f"206 without a usable Content-Range: {header!r}")
    total = None if match.group(3) == "*" else int(match.group(3))
    return int(match.group(1)), total


def fetch(url: str) -> Path:
    offset = PART.stat().st_size if PART.exists() else 0
    request = urllib.request.Request(url, method="GET")
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise ResumeError(f"unexpected status {exc.code}") from exc

    with response:
        if response.status == 206 and offset:
            start, expected = _range_start_and_total(response.headers.get("Content-Range"))
            if start != offset:
                raise ResumeError(f"asked for bytes from {offset}, server sent from {start}")
            mode = "ab"
        elif response.status == 200:
            # We got bytes: add them to what we have.
            length = response.headers.get("Content-Length")
            expected = int(length) + offset if length is not None else None
            mode = "ab"  # keep what we have and add the new bytes
        else:
            raise ResumeError(f"unexpected status {response.status}")

        with PART.open(mode) as out:
            while chunk := response.read(CHUNK):
                out.write(chunk)

    size = PART.stat().st_size
    if expected is not None and size != expected:
        raise ResumeError(f"connection dropped at {size} of {expected} bytes; call fetch() again to resume")
    PART.replace(DEST)
    return DEST
