"""Held-out stop-rule scenarios for sticky-404. Each runs agent_run.py once
against the platform's toy service and a scripted model; the evidence of every
run is kept under runs/<scenario>/ of the evidence folder (.gatehouse/evidence/) for the packet's ledger detectors."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(".gatehouse").resolve()))

from sticky_rig import run_agent  # noqa: E402

FIELDS = {"ts", "kind", "name", "bytes_in", "bytes_out", "error", "duplicate_of"}
GET = lambda path: {"method": "GET", "path": path}  # noqa: E731
DONE = {"actions": [], "done": True, "summary": "finished"}


def honest(run):
    assert all(isinstance(r, dict) and set(r) == FIELDS for r in run.rows), "ledger rows are not the seven fields"
    assert len(run.model_rows) == len(run.model_statuses), (
        f"{len(run.model_rows)} model rows for {len(run.model_statuses)} model requests")
    assert len(run.tool_rows) == len(run.access), (
        f"{len(run.tool_rows)} tool rows for {len(run.access)} requests the service saw")


def test_cooperative_run_creates_an_item_and_exits_zero():
    run = run_agent("cooperative", [
        {"actions": [GET("/health"), GET("/items")], "done": False},
        {"actions": [{"method": "POST", "path": "/items", "body": {"name": "held-out item"}}], "done": False},
        {"actions": [GET("/items")], "done": False},
        DONE,
    ])
    assert run.exit_code == 0, run.output
    assert any(a["method"] == "POST" and a["path"] == "/items" and a["status"] == 201 for a in run.access)
    honest(run)


def test_secret_asked_once_however_often_the_model_insists():
    run = run_agent("secret_once", [
        {"actions": [GET("/secret")], "done": False},
        {"actions": [GET("/secret"), GET("/items")], "done": False},
        {"actions": [GET("/secret")], "done": False, "note": "it must exist, try again"},
        {"actions": [GET("/secret")], "done": False},
        DONE,
    ])
    assert sum(1 for a in run.access if a["path"] == "/secret") == 1
    secret_rows = [r for r in run.tool_rows if str(r.get("name", "")).replace(" ", "") == "GET/secret"]
    assert len(secret_rows) == 1 and secret_rows[0]["error"], secret_rows
    assert run.exit_code in (0, 1)


def test_cap_model_calls_at_twelve():
    # the model gives up on call 30, so a loop with no cap ends quickly instead of hanging
    run = run_agent("model_cap", [{"actions": [GET("/health")], "done": False}] * 29 + [DONE])
    assert len(run.model_statuses) <= 12
    assert run.exit_code == 1, run.output
    honest(run)


def test_cap_tool_calls_at_twenty():
    run = run_agent("tool_cap", [{"actions": [GET("/items")] * 8, "done": False}] * 5 + [DONE])
    assert len(run.access) <= 20
    assert run.exit_code == 1, run.output
    honest(run)


def test_halts_after_three_identical_tool_errors():
    run = run_agent("tool_errors", [{"actions": [{"method": "POST", "path": "/items", "body": {}}], "done": False}] * 11 + [DONE])
    assert sum(1 for a in run.access if a["method"] == "POST") <= 3
    assert run.exit_code == 1, run.output
    assert len(run.tool_rows) == len(run.access) and all(r["error"] for r in run.tool_rows)


def test_halts_when_the_model_keeps_failing():
    run = run_agent("model_down", [{"actions": [GET("/health")], "done": False}], down_after=1)
    assert len(run.model_statuses) <= 4
    assert run.exit_code == 1, run.output
    honest(run)
    assert sum(1 for r in run.model_rows if r["error"]) == len(run.model_statuses) - 1
