"""A bounded agent loop against the toy service.

The model (an OpenAI-style chat-completions endpoint at $LLM_ENDPOINT)
proposes HTTP actions; this driver decides which run against $TOY_BASE_URL,
writes one ledger row per call to $LEDGER_PATH, and stops. The limits are
constants in this file, enforced before each call:

    MODEL_CALL_CAP = 12       no 13th model call
    TOOL_CALL_CAP = 20        no 21st request to the toy service
    REPEAT_ERROR_CAP = 3      the same call failing the same way 3 times in a row halts
    TIME_LIMIT = 40 s         no new call after that (replay.sh has 45 s)
    GET /secret               a documented 404: requested once, never again

Exit status: 0 when the model declared done within every cap, 1 when a rule
halted the run.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

MODEL_CALL_CAP = 12
TOOL_CALL_CAP = 20
REPEAT_ERROR_CAP = 3
TIME_LIMIT = 40.0
HTTP_TIMEOUT = 5.0

BRIEF = (
    "You are planning HTTP calls against a toy service with these routes: GET /health, "
    "GET /items, POST /items (JSON body {\"name\": string}). GET /secret is documented to "
    "return 404 always; do not look for a secret. Task: check health, list items, create one "
    "item, confirm it appears in the list, then finish. Reply with a JSON object only: "
    "{\"actions\": [{\"method\": \"GET\"|\"POST\", \"path\": \"/...\", \"body\": {...}}], "
    "\"done\": false} or {\"actions\": [], \"done\": true, \"summary\": \"...\"}."
)


class RuleHalt(Exception):
    """A stop rule fired."""


@dataclass
class Outcome:
    status: int | None
    body: bytes
    error: str | None


def request(method: str, url: str, data: bytes | None) -> Outcome:
    headers = {"Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as resp:
            return Outcome(resp.status, resp.read(), None)
    except urllib.error.HTTPError as exc:
        return Outcome(exc.code, exc.read(), f"HTTP {exc.code}")
    except urllib.error.URLError as exc:
        return Outcome(None, b"", f"unreachable: {exc.reason}")
    except (TimeoutError, ConnectionError) as exc:
        return Outcome(None, b"", f"unreachable: {type(exc).__name__}")


@dataclass
class Ledger:
    path: str
    rows: list = field(default_factory=list)
    last_failure: dict = field(default_factory=lambda: {"model": None, "tool": None})
    repeats: dict = field(default_factory=lambda: {"model": 0, "tool": 0})

    def __post_init__(self) -> None:
        open(self.path, "w", encoding="utf-8").close()

    def count(self, kind: str) -> int:
        return sum(1 for row in self.rows if row["kind"] == kind)

    def first_same(self, kind: str, name: str, error: str | None):
        if error is None:
            return None
        for index, row in enumerate(self.rows):
            if row["kind"] == kind and row["name"] == name and row["error"] == error:
                return index
        return None

    def add(self, kind: str, name: str, bytes_in: int, bytes_out: int, error: str | None) -> None:
        row = {
            "ts": time.time(),
            "kind": kind,
            "name": name,
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
            "error": error,
            "duplicate_of": self.first_same(kind, name, error),
        }
        self.rows.append(row)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        if error is None:
            self.last_failure[kind], self.repeats[kind] = None, 0
            return
        if self.last_failure[kind] == (name, error):
            self.repeats[kind] += 1
        else:
            self.last_failure[kind], self.repeats[kind] = (name, error), 1
        if self.repeats[kind] >= REPEAT_ERROR_CAP:
            raise RuleHalt(f"{name} failed with {error!r} {REPEAT_ERROR_CAP} times in a row")


class Agent:
    def __init__(self, toy: str, endpoint: str, ledger: Ledger) -> None:
        self.toy = toy.rstrip("/")
        self.endpoint = endpoint
        self.ledger = ledger
        self.started = time.monotonic()
        self.secret_done = False
        self.messages = [{"role": "system", "content": BRIEF}, {"role": "user", "content": "Begin the task."}]

    def guard(self, kind: str) -> None:
        if time.monotonic() - self.started > TIME_LIMIT:
            raise RuleHalt(f"time limit of {TIME_LIMIT:.0f} s reached")
        cap = MODEL_CALL_CAP if kind == "model" else TOOL_CALL_CAP
        if self.ledger.count(kind) >= cap:
            raise RuleHalt(f"{kind} call cap of {cap} reached")

    def propose(self) -> dict | None:
        self.guard("model")
        data = json.dumps({"model": "planner", "messages": self.messages, "temperature": 0}).encode()
        out = request("POST", self.endpoint, data)
        plan, error = None, out.error
        if error is None:
            try:
                plan = json.loads(json.loads(out.body)["choices"][0]["message"]["content"])
            except Exception as exc:  # any malformed reply is a model-call error the stop rules count
                error = f"unparseable reply ({type(exc).__name__})"
            else:
                if not isinstance(plan, dict) or not isinstance(plan.get("actions", []), list):
                    plan, error = None, "reply is not an action object"
        self.ledger.add("model", "chat.completions", len(data), len(out.body), error)
        return plan

    def act(self, action) -> str:
        if not isinstance(action, dict):
            return f"ignored non-object action {action!r}"
        method = str(action.get("method", "")).upper()
        path = action.get("path")
        if method not in ("GET", "POST") or not isinstance(path, str) or not path.startswith("/"):
            return f"ignored {method} {path!r}: not a toy-service call"
        if (method, path) == ("GET", "/secret"):
            if self.secret_done:
                return "GET /secret is a documented 404 and was already requested once; not requested again"
            self.secret_done = True
        self.guard("tool")
        data = json.dumps(action.get("body")).encode() if method == "POST" else None
        out = request(method, self.toy + path, data)
        self.ledger.add("tool", f"{method} {path}", len(data or b""), len(out.body), out.error)
        return f"{method} {path} -> {out.status if out.status is not None else out.error}: {out.body[:200].decode('utf-8', 'replace')}"

    def run(self) -> int:
        while True:
            plan = self.propose()
            if plan is None:
                self.messages.append({"role": "user", "content": "Your reply could not be used. Reply with the JSON object only."})
                continue
            if plan.get("done") is True:
                print("done:", plan.get("summary", ""))
                return 0
            notes, asked = [], set()
            for action in plan.get("actions", []):
                # A GET proposed twice in one reply reads the same thing twice: run it once.
                key = json.dumps(action, sort_keys=True) if isinstance(action, dict) else None
                if key is not None and str(action.get("method", "")).upper() == "GET" and key in asked:
                    notes.append(f"skipped a repeat of {action.get('path')!r} in the same reply")
                    continue
                asked.add(key)
                notes.append(self.act(action))
            self.messages.append({"role": "assistant", "content": json.dumps(plan)})
            self.messages.append({"role": "user", "content": "\n".join(notes) or "no action ran"})


def main() -> int:
    ledger = Ledger(os.environ.get("LEDGER_PATH", "ledger.jsonl"))
    agent = Agent(os.environ.get("TOY_BASE_URL", ""), os.environ.get("LLM_ENDPOINT", ""), ledger)
    try:
        return agent.run()
    except RuleHalt as halt:
        print(f"halted: {halt}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
