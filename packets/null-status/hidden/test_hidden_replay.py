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


def test_cli_confirm_fills_the_holes():
    # The brief's `--confirm field=value`: confirmed answers reach the
    # payloads verbatim, and the run stops at the next hole (inc-2044 has no
    # status for close_ticket).
    code, rows = _cli("incidents/inc-2044.json", "--confirm", "service=checkout-web",
                      "--confirm", "owner=team-payments", "--confirm", "http_status=502")
    calls = [r for r in rows if r.get("type") == "call"]
    assert code == 0, rows
    assert [c.get("tool") for c in calls] == ["page", "retry"], rows
    page = calls[0].get("payload") or {}
    assert (page.get("service"), page.get("owner"), page.get("http_status")) == (
        "checkout-web", "team-payments", 502), page
    assert rows and rows[-1].get("type") == "result" and rows[-1].get("status") == "blocked" \
        and rows[-1].get("blocked_on") == "close_ticket", rows


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
