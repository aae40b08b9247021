"""The gated driver (see PROMPT.md). Keep the public names below.

The gate only ever forwards values it can point at: a non-blank value in the
incident, or a non-blank answer a human confirmed. Every other field becomes
an AssumptionRecord and stops the run before the tool that needs it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from tools import TOOL_FIELDS, MockTools, ToolRejected, is_blank  # noqa: F401

PLAN = ("page", "retry", "close_ticket")

# One neutral question per known field. None of them suggests an answer.
QUESTIONS = {
    "incident_id": "What is the incident ID this work should be filed under?",
    "service": "Which service is failing in incident {iid}?",
    "owner": "Which team or on-call rotation owns incident {iid} and should be paged?",
    "http_status": "What HTTP status code are the failing requests in incident {iid} returning?",
    "route": "Which route (URL path) is failing in incident {iid}?",
    "region": "Which region is incident {iid} happening in?",
    "status": "What status should the ticket for incident {iid} be closed with?",
}
GENERIC_QUESTION = "What is the correct value of `{field}` for incident {iid}?"


class Gap(Enum):
    """Why a field cannot be used."""

    ABSENT = "absent: the incident has no `{field}` key and nobody confirmed it"
    NULL = "null: the incident has `{field}: null` and nobody confirmed it"
    EMPTY = "empty: the incident has an empty string for `{field}` and nobody confirmed it"
    WHITESPACE = "whitespace only: the incident's `{field}` holds no text and nobody confirmed it"

    @classmethod
    def of(cls, incident: dict, field: str) -> "Gap":
        if field not in incident:
            return cls.ABSENT
        value = incident[field]
        if value is None:
            return cls.NULL
        if value == "":
            return cls.EMPTY
        return cls.WHITESPACE

    def explain(self, field: str) -> str:
        return self.value.format(field=field)


@dataclass(frozen=True)
class AssumptionRecord:
    field: str
    tool: str
    reason: str
    question: str


@dataclass
class Facts:
    """The only sources of truth: the incident and confirmed answers."""

    incident: dict
    confirmed: dict

    def knows(self, field: str) -> bool:
        if field in self.confirmed and not is_blank(self.confirmed[field]):
            return True
        return field in self.incident and not is_blank(self.incident[field])

    def value(self, field: str):
        """The value as given, unchanged. A confirmed answer wins over the incident."""
        if field in self.confirmed and not is_blank(self.confirmed[field]):
            return self.confirmed[field]
        return self.incident[field]

    def gap(self, field: str, tool: str) -> AssumptionRecord:
        reason = Gap.of(self.incident, field).explain(field)
        if field in self.confirmed:
            reason += " (the confirmed answer given was blank)"
        iid = self.incident.get("incident_id")
        iid = iid if isinstance(iid, str) and not is_blank(iid) else "this incident"
        template = QUESTIONS.get(field, GENERIC_QUESTION)
        return AssumptionRecord(field, tool, reason, template.format(field=field, iid=iid))


@dataclass
class Gate:
    facts: Facts
    tools: MockTools
    on_call: object = None  # optional callback(tool, payload), used by the CLI

    def check(self, tool: str) -> list[AssumptionRecord]:
        return [self.facts.gap(f, tool) for f in TOOL_FIELDS[tool] if not self.facts.knows(f)]

    def payload(self, tool: str) -> dict:
        return {f: self.facts.value(f) for f in TOOL_FIELDS[tool]}

    def walk(self, plan) -> dict:
        unknown = [t for t in plan if t not in TOOL_FIELDS]
        if unknown:
            raise ValueError(f"plan names tools the gate does not know: {unknown}")
        for tool in plan:
            records = self.check(tool)
            if records:
                return {"status": "blocked", "records": records, "blocked_on": tool}
            payload = self.payload(tool)
            if self.on_call is not None:
                self.on_call(tool, payload)
            getattr(self.tools, tool)(payload)
        return {"status": "done", "records": [], "blocked_on": None}


def run(incident: dict, tools: MockTools, plan=PLAN, confirmed: dict | None = None) -> dict:
    """Return {"status": "done" | "blocked", "records": [AssumptionRecord, ...], "blocked_on": tool or None}."""
    return Gate(Facts(incident, dict(confirmed or {})), tools).walk(tuple(plan))


# ---------------------------------------------------------------- CLI


def _confirmation(text: str) -> tuple[str, object]:
    field, sep, raw = text.partition("=")
    if not sep or not field.strip():
        raise argparse.ArgumentTypeError(f"expected field=value, got {text!r}")
    try:
        value = json.loads(raw)  # 503 -> int, "x" or x -> str
    except ValueError:
        value = raw
    return field.strip(), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run incident tools without inventing values.")
    parser.add_argument("incident", type=Path, help="incident JSON file")
    parser.add_argument("--confirm", action="append", default=[], type=_confirmation,
                        metavar="FIELD=VALUE", help="an answer a human confirmed (repeatable)")
    args = parser.parse_args(argv)

    incident = json.loads(args.incident.read_text(encoding="utf-8"))
    confirmed = dict(args.confirm)
    lines: list[dict] = []

    def log_call(tool: str, payload: dict) -> None:
        lines.append({"type": "call", "tool": tool, "payload": payload})

    gate = Gate(Facts(incident, confirmed), MockTools(incident, confirmed), on_call=log_call)
    result = gate.walk(PLAN)
    lines += [{"type": "assumption", **asdict(r)} for r in result["records"]]
    lines.append({"type": "result", "status": result["status"], "blocked_on": result["blocked_on"]})
    for line in lines:
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
