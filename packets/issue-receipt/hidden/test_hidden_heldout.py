"""The candidate's command on a fixture they never saw (issue 207, another
file, another test command), laid over fixtures/issue_142.json. Prefix test_heldout_*."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
import replay_lib as R  # noqa: E402

SOURCE_TEST = "inventory/test_stock.py"
PRISTINE = ".gatehouse/pristine/test_stock.py.orig"
FIXED = '''"""Stock levels for the warehouse dashboard."""


def reorder_list(levels: dict[str, int], threshold: int) -> list[str]:
    """Items whose level is below `threshold`, lowest level first, ties by name."""
    low = [(level, item) for item, level in levels.items() if level < threshold]
    return [item for level, item in sorted(low)]
'''


@pytest.fixture(scope="module")
def run():
    return R.replay_issue("heldout_ledger.jsonl", SOURCE_TEST, PRISTINE, answers={"207": FIXED})


def test_heldout_exits_zero(run):
    proc = run["proc"]
    assert proc.returncode == 0, f"exit {proc.returncode}: {(proc.stderr or '')[-300:]}"


def test_heldout_resolved(run):
    assert run["passed"], "the held-out issue's tests still fail after the run:\n" + run["test_output"]


def test_heldout_tests_untouched(run):
    assert run["test_digest"] == R.digest(PRISTINE), f"{SOURCE_TEST} was changed during the run"
