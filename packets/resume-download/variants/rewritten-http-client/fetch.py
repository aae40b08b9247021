"""Download one file over HTTP to DEST, resuming from PART after a crash.

urllib hides the connection; this talks to the origin directly so every
header and byte is under our control.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit
import http.client
import re

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"
PART = HERE / "data.bin.part"


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


def fetch(url: str) -> Path:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=10)
    offset = PART.stat().st_size if PART.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        conn.request("GET", parts.path or "/", headers=headers)
        resp = conn.getresponse()
        if resp.status == 206 and offset:
            m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", resp.getheader("Content-Range", ""))
            if not m or int(m.group(1)) != offset:
                raise ResumeError("bad Content-Range")
            expected, mode = int(m.group(3)), "ab"
        elif resp.status == 200:
            expected, mode = int(resp.getheader("Content-Length", "-1")), "wb"
        else:
            raise ResumeError(f"unexpected status {resp.status}")
        with PART.open(mode) as out:
            while True:
                chunk = resp.read(65536)
                if not chunk:
                    break
                out.write(chunk)
    finally:
        conn.close()
    if expected >= 0 and PART.stat().st_size != expected:
        raise ResumeError("incomplete download")
    PART.replace(DEST)
    return DEST
