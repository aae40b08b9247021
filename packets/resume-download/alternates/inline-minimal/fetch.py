"""Download one file over HTTP to DEST.

This is the client the nightly job uses today. Bytes go to PART as they
arrive; PART is renamed to DEST once it holds the whole file, so a crash
half-way leaves PART for the next call to resume from.
"""

from __future__ import annotations

from pathlib import Path
import http.client
import urllib.error
import urllib.request

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"        # the finished file
PART = HERE / "data.bin.part"   # bytes received so far, until the file is complete


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


def fetch(url: str) -> Path:
    have = PART.stat().st_size if PART.exists() else 0
    request = urllib.request.Request(url, method="GET")
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        raise ResumeError(f"unexpected status {exc.code}") from None
    with response:
        if response.status == 200:
            total, mode = int(response.headers["Content-Length"]), "wb"
        elif response.status == 206 and have:
            unit, _, spec = (response.headers.get("Content-Range") or "").partition(" ")
            first, total = spec.split("-")[0], spec.rpartition("/")[2]
            if unit != "bytes" or not first.isdigit() or int(first) != have or not total.isdigit():
                raise ResumeError(f"asked for bytes from {have}, got Content-Range {response.headers.get('Content-Range')!r}")
            total, mode = int(total), "ab"
        else:
            raise ResumeError(f"unexpected status {response.status}")
        with PART.open(mode) as out:
            try:
                while block := response.read(65536):
                    out.write(block)
            except (OSError, http.client.HTTPException) as exc:
                raise ResumeError(f"connection dropped: {exc}") from None
    if PART.stat().st_size != total:
        raise ResumeError(f"have {PART.stat().st_size} of {total} bytes; call again to resume")
    PART.replace(DEST)
    return DEST
