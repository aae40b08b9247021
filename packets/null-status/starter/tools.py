"""Mock incident tools. Do not edit: the grader uses its own copy of this file.

Each tool takes one payload dict whose keys are exactly the fields listed in
TOOL_FIELDS for that tool. A value is accepted only when it equals the value
the incident carries for that key (and that value is not blank) or a value a
human confirmed for that key. Anything else, including a blank, raises
ToolRejected. Every attempt, accepted or not, is kept in `calls`.
"""

from __future__ import annotations

import copy

TOOL_FIELDS = {
    "page": ("incident_id", "service", "owner", "http_status"),
    "retry": ("incident_id", "service", "route", "region"),
    "close_ticket": ("incident_id", "status"),
}


class ToolRejected(RuntimeError):
    pass


def is_blank(value) -> bool:
    """Null, an empty or whitespace-only string: not a fact."""
    return value is None or (isinstance(value, str) and not value.strip())


class MockTools:
    def __init__(self, incident: dict, confirmed: dict | None = None) -> None:
        self.incident = incident
        self.confirmed = dict(confirmed or {})
        self.calls: list[dict] = []

    def confirm(self, field: str, value) -> None:
        """A human on call answered a question: from now on `value` is a fact."""
        self.confirmed[field] = value

    def _source(self, field: str):
        if field in self.confirmed and not is_blank(self.confirmed[field]):
            return True, self.confirmed[field]
        value = self.incident.get(field)
        return (not is_blank(value)), value

    def _call(self, tool: str, payload: dict) -> dict:
        entry = {"tool": tool, "payload": copy.deepcopy(payload), "accepted": False, "reason": None}
        self.calls.append(entry)
        if not isinstance(payload, dict):
            entry["reason"] = "payload is not a dict"
            raise ToolRejected(entry["reason"])
        expected = set(TOOL_FIELDS[tool])
        if set(payload) != expected:
            entry["reason"] = f"{tool} takes exactly {sorted(expected)}, got {sorted(payload)}"
            raise ToolRejected(entry["reason"])
        for field in TOOL_FIELDS[tool]:
            known, value = self._source(field)
            given = payload[field]
            if not known or given != value or type(given) is not type(value):
                entry["reason"] = f"{tool}: {field}={given!r} is not in the incident and was not confirmed"
                raise ToolRejected(entry["reason"])
        entry["accepted"] = True
        return {"ok": True, "tool": tool, "incident_id": payload["incident_id"]}

    def page(self, payload: dict) -> dict:
        return self._call("page", payload)

    def retry(self, payload: dict) -> dict:
        return self._call("retry", payload)

    def close_ticket(self, payload: dict) -> dict:
        return self._call("close_ticket", payload)
