"""Gated incident driver: blanks are not defaults.

The incident object (plus answers a human confirmed) is the only source of
truth. Before a tool call, every field the tool consumes is checked; if one is
null, empty or absent and nobody confirmed it, an AssumptionRecord is emitted
for it and the run stops with status "blocked". No tool is called with a value
that did not come from the incident or a confirmation, and nothing is derived
from other fields.

CLI (the replayable transcript, no model involved):
    python3 gate.py incidents/inc-2044.json [--confirm field=value ...]
prints one JSON object per line: assumption records, tool calls, the result.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

from tools import TOOL_FIELDS, MockTools, is_blank

PLAN = ("page", "retry", "close_ticket")


@dataclass(frozen=True)
class AssumptionRecord:
    field: str
    tool: str
    reason: str
    question: str


def _known(field: str, incident: dict, confirmed: dict) -> bool:
    if field in confirmed and not is_blank(confirmed[field]):
        return True
    return field in incident and not is_blank(incident[field])


def _value(field: str, incident: dict, confirmed: dict):
    if field in confirmed and not is_blank(confirmed[field]):
        return confirmed[field]
    return incident[field]


def _why(field: str, incident: dict) -> str:
    if field not in incident:
        return f"the incident has no {field} key"
    if incident[field] is None:
        return f"{field} is null in the incident"
    return f"{field} is blank in the incident"


def _question(field: str, tool: str, incident: dict) -> str:
    ref = incident.get("incident_id") if not is_blank(incident.get("incident_id")) else "this incident"
    where = incident.get("route") if not is_blank(incident.get("route")) else "the affected route"
    return f"{tool}() needs {field} for {ref} on {where}: what is it?"


def run(incident: dict, tools: MockTools, plan=PLAN, confirmed: dict | None = None,
        emit=None) -> dict:
    """Run the plan through the gate.

    Returns {"status": "done" | "blocked", "records": [AssumptionRecord, ...], "blocked_on": tool or None}.
    `emit`, when given, receives each transcript event (a dict) as it happens.
    """
    confirmed = dict(confirmed or {})
    emit = emit or (lambda event: None)
    records: list[AssumptionRecord] = []
    for tool in plan:
        if tool not in TOOL_FIELDS:
            raise ValueError(f"unknown tool {tool!r}")
        gaps = [f for f in TOOL_FIELDS[tool] if not _known(f, incident, confirmed)]
        for field in gaps:
            rec = AssumptionRecord(field, tool, _why(field, incident), _question(field, tool, incident))
            records.append(rec)
            emit({"type": "assumption", **asdict(rec)})
        payload = {f: _value(f, incident, confirmed) if _known(f, incident, confirmed) else "unknown"
                   for f in TOOL_FIELDS[tool]}
        emit({"type": "call", "tool": tool, "payload": payload})
        getattr(tools, tool)(payload)
    emit({"type": "result", "status": "done", "blocked_on": None})
    return {"status": "done", "records": records, "blocked_on": None}


def _parse_confirm(items: list[str]) -> dict:
    confirmed = {}
    for item in items:
        field, sep, raw = item.partition("=")
        if not sep or not field:
            raise SystemExit(f"--confirm expects field=value, got {item!r}")
        try:
            confirmed[field] = json.loads(raw)
        except ValueError:
            confirmed[field] = raw
    return confirmed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("incident")
    ap.add_argument("--confirm", action="append", default=[], metavar="FIELD=VALUE")
    args = ap.parse_args(argv)
    with open(args.incident, encoding="utf-8") as fh:
        incident = json.load(fh)
    confirmed = _parse_confirm(args.confirm)
    tools = MockTools(incident, confirmed)
    result = run(incident, tools, confirmed=confirmed,
                 emit=lambda event: print(json.dumps(event, sort_keys=True), flush=True))
    return 0 if result["status"] in ("done", "blocked") else 1


if __name__ == "__main__":
    sys.exit(main())
