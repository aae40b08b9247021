"""The gated driver (see PROMPT.md). Keep the public names below."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass

from tools import TOOL_FIELDS, MockTools, ToolRejected, is_blank  # noqa: F401

PLAN = ("page", "retry", "close_ticket")
_INT = re.compile(r"-?(0|[1-9][0-9]*)")

_ASK = {
    "incident_id": "What incident ID should this be filed under?",
    "service": "What is the name of the affected service for {ref}?",
    "owner": "Who owns {ref}, that is, which team or rotation should be paged?",
    "http_status": "What HTTP status code do the failing requests in {ref} return?",
    "route": "Which route is failing in {ref}?",
    "region": "In which region is {ref} happening?",
    "status": "Which status should {ref} be closed with?",
}


@dataclass(frozen=True)
class AssumptionRecord:
    field: str
    tool: str
    reason: str
    question: str


def lookup(field, incident, confirmed):
    """(True, value) when a fact exists for `field`, else (False, why_missing)."""
    if not is_blank(confirmed.get(field)):
        return True, confirmed[field]
    if field not in incident:
        why = f"`{field}` is not in the incident at all"
    elif incident[field] is None:
        why = f"`{field}` is null in the incident"
    elif is_blank(incident[field]):
        why = f"`{field}` is an empty or whitespace-only string in the incident"
    else:
        return True, incident[field]
    if field in confirmed:
        why += "; the confirmed answer for it is blank"
    else:
        why += "; no human has confirmed a value"
    return False, why


def question_for(field, incident):
    ref = incident.get("incident_id")
    ref = f"incident {ref}" if isinstance(ref, str) and not is_blank(ref) else "this incident"
    text = _ASK.get(field, "What is the value of `{field}` for {ref}?")
    return text.format(field=field, ref=ref)


def collect(tool, incident, confirmed):
    """Split a tool's fields into a payload of facts and a list of records for the gaps."""
    payload, gaps = {}, []
    for field in TOOL_FIELDS[tool]:
        found, got = lookup(field, incident, confirmed)
        if found:
            payload[field] = got
        else:
            gaps.append(AssumptionRecord(field, tool, got, question_for(field, incident)))
    return payload, gaps


def run(incident: dict, tools: MockTools, plan=PLAN, confirmed: dict | None = None) -> dict:
    """Return {"status": "done" | "blocked", "records": [AssumptionRecord, ...], "blocked_on": tool or None}."""
    confirmed = dict(confirmed or {})
    plan = tuple(plan)
    for tool in plan:
        if tool not in TOOL_FIELDS:
            raise ValueError(f"unknown tool in plan: {tool!r}")
    for tool in plan:
        payload, gaps = collect(tool, incident, confirmed)
        if gaps:
            return {"status": "blocked", "records": gaps, "blocked_on": tool}
        getattr(tools, tool)(payload)
    return {"status": "done", "records": [], "blocked_on": None}


def parse_confirm(item):
    if "=" not in item:
        raise SystemExit(f"gate.py: --confirm needs field=value, got {item!r}")
    field, raw = item.split("=", 1)
    if _INT.fullmatch(raw):  # "503" is the number 503; "007" or "5xx" stay text
        return field, int(raw)
    return field, raw


def parse_args(argv):
    if not argv or argv[0].startswith("-"):
        raise SystemExit("usage: python3 gate.py INCIDENT.json [--confirm field=value ...]")
    path, confirmed, rest = argv[0], {}, list(argv[1:])
    while rest:
        flag = rest.pop(0)
        if flag == "--confirm" and rest:
            field, value = parse_confirm(rest.pop(0))
        elif flag.startswith("--confirm="):
            field, value = parse_confirm(flag[len("--confirm="):])
        else:
            raise SystemExit(f"gate.py: unexpected argument {flag!r}")
        confirmed[field] = value
    return path, confirmed


def main(argv):
    path, confirmed = parse_args(argv)
    with open(path, encoding="utf-8") as fh:
        incident = json.load(fh)
    tools = MockTools(incident, confirmed)
    result = run(incident, tools, confirmed=confirmed)
    out = [{"type": "call", "tool": c["tool"], "payload": c["payload"]} for c in tools.calls]
    for rec in result["records"]:
        out.append({"type": "assumption", "field": rec.field, "tool": rec.tool,
                    "reason": rec.reason, "question": rec.question})
    out.append({"type": "result", "status": result["status"], "blocked_on": result["blocked_on"]})
    sys.stdout.write("".join(json.dumps(line) + "\n" for line in out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
