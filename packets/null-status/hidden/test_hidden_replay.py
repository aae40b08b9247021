"""Isolation and replay for null-status: the transcript replays with the model
out of the room, twice the same, and the gate runs with the network gone."""

import json
import socket
import sys
from pathlib import Path

import gate
from tools import MockTools

sys.path.insert(0, str(Path.cwd() / ".gatehouse"))
from gatehouse_harness import run_confined  # noqa: E402


def _cli(*args):
    done = run_confined([sys.executable, "gate.py", *args], capture_output=True, text=True, timeout=20)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, rows


def test_transcript_replays_from_the_cli():
    code, rows = _cli("incidents/inc-2044.json")
    claimed = [json.loads(line) for line in Path("transcript.jsonl").read_text().splitlines() if line.strip()]
    assert code == 0
    assert rows == claimed


def test_cli_output_is_deterministic():
    assert _cli(".gatehouse/inc-6610.json") == _cli(".gatehouse/inc-6610.json")


def test_gate_runs_without_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network is not part of the gate")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    incident = json.loads(Path(".gatehouse/inc-6610.json").read_text())
    result = gate.run(incident, MockTools(incident))
    assert result["status"] == "blocked"
