"""A bounded agent loop against the toy service (see PROMPT.md and STOP.md).

Reads TOY_BASE_URL, LLM_ENDPOINT and LEDGER_PATH (default ledger.jsonl) from
the environment. The model proposes HTTP actions; this driver decides which
ones run, writes one ledger row per model call or tool call, and stops.

Exit 0: the model said done and the run stopped inside every cap.
Exit 1: a stop rule halted the run.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any

# Hard limits. They live here, in code, not in the prompt.
MAX_MODEL_CALLS = 12
MAX_TOOL_CALLS = 20
MAX_IDENTICAL_ERRORS = 3          # the same kind, name and error, in a row, per kind
RUN_BUDGET_SECONDS = 38.0         # leaves room inside replay.sh's 45 s for start-up and teardown
CALL_TIMEOUT_SECONDS = 10.0       # per HTTP request, clipped to what is left of the run budget
DEAD_END_STATUSES = (404, 405)    # a route that answered this is never requested again

MODEL_ROW_NAME = "chat.completions"
ALLOWED_METHODS = ("GET", "POST")

SYSTEM_PROMPT = """You drive a toy HTTP service by proposing actions. Reply with ONE JSON object only:
{"actions": [{"method": "GET", "path": "/items"}, {"method": "POST", "path": "/items", "body": {"name": "..."}}], "done": false}
or, when the task is finished: {"actions": [], "done": true, "summary": "..."}.
Routes: GET /health, GET /items, POST /items with {"name": "<non-empty string>"}.
GET /secret is always 404: there is no secret, do not ask for it.
Task: check health, list items, create an item, confirm it is listed, then say done.
A driver runs your actions under hard caps and refuses dead ends."""


class Halt(Exception):
    """A stop rule fired; the run ends with exit status 1."""


@dataclass
class Config:
    toy_base_url: str
    llm_endpoint: str
    ledger_path: str
    model_name: str = "default"

    @classmethod
    def from_env(cls, env: dict[str, str]) -> "Config":
        missing = [name for name in ("TOY_BASE_URL", "LLM_ENDPOINT") if not env.get(name)]
        if missing:
            raise Halt("missing environment: " + ", ".join(missing))
        return cls(
            toy_base_url=env["TOY_BASE_URL"].rstrip("/"),
            llm_endpoint=env["LLM_ENDPOINT"],
            ledger_path=env.get("LEDGER_PATH") or "ledger.jsonl",
            model_name=env.get("LLM_MODEL") or "default",
        )


@dataclass
class LedgerRow:
    ts: float
    kind: str
    name: str
    bytes_in: int
    bytes_out: int
    error: str | None
    duplicate_of: int | None = None


class Ledger:
    """One JSON line per call, written as soon as the call ends."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rows: list[LedgerRow] = []
        self._first_seen: dict[tuple[str, str, str | None], int] = {}
        with open(self.path, "w", encoding="utf-8"):
            pass  # a run starts a fresh ledger

    def record(self, row: LedgerRow) -> LedgerRow:
        key = (row.kind, row.name, row.error)
        row.duplicate_of = self._first_seen.get(key)
        if row.duplicate_of is None:
            self._first_seen[key] = len(self.rows)
        self.rows.append(row)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(row)) + "\n")
            fh.flush()
        return row

    def count(self, kind: str) -> int:
        return sum(1 for row in self.rows if row.kind == kind)


class ErrorStreak:
    """Counts identical errors in a row for one kind of call."""

    def __init__(self) -> None:
        self.last: tuple[str, str] | None = None
        self.length = 0

    def update(self, name: str, error: str | None) -> int:
        if error is None:
            self.last, self.length = None, 0
        elif self.last == (name, error):
            self.length += 1
        else:
            self.last, self.length = (name, error), 1
        return self.length


@dataclass
class Action:
    method: str
    path: str
    body: Any = None
    has_body: bool = False

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def route_key(self) -> tuple[str, str]:
        """A normalised route, so /secret/, /secret?x=1 and //secret are one dead end."""
        path = self.path.split("#", 1)[0].split("?", 1)[0]
        while "//" in path:
            path = path.replace("//", "/")
        path = path.rstrip("/") or "/"
        return self.method, path.lower()

    @classmethod
    def parse(cls, raw: Any) -> "Action | None":
        if not isinstance(raw, dict):
            return None
        method, path = raw.get("method"), raw.get("path")
        if not isinstance(method, str) or not isinstance(path, str):
            return None
        method = method.strip().upper()
        if method not in ALLOWED_METHODS:
            return None
        printable_ascii = all(33 <= ord(c) <= 126 for c in path)
        if not path.startswith("/") or path.startswith("//") or not printable_ascii:
            return None
        return cls(method=method, path=path, body=raw.get("body"), has_body="body" in raw)


@dataclass
class Reply:
    actions: list[Any]
    done: bool
    summary: str = ""


@dataclass
class CallResult:
    status: int | None
    body: bytes
    error: str | None
    bytes_sent: int


class Clock:
    def __init__(self, budget: float) -> None:
        self.deadline = time.monotonic() + budget

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self) -> float:
        left = self.remaining()
        if left <= 0.5:
            raise Halt("wall-clock budget used up")
        return min(CALL_TIMEOUT_SECONDS, left)


