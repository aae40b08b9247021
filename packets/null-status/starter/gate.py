"""The gated driver (see PROMPT.md). Keep the public names below."""

from __future__ import annotations

from dataclasses import dataclass

from tools import TOOL_FIELDS, MockTools, ToolRejected, is_blank  # noqa: F401

PLAN = ("page", "retry", "close_ticket")


@dataclass(frozen=True)
class AssumptionRecord:
    field: str
    tool: str
    reason: str
    question: str


def run(incident: dict, tools: MockTools, plan=PLAN, confirmed: dict | None = None) -> dict:
    """Return {"status": "done" | "blocked", "records": [AssumptionRecord, ...], "blocked_on": tool or None}."""
    raise NotImplementedError


if __name__ == "__main__":
    raise SystemExit("gate.py: not written yet")
