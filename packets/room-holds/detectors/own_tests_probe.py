"""mock-theater / thin-tests: what did the candidate's own tests really do?

Runs `python3 -m pytest -q test_holds.py` with a probe `sitecustomize` on
PYTHONPATH (inherited by any server the tests start). The probe records, per
process: TCP connects to loopback, listening sockets, launches of app.py, and
every HTTP request sent through http.client/urllib (client side) or received
by an http.server handler (server side), with the Idempotency-Key and a hash
of the body. From that log:

- mock-theater: test_holds.py is missing, or the run never opened a TCP
  connection to 127.0.0.1 (everything was mocked or called in-process);
- thin-tests: the run did reach the server, but never sent one key twice with
  the same body (replay), never one key with two bodies (conflict), or never
  sent one key to two server starts (restart). A server start is a listening
  socket on 8080, or on any port in a process other than the test runner
  (a test may restart the server on a free port), else a launch of app.py.

Prints JSON finding lines only; the run's own output goes to a file.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import run_confined  # noqa: E402

PROBE = r'''
import json, os, socket, threading, time, hashlib
_LOG = os.environ.get("GH_PROBE_LOG")
_lock = threading.Lock()

def _w(kind, **kw):
    if not _LOG:
        return
    kw.update(kind=kind, pid=os.getpid(), t=time.time())
    try:
        with _lock, open(_LOG, "a") as f:
            f.write(json.dumps(kw, default=str) + "\n")
    except Exception:
        pass

def _loop(addr):
    try:
        host = addr[0]
    except Exception:
        return False
    return isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1", "0.0.0.0", ""))

_connect, _connect_ex, _listen = socket.socket.connect, socket.socket.connect_ex, socket.socket.listen

def connect(self, addr):
    r = _connect(self, addr)
    if self.family in (socket.AF_INET, socket.AF_INET6) and _loop(addr):
        _w("connect", port=addr[1])
    return r

def connect_ex(self, addr):
    r = _connect_ex(self, addr)
    if r == 0 and self.family in (socket.AF_INET, socket.AF_INET6) and _loop(addr):
        _w("connect", port=addr[1])
    return r

def listen(self, *a):
    try:
        port = self.getsockname()[1]
    except Exception:
        port = None
    _w("listen", port=port)
    return _listen(self, *a)

socket.socket.connect, socket.socket.connect_ex, socket.socket.listen = connect, connect_ex, listen

def _sha(b):
    if b is None:
        return hashlib.sha256(b"").hexdigest()
    if isinstance(b, str):
        b = b.encode("utf-8", "replace")
    if isinstance(b, (bytes, bytearray)):
        return hashlib.sha256(bytes(b)).hexdigest()
    return "stream"

def _key(headers):
    for k, v in (headers or {}).items():
        if str(k).lower() == "idempotency-key":
            return str(v)
    return None

try:
    import http.client as _hc
    _req = _hc.HTTPConnection.request
    def request(self, method, url, body=None, headers={}, **kw):
        try:
            _w("client", method=method, url=url, key=_key(headers), body=_sha(body))
        except Exception:
            pass
        return _req(self, method, url, body, headers, **kw)
    _hc.HTTPConnection.request = request
except Exception:
    pass

try:
    import subprocess as _sp
    _init = _sp.Popen.__init__
    def __init__(self, args, *a, **kw):
        try:
            argv = [args] if isinstance(args, (str, bytes)) else list(args)
            if any("app.py" in str(x) for x in argv):
                _w("launch", argv=[str(x) for x in argv])
        except Exception:
            pass
        return _init(self, args, *a, **kw)
    _sp.Popen.__init__ = __init__
except Exception:
    pass

try:
    import http.server as _hs
    class _Rec:
        def __init__(self, f):
            self._f, self.buf = f, b""
        def read(self, *a):
            d = self._f.read(*a); self.buf += d or b""; return d
        def readline(self, *a):
            d = self._f.readline(*a); self.buf += d or b""; return d
        def __getattr__(self, n):
            return getattr(self._f, n)
    _parse, _send = _hs.BaseHTTPRequestHandler.parse_request, _hs.BaseHTTPRequestHandler.send_response
    def parse_request(self):
        ok = _parse(self)
        if ok:
            self._gh_rec = _Rec(self.rfile); self.rfile = self._gh_rec
        return ok
    def send_response(self, code, *a):
        rec = getattr(self, "_gh_rec", None)
        if rec is not None:
            try:
                _w("server", method=self.command, url=self.path, key=_key(dict(self.headers)), body=_sha(rec.buf), status=code)
            except Exception:
                pass
            self.rfile = rec._f; self._gh_rec = None
        return _send(self, code, *a)
    _hs.BaseHTTPRequestHandler.parse_request = parse_request
    _hs.BaseHTTPRequestHandler.send_response = send_response
except Exception:
    pass
'''


def emit(fid, evidence):
    print(json.dumps({"id": fid, "evidence": evidence}), flush=True)


def main():
    if not os.path.exists("test_holds.py"):
        emit("mock-theater", "test_holds.py is missing: there are no tests to hit a socket")
        return
    work = tempfile.mkdtemp(prefix="gh-probe-")
    with open(os.path.join(work, "sitecustomize.py"), "w") as f:
        f.write(PROBE)
    log = os.path.join(work, "probe.jsonl")
    env = dict(os.environ, GH_PROBE_LOG=log,
               PYTHONPATH=work + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_holds.py"]
    with open(os.path.join(work, "run.out"), "wb") as out:
        try:
            # The candidate's tests, confined.
            rc = run_confined(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=90, start_new_session=True).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    events = []
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    shutil.rmtree(work, ignore_errors=True)
    events.sort(key=lambda e: e["t"])
    connects = [e for e in events if e["kind"] == "connect"]
    if not connects:
        emit("mock-theater", "running test_holds.py (exit %s) opened no TCP connection to 127.0.0.1: "
             "no test talked to a real server socket" % rc)
        return

    # Server starts: listening sockets if the server ran under the probe, else launches of app.py.
    # A listen counts on 8080 (the brief's port) from any process, and on any port from a process
    # that is not the test runner's (the brief asks only that the tests start the server
    # themselves: a test may restart it on a free port of its own).
    runner = {e["pid"] for e in events if e["kind"] in ("launch", "client")}
    listens = [e["t"] for e in events if e["kind"] == "listen"
               and (e.get("port") == 8080 or e["pid"] not in runner)]
    starts = listens or [e["t"] for e in events if e["kind"] == "launch"]
    client = [e for e in events if e["kind"] == "client"]
    server = [e for e in events if e["kind"] == "server"]
    reqs = client if len(client) >= len(server) else server
    by_key = {}
    for e in reqs:
        if str(e.get("method", "")).upper() != "POST" or not e.get("key"):
            continue
        epoch = sum(1 for t in starts if t <= e["t"])
        by_key.setdefault(e["key"], []).append((e["body"], epoch))
    replay = any(len(v) != len({b for b, _ in v}) for v in by_key.values())
    conflict = any(len({b for b, _ in v}) > 1 for v in by_key.values())
    restart = len(starts) >= 2 and any(len({ep for _, ep in v}) > 1 for v in by_key.values())
    missing = [name for name, ok in (("replay (one key, same body, twice)", replay),
                                     ("conflict (one key, two bodies)", conflict),
                                     ("restart (one key sent to two server starts)", restart)) if not ok]
    if missing:
        emit("thin-tests", "test_holds.py reached the server (%d POSTs with a key, %d server starts) but never "
             "exercised: %s" % (sum(len(v) for v in by_key.values()), len(starts), "; ".join(missing)))


if __name__ == "__main__":
    main()
