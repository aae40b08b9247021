"""One model call per issue, under the published caps.

Usage (the rehearsal model from fake_model.py):

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python3 agent.py fixtures/issue_142.json

Every answered or refused model call becomes one line of usage.jsonl; any cap
that would be crossed ends the run with give_up.json and exit status 0.
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

CAPS = {"tokens": 40_000, "tool_calls": 25, "seconds": 300}
REPLY_LIMIT = 2_000     # max_tokens asked of the model, reserved before each call
ATTEMPTS = 3            # a throttled (429/503) call is sent at most this many times
HERE = Path.cwd()
RECEIPT = HERE / "usage.jsonl"
SELF_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


class CapHit(Exception):
    """A cap (or an unusable answer) ends the run cleanly."""


class Meter:
    """What this run has spent so far, checked before anything is spent."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.tokens = 0
        self.tools = 0

    def elapsed(self):
        return time.monotonic() - self.t0

    def remaining(self):
        left = CAPS["seconds"] - self.elapsed()
        if left <= 5:
            raise CapHit("300 s wall clock nearly spent")
        return left

    def take_tool(self, what):
        if self.tools >= CAPS["tool_calls"]:
            raise CapHit(f"25 tool calls spent before {what}")
        self.tools += 1

    def reserve(self, request_bytes):
        estimate = -(-request_bytes // 4) + REPLY_LIMIT
        if self.tokens + estimate > CAPS["tokens"]:
            raise CapHit(f"{self.tokens} tokens spent; another call could pass 40,000")

    def summary(self):
        return {"tokens": self.tokens, "tool_calls": self.tools, "seconds": round(self.elapsed(), 2)}


def log_call(prompt_tokens, completion_tokens, status):
    line = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "status": status, "code_sha256": SELF_DIGEST}
    with RECEIPT.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def endpoint():
    base = os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:8765/v1"
    return base.rstrip("/") + "/chat/completions"


def post_once(payload, meter):
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(endpoint(), data=payload, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=min(60.0, meter.remaining())) as resp:
        return json.loads(resp.read().decode("utf-8"))


def ask(meter, prompt):
    payload = json.dumps({
        "model": "gpt-4o-mini",
        "temperature": 0,
        "max_tokens": REPLY_LIMIT,
        "messages": [
            {"role": "system", "content": "Fix the bug described. Reply with the complete corrected file inside a single ```python fence."},
            {"role": "user", "content": prompt},
        ],
    }).encode("utf-8")
    meter.reserve(len(payload))
    attempt = 0
    while True:
        attempt += 1
        try:
            data = post_once(payload, meter)
        except urllib.error.HTTPError as refused:
            log_call(0, 0, refused.code)
            throttled = refused.code in (429, 503)
            if not throttled or attempt >= ATTEMPTS:
                raise CapHit(f"model answered HTTP {refused.code} on attempt {attempt} of {ATTEMPTS}")
            time.sleep(0.5 * attempt)
            continue
        except (urllib.error.URLError, OSError, ValueError) as broken:
            log_call(0, 0, "error")
            raise CapHit(f"no usable answer from the model: {broken}")
        usage = data.get("usage") or {}
        spent = [int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)]
        log_call(spent[0], spent[1], 200)
        meter.tokens += sum(spent)
        return data["choices"][0]["message"]["content"]


def python_block(text):
    start = text.find("```python\n")
    if start < 0:
        return None
    start += len("```python\n")
    end = text.find("```", start)
    return text[start:end] if end >= 0 else None


def resolve(fixture_path, meter):
    meter.take_tool("reading the fixture")
    issue = json.loads(Path(fixture_path).read_text(encoding="utf-8"))
    target = (HERE / issue["source"]).resolve()
    if HERE.resolve() not in target.parents:
        raise CapHit(f"source {issue['source']!r} is outside the workspace")
    meter.take_tool("reading the source")
    before = target.read_text(encoding="utf-8")
    prompt = (f"Issue JSON:\n{json.dumps(issue, indent=2)}\n\n"
              f"File {issue['source']} as it is now:\n```python\n{before}```")
    fixed = python_block(ask(meter, prompt))
    if fixed is None:
        raise CapHit("the answer carried no ```python block")
    meter.take_tool("writing the fix")
    target.write_text(fixed, encoding="utf-8")
    meter.take_tool("running the issue's tests")
    check = subprocess.run(issue["test"], cwd=HERE, capture_output=True, text=True, timeout=meter.remaining())
    if check.returncode != 0:
        meter.take_tool("restoring the original")
        target.write_text(before, encoding="utf-8")
        raise CapHit("tests still fail with the proposed file; the original is back")
    return issue.get("id")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python3 agent.py FIXTURE.json\n")
        return 2
    meter = Meter()
    try:
        issue_id = resolve(sys.argv[1], meter)
    except (CapHit, subprocess.TimeoutExpired) as stop:
        reason = "the test command outlived the wall clock" if isinstance(stop, subprocess.TimeoutExpired) else str(stop)
        report = dict(reason=reason, **meter.summary())
        (HERE / "give_up.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"gave up: {reason}")
        return 0
    spent = meter.summary()
    print(f"issue {issue_id} resolved with {spent['tokens']} tokens and {spent['tool_calls']} tool calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
