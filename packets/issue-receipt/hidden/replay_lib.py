"""Shared replay helpers for the hidden tests (laid at .gatehouse/replay_lib.py).

Runs the candidate's command, `python3 agent.py fixtures/issue_142.json`, in
the workspace against the packet's deterministic model (a pristine copy of the
starter's fake_model.py at .gatehouse/fake_model.py, started through the
harness) or against the harness FakeOpenAI, and writes what the model side
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
from pathlib import Path

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import FakeOpenAI, Service, evidence_path, free_port, run_confined  # noqa: E402

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
    Path(evidence_path(ledger)).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return {"proc": proc, "rows": rows}


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
