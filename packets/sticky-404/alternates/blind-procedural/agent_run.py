"""Bounded agent driver for the sticky-404 take-home (see PROMPT.md, STOP.md).

Environment: TOY_BASE_URL (toy service), LLM_ENDPOINT (full chat-completions
URL), LEDGER_PATH (default ledger.jsonl), LLM_MODEL (optional model name).

Exit 0: the model said done and the run stopped inside every cap.
Exit 1: a stop rule halted the run.
"""

import http.client
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

MODEL_CAP = 12
TOOL_CAP = 20
SAME_ERROR_LIMIT = 3
DRIVER_SECONDS = 36.0
REQUEST_SECONDS = 8.0
MIN_SECONDS_FOR_A_CALL = 0.5

LLM_ROW = "llm"
RUNNABLE = {"GET", "POST"}

INSTRUCTIONS = (
    "You propose HTTP actions against a toy service; a driver decides what runs.\n"
    "Answer with a single JSON object and nothing else, either\n"
    '  {"actions": [{"method": "GET", "path": "/health"}], "done": false}\n'
    "or, once the task is finished,\n"
    '  {"actions": [], "done": true, "summary": "<one line>"}\n'
    'Routes: GET /health, GET /items, POST /items with body {"name": "<non-empty string>"}.\n'
    "GET /secret always answers 404. There is no secret; do not ask for it or invent one.\n"
    "Task: check health, list items, create one item, list items again to confirm it is there, then say done."
)


class StopRun(Exception):
    pass


# ---------------------------------------------------------------- settings

def read_settings(environ):
    toy = environ.get("TOY_BASE_URL", "").strip()
    llm = environ.get("LLM_ENDPOINT", "").strip()
    if not toy or not llm:
        raise StopRun("TOY_BASE_URL and LLM_ENDPOINT must both be set")
    return {
        "toy": toy.rstrip("/"),
        "llm": llm,
        "ledger": environ.get("LEDGER_PATH") or "ledger.jsonl",
        "model": environ.get("LLM_MODEL") or "default",
    }


def new_run(settings):
    open(settings["ledger"], "w", encoding="utf-8").close()
    return {
        "settings": settings,
        "deadline": time.monotonic() + DRIVER_SECONDS,
        "rows": [],
        "last_error": {"model": None, "tool": None},   # (name, error) of the previous call of that kind
        "error_run": {"model": 0, "tool": 0},
        "blocked": set(),
        "messages": [{"role": "system", "content": INSTRUCTIONS},
                     {"role": "user", "content": "Begin."}],
    }


# ---------------------------------------------------------------- transport

def request_timeout(run):
    left = run["deadline"] - time.monotonic()
    if left < MIN_SECONDS_FOR_A_CALL:
        raise StopRun("out of wall-clock time (%.0f s budget)" % DRIVER_SECONDS)
    return min(REQUEST_SECONDS, left)


