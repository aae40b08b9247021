"""Payment-intents intake.

A single-process HTTP service on the Python standard library, bound to
127.0.0.1:8088:

    POST /v1/intents   Idempotency-Key header + {"amount_cents": int > 0, "currency": "USD"}
    GET  /healthz      {"ok": true}

The append-only file ./data/intents.jsonl is the only store. Every decision
re-reads it under a lock, so a line written by an earlier run (or by hand
while the service was down) counts exactly like one written now.
"""

from __future__ import annotations

import json
import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT = "127.0.0.1", 8088
BASE_DIR = os.path.dirname(os.path.abspath(__file__))


class InvalidBody(ValueError):
    """The request body is not exactly the intent schema."""


class Ledger:
    """An append-only JSON-lines file of accepted intents."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, "intents.jsonl")
        self.lock = threading.Lock()

    def ensure_directory(self) -> None:
        os.makedirs(self.directory, exist_ok=True)

    def find(self, key: str) -> dict | None:
        if not os.path.exists(self.path):
            return None
        found = None
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                entry = json.loads(line)
                if entry.get("id") == key:
                    found = entry
                    break
        return found

    def record(self, key: str, intent: dict) -> tuple[HTTPStatus, dict]:
        """Decide and, for a new key, append: (status, response body)."""
        wanted = {"id": key, "amount_cents": intent["amount_cents"], "currency": intent["currency"]}
        with self.lock:
            existing = self.find(key)
            if existing is None:
                self.ensure_directory()
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(wanted) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                return HTTPStatus.CREATED, wanted
        if existing == wanted:
            return HTTPStatus.OK, existing
        return HTTPStatus.CONFLICT, {"error": "idempotency_conflict"}


def validate(raw: bytes) -> dict:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidBody("not JSON") from exc
    if not isinstance(body, dict):
        raise InvalidBody("not an object")
    if set(body.keys()) != {"amount_cents", "currency"}:
        raise InvalidBody("wrong keys")
    amount = body["amount_cents"]
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise InvalidBody("amount_cents must be a positive integer")
    if body["currency"] != "USD":
        raise InvalidBody("currency must be USD")
    return body


LEDGER = Ledger(os.path.join(BASE_DIR, "data"))


class IntentsHandler(BaseHTTPRequestHandler):
    server_version = "intents/1"

    def log_message(self, format, *args):  # keep stderr quiet
        return

    def reply(self, status: HTTPStatus, body: dict) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self) -> str:
        return self.path.split("?", 1)[0]

    def do_GET(self) -> None:
        if self.route() == "/healthz":
            self.reply(HTTPStatus.OK, {"ok": True})
        else:
            self.reply(HTTPStatus.NOT_FOUND, {"error": "not_found"})

    def do_POST(self) -> None:
        if self.route() != "/v1/intents":
            self.reply(HTTPStatus.NOT_FOUND, {"error": "not_found"})
            return
        key = (self.headers.get("Idempotency-Key") or "").strip()
        if not key:
            self.reply(HTTPStatus.BAD_REQUEST, {"error": "missing_idempotency_key"})
            return
        length = self.headers.get("Content-Length", "0")
        raw = self.rfile.read(int(length)) if length.isdigit() else b""
        try:
            intent = validate(raw)
        except InvalidBody:
            self.reply(HTTPStatus.BAD_REQUEST, {"error": "invalid_body"})
            return
        status, body = LEDGER.record(key, intent)
        self.reply(status, body)


def main() -> None:
    LEDGER.ensure_directory()
    server = ThreadingHTTPServer((HOST, PORT), IntentsHandler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
