"""Download one file over HTTP to DEST.

This is the client the nightly job uses today. It survives a crash half-way
through a download: bytes go to PART, which becomes DEST only when complete,
and the next call asks for the rest with a Range request.
"""

from __future__ import annotations

from pathlib import Path
import http.client
import re
import shutil
import urllib.error
import urllib.request

HERE = Path(__file__).resolve().parent
DEST = HERE / "data.bin"        # the finished file
PART = HERE / "data.bin.part"   # bytes received so far, until the file is complete


class ResumeError(RuntimeError):
    """The download cannot continue safely."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise ResumeError(f"unexpected status {code}: not following a redirect to {newurl}")


def fetch(url: str) -> Path:
    part, dest = PART, DEST  # looked up now, not at import
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if part.exists() else {}
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        response = urllib.request.build_opener(_NoRedirects).open(request, timeout=10)
    except urllib.error.HTTPError as err:
        raise ResumeError(f"unexpected status {err.code}") from err
    with response:
        if response.status == 206:
            # Append only if the server starts exactly where PART ends.
            m = re.fullmatch(r"bytes (\d+)-\d+/(\d+)", response.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != offset:
                raise ResumeError(f"206 does not continue at byte {offset}: "
                                  f"{response.headers.get('Content-Range')!r}")
            expected, mode = int(m.group(2)), "ab"
        elif response.status == 200:
            # The whole file, whatever was asked: start PART over.
            length = response.headers.get("Content-Length", "")
            if not length.isdigit():
                raise ResumeError("200 without a Content-Length")
            expected, mode = int(length), "wb"
        else:
            raise ResumeError(f"unexpected status {response.status}")
        try:
            with open(part, mode) as out:
                shutil.copyfileobj(response, out)
        except (OSError, http.client.HTTPException) as err:
            raise ResumeError(f"download interrupted: {err}") from err
    received = part.stat().st_size
    if received != expected:
        # Short (connection dropped): keep PART so the next call resumes.
        raise ResumeError(f"got {received} of {expected} bytes; PART kept for the next call")
    part.replace(dest)
    return dest
