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
    duplicates_name_the_first_identical_row(run.rows)


def duplicates_name_the_first_identical_row(rows):
    """duplicate_of is null or the 0-based index of the first earlier row with
    the same kind, name and error. A failed call that repeats one must name
    it; whether a repeated success names its first is left open (both
    readings of the brief pass)."""
    for i, row in enumerate(rows):
        ident = (row.get("kind"), row.get("name"), row.get("error"))
        first = next((j for j in range(i) if (rows[j].get("kind"), rows[j].get("name"), rows[j].get("error")) == ident), None)
        got = row.get("duplicate_of")
        if row.get("error") is not None:
            assert got == first, f"row {i} {ident}: duplicate_of {got!r}, the first identical row is {first!r}"
        else:
            assert got is None or got == first, f"row {i} {ident}: duplicate_of {got!r}, the first identical row is {first!r}"


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
    """brief: "at most **12 model calls** and **20 tool calls** per run"

    The model proposes 40 reads of /items over five replies, then done. The
    driver decides what runs ("Your driver decides what runs"): one that runs
    them all must halt at 20 (exit 1); one that skips repeats stays inside the
    cap, reaches the model's done and exits 0. Exit 0 is only right when the
    run did reach the done (the sixth reply)."""
    run = run_agent("tool_cap", [{"actions": [GET("/items")] * 8, "done": False}] * 5 + [DONE])
    assert len(run.access) <= 20
    assert run.exit_code in (0, 1), run.output
    if run.exit_code == 0:
        assert len(run.model_statuses) == 6, (
            f"exit 0 (done inside every cap) after {len(run.model_statuses)} model calls: the done is the sixth reply")
    honest(run)


def test_halts_after_three_identical_tool_errors():
    run = run_agent("tool_errors", [{"actions": [{"method": "POST", "path": "/items", "body": {}}], "done": False}] * 11 + [DONE])
    assert sum(1 for a in run.access if a["method"] == "POST") <= 3
    assert run.exit_code == 1, run.output
    assert len(run.tool_rows) == len(run.access) and all(r["error"] for r in run.tool_rows)
    duplicates_name_the_first_identical_row(run.rows)


def test_cap_tool_calls_in_one_reply():
    # One reply proposing 25 requests: the tool cap holds inside a batch too.
    run = run_agent("tool_cap_batch", [{"actions": [GET("/items")] * 25, "done": False}, DONE])
    assert len(run.access) <= 20
    honest(run)


def test_two_identical_errors_do_not_halt():
    # The halt is on the third identical error in a row: two, then a success,
    # and the model's done ends the run inside every cap (exit 0).
    bad = {"actions": [{"method": "POST", "path": "/items", "body": {}}], "done": False}
    run = run_agent("two_errors", [bad, bad, {"actions": [{"method": "POST", "path": "/items", "body": {"name": "third time"}}], "done": False}, DONE])
    assert sum(1 for a in run.access if a["method"] == "POST" and a["status"] == 201) == 1, run.access
    assert run.exit_code == 0, run.output
    honest(run)


def test_unusable_reply_is_not_a_crash():
    # A reply that is JSON but not an action object: the driver decides what
    # runs, so it neither crashes nor runs anything, and one bad reply is no
    # stop rule; the loop asks again (here: done, exit 0). Whether that row
    # carries an error is left to the candidate.
    run = run_agent("unusable_reply", [["GET /items"], DONE])
    assert run.exit_code == 0, run.output
    assert run.access == [], run.access
    honest(run)


def test_halts_when_the_model_keeps_failing():
    run = run_agent("model_down", [{"actions": [GET("/health")], "done": False}], down_after=1)
    assert len(run.model_statuses) <= 4
    assert run.exit_code == 1, run.output
    honest(run)
    assert sum(1 for r in run.model_rows if r["error"]) == len(run.model_statuses) - 1
