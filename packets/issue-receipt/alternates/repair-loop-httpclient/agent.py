#!/usr/bin/env python3
"""A small, budgeted issue-fixing agent.

Usage:
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python3 agent.py FIXTURE.json

The fixture names the file to fix (`source`) and the command that tests it
(`test`). The agent asks the model for the whole new file, writes it, runs the
test command, and if the tests still fail it asks once more with the failure
output. Every request sent to the model is receipted in usage.jsonl. Whenever a
cap would be crossed, it stops cleanly: give_up.json and exit status 0.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

TOKEN_CAP = 40_000
TOOL_CALL_CAP = 25
WALL_CLOCK_CAP = 300.0
REPLY_TOKEN_LIMIT = 3_000
MAX_REPAIR_ROUNDS = 2
THROTTLED = {429, 503}
THROTTLE_ATTEMPTS = 3
THROTTLE_PAUSES = (0.25, 0.75)  # between attempts 1-2 and 2-3
RECEIPT = "usage.jsonl"
GIVE_UP = "give_up.json"


class Stop(Exception):
    """A clean stop: the reason goes to give_up.json."""


@dataclass
class Budget:
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    tool_calls: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining_seconds(self) -> float:
        return WALL_CLOCK_CAP - self.elapsed()

    def take_tool_call(self, what: str) -> None:
        if self.tool_calls >= TOOL_CALL_CAP:
            raise Stop(f"tool-call cap of {TOOL_CALL_CAP} reached before: {what}")
        if self.remaining_seconds() < 5:
            raise Stop(f"wall-clock cap of {WALL_CLOCK_CAP:.0f}s reached before: {what}")
        self.tool_calls += 1

    def check_call_fits(self, request_bytes: int) -> None:
        bound = -(-request_bytes // 4) + REPLY_TOKEN_LIMIT
        if self.tokens + bound > TOKEN_CAP:
            raise Stop(
                f"token cap: {self.tokens} spent + up to {bound} for the next call "
                f"would pass {TOKEN_CAP}"
            )


class Workspace:
    """File and test tools, each counted against the budget, confined to the working folder."""

    def __init__(self, root: Path, budget: Budget) -> None:
        self.root = root.resolve()
        self.budget = budget

    def _resolve(self, relative: str) -> Path:
        candidate = (self.root / relative).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise Stop(f"refusing a path outside the working folder: {relative!r}")
        return candidate

    def read(self, relative: str) -> str:
        self.budget.take_tool_call(f"read {relative}")
        return self._resolve(relative).read_text(encoding="utf-8")

    def write(self, relative: str, text: str) -> None:
        self.budget.take_tool_call(f"write {relative}")
        self._resolve(relative).write_text(text, encoding="utf-8")

    def run_tests(self, argv: list[str]) -> tuple[bool, str]:
        self.budget.take_tool_call("run the test command")
        try:
            done = subprocess.run(argv, cwd=self.root, capture_output=True, text=True,
                                  timeout=max(1.0, self.budget.remaining_seconds() - 2))
        except subprocess.TimeoutExpired:
            raise Stop("the test command ran into the wall-clock cap") from None
        return done.returncode == 0, (done.stdout + done.stderr)[-3000:]


class ModelClient:
    """OpenAI-style chat completions over http.client, with a receipt line per request."""

    def __init__(self, base_url: str, api_key: str | None, budget: Budget, receipt: Path,
                 code_sha256: str) -> None:
        parts = urllib.parse.urlsplit(base_url.rstrip("/"))
        if parts.scheme != "http" or not parts.hostname:
            raise Stop(f"OPENAI_BASE_URL must be an http URL, got {base_url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.path = parts.path + "/chat/completions"
        self.api_key = api_key
        self.budget = budget
        self.receipt = receipt
        self.code_sha256 = code_sha256

    def _receipt(self, attempt: int, status: object, prompt_tokens: int, completion_tokens: int) -> None:
        line = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "code_sha256": self.code_sha256,
            "attempt": attempt,
            "status": status,
        }
        with self.receipt.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")

    def _post(self, body: bytes) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        timeout = max(1.0, min(60.0, self.budget.remaining_seconds() - 2))
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request("POST", self.path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def complete(self, messages: list[dict]) -> str:
        body = json.dumps({"model": "default", "messages": messages, "temperature": 0,
                           "max_tokens": REPLY_TOKEN_LIMIT}, sort_keys=True).encode("utf-8")
        for attempt in range(1, THROTTLE_ATTEMPTS + 1):
            self.budget.check_call_fits(len(body))
            if self.budget.remaining_seconds() < 5:
                raise Stop("wall-clock cap reached before a model call")
            try:
                status, raw = self._post(body)
            except (OSError, http.client.HTTPException) as err:
                self._receipt(attempt, "unreachable", 0, 0)
                raise Stop(f"model endpoint unreachable: {err}") from None
            if status in THROTTLED:
                self._receipt(attempt, status, 0, 0)
                if attempt == THROTTLE_ATTEMPTS:
                    raise Stop(f"model still throttling (HTTP {status}) after {attempt} attempts")
                time.sleep(THROTTLE_PAUSES[attempt - 1])
                continue
            try:
                reply = json.loads(raw)
                usage = reply.get("usage") or {}
                prompt_tokens = int(usage.get("prompt_tokens") or 0)
                completion_tokens = int(usage.get("completion_tokens") or 0)
            except (ValueError, AttributeError, TypeError):
                reply, prompt_tokens, completion_tokens = None, 0, 0
            self._receipt(attempt, status, prompt_tokens, completion_tokens)
            self.budget.tokens += prompt_tokens + completion_tokens
            if status != 200 or not isinstance(reply, dict):
                raise Stop(f"model endpoint answered HTTP {status}")
            try:
                return reply["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise Stop("model reply has no choices[0].message.content") from None
        raise Stop("model call loop ended without an answer")


def python_block(answer: str) -> str | None:
    """The body of the first ```python fenced block in `answer`, or None."""
    start = answer.find("```python")
    if start < 0:
        return None
    start = answer.find("\n", start)
    end = answer.find("```", start + 1)
    if start < 0 or end < 0:
        return None
    return answer[start + 1:end]


