"""Intents intake on wsgiref (stdlib). State: ./data/intents.jsonl only."""

import json
import os
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
LEDGER = os.path.join(DATA, "intents.jsonl")
GUARD = threading.Lock()


def answer(start, code, obj):
    reasons = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 409: "Conflict"}
    raw = json.dumps(obj).encode()
    start(f"{code} {reasons[code]}", [("Content-Type", "application/json"), ("Content-Length", str(len(raw)))])
    return [raw]


def valid(raw):
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or sorted(body) != ["amount_cents", "currency"]:
        return None
    amount = body["amount_cents"]
    if type(amount) is not int or amount < 1 or body["currency"] != "USD":
        return None
    return body


def lookup(key):
    try:
        with open(LEDGER, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    if row.get("id") == key:
                        return row
    except FileNotFoundError:
        pass
    return None


def app(environ, start):
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
    if method == "GET" and path == "/healthz":
        return answer(start, 200, {"ok": True})
    if method != "POST" or path != "/v1/intents":
        return answer(start, 404, {"error": "not_found"})
    key = environ.get("HTTP_IDEMPOTENCY_KEY", "")
    if not key:
        return answer(start, 400, {"error": "missing_idempotency_key"})
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0
    body = valid(environ["wsgi.input"].read(size) if size > 0 else b"")
    if body is None:
        return answer(start, 400, {"error": "invalid_body"})
    intent = {"id": key, "amount_cents": body["amount_cents"], "currency": "USD"}
    with GUARD:
        old = lookup(key)
        if old is None:
            os.makedirs(DATA, exist_ok=True)
            with open(LEDGER, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(intent) + "\n")
            return answer(start, 201, intent)
    if old == intent:
        return answer(start, 200, old)
    return answer(start, 409, {"error": "idempotency_conflict"})


class Quiet(WSGIRequestHandler):
    def log_request(self, *args):
        pass


if __name__ == "__main__":
    os.makedirs(DATA, exist_ok=True)
    make_server("127.0.0.1", 8088, app, handler_class=Quiet).serve_forever()
