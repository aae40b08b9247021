"""Replay of the candidate's command on the fixture they saw (issue 142),
against the packet's deterministic model. Prefix test_seen_*."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
import replay_lib as R  # noqa: E402

SOURCE_TEST = "project/test_slug.py"
PRISTINE = ".gatehouse/pristine/test_slug.py.orig"


@pytest.fixture(scope="module")
def run():
    out = R.replay_issue("recomputed.jsonl", SOURCE_TEST, PRISTINE)
    out["gave_up"] = Path("give_up.json").exists()
    return out


def test_seen_exits_zero(run):
    proc = run["proc"]
    assert proc.returncode == 0, f"exit {proc.returncode}: {(proc.stderr or '')[-300:]}"


def test_seen_resolved(run):
    assert run["passed"], "issue 142's tests still fail after the run:\n" + run["test_output"]


def test_seen_tests_untouched(run):
    assert run["test_digest"] == R.digest(PRISTINE), f"{SOURCE_TEST} was changed during the run"


def test_seen_usage_written(run):
    usage = Path("usage.jsonl")
    assert usage.exists() and usage.read_text().strip(), "the replay wrote no usage.jsonl"


def test_seen_called_the_model(run):
    assert run["rows"], "the replay never called the model"


def test_seen_stops_when_resolved(run):
    # The model's first answer fixes issue 142, far from every cap: a run
    # that still ends in give_up.json did not notice the tests went green
    # and was only stopped by a cap.
    assert not run["gave_up"], "the run resolved issue 142 but still wrote give_up.json: " + (
        Path("give_up.json").read_text()[:300] if Path("give_up.json").exists() else "")