def first_prompt(fixture: dict, source_text: str) -> list[dict]:
    return [
        {"role": "system", "content": (
            "You are fixing one bug in one file. Reply with the complete new file in a single "
            "```python fenced block. Do not change tests.")},
        {"role": "user", "content": (
            "Issue (fixture JSON):\n" + json.dumps(fixture, sort_keys=True) + "\n\n"
            f"File {fixture['source']}:\n```python\n{source_text}```\n")},
    ]


def run(fixture_path: str, root: Path) -> dict:
    budget = Budget()
    code_sha256 = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    tools = Workspace(root, budget)
    fixture = json.loads(tools.read(fixture_path))
    source_rel, test_argv = fixture["source"], fixture["test"]
    if not isinstance(test_argv, list) or not all(isinstance(a, str) for a in test_argv):
        raise Stop("fixture 'test' is not a list of strings")
    model = ModelClient(os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8765/v1"),
                        os.environ.get("OPENAI_API_KEY"), budget, root / RECEIPT, code_sha256)

    original = tools.read(source_rel)
    messages = first_prompt(fixture, original)
    previous_answer = None
    for round_no in range(1, MAX_REPAIR_ROUNDS + 1):
        answer = model.complete(messages)
        new_source = python_block(answer)
        if new_source is None:
            tools.write(source_rel, original)
            raise Stop(f"round {round_no}: the model's answer had no ```python block")
        if new_source == previous_answer:
            tools.write(source_rel, original)
            raise Stop(f"round {round_no}: the model repeated its failing file; asking again would only spend budget")
        tools.write(source_rel, new_source)
        passed, output = tools.run_tests(test_argv)
        if passed:
            return {"status": "resolved", "rounds": round_no, "tokens": budget.tokens,
                    "tool_calls": budget.tool_calls, "seconds": round(budget.elapsed(), 2)}
        previous_answer = new_source
        messages = messages + [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "The test command still fails:\n" + output
             + "\nReply with the complete corrected file in one ```python block."},
        ]
    tools.write(source_rel, original)
    raise Stop(f"tests still red after {MAX_REPAIR_ROUNDS} model rounds; original file restored")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path.cwd()
    started = time.monotonic()
    try:
        outcome = run(argv[1], root)
    except Stop as stop:
        record = {"reason": str(stop), "seconds": round(time.monotonic() - started, 2)}
        (root / GIVE_UP).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"agent: stopped cleanly: {stop}")
        return 0
    print("agent: " + json.dumps(outcome, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
