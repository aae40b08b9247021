"""A scripted partner API on 127.0.0.1 for the hidden retry-ticket tests.

Each server answers from a list of (status, body) pairs, one per request, and
repeats the `then` answer once the list runs out. It counts every request it
sees, so a test can tell how many attempts the client made without caring how
the client is written.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, ".gatehouse")
from gatehouse_harness import host_module  # noqa: E402

OK_BODY = b'{"ok": true, "items": [1, 2, 3]}'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        server = self.server
        with server.lock:
            server.paths.append(self.path)
            server.times.append(time.monotonic())
            if server.script:
                status, body = server.script.pop(0)
            else:
                status, body = server.then
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        # Never echo request lines: the URL tests read stderr.
        return None


class Partner:
    def __init__(self, script: list[tuple[int, bytes]], then: tuple[int, bytes] = (200, OK_BODY)):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.lock = threading.Lock()
        self.httpd.script = list(script)
        self.httpd.then = then
        self.httpd.paths = []
        self.httpd.times = []
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def hits(self) -> int:
        return len(self.httpd.paths)

    @property
    def gaps(self) -> list[float]:
        """Seconds between consecutive requests, as this server saw them."""
        t = self.httpd.times
        return [b - a for a, b in zip(t, t[1:])]

    def url(self, path: str = "/v1/feed?page=2") -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{path}"

    def __enter__(self) -> "Partner":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def status(code: int, body: bytes = b'{"error": "x"}') -> tuple[int, bytes]:
    return (code, body)


def ok(body: bytes = OK_BODY) -> tuple[int, bytes]:
    return (200, body)


def closed_port_url(path: str = "/v1/feed") -> str:
    """A loopback URL on which nothing listens (connection refused)."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


@contextlib.contextmanager
def quiet_host_logging_at_debug():
    """The candidate's process logs at DEBUG and shows every warning for the
    duration (what the URL tests read), then is put back. Its loggers are
    its own (JUDGE.md: its process is not the tests'), so setting this
    process's levels, as the tests do, would not reach them."""
    logging, warnings = host_module("logging"), host_module("warnings")
    root = logging.getLogger()
    level, disabled = root.level, logging.root.manager.disable
    loggers = [lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    logging.disable(logging.NOTSET)
    root.setLevel(logging.DEBUG)
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    warnings.simplefilter("always")
    try:
        yield
    finally:
        warnings.resetwarnings()
        root.setLevel(level)
        logging.disable(disabled)
        for lg, lv, dis in saved:
            lg.setLevel(lv)
            lg.disabled = dis


@contextlib.contextmanager
def recorded_sleeps(module):
    """Replace time.sleep (and a `sleep` the module imported by name) with a recorder."""
    import time
    from unittest import mock

    waits: list[float] = []

    def fake_sleep(seconds: float = 0.0, *args: object, **kwargs: object) -> None:
        waits.append(float(seconds))

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(time, "sleep", fake_sleep))
        if getattr(module, "sleep", None) is not None and not isinstance(getattr(module, "sleep"), type(time)):
            stack.enter_context(mock.patch.object(module, "sleep", fake_sleep))
        yield waits
