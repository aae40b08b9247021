"""Partial-mode replays for sticky-404: replay.sh with only one of the two
services given. The prompt's rule: when TOY_BASE_URL and LLM_ENDPOINT are
set replay.sh uses them, when they are not it starts the shipped
toy_service.py and fake_model.py itself, and everything it starts is gone
when it exits. The replay step sets both, the cold step neither; this step
sets each one alone:

  partial-toy    TOY_BASE_URL is the platform's toy service, LLM_ENDPOINT is
                 unset: replay.sh starts fake_model.py itself
  partial-model  LLM_ENDPOINT is a scripted platform model, TOY_BASE_URL is
                 unset: replay.sh starts toy_service.py itself

A script that keeps its clean-up for the cold case leaves the service it
started in one of these behind; the sandbox reports it (leftovers). Each run's
exit is written to runs/<mode>/run.jsonl of the evidence folder. replay.sh
runs confined (the harness's launcher); the platform's services are packet
code. Always exits 0: the detectors judge."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, "/workspace/.gatehouse")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gatehouse_harness import popen_confined  # noqa: E402
from sticky_rig import ScriptedModel, evidence_dir, start_toy, stop_proc  # noqa: E402

WALL_BUDGET = 45.0
GET = lambda path: {"method": "GET", "path": path}  # noqa: E731
SCRIPT = [
    {"actions": [GET("/health"), GET("/items")], "done": False},
    {"actions": [{"method": "POST", "path": "/items", "body": {"name": "partial replay"}}], "done": False},
    {"actions": [], "done": True, "summary": "item created"},
]


def replay(mode: str, env_overrides: dict) -> dict:
    out = evidence_dir("runs/" + mode)
    env = {k: v for k, v in os.environ.items() if k not in ("TOY_BASE_URL", "LLM_ENDPOINT")}
    ledger = Path(".gatehouse/agent-ledgers") / f"{mode}.jsonl"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.unlink(missing_ok=True)
    env.update(env_overrides, LEDGER_PATH=str(ledger.resolve()))
    code, timed_out, t0 = None, False, time.monotonic()
    with open(out / "replay.out", "wb") as fh:
        proc = popen_confined(["sh", "replay.sh"], env=env, stdout=fh, stderr=subprocess.STDOUT,
                              start_new_session=True)
        try:
            code = proc.wait(WALL_BUDGET)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    row = {"exit": code, "exit_ok": code in (0, 1) and not timed_out,
           "wall_secs": round(time.monotonic() - t0, 3), "timed_out": timed_out}
    (out / "run.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return row


def main() -> int:
    if not Path("replay.sh").exists():
        print("replay.sh is missing")
        return 0
    toy, port = start_toy(evidence_dir("runs/partial-toy") / "access.jsonl")
    try:
        a = replay("partial-toy", {"TOY_BASE_URL": f"http://127.0.0.1:{port}"})
    finally:
        stop_proc(toy)
    model = ScriptedModel(SCRIPT)
    try:
        b = replay("partial-model", {"LLM_ENDPOINT": model.endpoint})
    finally:
        model.stop()
    print(json.dumps({"partial-toy": a, "partial-model": b}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
