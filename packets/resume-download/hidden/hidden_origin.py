"""A scriptable origin server for the held-out fetch tests (127.0.0.1 only),
and the fixtures and checks those test modules share (a module imports the
fixtures it uses: `paths` is autouse)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import re
import threading

import pytest

import fetch


def payload(size: int) -> bytes:
    """Deterministic bytes that never repeat a short prefix."""
    out = bytearray()
    n = 0
    while len(out) < size:
        out += f"<{n:07d}>".encode()
        n += 1
    return bytes(out[:size])


class Origin:
    """Serves `body`.

    mode "range":    honours `Range: bytes=N-` with 206 (Content-Range start = N)
    mode "ignore":   ignores Range, always 200 with the whole body
    mode "shifted":  answers a Range request with 206 but from byte 0
    mode "no-range": answers a Range request with 206 (the rest of the body)
                     but no Content-Range header at all
    mode "status":   always answers `status` with a short error body
    cut_after:       send the headers for the full answer, then only this many
                     body bytes, then close the connection (a crash mid-body)
    """

    def __init__(self, body: bytes, mode: str = "range", status: int = 200, cut_after: int | None = None):
        self.body = body
        self.mode = mode
        self.status = status
        self.cut_after = cut_after
        self.ranges: list[str | None] = []
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                origin.handle(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/data.bin"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        wanted = h.headers.get("Range")
        self.ranges.append(wanted)
        match = re.fullmatch(r"bytes=(\d+)-", wanted or "")
        total = len(self.body)
        if self.mode == "status":
            data = b"nope"
            h.send_response(self.status)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return
        if match and self.mode == "range" and int(match.group(1)) < total:
            start = int(match.group(1))
            data = self.body[start:]
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
        elif match and self.mode == "no-range":
            data = self.body[int(match.group(1)):]
            h.send_response(206)
        elif match and self.mode == "shifted":
            data = self.body
            h.send_response(206)
            h.send_header("Content-Range", f"bytes 0-{total - 1}/{total}")
        else:
            data = self.body
            h.send_response(200)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if self.cut_after is not None:
            h.wfile.write(data[: self.cut_after])
            h.wfile.flush()
            h.close_connection = True
            return
        h.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def paths(tmp_path, monkeypatch):
    """fetch.DEST and fetch.PART in the test's own folder."""
    monkeypatch.setattr(fetch, "DEST", tmp_path / "data.bin")
    monkeypatch.setattr(fetch, "PART", tmp_path / "data.bin.part")


@pytest.fixture
def serve():
    """Starts an Origin (same arguments); every one started is closed after the test."""
    started = []

    def start(*args, **kwargs):
        origin = Origin(*args, **kwargs)
        started.append(origin)
        return origin

    yield start
    for origin in started:
        origin.close()


def assert_complete(body: bytes) -> None:
    """The download finished: DEST holds exactly `body` and PART is gone."""
    got = fetch.DEST.read_bytes()
    assert got == body, f"DEST holds {len(got)} bytes that differ from the {len(body)} served"
    assert not fetch.PART.is_file(), "PART must be renamed to DEST once complete"
