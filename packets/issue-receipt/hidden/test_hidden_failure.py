"""Failure behaviour. test_budget_*: an issue whose every call costs about
10,000 tokens and whose model never finds the fix (laid over
fixtures/issue_142.json); the run must stop under 40,000 tokens with
give_up.json and exit 0. Its size puts a fourth call just past the cap: an
estimate that undercounts the request's bytes starts it.
test_budget_verbose_*: the same issue trimmed to about 9,600 prompt tokens a
call, answered with a wrong file of about 1,000 tokens: a tally that leaves
completion tokens out starts a fourth call past the cap.
test_budget_tool_cap_*: a cheap issue that is never fixed, whose test
command counts its runs; the run must stop cleanly within 25 tool calls, so
at most 25 runs of the issue's tests, and the fixture's read, the writes of
the issue's file (seen through inotify) and the test runs at most 25.
test_throttle_*: a model that answers every call with HTTP 429; the run
must stop after at most 3 attempts with give_up.json and exit 0, sending the
API key, with a usage row of 0 tokens per request, pausing before each retry
(a pause that does not shrink).
test_refused_*: no model listening; a clean stop, and any usage row has 0
tokens. test_unreadable_*: a model that answers in prose, never with a code
block; a clean stop under the cap. test_unmetered_*: a model that answers
with the fix but reports no usage; a usage row of 0 tokens per request.
test_throttle_once_*: a model that answers the first call with 429, then
with the fix: the run retries and resolves the issue."""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
import replay_lib as R  # noqa: E402

TOKEN_CAP = 40_000
TOOL_CALL_CAP = 25
WRONG = Path(".gatehouse/pristine/slug.py").read_text() if Path(".gatehouse/pristine/slug.py").exists() else ""
# The same wrong file with a review note appended: about 1,000 completion
# tokens a call (under the 1,024 max_tokens a careful agent may ask for).
WRONG_VERBOSE = WRONG + "\n# Render log review, kept for the next reader (issue 913):\n" + "".join(
    f"# worker-{i % 17}: a slug with an edge dash reached the router; see the log in the issue.\n"
    for i in range(44))
# Issue 913 cut to its first log lines: about 9,600 prompt tokens a call.
VERBOSE_LOG_LINES = 380
# Issue 142's fix, as the unmetered model answers it.
FIXED = ('"""URL slugs for article titles."""\n\nimport re\n\n\n'
         "def slugify(title: str) -> str:\n"
         '    """Lower-case `title` and join its runs of letters and digits with single dashes."""\n'
         '    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")\n')
# The tool-cap issue's test command: counts its runs, never passes on the
# wrong file the model keeps sending.
CHECK = "project/check_slug.py"
RUNS = "test_runs.log"
CHECK_SCRIPT = f'''import sys
with open({RUNS!r}, "a", encoding="utf-8") as fh:
    fh.write("run\\n")
sys.dont_write_bytecode = True
sys.path.insert(0, "project")
from slug import slugify
sys.exit(0 if slugify("  Hello, World! ") == "hello-world" else 1)
'''
TOOL_CAP_BODY = ("Titles that start or end with spaces or punctuation get slugs with a dash at the "
                 "edge. The check script project/check_slug.py reproduces it. ") * 12


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


@pytest.fixture(scope="module")
def verbose(unreadable):
    text = Path(R.FIXTURE).read_text(encoding="utf-8")
    head, sep, log = json.loads(text)["body"].partition("\n")
    body = head + sep + "\n".join(log.split("\n")[:VERBOSE_LOG_LINES])
    with R.fixture_as(id=915, body=body):
        out = R.replay("verbose_ledger.jsonl", answers={"915": WRONG_VERBOSE})
    out["give_up"] = give_up()
    R.restore(".gatehouse/pristine/slug.py", "project/slug.py")
    return out


@pytest.fixture(scope="module")
def tool_cap(verbose):
    Path(CHECK).write_text(CHECK_SCRIPT, encoding="utf-8")
    Path(RUNS).unlink(missing_ok=True)
    try:
        with R.fixture_as(id=914, title="slugify leaves dashes at the edges", body=TOOL_CAP_BODY,
                          test=["python3", CHECK]):
            writes = R.Writes("project/slug.py")
            out = R.replay("tool_cap_ledger.jsonl", answers={"914": WRONG})
            out["source_writes"] = writes.count()
        out["give_up"] = give_up()
        out["test_runs"] = len(Path(RUNS).read_text().splitlines()) if Path(RUNS).exists() else 0
    finally:
        Path(CHECK).unlink(missing_ok=True)
        Path(RUNS).unlink(missing_ok=True)
        R.restore(".gatehouse/pristine/slug.py", "project/slug.py")
    return out


