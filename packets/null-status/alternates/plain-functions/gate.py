"""Gate: call incident tools only with facts from the incident or confirmed answers."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

from tools import TOOL_FIELDS, MockTools, ToolRejected, is_blank  # noqa: F401

PLAN = ("page", "retry", "close_ticket")


@dataclass(frozen=True)
class AssumptionRecord:
    field: str
    tool: str
    reason: str
    question: str


def source_of(field, incident, confirmed):
    if not is_blank(confirmed.get(field)):
        return confirmed
    if not is_blank(incident.get(field)):
        return incident
    return None


def missing_reason(field, incident):
    if field not in incident:
        return f"{field} not present in incident"
    return f"{field} present but holds {json.dumps(incident[field])}"


def run(incident: dict, tools: MockTools, plan=PLAN, confirmed: dict | None = None, out=None) -> dict:
    """Return {"status": "done" | "blocked", "records": [AssumptionRecord, ...], "blocked_on": tool or None}."""
    confirmed = confirmed or {}
    say = out or (lambda row: None)
    records = []
    for tool in plan:
        gaps = [f for f in TOOL_FIELDS[tool] if source_of(f, incident, confirmed) is None]
        for f in gaps:
            rec = AssumptionRecord(f, tool, missing_reason(f, incident), f"What is the {f} for {tool}()?")
            records.append(rec)
            say({"type": "assumption", **asdict(rec)})
        if gaps:
            say({"type": "result", "status": "blocked", "blocked_on": tool})
            return {"status": "blocked", "records": records, "blocked_on": tool}
        payload = {f: source_of(f, incident, confirmed)[f] for f in TOOL_FIELDS[tool]}
        say({"type": "call", "tool": tool, "payload": payload})
        getattr(tools, tool)(payload)
    say({"type": "result", "status": "done", "blocked_on": None})
    return {"status": "done", "records": records, "blocked_on": None}


if __name__ == "__main__":
    args = sys.argv[1:]
    confirmed = {}
    while "--confirm" in args:
        i = args.index("--confirm")
        key, _, raw = args[i + 1].partition("=")
        try:
            confirmed[key] = json.loads(raw)
        except ValueError:
            confirmed[key] = raw
        del args[i:i + 2]
    with open(args[0]) as fh:
        inc = json.load(fh)
    run(inc, MockTools(inc, confirmed), confirmed=confirmed, out=lambda row: print(json.dumps(row)))
