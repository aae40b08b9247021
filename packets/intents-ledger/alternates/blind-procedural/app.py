"""Payment-intents intake on 127.0.0.1:8088; the store is ./data/intents.jsonl."""

import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

ADDRESS = ("127.0.0.1", 8088)
STORE_DIR = "data"
STORE = os.path.join(STORE_DIR, "intents.jsonl")


def reject_pairs(pairs):
    """json object hook: refuse an object that repeats a key."""
    seen = {}
    for name, value in pairs:
        if name in seen:
            raise ValueError("repeated key %r" % name)
        seen[name] = value
    return seen


def validate(raw):
    """Return the accepted (amount_cents, currency), or None if the body is not acceptable."""
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=reject_pairs)
    except ValueError:  # includes UnicodeDecodeError and JSONDecodeError
        return None
    if type(doc) is not dict or sorted(doc) != ["amount_cents", "currency"]:
        return None
    amount = doc["amount_cents"]
    if type(amount) is not int or amount < 1:
        return None
    if doc["currency"] != "USD":
        return None
    return amount, "USD"


def stored_intent(key):
    """The first ledger line whose id is `key`, as a dict, or None."""
    try:
        fh = open(STORE, "rb")
    except FileNotFoundError:
        return None
    with fh:
        for raw_line in fh:
            try:
                row = json.loads(raw_line.decode("utf-8"))
            except ValueError:
                continue  # not a ledger line; skip it
            if type(row) is dict and row.get("id") == key:
                return row
    return None


def append_intent(row):
    os.makedirs(STORE_DIR, exist_ok=True)
    data = (json.dumps(row) + "\n").encode("utf-8")
    with open(STORE, "ab") as fh:
        if fh.tell() > 0 and not ends_with_newline():
            data = b"\n" + data
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def ends_with_newline():
    with open(STORE, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def create_intent(key, raw_body):
    """Decide one POST /v1/intents. Returns (status, json_body)."""
    if key is None or key.strip() == "":
        return 400, {"error": "missing_idempotency_key"}
    accepted = validate(raw_body)
    if accepted is None:
        return 400, {"error": "invalid_body"}
    amount, currency = accepted
    previous = stored_intent(key)
    if previous is None:
        row = {"id": key, "amount_cents": amount, "currency": currency}
        append_intent(row)
        return 201, row
    if type(previous.get("amount_cents")) is int and previous["amount_cents"] == amount \
            and previous.get("currency") == currency:
        return 200, {"id": key, "amount_cents": amount, "currency": currency}
    return 409, {"error": "idempotency_conflict"}


class IntentsHandler(BaseHTTPRequestHandler):
    def respond(self, status, body):
        out = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def route(self):
        return self.path.split("?", 1)[0]

    def do_GET(self):
        if self.route() == "/healthz":
            self.respond(200, {"ok": True})
        else:
            self.respond(404, {"error": "not_found"})

    def do_POST(self):
        size = self.headers.get("Content-Length", "0")
        raw = self.rfile.read(int(size)) if size.isdigit() else b""
        if self.route() != "/v1/intents":
            self.respond(404, {"error": "not_found"})
        else:
            self.respond(*create_intent(self.headers.get("Idempotency-Key"), raw))


if __name__ == "__main__":
    os.makedirs(STORE_DIR, exist_ok=True)
    # One request at a time: the check-then-append on the ledger cannot race.
    HTTPServer(ADDRESS, IntentsHandler).serve_forever()
