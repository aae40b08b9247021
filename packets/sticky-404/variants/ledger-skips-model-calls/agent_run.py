"""Bounded agent for the sticky-404 take-home.

The model proposes HTTP actions against the toy service; this driver decides
whether they run. Every model call and every tool call is one ledger row,
written before the next call is made. The caps live here, in code:

  12 model calls, 20 tool calls, 40 s of wall clock (replay.sh allows 45),
  3 identical errors in a row (same kind, same call, same error) -> halt,
  GET /secret is a documented 404: called at most once, never retried.

Exit 0: the model said done inside every cap. Exit 1: a stop rule halted the run.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

MAX_MODEL_CALLS = 12
MAX_TOOL_CALLS = 20
MAX_IDENTICAL_ERRORS = 3
WALL_SECS = 40.0
REQUEST_TIMEOUT = 5.0
DOCUMENTED_404 = ("GET", "/secret")
ALLOWED_METHODS = ("GET", "POST")

SYSTEM = (
    "You drive a toy HTTP service: GET /health, GET /items, POST /items {\"name\": str}, "
    "GET /secret is a documented 404 (there is no secret). Reply with one JSON object: "
    "{\"actions\": [{\"method\": ..., \"path\": ..., \"body\": ...}], \"done\": bool}. "
    "Goal: check health, list items, create one item, confirm it is listed, then say done."
)


class Halt(Exception):
    """A stop rule fired; the run ends with exit 1."""


class Ledger:
    def __init__(self, path: str, deadline: float) -> None:
        self.path = path
        self.deadline = deadline
        self.rows: list[dict] = []
        self.streak: dict[str, tuple[tuple[str, str] | None, int]] = {"model": (None, 0), "tool": (None, 0)}
        with open(self.path, "w", encoding="utf-8"):
            pass

    def may_call(self, kind: str) -> None:
        """Refuse a call before it is made when a cap would be crossed."""
        if time.monotonic() > self.deadline:
            raise Halt("wall clock spent")
        used = sum(1 for r in self.rows if r["kind"] == kind)
        cap = MAX_MODEL_CALLS if kind == "model" else MAX_TOOL_CALLS
        if used >= cap:
            raise Halt(f"{kind} call budget spent ({cap})")

    def record(self, kind: str, name: str, bytes_in: int, bytes_out: int, error: str | None) -> dict:
        duplicate_of = None
        if error is not None:
            for i, prev in enumerate(self.rows):
                if prev["kind"] == kind and prev["name"] == name and prev["error"] == error:
                    duplicate_of = i
                    break
        row = {"ts": round(time.time(), 3), "kind": kind, "name": name, "bytes_in": bytes_in,
               "bytes_out": bytes_out, "error": error, "duplicate_of": duplicate_of}
        self.rows.append(row)
        if kind == "tool":  # model chatter is not an action
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        last, count = self.streak[kind]
        if error is None:
            self.streak[kind] = (None, 0)
        else:
            key = (name, error)
            count = count + 1 if key == last else 1
            self.streak[kind] = (key, count)
            if count >= MAX_IDENTICAL_ERRORS:
                raise Halt(f"{count} identical errors in a row: {name} -> {error}")
        return row


def http(method: str, url: str, payload: bytes | None) -> tuple[int | None, bytes, str | None]:
    """One HTTP request. Returns (status, body, error); error is None on a 2xx."""
    req = urllib.request.Request(url, data=payload, method=method,
                                 headers={"Content-Type": "application/json"} if payload is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT) as resp:
            return resp.status, resp.read(), None
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return exc.code, body, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, b"", f"unreachable: {type(reason).__name__}"


def ask_model(ledger: Ledger, endpoint: str, messages: list[dict]) -> dict | None:
    ledger.may_call("model")
    payload = json.dumps({"model": "any", "temperature": 0, "messages": messages}).encode()
    status, body, error = http("POST", endpoint, payload)
    plan = None
    if error is None:
        try:
            content = json.loads(body)["choices"][0]["message"]["content"]
            plan = json.loads(content)
            if not isinstance(plan, dict) or not isinstance(plan.get("actions", []), list):
                raise ValueError("not an action object")
        except (ValueError, KeyError, IndexError, TypeError):
            plan, error = None, "unusable reply"
    ledger.record("model", "chat.completions", len(payload), len(body), error)
    return plan


def run_tool(ledger: Ledger, base: str, method: str, path: str, body) -> str:
    ledger.may_call("tool")
    payload = json.dumps(body).encode() if method == "POST" else None
    status, answer, error = http(method, base.rstrip("/") + path, payload)
    ledger.record("tool", f"{method} {path}", len(payload or b""), len(answer), error)
    return f"{method} {path} -> {status if status is not None else error}: {answer[:200].decode('utf-8', 'replace')}"


def main() -> int:
    base = os.environ.get("TOY_BASE_URL", "http://127.0.0.1:8077")
    endpoint = os.environ.get("LLM_ENDPOINT", "http://127.0.0.1:8078/v1/chat/completions")
    ledger = Ledger(os.environ.get("LEDGER_PATH", "ledger.jsonl"), time.monotonic() + WALL_SECS)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Start."}]
    asked_secret = False
    try:
        while True:
            plan = ask_model(ledger, endpoint, messages)
            if plan is None:
                messages.append({"role": "user", "content": "Your last reply was unusable or failed. Reply with the JSON object only."})
                continue
            if plan.get("done") is True:
                print(f"done: {plan.get('summary', '')}".strip())
                return 0
            observations = []
            for action in plan.get("actions", []):
                method = str(action.get("method", "")).upper() if isinstance(action, dict) else ""
                path = action.get("path") if isinstance(action, dict) else None
                if method not in ALLOWED_METHODS or not isinstance(path, str) or not path.startswith("/"):
                    observations.append(f"refused {action!r}: not a toy-service action")
                    continue
                if (method, path) == DOCUMENTED_404:
                    if asked_secret:
                        observations.append("GET /secret is a documented 404, already recorded once: not retried")
                        continue
                    asked_secret = True
                observations.append(run_tool(ledger, base, method, path, action.get("body")))
            messages.append({"role": "assistant", "content": json.dumps(plan)})
            messages.append({"role": "user", "content": "\n".join(observations) or "no action was run"})
    except Halt as stop:
        print(f"halted: {stop}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