def send(method, url, body, timeout):
    """One HTTP request. Returns (status or None, response bytes, error or None)."""
    headers = {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        req = urllib.request.Request(url, data=body, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), None
    except urllib.error.HTTPError as err:
        try:
            data = err.read()
        except Exception:
            data = b""
        return err.code, data, "HTTP %d" % err.code
    except urllib.error.URLError as err:
        why = err.reason
        if isinstance(why, (socket.timeout, TimeoutError)):
            return None, b"", "timed out"
        if isinstance(why, ConnectionRefusedError):
            return None, b"", "refused"
        return None, b"", "no route: %s" % type(why).__name__
    except (socket.timeout, TimeoutError):
        return None, b"", "timed out"
    except (OSError, http.client.HTTPException) as err:
        return None, b"", "broken: %s" % type(err).__name__
    except ValueError:
        return None, b"", "bad url"


# ---------------------------------------------------------------- ledger and stop rules

def write_row(run, kind, name, started, sent, received, error):
    rows = run["rows"]
    first = None
    for index, old in enumerate(rows):
        if old["kind"] == kind and old["name"] == name and old["error"] == error:
            first = index
            break
    row = {"ts": started, "kind": kind, "name": name, "bytes_in": sent,
           "bytes_out": received, "error": error, "duplicate_of": first}
    rows.append(row)
    with open(run["settings"]["ledger"], "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def check_error_run(run, kind, name, error):
    if error is None:
        run["last_error"][kind] = None
        run["error_run"][kind] = 0
        return
    if run["last_error"][kind] == (name, error):
        run["error_run"][kind] += 1
    else:
        run["last_error"][kind] = (name, error)
        run["error_run"][kind] = 1
    if run["error_run"][kind] >= SAME_ERROR_LIMIT:
        raise StopRun("%s %s failed with %r %d times in a row" % (kind, name, error, SAME_ERROR_LIMIT))


def calls_so_far(run, kind):
    return len([row for row in run["rows"] if row["kind"] == kind])


# ---------------------------------------------------------------- the model

def decode_proposal(raw):
    """The proposal object inside a chat-completions answer, or ValueError."""
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as err:
        raise ValueError("no choices[0].message.content") from err
    text = str(content).strip()
    if text.startswith("```"):
        text = text.strip("`").strip()
        if text[:4].lower() == "json":
            text = text[4:]
    proposal = json.loads(text)
    if not isinstance(proposal, dict) or not isinstance(proposal.get("actions", []), list):
        raise ValueError("not a proposal object")
    return proposal


def ask_llm(run):
    """One model call. Returns the proposal dict, or None when the call failed."""
    if calls_so_far(run, "model") >= MODEL_CAP:
        raise StopRun("%d model calls used and the model never said done" % MODEL_CAP)
    timeout = request_timeout(run)
    cfg = run["settings"]
    payload = json.dumps({"model": cfg["model"], "messages": run["messages"]}).encode()
    started = time.time()
    status, data, error = send("POST", cfg["llm"], payload, timeout)
    proposal = None
    if error is None:
        try:
            proposal = decode_proposal(data)
        except ValueError:
            error = "unparseable reply"
    write_row(run, "model", LLM_ROW, started, len(payload), len(data), error)
    check_error_run(run, "model", LLM_ROW, error)
    if proposal is not None:
        run["messages"].append({"role": "assistant", "content": json.dumps(proposal)})
    return proposal


# ---------------------------------------------------------------- the tools

def route_of(path):
    bare = path.split("?")[0].split("#")[0]
    parts = [p for p in bare.split("/") if p]
    return "/" + "/".join(parts).lower()


def vet(action):
    """(method, path, body_bytes) for an action we are willing to run, or a reason string."""
    if not isinstance(action, dict):
        return "not an action object"
    method = str(action.get("method", "")).upper()
    path = action.get("path")
    if method not in RUNNABLE:
        return "method %r is not run" % action.get("method")
    if (not isinstance(path, str) or not path.startswith("/") or path.startswith("//")
            or not all("!" <= ch <= "~" for ch in path)):
        return "path %r is not a plain path on the toy service" % path
    body = None
    if method == "POST":
        body = json.dumps(action["body"]).encode() if "body" in action else b""
    return method, path, body


def use_tool(run, method, path, body):
    """One request to the toy service. Returns a line for the next prompt."""
    label = "%s %s" % (method, path)
    if (method, route_of(path)) in run["blocked"]:
        return "%s: not sent, it already returned 404 in this run" % label
    if calls_so_far(run, "tool") >= TOOL_CAP:
        raise StopRun("%d tool calls used" % TOOL_CAP)
    timeout = request_timeout(run)
    started = time.time()
    status, data, error = send(method, run["settings"]["toy"] + path, body, timeout)
    if status in (404, 405):
        run["blocked"].add((method, route_of(path)))
    write_row(run, "tool", label, started, len(body or b""), len(data), error)
    check_error_run(run, "tool", label, error)
    return "%s -> %s %s" % (label, status if status is not None else error, data[:300].decode("utf-8", "replace"))


# ---------------------------------------------------------------- loop

def drive(run):
    while True:
        proposal = ask_llm(run)
        if proposal is None:
            continue
        if proposal.get("done") is True:
            print("done: %s" % str(proposal.get("summary", ""))[:200], file=sys.stderr)
            return 0
        results = []
        for action in proposal.get("actions", []):
            vetted = vet(action)
            if isinstance(vetted, str):
                results.append("refused: " + vetted)
                continue
            results.append(use_tool(run, *vetted))
        for line in results:
            print(line, file=sys.stderr)
        run["messages"].append({"role": "user", "content": "\n".join(results) or "No actions ran. Propose actions or say done."})


def main():
    try:
        run = new_run(read_settings(os.environ))
    except (StopRun, OSError) as why:
        print("halt: %s" % why, file=sys.stderr)
        return 1
    try:
        code = drive(run)
    except StopRun as why:
        print("halt: %s" % why, file=sys.stderr)
        code = 1
    print("exit %d after %d model and %d tool calls" % (code, calls_so_far(run, "model"), calls_so_far(run, "tool")),
          file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
