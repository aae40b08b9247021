"""Failure behaviour. test_budget_*: an issue whose every call costs about
10,000 tokens and whose model never finds the fix (laid over
fixtures/issue_142.json); the run must stop under 40,000 tokens with
give_up.json and exit 0. test_throttle_*: a model that answers every call
with HTTP 429; the run must stop after at most 3 attempts with give_up.json
and exit 0."""

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
    return out


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
