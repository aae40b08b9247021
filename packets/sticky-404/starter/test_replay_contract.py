"""Contract test for the sticky-404 take-home. Do not edit.

Starts the toy service and the rehearsal model on free ports, runs replay.sh
with TOY_BASE_URL, LLM_ENDPOINT and LEDGER_PATH set, and checks what came back.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIELDS = {"ts", "kind", "name", "bytes_in", "bytes_out", "error", "duplicate_of"}


def _start(script, tmp, name, *extra):
    port_file = tmp / f"{name}.port"
    proc = subprocess.Popen([sys.executable, str(HERE / script), "--port", "0", "--port-file", str(port_file), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text())
        time.sleep(0.025)
    proc.kill()
    raise RuntimeError(f"{script} did not start")


@pytest.fixture()
def replay(tmp_path):
    access = tmp_path / "access.jsonl"
    toy, toy_port = _start("toy_service.py", tmp_path, "toy", "--log", str(access))
    model, model_port = _start("fake_model.py", tmp_path, "model")
    ledger = tmp_path / "ledger.jsonl"
    env = dict(os.environ,
               TOY_BASE_URL=f"http://127.0.0.1:{toy_port}",
               LLM_ENDPOINT=f"http://127.0.0.1:{model_port}/v1/chat/completions",
               LEDGER_PATH=str(ledger))
    try:
        assert (HERE / "replay.sh").exists(), "replay.sh is missing"
        t0 = time.monotonic()
        done = subprocess.run(["sh", str(HERE / "replay.sh")], cwd=HERE, env=env, timeout=60,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - t0
    finally:
        toy.kill(); model.kill(); toy.wait(); model.wait()
    access_rows = [json.loads(l) for l in access.read_text().splitlines() if l.strip()] if access.exists() else []
    rows = [json.loads(l) for l in ledger.read_text().splitlines() if l.strip()] if ledger.exists() else []
    return done, wall, rows, access_rows


def test_replay_exits_zero_or_one_in_time(replay):
    done, wall, _, _ = replay
    assert done.returncode in (0, 1), done.stdout[-2000:]
    assert wall < 45


def test_ledger_rows_have_the_fields(replay):
    _, _, rows, _ = replay
    assert rows, "the replay wrote no ledger rows"
    for row in rows:
        assert set(row) == FIELDS, row
        assert row["kind"] in ("model", "tool")


def test_one_tool_row_per_request_the_service_saw(replay):
    _, _, rows, access = replay
    assert len([r for r in rows if r["kind"] == "tool"]) == len(access)


def test_items_touched_and_secret_asked_once(replay):
    _, _, _, access = replay
    assert any(a["path"] == "/items" for a in access)
    assert sum(1 for a in access if a["path"] == "/secret") <= 1


def test_budgets(replay):
    _, _, rows, _ = replay
    assert sum(1 for r in rows if r["kind"] == "model") <= 12
    assert sum(1 for r in rows if r["kind"] == "tool") <= 20
