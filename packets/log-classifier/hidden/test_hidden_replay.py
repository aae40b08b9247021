"""Held-out replay of classify_logs.py through its command line against a
fake chat-completions endpoint inside the sandbox (the grader's harness).

Names matter: the failure catalog selects tests by prefix.
  test_labels_*   the classifier labels lines through $LLM_ENDPOINT at all
  test_payload_*  bytes per request do not follow the length of the log
  test_cache_*    identical lines cost one call
  test_down_*     a dead endpoint or a junk answer is a failure, never INFO
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import FakeOpenAI, run_confined  # noqa: E402

# Lines with no level word in them, so a local short-cut cannot answer them.
TEXTS = [
    "worker {i} drained queue shard {j} after {k} ms",
    "cache node {i} evicted {j} keys under pressure {k}",
    "upstream {i} answered slowly, {j} ms for job {k}",
    "replica {i} lag is {j} seconds on table t{k}",
    "scheduler moved task {i} from host h{j} to h{k}",
]


def distinct_lines(count):
    return [TEXTS[i % len(TEXTS)].format(i=i, j=(i * 37) % 101, k=(i * 11) % 97) for i in range(count)]


def chat_url(fake):
    url = fake.url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return url + "/chat/completions"
    return url + "/v1/chat/completions"


@pytest.fixture
def fake():
    server = FakeOpenAI()
    server.reply = lambda body: "ERROR"
    yield server
    server.stop()


def run(fake, tmp_path, lines, name="app.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = dict(os.environ, LLM_ENDPOINT=chat_url(fake))
    # The candidate's classifier, confined (the harness's launcher).
    return run_confined(
        [sys.executable, "classify_logs.py", str(path)],
        env=env, capture_output=True, text=True, timeout=60,
    )


def printed_labels(proc):
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def test_labels_every_line_through_endpoint(fake, tmp_path):
    proc = run(fake, tmp_path, distinct_lines(4))
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-300:]}"
    assert printed_labels(proc) == ["ERROR"] * 4, f"stdout was {proc.stdout[-300:]!r}"
    assert fake.requests, "no request reached $LLM_ENDPOINT"


def test_labels_lines_that_name_their_level(fake, tmp_path):
    # The brief lets a line that names its level be labelled without the
    # model; asked or not, the label is that level (the fake answers it too).
    fake.reply = lambda body: "WARN"
    lines = [f"WARN disk {n} is {80 + n}% full on node n{n}" for n in range(3)]
    proc = run(fake, tmp_path, lines)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-300:]}"
    assert printed_labels(proc) == ["WARN"] * 3, f"stdout was {proc.stdout[-300:]!r}"


def average_request_bytes(fake, tmp_path, count, name):
    before = len(fake.requests)
    proc = run(fake, tmp_path, distinct_lines(count), name)
    assert proc.returncode == 0, f"exit {proc.returncode} on a {count}-line log: {proc.stderr[-300:]}"
    sizes = [r["bytes"] for r in fake.requests[before:]]
    assert sizes, f"no request for a {count}-line log"
    return sum(sizes) / len(sizes)


def test_payload_flat_when_file_grows(fake, tmp_path):
    short = average_request_bytes(fake, tmp_path, 6, "short.log")
    long = average_request_bytes(fake, tmp_path, 150, "long.log")
    assert long <= short * 1.5 + 200, (
        f"average request {short:.0f} bytes for a 6-line log, {long:.0f} bytes for a 150-line log: "
        "the payload follows the file"
    )


def test_payload_small_on_long_file(fake, tmp_path):
    """brief: "each request carries the line being labelled (a fixed, tiny window around it is acceptable), never the file"

    The brief bounds a request by the file, not by a number of bytes: an
    honest prompt with long instructions or examples passes, a request that
    carries the whole 150-line log does not."""
    long = average_request_bytes(fake, tmp_path, 150, "long.log")
    size = (tmp_path / "long.log").stat().st_size
    assert long < size, f"average request {long:.0f} bytes for a 150-line log of {size} bytes: it carries the file"


def test_cache_identical_lines_one_call(fake, tmp_path):
    lines = ["heartbeat from collector c7 missed once"] * 60 + ["peer p2 reset the stream"] * 5
    proc = run(fake, tmp_path, lines)
    assert proc.returncode == 0, proc.stderr[-300:]
    assert len(printed_labels(proc)) == 65
    assert len(fake.requests) <= 2, f"{len(fake.requests)} calls for 65 lines with 2 distinct texts"


def test_cache_interleaved_repeats(fake, tmp_path):
    base = distinct_lines(3)
    lines = [base[i % 3] for i in range(30)]
    proc = run(fake, tmp_path, lines)
    assert proc.returncode == 0, proc.stderr[-300:]
    assert len(printed_labels(proc)) == 30
    assert len(fake.requests) <= 3, f"{len(fake.requests)} calls for 30 lines with 3 distinct texts"


def assert_not_courtesy(proc, what):
    labels = printed_labels(proc)
    assert proc.returncode != 0, f"{what}: exit 0 (stdout {proc.stdout[-120:]!r})"
    assert "INFO" not in labels, f"{what}: printed INFO for a line nobody labelled"


def test_down_refused_is_not_info(fake, tmp_path):
    fake.down("refuse")
    assert_not_courtesy(run(fake, tmp_path, distinct_lines(3)), "connection refused")


def test_down_http_500_is_not_info(fake, tmp_path):
    fake.down("500")
    assert_not_courtesy(run(fake, tmp_path, distinct_lines(3)), "HTTP 500")


def test_down_junk_answer_is_not_info(fake, tmp_path):
    fake.reply = lambda body: "Sure, happy to help with your logs!"
    assert_not_courtesy(run(fake, tmp_path, distinct_lines(3)), "an answer that is not a label")
