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
