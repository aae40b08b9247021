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


# --- more tests (unittest style; pytest collects them too) -------------------

import subprocess
import sys
import unittest

import gate
from tools import TOOL_FIELDS

COMPLETE = {
    "incident_id": "inc-7",
    "service": "orders",
    "owner": "orders-team",
    "http_status": 502,
    "route": "/orders",
    "region": "ap-south-1",
    "status": "mitigated",
}


def with_hole(field, hole):
    incident = dict(COMPLETE)
    if hole is KeyError:
        incident.pop(field)
    else:
        incident[field] = hole
    return incident


class HolesBlock(unittest.TestCase):
    def test_each_kind_of_hole_in_each_field(self):
        owner_tool = {f: t for t in reversed(gate.PLAN) for f in TOOL_FIELDS[t]}
        for field in COMPLETE:
            for hole in (None, "", "  ", KeyError):
                with self.subTest(field=field, hole=hole):
                    incident = with_hole(field, hole)
                    tools = MockTools(incident)
                    result = run(incident, tools)
                    first = owner_tool[field]
                    self.assertEqual(result["status"], "blocked")
                    self.assertEqual(result["blocked_on"], first)
                    self.assertEqual([(r.field, r.tool) for r in result["records"]], [(field, first)])
                    self.assertEqual([c["tool"] for c in tools.calls], list(gate.PLAN[: gate.PLAN.index(first)]))
                    self.assertTrue(all(c["accepted"] for c in tools.calls))

    def test_nothing_invented_for_the_sample(self):
        result = run(INCIDENT, MockTools(INCIDENT))
        self.assertEqual(sorted(r.field for r in result["records"]), ["http_status", "owner", "service"])
        for r in result["records"]:
            self.assertEqual(r.tool, "page")
            self.assertTrue(r.reason)
            self.assertEqual(r.question.count("?"), 1)

    def test_blank_confirmed_answer_does_not_count(self):
        confirmed = {"service": "", "owner": "web-oncall", "http_status": 503}
        tools = MockTools(INCIDENT, confirmed)
        result = run(INCIDENT, tools, confirmed=confirmed)
        self.assertEqual([r.field for r in result["records"]], ["service"])
        self.assertIn("blank", result["records"][0].reason)
        self.assertEqual(tools.calls, [])


class CallsGoThrough(unittest.TestCase):
    def test_complete_incident_is_done(self):
        tools = MockTools(COMPLETE)
        self.assertEqual(run(COMPLETE, tools), {"status": "done", "records": [], "blocked_on": None})
        self.assertEqual([c["tool"] for c in tools.calls], list(gate.PLAN))
        for c in tools.calls:
            self.assertTrue(c["accepted"])
            self.assertEqual(c["payload"], {f: COMPLETE[f] for f in TOOL_FIELDS[c["tool"]]})

    def test_confirmed_value_is_passed_as_is(self):
        incident = with_hole("http_status", None)
        confirmed = {"http_status": 504, "status": "resolved"}
        tools = MockTools(incident, confirmed)
        self.assertEqual(run(incident, tools, confirmed=confirmed)["status"], "done")
        self.assertIs(type(tools.calls[0]["payload"]["http_status"]), int)
        self.assertEqual(tools.calls[0]["payload"]["http_status"], 504)
        self.assertEqual(tools.calls[2]["payload"]["status"], "resolved")

    def test_extra_incident_fields_never_reach_a_payload(self):
        incident = dict(COMPLETE, notes="probably payments", team_hint="payments")
        tools = MockTools(incident)
        run(incident, tools)
        for c in tools.calls:
            self.assertEqual(set(c["payload"]), set(TOOL_FIELDS[c["tool"]]))

    def test_inputs_are_left_alone(self):
        incident = dict(INCIDENT)
        confirmed = {"owner": "web-oncall"}
        run(incident, MockTools(incident, confirmed), confirmed=confirmed)
        self.assertEqual(incident, INCIDENT)
        self.assertEqual(confirmed, {"owner": "web-oncall"})

    def test_plan_order_and_unknown_tools(self):
        tools = MockTools(COMPLETE)
        run(COMPLETE, tools, plan=("retry", "page"))
        self.assertEqual([c["tool"] for c in tools.calls], ["retry", "page"])
        tools = MockTools(COMPLETE)
        with self.assertRaises(ValueError):
            run(COMPLETE, tools, plan=("page", "escalate"))
        self.assertEqual(tools.calls, [])


class Cli(unittest.TestCase):
    def cli(self, *extra):
        proc = subprocess.run([sys.executable, "gate.py", "incidents/inc-2044.json", *extra],
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout

    def test_transcript_replays_exactly(self):
        first = self.cli()
        self.assertEqual(first, self.cli())
        self.assertEqual(first, Path("transcript.jsonl").read_text(encoding="utf-8"))
        rows = [json.loads(x) for x in first.splitlines()]
        self.assertEqual(rows[-1], {"type": "result", "status": "blocked", "blocked_on": "page"})
        self.assertEqual({r["field"] for r in rows if r["type"] == "assumption"}, {"service", "owner", "http_status"})
        self.assertFalse(any(r["type"] == "call" for r in rows))

    def test_confirmations_on_the_command_line(self):
        rows = [json.loads(x) for x in self.cli("--confirm", "service=checkout-web", "--confirm",
                                                 "owner=web-oncall", "--confirm", "http_status=503",
                                                 "--confirm", "status=resolved").splitlines()]
        self.assertEqual([r["tool"] for r in rows if r["type"] == "call"], ["page", "retry", "close_ticket"])
        self.assertEqual(rows[0]["payload"]["http_status"], 503)
        self.assertEqual(rows[-1], {"type": "result", "status": "done", "blocked_on": None})

    def test_parse_confirm_keeps_text_that_is_not_a_plain_integer(self):
        self.assertEqual(gate.parse_confirm("http_status=503"), ("http_status", 503))
        self.assertEqual(gate.parse_confirm("owner=007"), ("owner", "007"))
        self.assertEqual(gate.parse_confirm("route=/a=b"), ("route", "/a=b"))
