import json
from pathlib import Path

from gate import run
from tools import MockTools

INC = json.loads(Path("incidents/inc-2044.json").read_text())


def test_blank_status_blocks_close_ticket():
    inc = dict(INC, service="web", owner="web-oncall", http_status=503, status="  ")
    tools = MockTools(inc)
    out = run(inc, tools)
    assert out["blocked_on"] == "close_ticket"
    assert [r.field for r in out["records"]] == ["status"]
    assert [c["tool"] for c in tools.calls] == ["page", "retry"]


def test_no_call_carries_a_blank():
    tools = MockTools(INC)
    run(INC, tools, confirmed={"service": "web"})
    for call in tools.calls:
        assert all(v not in (None, "") for v in call["payload"].values())
