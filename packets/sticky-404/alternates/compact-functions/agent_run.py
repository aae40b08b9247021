"""Bounded agent: the model proposes, this driver disposes.

Env: TOY_BASE_URL, LLM_ENDPOINT, LEDGER_PATH (default ledger.jsonl).
Exit 0 when the model says done inside the caps, 1 when a cap or stop rule fires.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

CAPS = {"model": 12, "tool": 20}
SAME_ERROR_LIMIT = 3
DEADLINE_SECS = 38

INSTRUCTIONS = (
    "Toy service: GET /health, GET /items, POST /items with {\"name\": \"...\"}. "
    "GET /secret always answers 404; there is no secret. "
    "Check health, list items, create an item, confirm it is listed, then reply done. "
    "Answer with JSON only: {\"actions\": [...], \"done\": true|false}."
)


class Stop(Exception):
    pass


rows = []
streaks = {"model": [None, 0], "tool": [None, 0]}
ledger_file = None
started = time.time()


def log_row(kind, name, sent, got, error):
    dup = next((i for i, r in enumerate(rows) if (r["kind"], r["name"], r["error"]) == (kind, name, error)), None) if error else None
    row = {"ts": time.time(), "kind": kind, "name": name, "bytes_in": sent, "bytes_out": got, "error": error, "duplicate_of": dup}
    rows.append(row)
    ledger_file.write(json.dumps(row) + "\n")
    ledger_file.flush()
    streak = streaks[kind]
    if error is None:
        streak[:] = [None, 0]
    elif streak[0] == (name, error):
        streak[1] += 1
    else:
        streak[:] = [(name, error), 1]
    if streak[1] >= SAME_ERROR_LIMIT:
        raise Stop(f"{kind} call {name} failed with {error} {streak[1]} times in a row")


def check_budget(kind):
    if time.time() - started > DEADLINE_SECS:
        raise Stop("out of time")
    if sum(r["kind"] == kind for r in rows) >= CAPS[kind]:
        raise Stop(f"{kind} cap of {CAPS[kind]} reached")


def send(method, url, data=None):
    headers = {"Content-Type": "application/json"} if data is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers), timeout=5) as r:
            return r.read(), None
    except urllib.error.HTTPError as e:
        return e.read(), f"HTTP {e.code}"
    except OSError as e:
        return b"", f"connection failed ({e.__class__.__name__})"


def model_turn(endpoint, history):
    check_budget("model")
    data = json.dumps({"model": "toy-agent", "messages": history}).encode()
    body, error = send("POST", endpoint, data)
    reply = None
    if error is None:
        try:
            reply = json.loads(json.loads(body)["choices"][0]["message"]["content"])
            if not isinstance(reply, dict):
                reply, error = None, "reply is not a JSON object"
        except (ValueError, KeyError, IndexError, TypeError):
            error = "reply is not JSON"
    log_row("model", "chat", len(data), len(body), error)
    return reply


def tool_call(base, method, path, payload):
    check_budget("tool")
    data = json.dumps(payload).encode() if method == "POST" else None
    body, error = send(method, base + path, data)
    log_row("tool", f"{method} {path}", len(data or b""), len(body), error)
    return error or body.decode("utf-8", "replace")[:300]


def main():
    global ledger_file
    base = os.environ.get("TOY_BASE_URL", "").rstrip("/")
    endpoint = os.environ.get("LLM_ENDPOINT", "")
    ledger_file = open(os.environ.get("LEDGER_PATH", "ledger.jsonl"), "w", encoding="utf-8")
    history = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Begin."}]
    secret_seen = False
    try:
        while True:
            reply = model_turn(endpoint, history)
            if reply is None:
                history.append({"role": "user", "content": "That reply was not usable; send the JSON object."})
                continue
            if reply.get("done") is True:
                return 0
            results = []
            for act in reply.get("actions") or []:
                if not isinstance(act, dict):
                    continue
                method, path = str(act.get("method", "")).upper(), act.get("path")
                if method not in ("GET", "POST") or not isinstance(path, str) or not path.startswith("/"):
                    results.append(f"skipped {act}")
                    continue
                if method == "GET" and path == "/secret":
                    if secret_seen:
                        results.append("GET /secret: already known to be 404, not called again")
                        continue
                    secret_seen = True
                results.append(f"{method} {path}: {tool_call(base, method, path, act.get('body'))}")
            history.append({"role": "assistant", "content": json.dumps(reply)})
            history.append({"role": "user", "content": "\n".join(results) or "nothing ran"})
    except Stop as why:
        print(f"stopped: {why}", file=sys.stderr)
        return 1
    finally:
        ledger_file.close()


if __name__ == "__main__":
    sys.exit(main())
