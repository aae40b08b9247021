import json
import subprocess
import sys

import pytest

from gate import run
from tools import MockTools


def incident(**fields):
    base = {"incident_id": "inc-1", "service": "api", "owner": "team-a", "http_status": 500,
            "route": "/x", "region": "eu-west-1", "status": "open"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


@pytest.mark.parametrize("field,value", [("owner", None), ("owner", ""), ("owner", "  "), ("owner", ...)])
def test_every_kind_of_hole_blocks_page(field, value):
    inc = incident(**{field: value})
    tools = MockTools(inc)
    result = run(inc, tools)
    assert result["status"] == "blocked" and result["blocked_on"] == "page"
    assert tools.calls == []
    assert [(r.field, r.tool) for r in result["records"]] == [("owner", "page")]


def test_whitespace_region_blocks_retry_after_page():
    inc = incident(region="   ")
    tools = MockTools(inc)
    result = run(inc, tools)
    assert [c["tool"] for c in tools.calls] == ["page"]
    assert result["blocked_on"] == "retry"


def test_complete_incident_runs_the_plan():
    inc = incident()
    tools = MockTools(inc)
    assert run(inc, tools) == {"status": "done", "records": [], "blocked_on": None}
    assert all(c["accepted"] for c in tools.calls)


def test_a_confirmation_fills_a_hole_exactly():
    inc = incident(status=None)
    tools = MockTools(inc, {"status": "resolved"})
    result = run(inc, tools, confirmed={"status": "resolved"})
    assert result["status"] == "done"
    assert tools.calls[-1]["payload"]["status"] == "resolved"


def test_cli_is_deterministic_and_matches_the_transcript():
    a = subprocess.run([sys.executable, "gate.py", "incidents/inc-2044.json"], capture_output=True, text=True)
    b = subprocess.run([sys.executable, "gate.py", "incidents/inc-2044.json"], capture_output=True, text=True)
    assert a.returncode == 0 and a.stdout == b.stdout
    rows = [json.loads(line) for line in a.stdout.splitlines()]
    assert rows[-1] == {"type": "result", "status": "blocked", "blocked_on": "page"}
    with open("transcript.jsonl", encoding="utf-8") as fh:
        assert [json.loads(line) for line in fh if line.strip()] == rows
