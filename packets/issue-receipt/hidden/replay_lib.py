"""Shared replay helpers for the hidden tests (laid at .gatehouse/replay_lib.py).

Runs the candidate's command, `python3 agent.py fixtures/issue_142.json`, in
the workspace against the packet's deterministic model (a pristine copy of the
starter's fake_model.py at .gatehouse/fake_model.py, started through the
harness) or against the harness FakeOpenAI, and writes what the model side
saw to .gatehouse/ (recomputed ledgers the manifest's ledger detectors read).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import FakeOpenAI, Service, free_port  # noqa: E402

FIXTURE = "fixtures/issue_142.json"
PRODUCTS = ("usage.jsonl", "give_up.json", "result.json")


def clean() -> None:
    for name in PRODUCTS:
        Path(name).unlink(missing_ok=True)


def run_agent(base_url: str, timeout: float = 45) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPENAI_BASE_URL=base_url, OPENAI_API_KEY="sk-replay")
    try:
        return subprocess.run([sys.executable, "agent.py", FIXTURE], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, None, exc.stdout or "", "timed out")


def replay(ledger: str, answers: dict | None = None) -> dict:
    """Run the agent against fake_model.py; the model's own log becomes `ledger`."""
    clean()
    log = Path(ledger)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    cmd = [sys.executable, os.path.abspath(".gatehouse/fake_model.py"), "--log", os.path.abspath(log)]
    if answers:
        Path(".gatehouse/answers.json").write_text(json.dumps(answers), encoding="utf-8")
        cmd += ["--answers", os.path.abspath(".gatehouse/answers.json")]
    port = free_port()
    # In the sandbox the workspace is /workspace, the harness's default cwd.
    where = {} if os.getcwd() == "/workspace" else {"cwd": os.getcwd()}
    model = Service(cmd + ["--port", str(port)], port=port, ready=None, **where)
    model.start(timeout=10)
    try:
        proc = run_agent(f"http://127.0.0.1:{port}/v1")
    finally:
        model.stop()
    log.touch()
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return {"proc": proc, "rows": rows}


def throttled(ledger: str) -> dict:
    """Run the agent against a FakeOpenAI that answers every call with 429."""
    clean()
    fake = FakeOpenAI()
    fake.down("429")
    try:
        url = fake.url.rstrip("/")
        base = url[: -len("/chat/completions")] if url.endswith("/chat/completions") else (url if url.endswith("/v1") else url + "/v1")
        proc = run_agent(base, timeout=20)
        seen = list(fake.requests)
    finally:
        fake.stop()
    rows = []
    for i, r in enumerate(seen, 1):
        body = r.get("body")
        raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
        rows.append({"n": i, "status": 429, "bytes": r.get("bytes", len(raw)), "body_sha256": hashlib.sha256(raw).hexdigest()})
    Path(ledger).parent.mkdir(parents=True, exist_ok=True)
    Path(ledger).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return {"proc": proc, "rows": rows}


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).exists() else "absent"


def tests_pass(command: list[str]) -> tuple[bool, str]:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    return proc.returncode == 0, (proc.stdout + proc.stderr)[-400:]


def restore(pristine: str, path: str) -> None:
    shutil.copyfile(pristine, path)
