"""Shared replay helpers for the hidden tests (laid at .gatehouse/replay_lib.py).

Runs the candidate's command, `python3 agent.py fixtures/issue_142.json`, in
the workspace against the packet's deterministic model (a pristine copy of the
starter's fake_model.py at .gatehouse/fake_model.py, started through the
harness), an endpoint that answers 429 to everything, or a closed port, and
writes what the model side
saw to the evidence folder (recomputed ledgers the manifest keeps as
.gatehouse/evidence/*.jsonl and its ledger detectors read). The agent, and
the issue's test command that runs the code it changed, are started through
the harness's confining launcher: they cannot write the evidence folder, so a
dishonest agent cannot make the model-side ledger agree with its receipt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import Service, evidence_path, free_port, run_confined  # noqa: E402

FIXTURE = "fixtures/issue_142.json"
PRODUCTS = ("usage.jsonl", "give_up.json", "result.json")
PRISTINE = ".gatehouse/pristine/"

# The pristine copies the grader laid under .gatehouse/pristine/ are in the
# workspace, which the candidate's agent can write: snapshot them into the
# evidence folder now, before any agent runs, and read only the snapshot.
if os.path.isdir(PRISTINE):
    for _name in os.listdir(PRISTINE):
        if os.path.isfile(PRISTINE + _name):
            shutil.copyfile(PRISTINE + _name, evidence_path("pristine/" + _name))


# The files the agent and the replay write (laid files are read-only) are
# laid under .gatehouse/place/ and copied into place here, over whatever the
# submission holds there; a test file is laid as <name>.orig (laid under its
# own name it would get the grader's canary twins).
PLACE = ".gatehouse/place/"
for _root, _dirs, _files in os.walk(PLACE):
    for _name in _files:
        _src = os.path.join(_root, _name)
        _dest = os.path.relpath(_src, PLACE)
        _dest = _dest[: -len(".orig")] if _dest.endswith(".orig") else _dest
        if os.path.isdir(_dest) and not os.path.islink(_dest):
            shutil.rmtree(_dest)
        elif os.path.lexists(_dest):
            os.unlink(_dest)
        os.makedirs(os.path.dirname(_dest) or ".", exist_ok=True)
        shutil.copyfile(_src, _dest)


def _pristine(path: str) -> str:
    """A laid pristine copy's snapshot in the evidence folder; other paths as given."""
    return evidence_path("pristine/" + path[len(PRISTINE):]) if path.startswith(PRISTINE) else path


def clean() -> None:
    for name in PRODUCTS:
        Path(name).unlink(missing_ok=True)


def run_agent(base_url: str, timeout: float = 45) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPENAI_BASE_URL=base_url, OPENAI_API_KEY="sk-replay")
    try:
        return run_confined([sys.executable, "agent.py", FIXTURE], env=env,
                            capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, None, exc.stdout or "", "timed out")


def replay(ledger: str, answers: dict | None = None) -> dict:
    """Run the agent against fake_model.py; the model's own log becomes
    `ledger` in the evidence folder."""
    clean()
    log = Path(evidence_path(ledger))
    log.unlink(missing_ok=True)
    cmd = [sys.executable, os.path.abspath(".gatehouse/fake_model.py"), "--log", str(log)]
    if answers:
        answers_file = Path(evidence_path("answers.json"))
        answers_file.write_text(json.dumps(answers), encoding="utf-8")
        cmd += ["--answers", str(answers_file)]
    port = free_port()
    # In the sandbox the workspace is /workspace, the harness's default cwd.
    where = {} if os.getcwd() == "/workspace" else {"cwd": os.getcwd()}
    # The model is the packet's own code: it runs unconfined, to write the ledger.
    model = Service(cmd + ["--port", str(port)], port=port, ready=None, confine=False, **where)
    model.start(timeout=10)
    try:
        proc = run_agent(f"http://127.0.0.1:{port}/v1")
    finally:
        model.stop()
    log.touch()
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return {"proc": proc, "rows": rows}


