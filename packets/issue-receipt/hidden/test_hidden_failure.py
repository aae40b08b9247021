"""Failure behaviour. test_budget_*: an issue whose every call costs about
10,000 tokens and whose model never finds the fix (laid over
fixtures/issue_142.json); the run must stop under 40,000 tokens with
give_up.json and exit 0. Its size puts a fourth call just past the cap: an
estimate that leaves out max_tokens (or undercounts the request's bytes)
starts it. test_throttle_*: a model that answers every call with HTTP 429;
the run must stop after at most 3 attempts with give_up.json and exit 0,
sending the API key, with a usage row of 0 tokens per request.
test_refused_*: no model listening; a clean stop, and any usage row has 0
tokens. test_unreadable_*: a model that answers in prose, never with a code
block; a clean stop under the cap."""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
import replay_lib as R  # noqa: E402

TOKEN_CAP = 40_000
WRONG = Path(".gatehouse/pristine/slug.py").read_text() if Path(".gatehouse/pristine/slug.py").exists() else ""


def give_up():
    path = Path("give_up.json")
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return "not JSON"
    return data if isinstance(data, dict) else "not an object"


@pytest.fixture(scope="module")
def budget():
    out = R.replay("budget_ledger.jsonl", answers={"913": WRONG})
    out["give_up"] = give_up()
    return out


@pytest.fixture(scope="module")
def throttle(budget):
    out = R.throttled("throttle_requests.jsonl")
    out["give_up"] = give_up()
    out["usage"] = R.usage_rows()
    return out


@pytest.fixture(scope="module")
def refused(throttle):
    out = R.refused()
    out["give_up"] = give_up()
    out["usage"] = R.usage_rows()
    return out


@pytest.fixture(scope="module")
def unreadable(refused):
    out = R.unreadable("unreadable_ledger.jsonl")
    out["give_up"] = give_up()
    return out


def zero_rows(rows):
    return all(isinstance(r, dict) and r.get("prompt_tokens") == 0 and r.get("completion_tokens") == 0 for r in rows)


def test_budget_clean_exit(budget):
    assert budget["proc"].returncode == 0, f"exit {budget['proc'].returncode}: {(budget['proc'].stderr or '')[-300:]}"


def test_budget_give_up_written(budget):
    assert isinstance(budget["give_up"], dict), f"give_up.json: {budget['give_up']!r}"


def test_budget_within_token_cap(budget):
    spent = sum(r["total_tokens"] for r in budget["rows"])
    assert spent <= TOKEN_CAP, f"{spent} tokens over {len(budget['rows'])} calls, cap {TOKEN_CAP}"


def test_throttle_clean_exit(throttle):
    assert throttle["proc"].returncode == 0, f"exit {throttle['proc'].returncode} after 429s"
    assert isinstance(throttle["give_up"], dict), f"give_up.json after 429s: {throttle['give_up']!r}"


def test_throttle_bounded(throttle):
    assert 1 <= len(throttle["rows"]) <= 3, f"{len(throttle['rows'])} requests against a model answering 429"


def test_throttle_receipt_has_a_zero_row_per_request(throttle):
    usage, sent = throttle["usage"], len(throttle["rows"])
    assert len(usage) == sent, f"{len(usage)} usage rows for {sent} throttled requests"
    assert zero_rows(usage), f"throttled requests are rows of 0 tokens: {usage}"


def test_throttle_sends_the_api_key(throttle):
    assert throttle["auth"] and all(a == "Bearer sk-replay" for a in throttle["auth"]), throttle["auth"]


def test_refused_clean_exit(refused):
    assert refused["proc"].returncode == 0, f"exit {refused['proc'].returncode} with no model listening"
    assert isinstance(refused["give_up"], dict), f"give_up.json with no model listening: {refused['give_up']!r}"


def test_refused_receipt_rows_have_no_tokens(refused):
    assert zero_rows(refused["usage"]), f"failed requests are rows of 0 tokens: {refused['usage']}"


def test_unreadable_clean_exit(unreadable):
    proc = unreadable["proc"]
    assert proc.returncode == 0, f"exit {proc.returncode} on answers with no code block: {(proc.stderr or '')[-300:]}"
    assert isinstance(unreadable["give_up"], dict), f"give_up.json: {unreadable['give_up']!r}"
    spent = sum(r["total_tokens"] for r in unreadable["rows"])
    assert spent <= TOKEN_CAP, f"{spent} tokens over {len(unreadable['rows'])} calls, cap {TOKEN_CAP}"