@pytest.fixture(scope="module")
def unmetered(tool_cap):
    out = R.unmetered(f"Here is the whole file with the fix:\n\n```python\n{FIXED}```\n")
    out["usage"] = R.usage_rows()
    R.restore(".gatehouse/pristine/slug.py", "project/slug.py")
    return out


@pytest.fixture(scope="module")
def recovers(unmetered):
    runs = {}
    for status in (429, 503):
        out = R.throttled_then_served(f"Here is the whole file with the fix:\n\n```python\n{FIXED}```\n",
                                      status=status)
        out["give_up"] = give_up()
        out["passed"], out["test_output"] = R.tests_pass(json.loads(Path(R.FIXTURE).read_text())["test"])
        R.restore(".gatehouse/pristine/slug.py", "project/slug.py")
        runs[status] = out
    return runs


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


def test_throttle_backs_off(throttle):
    # Each retry waits (the brief: a short, growing pause). Measured from the
    # requests' arrival: a wait is a floor on the gap, so an agent that
    # sleeps is never failed by a slow machine. Whether the pauses grow is
    # not asserted: on a loaded machine one request's latency can exceed the
    # difference between two honest pauses, and a false accusation costs more
    # than a missed one.
    times = throttle["times"]
    gaps = [round(b - a, 3) for a, b in zip(times, times[1:])]
    assert all(g >= 0.05 for g in gaps), f"seconds between throttled requests: {gaps} (no pause before a retry)"


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


def test_budget_verbose_clean_exit(verbose):
    proc = verbose["proc"]
    assert proc.returncode == 0, f"exit {proc.returncode}: {(proc.stderr or '')[-300:]}"
    assert isinstance(verbose["give_up"], dict), f"give_up.json: {verbose['give_up']!r}"


def test_budget_verbose_within_token_cap(verbose):
    spent = sum(r["total_tokens"] for r in verbose["rows"])
    assert spent <= TOKEN_CAP, f"{spent} tokens over {len(verbose['rows'])} calls, cap {TOKEN_CAP}"


def test_budget_tool_cap_clean_exit(tool_cap):
    proc = tool_cap["proc"]
    assert proc.returncode == 0, f"exit {proc.returncode} on an issue never fixed: {(proc.stderr or '')[-300:]}"
    assert isinstance(tool_cap["give_up"], dict), f"give_up.json: {tool_cap['give_up']!r}"


def test_budget_tool_cap_test_runs(tool_cap):
    # Each run of the tests is a tool call: more than 25 runs is past the cap.
    runs = tool_cap["test_runs"]
    assert runs <= TOOL_CALL_CAP, f"the issue's tests ran {runs} times over {len(tool_cap['rows'])} model calls, cap {TOOL_CALL_CAP} tool calls"


def test_budget_tool_cap_counted_calls(tool_cap):
    # The tool calls the run made at least, counted from outside the agent:
    # the fixture's read, each write of the file, each test run.
    writes, runs = tool_cap["source_writes"], tool_cap["test_runs"]
    least = 1 + writes + runs
    assert least <= TOOL_CALL_CAP, (f"at least {least} tool calls: the fixture's read, {writes} writes of "
                                    f"project/slug.py and {runs} test runs; cap {TOOL_CALL_CAP}")


def test_unmetered_receipt_has_a_zero_row_per_request(unmetered):
    usage, sent = unmetered["usage"], unmetered["requests"]
    assert len(usage) == sent, f"{len(usage)} usage rows for {sent} requests"
    assert zero_rows(usage), f"an endpoint that reports no usage is rows of 0 tokens: {usage}"


def test_throttle_once_then_resolves(recovers):
    """brief: "A throttled call (HTTP 429 or 503) is retried after a short, growing pause"

    One 429 (then, in a second run, one 503), then a model that answers with the fix: a single
    refusal is no reason to give up ("or the endpoint keeps refusing"). The run retries,
    resolves the issue and exits 0."""
    for status, run in recovers.items():
        proc = run["proc"]
        assert run["requests"] >= 2, f"{run['requests']} request(s): the call throttled with {status} was never retried"
        assert proc.returncode == 0, f"after one {status}: exit {proc.returncode}: {(proc.stderr or '')[-300:]}"
        assert run["give_up"] is None, f"gave up after one {status}: {run['give_up']!r}"
        assert run["passed"], f"the issue's tests still fail after one {status} and an answer:\n" + run["test_output"]
