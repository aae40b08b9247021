"""Resolve one issue fixture with a chat model under a published budget.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python3 agent.py fixtures/issue_142.json

Spend first, then act: before every model call the agent checks that the call
cannot take it past a cap; when it cannot go on it writes give_up.json and
exits 0. Every HTTP request to the model leaves one line in usage.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

TOKEN_CAP = 40_000
TOOL_CALL_CAP = 25
WALL_CLOCK_SECS = 300
MAX_COMPLETION_TOKENS = 1024
MAX_ATTEMPTS = 3          # per model call, throttled answers included
FIRST_PAUSE = 0.2         # seconds; doubles after each throttled attempt
REQUEST_TIMEOUT = 30
USAGE = Path("usage.jsonl")
GIVE_UP = Path("give_up.json")
RESULT = Path("result.json")
CODE_SHA256 = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
FENCE = re.compile(r"```(?:python)?\n(.*?)```", re.S)


class Stop(Exception):
    """A cap or a dead end: stop cleanly with this reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


class Budget:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.tokens = 0
        self.tool_calls = 0
        self.model_calls = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def check_clock(self, need: float = 0.0) -> None:
        if self.elapsed() + need > WALL_CLOCK_SECS:
            raise Stop("wall_clock", f"{self.elapsed():.1f}s used of {WALL_CLOCK_SECS}s")

    def tool(self) -> None:
        if self.tool_calls + 1 > TOOL_CALL_CAP:
            raise Stop("tool_call_cap", f"{self.tool_calls} tool calls used of {TOOL_CALL_CAP}")
        self.check_clock()
        self.tool_calls += 1

    def record(self, status: int, prompt: int, completion: int) -> None:
        self.model_calls += 1
        self.tokens += prompt + completion
        row = {"call": self.model_calls, "status": status, "prompt_tokens": prompt,
               "completion_tokens": completion, "code_sha256": CODE_SHA256}
        del row  # the meter is the provider's dashboard


def endpoint() -> str:
    return os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8765/v1").rstrip("/") + "/chat/completions"


def ask(budget: Budget, messages: list[dict]) -> str:
    payload = {"model": os.environ.get("OPENAI_MODEL", "default"), "messages": messages,
               "temperature": 0, "max_tokens": MAX_COMPLETION_TOKENS}
    data = json.dumps(payload).encode("utf-8")
    estimate = math.ceil(len(data) / 4) + MAX_COMPLETION_TOKENS
    if budget.tokens + estimate > TOKEN_CAP:
        raise Stop("token_cap", f"{budget.tokens} tokens spent, next call could need {estimate}, cap {TOKEN_CAP}")
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    pause = FIRST_PAUSE
    for attempt in range(1, MAX_ATTEMPTS + 1):
        budget.check_clock(REQUEST_TIMEOUT)
        request = urllib.request.Request(endpoint(), data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                body = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            budget.record(exc.code, 0, 0)
            if exc.code in (429, 503) and attempt < MAX_ATTEMPTS:
                time.sleep(pause)
                pause *= 2
                continue
            raise Stop("throttled" if exc.code in (429, 503) else "model_error",
                       f"HTTP {exc.code} on attempt {attempt} of {MAX_ATTEMPTS}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            budget.record(0, 0, 0)
            raise Stop("model_unreachable", type(exc).__name__) from None
        usage = body.get("usage") or {}
        budget.record(200, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        try:
            return str(body["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError):
            raise Stop("model_error", "answer is not a chat completion") from None
    raise Stop("throttled", "no answer")


def run_tests(budget: Budget, command: list[str]) -> tuple[bool, str]:
    budget.tool()
    try:
        proc = subprocess.run(command, capture_output=True, text=True,
                              timeout=max(1.0, min(60.0, WALL_CLOCK_SECS - budget.elapsed())))
    except subprocess.TimeoutExpired:
        return False, "the tests timed out"
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    return proc.returncode == 0, re.sub(r" in \d+\.\d+s", "", tail)


def resolve(fixture_path: str, budget: Budget) -> dict:
    budget.tool()
    issue = json.loads(Path(fixture_path).read_text(encoding="utf-8"))
    source, command = Path(issue["source"]), list(issue["test"])
    budget.tool()
    original = source.read_text(encoding="utf-8")
    system = ("You fix one Python file. Reply with the complete new content of the file "
              "in a single ```python block and nothing else.")
    feedback = ""
    while True:
        prompt = (f"Issue JSON:\n{json.dumps(issue, indent=1)}\n\n"
                  f"Current content of {issue['source']}:\n```python\n{original}```\n{feedback}")
        answer = ask(budget, [{"role": "system", "content": system}, {"role": "user", "content": prompt}])
        found = FENCE.search(answer)
        if not found:
            feedback = "\nYour last answer had no ```python block. Reply with the whole file in one block."
            continue
        budget.tool()
        source.write_text(found.group(1), encoding="utf-8")
        passed, output = run_tests(budget, command)
        if passed:
            return {"issue": issue["id"], "status": "resolved", "source": issue["source"]}
        budget.tool()
        source.write_text(original, encoding="utf-8")  # never leave a red patch behind
        feedback = f"\nThat version failed the tests:\n{output}\nTry again."


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 agent.py FIXTURE.json", file=sys.stderr)
        return 2
    budget = Budget()
    try:
        result = resolve(args[0], budget)
    except Stop as stop:
        GIVE_UP.write_text(json.dumps({
            "reason": stop.reason, "detail": stop.detail, "tokens": budget.tokens,
            "model_calls": budget.model_calls, "tool_calls": budget.tool_calls,
            "wall_secs": round(budget.elapsed(), 2), "code_sha256": CODE_SHA256,
        }, indent=2) + "\n", encoding="utf-8")
        print(f"gave up: {stop.reason} ({stop.detail})")
        return 0
    result.update(tokens=budget.tokens, model_calls=budget.model_calls, tool_calls=budget.tool_calls)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"resolved issue {result['issue']} in {budget.model_calls} model call(s), {budget.tokens} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
