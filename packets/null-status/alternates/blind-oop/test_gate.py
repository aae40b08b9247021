import json
from pathlib import Path

from gate import AssumptionRecord, run
from tools import MockTools

INCIDENT = json.loads(Path("incidents/inc-2044.json").read_text())


def test_blanks_block_the_page():
    tools = MockTools(INCIDENT)
    result = run(INCIDENT, tools)
    assert result["status"] == "blocked"
    assert result["blocked_on"] == "page"
    assert tools.calls == []
    asked = {(r.field, r.tool) for r in result["records"]}
    assert {("service", "page"), ("owner", "page"), ("http_status", "page")} <= asked
    assert all(isinstance(r, AssumptionRecord) and r.question.strip().endswith("?") for r in result["records"])


def test_confirmed_answers_unblock_the_page():
    confirmed = {"service": "checkout-web", "owner": "web-oncall", "http_status": 503}
    tools = MockTools(INCIDENT, confirmed)
    result = run(INCIDENT, tools, confirmed=confirmed)
    assert [c["tool"] for c in tools.calls if c["accepted"]] == ["page", "retry"]
    assert result["status"] == "blocked" and result["blocked_on"] == "close_ticket"


# ---------------------------------------------------------------- added tests

import copy
import subprocess
import sys

import pytest

from gate import PLAN
from tools import TOOL_FIELDS

FULL = {
    "incident_id": "inc-1",
    "service": "search-api",
    "owner": "search-oncall",
    "http_status": 500,
    "route": "/search",
    "region": "eu-west-1",
    "status": "resolved",
}


@pytest.fixture
def full():
    return copy.deepcopy(FULL)


def test_complete_incident_runs_the_whole_plan(full):
    tools = MockTools(full)
    result = run(full, tools)
    assert result == {"status": "done", "records": [], "blocked_on": None}
    assert [c["tool"] for c in tools.calls] == list(PLAN)
    assert all(c["accepted"] for c in tools.calls)
    for call in tools.calls:
        assert call["payload"] == {f: full[f] for f in TOOL_FIELDS[call["tool"]]}


@pytest.mark.parametrize("hole", [None, "", "   ", "\t\n", "absent"])
@pytest.mark.parametrize("field", ["service", "owner", "http_status", "incident_id"])
def test_any_hole_blocks_page_and_calls_nothing(full, field, hole):
    if hole == "absent":
        del full[field]
    else:
        full[field] = hole
    tools = MockTools(full)
    result = run(full, tools)
    assert result["status"] == "blocked" and result["blocked_on"] == "page"
    assert tools.calls == []
    assert [(r.field, r.tool) for r in result["records"]] == [(field, "page")]


@pytest.mark.parametrize("field,tool", [("route", "retry"), ("region", "retry"), ("status", "close_ticket")])
def test_later_holes_block_later_tools(full, field, tool):
    del full[field]
    tools = MockTools(full)
    result = run(full, tools)
    assert result["blocked_on"] == tool
    assert [(r.field, r.tool) for r in result["records"]] == [(field, tool)]
    called = [c["tool"] for c in tools.calls]
    assert called == list(PLAN[: PLAN.index(tool)])


def test_present_fields_are_not_asked_about():
    result = run(INCIDENT, MockTools(INCIDENT))
    assert {r.field for r in result["records"]} == {"service", "owner", "http_status"}


def test_blank_confirmation_is_not_a_confirmation():
    confirmed = {"service": "  ", "owner": "web-oncall", "http_status": 503}
    tools = MockTools(INCIDENT, confirmed)
    result = run(INCIDENT, tools, confirmed=confirmed)
    assert result["blocked_on"] == "page"
    assert [r.field for r in result["records"]] == ["service"]
    assert "blank" in result["records"][0].reason
    assert tools.calls == []


def test_confirmed_values_go_through_unchanged(full):
    full["http_status"] = None
    confirmed = {"http_status": 503}
    tools = MockTools(full, confirmed)
    result = run(full, tools, confirmed=confirmed)
    assert result["status"] == "done"
    page = tools.calls[0]
    assert page["payload"]["http_status"] == 503 and type(page["payload"]["http_status"]) is int


def test_confirmation_wins_over_the_incident(full):
    confirmed = {"owner": "payments-oncall"}
    tools = MockTools(full, confirmed)
    assert run(full, tools, confirmed=confirmed)["status"] == "done"
    assert tools.calls[0]["payload"]["owner"] == "payments-oncall"


def test_payload_holds_only_the_tool_fields(full):
    full["notes"] = "checkout usually means payments"
    tools = MockTools(full)
    run(full, tools)
    for call in tools.calls:
        assert set(call["payload"]) == set(TOOL_FIELDS[call["tool"]])


def test_run_does_not_mutate_its_inputs():
    incident = copy.deepcopy(INCIDENT)
    confirmed = {"service": "checkout-web"}
    run(incident, MockTools(incident, confirmed), confirmed=confirmed)
    assert incident == INCIDENT and confirmed == {"service": "checkout-web"}


def test_custom_plan_and_unknown_tool(full):
    tools = MockTools(full)
    assert run(full, tools, plan=("close_ticket",))["status"] == "done"
    assert [c["tool"] for c in tools.calls] == ["close_ticket"]
    with pytest.raises(ValueError):
        run(full, MockTools(full), plan=("page", "reboot"))


def test_questions_are_single_questions_naming_the_incident():
    for r in run(INCIDENT, MockTools(INCIDENT))["records"]:
        assert r.question.count("?") == 1 and r.question.endswith("?")
        assert "inc-2044" in r.question
        assert r.reason


def _cli(*args):
    return subprocess.run([sys.executable, "gate.py", "incidents/inc-2044.json", *args],
                          capture_output=True, text=True, check=True).stdout


def test_cli_matches_the_handed_back_transcript_and_is_stable():
    out = _cli()
    assert out == _cli()
    assert out == Path("transcript.jsonl").read_text()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [l["type"] for l in lines] == ["assumption"] * 3 + ["result"]
    assert lines[-1] == {"type": "result", "status": "blocked", "blocked_on": "page"}
    assert list(lines[0]) == ["type", "field", "tool", "reason", "question"]


def test_cli_with_confirmations_logs_calls():
    out = _cli("--confirm", "service=checkout-web", "--confirm", "owner=web-oncall",
               "--confirm", "http_status=503")
    lines = [json.loads(line) for line in out.splitlines()]
    calls = [l for l in lines if l["type"] == "call"]
    assert [c["tool"] for c in calls] == ["page", "retry"]
    assert calls[0]["payload"]["http_status"] == 503
    assert lines[-1] == {"type": "result", "status": "blocked", "blocked_on": "close_ticket"}
    assert [(l["field"], l["tool"]) for l in lines if l["type"] == "assumption"] == [("status", "close_ticket")]