class Throttler:
    """An endpoint on 127.0.0.1 that answers every request with HTTP 429 and
    records each one's body, Authorization header and arrival time (the
    harness's fakes keep no headers). With `answer`, it answers HTTP 200
    instead: a chat completion whose content is `answer` and that carries no
    `usage` at all (an endpoint that does not meter); with `refuse_first`, the
    first that many requests still get the 429 (a model that throttles once,
    then serves)."""

    def __init__(self, answer: str | None = None, refuse_first: int = 0, refuse_status: int = 429) -> None:
        self.requests: list[dict] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                rec.requests.append({"path": self.path, "raw": raw, "authorization": self.headers.get("Authorization"),
                                     "t": time.monotonic()})
                if answer is None or len(rec.requests) <= refuse_first:
                    status = refuse_status
                    data = json.dumps({"error": {"message": "rate limited", "code": str(status)}}).encode()
                else:
                    status, data = 200, json.dumps({
                        "id": "unmetered", "object": "chat.completion", "model": "unmetered",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer}}]}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = "http://127.0.0.1:%d/v1" % self.server.server_address[1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def throttled(ledger: str) -> dict:
    """Run the agent against an endpoint that answers every call with 429."""
    clean()
    fake = Throttler()
    try:
        proc = run_agent(fake.base, timeout=20)
        seen = list(fake.requests)
    finally:
        fake.stop()
    rows = []
    for i, r in enumerate(seen, 1):
        raw = r["raw"]
        rows.append({"n": i, "status": 429, "bytes": len(raw), "body_sha256": hashlib.sha256(raw).hexdigest()})
    Path(evidence_path(ledger)).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return {"proc": proc, "rows": rows, "auth": [r["authorization"] for r in seen],
            "times": [r["t"] for r in seen]}


def unmetered(answer: str) -> dict:
    """Run the agent against an endpoint that answers every call with HTTP
    200 and `answer`, reporting no usage; `requests` is how many it served."""
    clean()
    fake = Throttler(answer=answer)
    try:
        proc = run_agent(fake.base, timeout=45)
        served = len(fake.requests)
    finally:
        fake.stop()
    return {"proc": proc, "requests": served}


def throttled_then_served(answer: str, refusals: int = 1, status: int = 429) -> dict:
    """Run the agent against an endpoint that answers its first `refusals`
    requests with `status` (429 or 503), then every one with HTTP 200 and
    `answer` (no usage)."""
    clean()
    fake = Throttler(answer=answer, refuse_first=refusals, refuse_status=status)
    try:
        proc = run_agent(fake.base, timeout=45)
        served = len(fake.requests)
    finally:
        fake.stop()
    return {"proc": proc, "requests": served}


def refused() -> dict:
    """Run the agent against a port nothing listens on."""
    clean()
    return {"proc": run_agent("http://127.0.0.1:%d/v1" % free_port(), timeout=20)}


class Writes:
    """Counts the writes of the file `path` by any process, seen from outside
    them (Linux inotify on its folder): each close of the file opened for
    writing, and each file renamed onto it. Start it before the run, read
    `count()` after. Opens are watched too: the kernel merges an event into
    an identical one still unread at the end of the queue, and an open comes
    between any two writes."""

    IN_CLOSE_WRITE, IN_OPEN, IN_MOVED_TO, IN_NONBLOCK = 0x8, 0x20, 0x80, os.O_NONBLOCK

    def __init__(self, path: str) -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        folder, self.name = os.path.split(os.path.abspath(path))
        self.fd = libc.inotify_init1(self.IN_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        mask = self.IN_CLOSE_WRITE | self.IN_OPEN | self.IN_MOVED_TO
        if libc.inotify_add_watch(self.fd, os.fsencode(folder), mask) < 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, f"inotify_add_watch {folder}")

    def count(self) -> int:
        import struct

        data = b""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        os.close(self.fd)
        n, at, want = 0, 0, os.fsencode(self.name)
        while at + 16 <= len(data):
            _wd, mask, _cookie, size = struct.unpack_from("iIII", data, at)
            if mask & 0x4000:  # IN_Q_OVERFLOW: events were lost, so no count
                raise OSError("inotify queue overflow")
            name = data[at + 16: at + 16 + size].rstrip(b"\0")
            at += 16 + size
            n += name == want and bool(mask & (self.IN_CLOSE_WRITE | self.IN_MOVED_TO))
        return n


@contextmanager
def fixture_as(**fields):
    """The laid fixture with `fields` changed, put back afterwards."""
    text = Path(FIXTURE).read_text(encoding="utf-8")
    issue = json.loads(text)
    issue.update(fields)
    Path(FIXTURE).write_text(json.dumps(issue, indent=1), encoding="utf-8")
    try:
        yield issue
    finally:
        Path(FIXTURE).write_text(text, encoding="utf-8")


def unreadable(ledger: str) -> dict:
    """Run the agent on the fixture renumbered to an issue the model does not
    know: it answers every call in prose, with no code block."""
    with fixture_as(id=916):
        return replay(ledger)


def usage_rows() -> list:
    """The usage.jsonl the last run wrote (a line that is not JSON is None)."""
    path = Path("usage.jsonl")
    rows: list = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []:
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                rows.append(None)
    return rows


def digest(path: str) -> str:
    path = _pristine(path)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).exists() else "absent"


def tests_pass(command: list[str]) -> tuple[bool, str]:
    """The issue's test command on the code the agent changed: confined too."""
    proc = run_confined(command, capture_output=True, text=True, timeout=60)
    return proc.returncode == 0, (proc.stdout + proc.stderr)[-400:]


def restore(pristine: str, path: str) -> None:
    shutil.copyfile(_pristine(pristine), path)


def replay_issue(ledger: str, source_test: str, pristine: str, answers: dict | None = None) -> dict:
    """`replay`, then the issue's own check: the digest of its test file
    `source_test` as the run left it (`test_digest`; the run must not change
    it), the pristine copy put back, and the fixture's test command run on the
    code the agent changed (`passed`, `test_output`)."""
    out = replay(ledger, answers=answers)
    out["test_digest"] = digest(source_test)
    restore(pristine, source_test)
    out["passed"], out["test_output"] = tests_pass(json.loads(Path(FIXTURE).read_text())["test"])
    return out
