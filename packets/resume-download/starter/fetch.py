"""Download one file over HTTP to DEST.

This is the client the nightly job uses today. It is meant to survive a
crash half-way through a download and pick up where it stopped; it does not.
"""

from __future__ import annotations

from pathlib import Path
import urllib.request

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"        # the finished file
PART = HERE / "data.bin.part"   # bytes received so far, until the file is complete


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


def fetch(url: str) -> Path:
    request = urllib.request.Request(url, method="GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        if response.status not in (200, 206):
            raise ResumeError(f"unexpected status {response.status}")
        # Everything lands in DEST in one go: a crash mid-body leaves a
        # half-written DEST and nothing a second call could resume from.
        DEST.write_bytes(response.read())
    return DEST
