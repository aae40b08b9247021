"""Gatehouse's harness for packet driver scripts.

The grader lays this file into every step and detector-script run at
``.gatehouse/gatehouse_harness.py``. It runs inside the sandbox, where the
only network is 127.0.0.1, and uses the standard library only.

- ``Service``: start a candidate's server (confined, see below), wait until
  it is ready, send it HTTP requests, restart it, stop it and its whole
  process group.
- ``confined``, ``run_confined``, ``popen_confined``: start a candidate's
  command through the grader's confining launcher
  (``/gatehouse/gatehouse_confine.py``, Landlock): it and its children can
  write beneath ``/workspace`` and ``/tmp`` only, never ``EVIDENCE``.
- ``EVIDENCE`` (``$GATEHOUSE_EVIDENCE``, ``/evidence``) and
  ``evidence_path``: where packet code writes what the manifest keeps
  (``keep = [".gatehouse/evidence/..."]``); the fakes' request logs and
  ``Service`` logs go there by default.
- ``FakeOpenAI``: an OpenAI-format ``/v1/chat/completions`` endpoint that
  records every request and can be told to fail.
- ``FakeHTTP``: a recording HTTP server with fixed routes.
- ``emit``: print a finding line for a ``script`` detector.
- ``measure``: append a measurement to ``measures.jsonl`` in the evidence folder.
"""

import http.client
import http.server
import json
import os
import signal
import socket
import subprocess
import threading
import time

import sys

GATEHOUSE_DIR = os.path.dirname(os.path.abspath(__file__))

# The evidence folder: outside the workspace, writable by packet code, not by
# confined processes. Absent outside the sandbox (old graders): then .gatehouse/.
EVIDENCE = os.environ.get("GATEHOUSE_EVIDENCE") or "/evidence"
CONFINE = "/gatehouse/gatehouse_confine.py"

__all__ = ["Service", "ServiceError", "Response", "FakeOpenAI", "FakeHTTP", "emit", "measure", "free_port",
           "EVIDENCE", "evidence_path", "confined", "run_confined", "popen_confined", "host_module"]


def host_module(name, root=None):
    """The module ``name`` as the candidate's code sees it.

    In a run judged apart (JUDGE.md) the candidate's code runs in a host
    process of its own, so patching this process's ``time.sleep`` or
    ``urllib.request.urlopen`` changes nothing it does: patch
    ``host_module("time")`` instead (``mock.patch.object``,
    ``monkeypatch.setattr``), and what the candidate's code calls comes back
    to the judge's stand-in. With ``root``, the module as a program run in
    that folder sees it (a disposable copy the packet code prepared, the
    candidate's patch applied there), served by a host of its own.
    Anywhere else (a packet that declares ``judge = "shared"``), the module
    itself (from ``root`` when given)."""
    judge = sys.modules.get("gatehouse_judge")
    if judge is not None and judge.in_judge():
        return judge.host_module(name, root)
    import importlib

    if root is None:
        return importlib.import_module(name)
    import importlib.util

    root = os.fspath(root)
    parts = name.split(".")
    path = os.path.join(root, *parts)
    path = os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"
    saved = sys.path[:]
    sys.path.insert(0, root)
    try:
        spec = importlib.util.spec_from_file_location("gatehouse_root_%d_%s" % (abs(hash(root)), name.replace(".", "_")), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved


def evidence_path(name):
    """``name`` in the evidence folder (created if needed); the grader brings
    it back as ``.gatehouse/evidence/<name>``."""
    base = EVIDENCE if os.path.isdir(EVIDENCE) else os.path.join(GATEHOUSE_DIR, "evidence")
    path = os.path.join(base, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def confined(argv, write=()):
    """The argv that runs ``argv`` under the grader's confining launcher:
    Landlock, inherited by every child, no writes outside ``/workspace``,
    ``/tmp`` and ``write`` (never the evidence folder)."""
    if not os.path.isfile(CONFINE):
        raise ServiceError("the grader's tools are not mounted at /gatehouse: cannot confine %r" % (list(argv),))
    extra = []
    for w in write:
        extra += ["--write", str(w)]
    return [sys.executable, "-I", CONFINE] + extra + ["--"] + [str(a) for a in argv]


def _local_popen():
    """`subprocess.Popen` for the packet's own programs: in a run judged
    apart (JUDGE.md), under the judge's uid; every other program packet code
    starts runs under the candidate's."""
    judge = sys.modules.get("gatehouse_judge")
    if judge is not None and judge.in_judge():
        return judge.local_popen
    return subprocess.Popen


def run_confined(argv, write=(), **kwargs):
    """``subprocess.run`` of a candidate's command, confined."""
    return subprocess.run(confined(argv, write), **kwargs)


def popen_confined(argv, write=(), **kwargs):
    """``subprocess.Popen`` of a candidate's command, confined."""
    return subprocess.Popen(confined(argv, write), **kwargs)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def emit(failure_id, evidence, provenance="replayed"):
    """Prints one finding for a ``script`` detector."""
    print(json.dumps({"id": failure_id, "evidence": str(evidence), "provenance": provenance}), flush=True)


def measure(name, value, path=None):
    """Appends ``{"name": name, "value": value}`` to the measures ledger
    (``measures.jsonl`` in the evidence folder)."""
    path = path or evidence_path("measures.jsonl")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"name": name, "value": value}) + "\n")


