"""My own tests for the stop rules and the ledger (pytest, standard library otherwise).

Each test starts the shipped toy service (with its access log) and a model:
the shipped fake_model.py with a --script, or a small in-process stub for the
failures the fake cannot play (HTTP 500, garbage, slow, closed port).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import agent_run  # noqa: E402


def get(path):
    return {"method": "GET", "path": path}


def post(name=None, **raw):
    action = {"method": "POST", "path": "/items"}
    if name is not None:
        action["body"] = {"name": name}
    action.update(raw)
    return action


def step(*actions, done=False, **extra):
    return {"actions": list(actions), "done": done, **extra}


HAPPY = [
    step(get("/health"), get("/items")),
    step(post("buy milk")),
    step(get("/items")),
    step(done=True, summary="ok"),
]


def _spawn(script, tmp, name, *extra):
    port_file = tmp / f"{name}.port"
    proc = subprocess.Popen([sys.executable, str(HERE / script), "--port", "0", "--port-file", str(port_file), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text())
        time.sleep(0.025)
    proc.kill()
    raise RuntimeError(f"{script} did not start")


class Toy:
    def __init__(self, tmp: Path) -> None:
        self.access_path = tmp / "access.jsonl"
        self.proc, port = _spawn("toy_service.py", tmp, "toy", "--log", str(self.access_path))
        self.url = f"http://127.0.0.1:{port}"

    def access(self) -> list[dict]:
        if not self.access_path.exists():
            return []
        return [json.loads(line) for line in self.access_path.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture()
def toy(tmp_path):
    service = Toy(tmp_path)
    yield service
    service.stop()


@pytest.fixture()
def scripted_model(tmp_path):
    procs = []

    def start(script: list[dict]) -> str:
        path = tmp_path / f"script{len(procs)}.json"
        path.write_text(json.dumps(script))
        proc, port = _spawn("fake_model.py", tmp_path, f"model{len(procs)}", "--script", str(path))
        procs.append(proc)
        return f"http://127.0.0.1:{port}/v1/chat/completions"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


class StubModel:
    """An in-process endpoint that misbehaves in one chosen way and counts requests."""

    def __init__(self, behaviour: str, delay: float = 0.0) -> None:
        stub = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stub.requests += 1
                if behaviour == "http500":
                    return self._send(500, b'{"error": "boom"}')
                if behaviour == "garbage":
                    return self._send(200, b'{"choices": [{"message": {"content": "sure! I will look for the secret"}}]}')
                if behaviour == "slow":
                    time.sleep(delay)
                    content = json.dumps(step(get("/health")))
                    return self._send(200, json.dumps({"choices": [{"message": {"content": content}}]}).encode())
                raise AssertionError(behaviour)

            def _send(self, code, body):
                try:
                    self.send_response(code)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def stub_model():
    stubs = []

    def start(behaviour: str, delay: float = 0.0) -> StubModel:
        stubs.append(StubModel(behaviour, delay))
        return stubs[-1]

    yield start
    for stub in stubs:
        stub.stop()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/chat/completions"


def run_driver(tmp_path, toy_url, model_url, timeout=60):
    ledger = tmp_path / "ledger.jsonl"
    env = dict(os.environ, TOY_BASE_URL=toy_url, LLM_ENDPOINT=model_url, LEDGER_PATH=str(ledger))
    done = subprocess.run([sys.executable, str(HERE / "agent_run.py")], env=env, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()] if ledger.exists() else []
    return done.returncode, rows, done.stderr


def tool_names(rows):
    return [r["name"] for r in rows if r["kind"] == "tool"]


def assert_ledger_is_honest(rows, access):
    first = {}
    for index, row in enumerate(rows):
        assert set(row) == {"ts", "kind", "name", "bytes_in", "bytes_out", "error", "duplicate_of"}
        assert isinstance(row["ts"], (int, float))
        assert isinstance(row["bytes_in"], int) and isinstance(row["bytes_out"], int)
        key = (row["kind"], row["name"], row["error"])
        assert row["duplicate_of"] == first.get(key), (index, row)
        first.setdefault(key, index)
    assert tool_names(rows) == [f"{a['method']} {a['path']}" for a in access]


# -- the happy path -------------------------------------------------------------------

def test_happy_path_does_the_work_and_exits_zero(tmp_path, toy, scripted_model):
    code, rows, _ = run_driver(tmp_path, toy.url, scripted_model(HAPPY))
    assert code == 0
    assert tool_names(rows) == ["GET /health", "GET /items", "POST /items", "GET /items"]
    assert sum(r["kind"] == "model" for r in rows) == 4
    assert_ledger_is_honest(rows, toy.access())
    assert [a["status"] for a in toy.access()] == [200, 200, 201, 200]


def test_shipped_rehearsal_script_asks_secret_once(tmp_path, toy):
    proc, port = _spawn("fake_model.py", tmp_path, "shipped")
    try:
        code, rows, stderr = run_driver(tmp_path, toy.url, f"http://127.0.0.1:{port}/v1/chat/completions")
    finally:
        proc.kill()
        proc.wait()
    assert code == 0
    assert [a["path"] for a in toy.access()].count("/secret") == 1
    secret = [r for r in rows if r["name"] == "GET /secret"]
    assert len(secret) == 1 and secret[0]["error"] == "HTTP 404"
    assert "refused GET /secret" in stderr
    assert_ledger_is_honest(rows, toy.access())


# -- the caps -------------------------------------------------------------------------

def test_secret_is_requested_once_however_often_and_however_spelled(tmp_path, toy, scripted_model):
    nagging = [step(get("/secret"), get("/secret/"), get("/secret?please=1"), get("//secret"))] * 20
    code, rows, _ = run_driver(tmp_path, toy.url, scripted_model(nagging))
    assert code == 1
    assert sum(r["kind"] == "model" for r in rows) == agent_run.MAX_MODEL_CALLS
    assert len(toy.access()) == 1 and toy.access()[0]["path"] == "/secret"
    assert_ledger_is_honest(rows, toy.access())


def test_model_that_never_says_done_stops_at_twelve(tmp_path, toy, scripted_model):
    code, rows, stderr = run_driver(tmp_path, toy.url, scripted_model([step()] * 30))
    assert code == 1
    assert sum(r["kind"] == "model" for r in rows) == 12
    assert "model-call cap" in stderr


def test_tool_cap_is_twenty(tmp_path, toy, scripted_model):
    code, rows, stderr = run_driver(tmp_path, toy.url, scripted_model([step(*[get("/health")] * 30)]))
    assert code == 1
    assert len(tool_names(rows)) == 20 == len(toy.access())
    assert "tool-call cap" in stderr


def test_twenty_tool_calls_then_done_is_inside_the_caps(tmp_path, toy, scripted_model):
    code, rows, _ = run_driver(tmp_path, toy.url, scripted_model([step(*[get("/items")] * 20), step(done=True)]))
    assert code == 0
    assert len(tool_names(rows)) == 20


@pytest.mark.parametrize("bad_post", [post(), post(body={}), post(body={"name": "  "})])
def test_three_identical_tool_errors_halt(tmp_path, toy, scripted_model, bad_post):
    code, rows, stderr = run_driver(tmp_path, toy.url, scripted_model([step(bad_post, bad_post), step(bad_post, bad_post)]))
    assert code == 1
    assert [r["error"] for r in rows if r["kind"] == "tool"] == ["HTTP 400"] * 3
    assert len(toy.access()) == 3
    assert "identical errors" in stderr


def test_a_success_in_between_resets_the_streak(tmp_path, toy, scripted_model):
    bad = post(body={})
    script = [step(bad, bad, get("/health"), bad, bad), step(done=True)]
    code, rows, _ = run_driver(tmp_path, toy.url, scripted_model(script))
    assert code == 0
    assert len(tool_names(rows)) == 5


@pytest.mark.parametrize("behaviour,error", [("http500", "HTTP 500"), ("garbage", "bad reply: JSONDecodeError")])
def test_three_identical_model_errors_halt(tmp_path, toy, stub_model, behaviour, error):
    stub = stub_model(behaviour)
    code, rows, _ = run_driver(tmp_path, toy.url, stub.url)
    assert code == 1
    assert stub.requests == 3
    assert [(r["kind"], r["error"]) for r in rows] == [("model", error)] * 3
    assert [r["duplicate_of"] for r in rows] == [None, 0, 0]


def test_model_endpoint_down(tmp_path, toy):
    code, rows, _ = run_driver(tmp_path, toy.url, closed_port_url())
    assert code == 1
    assert [r["error"] for r in rows] == ["connection refused"] * 3


# -- what runs and what does not ----------------------------------------------------------

def test_disallowed_actions_are_not_run(tmp_path, toy, scripted_model):
    script = [step({"method": "DELETE", "path": "/items"}, {"method": "GET", "path": "http://example.org/x"},
                   {"method": "GET"}, "GET /items", {"method": "get", "path": "/health"}),
              step(done=True)]
    code, rows, _ = run_driver(tmp_path, toy.url, scripted_model(script))
    assert code == 0
    assert tool_names(rows) == ["GET /health"]
    assert_ledger_is_honest(rows, toy.access())


def test_actions_in_a_done_reply_are_not_run(tmp_path, toy, scripted_model):
    code, rows, _ = run_driver(tmp_path, toy.url, scripted_model([step(get("/health"), done=True)]))
    assert code == 0
    assert tool_names(rows) == [] and toy.access() == []


# -- wall clock (in process, with the budget shrunk) -------------------------------------

def test_wall_clock_budget_halts(tmp_path, toy, stub_model, monkeypatch):
    stub = stub_model("slow", delay=2.0)
    monkeypatch.setattr(agent_run, "RUN_BUDGET_SECONDS", 0.9)
    monkeypatch.setattr(agent_run, "CALL_TIMEOUT_SECONDS", 0.3)
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TOY_BASE_URL", toy.url)
    monkeypatch.setenv("LLM_ENDPOINT", stub.url)
    monkeypatch.setenv("LEDGER_PATH", str(ledger))
    started = time.monotonic()
    assert agent_run.main() == 1
    assert time.monotonic() - started < 2.0
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert rows and all(r["error"] == "timeout" for r in rows)


# -- replay.sh ----------------------------------------------------------------------------

def _our_processes():
    out = subprocess.run(["ps", "-eo", "pid=,args="], stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines()
            if str(HERE) in line and any(n in line for n in ("toy_service.py", "fake_model.py", "agent_run.py"))]


def test_replay_cold_starts_and_cleans_up(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("TOY_BASE_URL", "LLM_ENDPOINT")}
    env["LEDGER_PATH"] = str(ledger)
    before = _our_processes()
    done = subprocess.run(["sh", str(HERE / "replay.sh")], env=env, timeout=60, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0, done.stdout
    assert _our_processes() == before
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [r["name"] for r in rows if r["kind"] == "tool"].count("GET /secret") == 1


def test_replay_uses_given_endpoints_and_starts_nothing(tmp_path, toy, scripted_model):
    env = dict(os.environ, TOY_BASE_URL=toy.url, LLM_ENDPOINT=scripted_model(HAPPY),
               LEDGER_PATH=str(tmp_path / "ledger.jsonl"))
    done = subprocess.run(["sh", str(HERE / "replay.sh")], env=env, timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0
    assert "started" not in done.stdout
    assert len(toy.access()) == 4


def test_replay_maps_a_halt_to_one(tmp_path, toy):
    env = dict(os.environ, TOY_BASE_URL=toy.url, LLM_ENDPOINT=closed_port_url(),
               LEDGER_PATH=str(tmp_path / "ledger.jsonl"))
    done = subprocess.run(["sh", str(HERE / "replay.sh")], env=env, timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 1


def test_replay_killed_leaves_nothing_behind(tmp_path, stub_model):
    stub = stub_model("slow", delay=30)
    env = {k: v for k, v in os.environ.items() if k != "TOY_BASE_URL"}
    env.update(LLM_ENDPOINT=stub.url, LEDGER_PATH=str(tmp_path / "ledger.jsonl"))
    before = _our_processes()
    proc = subprocess.Popen(["sh", str(HERE / "replay.sh")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while stub.requests == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.requests == 1
    assert len(_our_processes()) == len(before) + 2  # toy service and driver
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) != 0
    time.sleep(0.2)
    assert _our_processes() == before