def http_call(method: str, url: str, payload: bytes | None, timeout: float) -> CallResult:
    headers = {"Content-Type": "application/json"} if payload is not None else {}
    sent = len(payload or b"")
    try:
        request = urllib.request.Request(url, data=payload, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return CallResult(response.status, response.read(), None, sent)
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read()
        except Exception:
            body = b""
        return CallResult(exc.code, body, f"HTTP {exc.code}", sent)
    except (socket.timeout, TimeoutError):
        return CallResult(None, b"", "timeout", sent)
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return CallResult(None, b"", "timeout", sent)
        if isinstance(reason, ConnectionRefusedError):
            return CallResult(None, b"", "connection refused", sent)
        return CallResult(None, b"", f"unreachable: {type(reason).__name__}", sent)
    except (ConnectionError, OSError) as exc:
        return CallResult(None, b"", f"transport: {type(exc).__name__}", sent)
    except http.client.HTTPException as exc:
        return CallResult(None, b"", f"bad response: {type(exc).__name__}", sent)
    except ValueError:
        return CallResult(None, b"", "bad url", sent)


def parse_reply(raw: bytes) -> Reply:
    """Raises ValueError when the endpoint's answer is not a usable proposal."""
    doc = json.loads(raw)
    content = doc["choices"][0]["message"]["content"]
    if not isinstance(content, str):
        raise ValueError("content is not text")
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`")
        if text.lower().startswith("json"):
            text = text[4:]
    proposal = json.loads(text)
    if not isinstance(proposal, dict):
        raise ValueError("content is not a JSON object")
    actions = proposal.get("actions", [])
    if not isinstance(actions, list):
        raise ValueError("actions is not a list")
    summary = proposal.get("summary")
    return Reply(actions=actions, done=proposal.get("done") is True,
                 summary=summary if isinstance(summary, str) else "")


@dataclass
class Agent:
    config: Config
    ledger: Ledger
    clock: Clock
    streaks: dict[str, ErrorStreak] = field(default_factory=lambda: {"model": ErrorStreak(), "tool": ErrorStreak()})
    dead_ends: set[tuple[str, str]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def log(self, message: str) -> None:
        print(f"agent: {message}", file=sys.stderr)

    # -- the two kinds of call -------------------------------------------------
    def _finish_call(self, kind: str, name: str, started: float, result: CallResult) -> None:
        self.ledger.record(LedgerRow(ts=started, kind=kind, name=name, bytes_in=result.bytes_sent,
                                     bytes_out=len(result.body), error=result.error))
        streak = self.streaks[kind].update(name, result.error)
        if streak >= MAX_IDENTICAL_ERRORS:
            raise Halt(f"{streak} identical errors in a row: {kind} {name!r} -> {result.error}")

    def ask_model(self) -> Reply | None:
        if self.ledger.count("model") >= MAX_MODEL_CALLS:
            raise Halt(f"model-call cap reached ({MAX_MODEL_CALLS}) without done")
        timeout = self.clock.timeout()
        payload = json.dumps({
            "model": self.config.model_name,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": self._progress_report()}],
        }).encode()
        started = time.time()
        result = http_call("POST", self.config.llm_endpoint, payload, timeout)
        reply = None
        if result.error is None:
            try:
                reply = parse_reply(result.body)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                result.error = f"bad reply: {type(exc).__name__}"
        self._finish_call("model", MODEL_ROW_NAME, started, result)
        if result.error:
            self.notes.append(f"model call failed: {result.error}")
        return reply

    def run_action(self, action: Action) -> None:
        if action.route_key in self.dead_ends:
            self.notes.append(f"refused {action.name}: it already answered 404/405, not asking again")
            self.log(f"refused {action.name} (dead end)")
            return
        if self.ledger.count("tool") >= MAX_TOOL_CALLS:
            raise Halt(f"tool-call cap reached ({MAX_TOOL_CALLS})")
        timeout = self.clock.timeout()
        payload = None
        if action.method == "POST":
            payload = json.dumps(action.body).encode() if action.has_body else b""
        started = time.time()
        result = http_call(action.method, self.config.toy_base_url + action.path, payload, timeout)
        if result.status in DEAD_END_STATUSES:
            self.dead_ends.add(action.route_key)
        text = result.body.decode("utf-8", "replace")[:300]
        self.notes.append(f"{action.name} -> {result.status if result.status is not None else result.error} {text}")
        self._finish_call("tool", action.name, started, result)

    # -- the loop -----------------------------------------------------------------
    def _progress_report(self) -> str:
        if not self.notes:
            return "Nothing has run yet. Propose your first actions."
        recent = self.notes[-30:]
        return "Results so far (oldest first):\n" + "\n".join(recent) + "\nPropose the next actions, or say done."

    def run(self) -> int:
        while True:
            reply = self.ask_model()
            if reply is None:
                continue
            if reply.done:
                if reply.actions:
                    self.log("model said done; the actions in that same reply are not run")
                self.log(f"model said done: {reply.summary[:200]}")
                return 0
            if not reply.actions:
                self.notes.append("your last reply proposed no actions and was not done")
            for raw in reply.actions:
                action = Action.parse(raw)
                if action is None:
                    self.notes.append(f"refused malformed or disallowed action: {json.dumps(raw)[:200]}")
                    self.log(f"refused action {json.dumps(raw)[:200]}")
                    continue
                self.run_action(action)


def main() -> int:
    clock = Clock(RUN_BUDGET_SECONDS)
    try:
        config = Config.from_env(dict(os.environ))
    except Halt as stop:
        print(f"agent: stop: {stop}", file=sys.stderr)
        return 1
    ledger = Ledger(config.ledger_path)
    agent = Agent(config=config, ledger=ledger, clock=clock)
    try:
        code = agent.run()
    except Halt as stop:
        print(f"agent: stop: {stop}", file=sys.stderr)
        code = 1
    print(f"agent: exit {code}: {ledger.count('model')} model calls, {ledger.count('tool')} tool calls, "
          f"ledger {config.ledger_path}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