class ServiceError(Exception):
    """The service did not start, or did not answer."""


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "Response(%d, %r)" % (self.status, self.body[:80])


def _request(port, method, path, body=None, json_body=None, headers=None, timeout=5.0):
    headers = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode("utf-8")
        headers.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode("utf-8")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


class Service:
    """A candidate's server, run as its own process group.

    ``ready`` is an HTTP path polled until it answers (any status), or None
    to wait for a TCP connection to ``port``. The process is started
    confined (``confined``): a candidate's server cannot write the evidence
    folder. ``confine=False`` is for the packet's own services (a fake
    upstream that writes evidence), never for candidate code. Its output
    goes to ``log`` (default ``service-<port>.log`` in the evidence folder):
    the harness opens it, so the log holds the process's own output, which
    it can write (or truncate) through its stdout, and nothing else.
    """

    def __init__(self, argv, port, ready=None, env=None, cwd="/workspace", log=None, confine=True, write=()):
        self.command = [str(a) for a in argv]
        self.argv = confined(argv, write) if confine else list(argv)
        self.port = port
        self.ready = ready
        self.env = dict(os.environ, **(env or {}))
        self.cwd = cwd
        self.confine = confine
        self.log_path = log or evidence_path("service-%d.log" % port)
        self.proc = None
        self.starts = 0

    def start(self, timeout=10.0):
        self.starts += 1
        popen = subprocess.Popen if self.confine else _local_popen()
        with open(self.log_path, "ab") as log:
            log.write(("--- start %d: %s\n" % (self.starts, " ".join(self.command))).encode())
            self.proc = popen(
                self.argv, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError("exited with %s before it was ready:\n%s" % (self.proc.returncode, self.output()[-2000:]))
            if self._is_ready():
                return self
            time.sleep(0.02)
        raise ServiceError("not ready on port %d after %.1f s:\n%s" % (self.port, timeout, self.output()[-2000:]))

    def _is_ready(self):
        try:
            if self.ready is None:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            _request(self.port, "GET", self.ready, timeout=0.5)
            return True
        except (OSError, http.client.HTTPException):
            return False

    def request(self, method, path, json=None, body=None, headers=None, timeout=5.0):
        """Sends one request; raises ServiceError when there is no answer."""
        try:
            return _request(self.port, method, path, body=body, json_body=json, headers=headers, timeout=timeout)
        except (OSError, http.client.HTTPException) as e:
            raise ServiceError("%s %s: no answer (%s)" % (method, path, e))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace=3.0):
        """Stops the whole process group; returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.wait()

    def restart(self, timeout=10.0):
        self.stop()
        return self.start(timeout)

    def output(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _Recorder(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _FakeBase:
    """A threaded HTTP server on 127.0.0.1 that records every request."""

    def __init__(self, port=0, log=None, name="fake"):
        self.requests = []
        self.mode = None
        self._fail_left, self._fail_how = 0, None
        self.log_path = log or evidence_path("%s-requests.jsonl" % name)
        self._lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                mode = fake._mode_for_next()
                entry = fake._record(self.command, self.path, raw, mode)
                if mode in ("hang", "drop"):
                    fake._log(entry)
                    if mode == "hang":
                        time.sleep(3600)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if mode in ("500", "429"):
                    status, payload = int(mode), {"error": {"message": "fake endpoint told to fail", "code": mode}}
                else:
                    status, payload = fake.respond(self.command, self.path, raw)
                # The answer is part of the record: its status, and the usage
                # the fake reported, so a packet can recompute spend from it.
                entry["status"] = status
                if isinstance(payload, dict) and "usage" in payload:
                    entry["usage"] = payload["usage"]
                fake._log(entry)
                self._send(status, payload)

            def _send(self, status, payload):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self._handler = Handler
        self.port = port or free_port()
        self._server = None
        self.up()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _mode_for_next(self):
        """How to answer the request that just arrived, decided atomically."""
        with self._lock:
            if self._fail_left > 0:
                self._fail_left -= 1
                return self._fail_how
            return self.mode

    def fail_first(self, n, how="500"):
        """Fails exactly the next ``n`` requests (``500``, ``429``, ``hang``
        or ``drop``: close the connection without an answer), then serves."""
        if how not in ("500", "429", "hang", "drop"):
            raise ValueError("fail_first() takes 500, 429, hang or drop")
        with self._lock:
            self._fail_left, self._fail_how = n, how

    def _record(self, method, path, raw, mode=None):
        try:
            parsed = json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            parsed = None
        entry = {"method": method, "path": path, "bytes": len(raw), "body": raw.decode("utf-8", "replace"), "json": parsed, "ts": time.time(), "mode": mode}
        with self._lock:
            self.requests.append(entry)
        return entry

    def _log(self, entry):
        with self._lock:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")

    def up(self):
        """Serves normally (starting the listener again after ``down("refuse")``)."""
        self.mode = None
        if self._server is None:
            self._server = _Recorder(("127.0.0.1", self.port), self._handler)
            threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self, how="refuse"):
        """Fails every request: ``refuse`` closes the listener; ``500``,
        ``429`` answer with that status; ``hang`` never answers."""
        if how == "refuse":
            self.stop()
        elif how in ("500", "429", "hang"):
            self.mode = how
        else:
            raise ValueError("down() takes refuse, 500, 429 or hang")

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def respond(self, method, path, raw):
        raise NotImplementedError


class FakeOpenAI(_FakeBase):
    """``POST /v1/chat/completions`` and ``GET /v1/models`` in OpenAI's format.

    ``reply`` maps the request's JSON body to the reply's content (default:
    always ``"INFO"``). Usage counts are derived from bytes (4 per token) so
    they are deterministic.
    """

    def __init__(self, port=0, log=None, reply=None, model="fake-model"):
        self.reply = reply or (lambda body: "INFO")
        self.model = model
        super().__init__(port, log, name="openai")

    @property
    def calls(self):
        return [r for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    def respond(self, method, path, raw):
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": "no route %s" % path}}
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}
        content = str(self.reply(body))
        prompt_tokens = max(1, len(raw) // 4)
        completion_tokens = max(1, len(content.encode("utf-8")) // 4)
        return 200, {
            "id": "chatcmpl-%d" % len(self.requests),
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
        }


class FakeHTTP(_FakeBase):
    """Fixed routes: ``{(method, path): (status, json_payload)}``; a payload
    may also be a function of the request body."""

    def __init__(self, routes, port=0, log=None, name="http"):
        self.routes = dict(routes)
        super().__init__(port, log, name=name)

    def respond(self, method, path, raw):
        route = self.routes.get((method, path.split("?")[0]))
        if route is None:
            return 404, {"error": "no route %s %s" % (method, path)}
        status, payload = route
        return status, payload(raw) if callable(payload) else payload
