"""Resolve one issue fixture with a chat model, inside a hard budget.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python3 agent.py fixtures/issue_142.json
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

MAX_TOKENS_TOTAL = 40_000
MAX_TOOL_CALLS = 25
MAX_WALL_SECONDS = 300
ANSWER_TOKENS = 2_000          # max_tokens we ask for on each call
THROTTLE_TRIES = 3             # attempts in all for a throttled call
WORKDIR = Path.cwd()
CODE_SHA = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
FENCE = re.compile(r"```python\n(.*?)```", re.S)

started = time.monotonic()
spent_tokens = 0
tool_calls = 0


class GiveUp(Exception):
    pass


def give_up(reason):
    raise GiveUp(reason)


def tool():
    global tool_calls
    if tool_calls + 1 > MAX_TOOL_CALLS:
        give_up(f"tool-call cap: {MAX_TOOL_CALLS} used")
    tool_calls += 1


def seconds_left():
    left = MAX_WALL_SECONDS - (time.monotonic() - started)
    if left <= 5:
        give_up("wall-clock cap reached")
    return left


def inside(rel):
    path = (WORKDIR / rel).resolve()
    if WORKDIR.resolve() not in path.parents:
        give_up(f"fixture path {rel!r} leaves the working folder")
    return path


def record(prompt_tokens, completion_tokens, status):
    with open(WORKDIR / "usage.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "status": status, "code_sha256": CODE_SHA}) + "\n")


def chat(messages):
    global spent_tokens
    body = json.dumps({"model": "gpt-4o-mini", "messages": messages, "temperature": 0,
                       "max_tokens": ANSWER_TOKENS}).encode("utf-8")
    if spent_tokens + len(body) // 4 + 1 + ANSWER_TOKENS > MAX_TOKENS_TOTAL:
        give_up("token cap: the next call could pass 40,000 tokens")
    url = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8765/v1").rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    for attempt in range(1, THROTTLE_TRIES + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=min(60, seconds_left())) as resp:
                reply = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            record(0, 0, err.code)
            if err.code in (429, 503) and attempt < THROTTLE_TRIES:
                time.sleep(0.5 * attempt)
                continue
            give_up(f"model endpoint answered HTTP {err.code} (attempt {attempt})")
        except (urllib.error.URLError, OSError, ValueError) as err:
            record(0, 0, "error")
            give_up(f"model endpoint unreachable or unreadable: {err}")
        usage = reply.get("usage") or {}
        p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        record(p, c, 200)
        spent_tokens += p + c
        return reply["choices"][0]["message"]["content"]
    give_up("unreachable")


def main(argv):
    if len(argv) != 2:
        print("usage: python3 agent.py FIXTURE.json", file=sys.stderr)
        return 2
    try:
        tool()
        fixture = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        source = inside(fixture["source"])
        tool()
        original = source.read_text(encoding="utf-8")
        messages = [
            {"role": "system", "content": "You fix one bug. Answer with the whole new file in one ```python block."},
            {"role": "user", "content": "Issue:\n" + json.dumps(fixture, indent=2)
             + f"\n\nCurrent {fixture['source']}:\n```python\n{original}```"},
        ]
        found = FENCE.search(chat(messages))
        if not found:
            give_up("the model's answer held no ```python block")
        tool()
        source.write_text(found.group(1), encoding="utf-8")
        tool()
        result = subprocess.run(fixture["test"], cwd=WORKDIR, capture_output=True, text=True,
                                timeout=seconds_left())
        if result.returncode != 0:
            tool()
            source.write_text(original, encoding="utf-8")
            give_up("the model's patch did not pass the test command; original restored")
        print(f"resolved issue {fixture.get('id')}: {spent_tokens} tokens, {tool_calls} tool calls")
    except GiveUp as stop:
        (WORKDIR / "give_up.json").write_text(json.dumps({
            "reason": str(stop), "tokens": spent_tokens, "tool_calls": tool_calls,
            "seconds": round(time.monotonic() - started, 2)}, indent=2) + "\n", encoding="utf-8")
        print("gave up:", stop)
    except subprocess.TimeoutExpired:
        (WORKDIR / "give_up.json").write_text(json.dumps({"reason": "test command ran past the wall clock"}) + "\n")
        print("gave up: test command ran past the wall clock")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
