"""A gated driver for incident tools that refuses to fill holes.

Every tool in the plan declares the fields it takes (tools.TOOL_FIELDS). Before
a tool runs, the gate looks each field up: first in the answers a human
confirmed, then in the incident itself. A field that is null, an empty or
whitespace-only string, or absent is a hole. Holes are never filled: the gate
writes one AssumptionRecord per hole and stops the plan at that tool.

    python3 gate.py incidents/inc-2044.json --confirm service=checkout-web

prints JSON lines (assumption / call / result), sorted keys, nothing random.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

from tools import TOOL_FIELDS, MockTools, ToolRejected, is_blank  # noqa: F401

PLAN = ("page", "retry", "close_ticket")

QUESTIONS = {
    "service": "Which service is failing in {ref}?",
    "owner": "Which team owns {ref} and should be paged?",
    "http_status": "What HTTP status code did {ref} actually return?",
    "region": "Which region is {ref} in?",
    "route": "Which route is affected in {ref}?",
    "status": "What is the current status of {ref} (open, resolved, ...)?",
    "incident_id": "What is the incident id of this incident?",
}


@dataclass(frozen=True)
class AssumptionRecord:
    field: str
    tool: str
    reason: str
    question: str


def hole_kind(incident: dict, field: str) -> str:
    """How a field is missing, in words, for the reason text."""
    if field not in incident:
        return "absent"
    if incident[field] is None:
        return "null"
    return "empty"


class Gate:
    def __init__(self, incident: dict, confirmed: dict | None = None, emit=None):
        self.incident = incident
        self.confirmed = {k: v for k, v in (confirmed or {}).items() if not is_blank(v)}
        self.emit = emit or (lambda event: None)
        self.records: list[AssumptionRecord] = []

    def lookup(self, field: str):
        """(True, value) for a fact, (False, None) for a hole."""
        if field in self.confirmed:
            return True, self.confirmed[field]
        if field in self.incident and not is_blank(self.incident[field]):
            return True, self.incident[field]
        return False, None

    def record(self, field: str, tool: str) -> AssumptionRecord:
        ref = self.incident.get("incident_id") or "this incident"
        reason = f"`{field}` is {hole_kind(self.incident, field)} in the incident and nobody confirmed it"
        question = QUESTIONS.get(field, "What is the value of " + field + " for {ref}?").format(ref=ref)
        rec = AssumptionRecord(field=field, tool=tool, reason=reason, question=question)
        self.records.append(rec)
        self.emit({"type": "assumption", **asdict(rec)})
        return rec

    def run(self, tools: MockTools, plan) -> dict:
        for tool in plan:
            payload, holes = {}, []
            for field in TOOL_FIELDS[tool]:
                known, value = self.lookup(field)
                if known:
                    payload[field] = value
                else:
                    holes.append(field)
            if holes:
                for field in holes:
                    self.record(field, tool)
                return self.finish("blocked", tool)
            self.emit({"type": "call", "tool": tool, "payload": payload})
            getattr(tools, tool)(payload)
        return self.finish("done", None)

    def finish(self, status: str, blocked_on):
        self.emit({"type": "result", "status": status, "blocked_on": blocked_on})
        return {"status": status, "records": list(self.records), "blocked_on": blocked_on}


def run(incident: dict, tools: MockTools, plan=PLAN, confirmed: dict | None = None) -> dict:
    """Return {"status": "done" | "blocked", "records": [AssumptionRecord, ...], "blocked_on": tool or None}."""
    return Gate(incident, confirmed).run(tools, plan)


def parse_args(argv: list[str]) -> tuple[str, dict]:
    path, confirmed, rest = None, {}, list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--confirm":
            if not rest or "=" not in rest[0]:
                raise SystemExit("gate.py: --confirm needs field=value")
            field, raw = rest.pop(0).split("=", 1)
            try:
                confirmed[field] = json.loads(raw)
            except ValueError:
                confirmed[field] = raw
        elif path is None:
            path = arg
        else:
            raise SystemExit(f"gate.py: unexpected argument {arg!r}")
    if path is None:
        raise SystemExit("usage: python3 gate.py INCIDENT.json [--confirm field=value ...]")
    return path, confirmed


def main(argv: list[str]) -> int:
    path, confirmed = parse_args(argv)
    with open(path, encoding="utf-8") as fh:
        incident = json.load(fh)
    gate = Gate(incident, confirmed, emit=lambda e: print(json.dumps(e, sort_keys=True)))
    gate.run(MockTools(incident, confirmed), PLAN)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
