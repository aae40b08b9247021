"""Intents intake: POST /v1/intents and GET /healthz on 127.0.0.1:8088.

The only state is ./data/intents.jsonl, one JSON object per line. It is read
on every POST, so a line already in the file counts and a restart changes
nothing.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

HOST, PORT = "127.0.0.1", 8088
DATA_DIR = Path(__file__).resolve().parent / "data"
LEDGER = DATA_DIR / "intents.jsonl"


class InvalidBody(ValueError):
    pass


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise InvalidBody("duplicate key")
    return dict(pairs)


def _no_constants(name):
    raise InvalidBody(f"{name} is not allowed")


@dataclass(frozen=True)
class Intent:
    id: str
    amount_cents: int
    currency: str

    @staticmethod
    def parse_body(raw: bytes) -> tuple[int, str]:
        """Return (amount_cents, currency) or raise InvalidBody."""
        try:
            data = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys,
                              parse_constant=_no_constants)
        except (UnicodeDecodeError, ValueError) as err:
            raise InvalidBody(str(err)) from None
        if not isinstance(data, dict) or set(data) != {"amount_cents", "currency"}:
            raise InvalidBody("expected exactly amount_cents and currency")
        amount, currency = data["amount_cents"], data["currency"]
        if type(amount) is not int or amount <= 0:
            raise InvalidBody("amount_cents must be a positive integer")
        if currency != "USD":
            raise InvalidBody('currency must be "USD"')
        return amount, currency

    @classmethod
    def from_line(cls, line: str) -> "Intent | None":
        try:
            obj = json.loads(line)
        except ValueError:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            return None
        return cls(obj["id"], obj.get("amount_cents"), obj.get("currency"))

    def same_request(self, amount: int, currency: str) -> bool:
        return type(self.amount_cents) is int and self.amount_cents == amount and self.currency == currency

    def as_json(self) -> dict:
        return {"id": self.id, "amount_cents": self.amount_cents, "currency": self.currency}


class Ledger:
    """Append-only JSONL file; the first line for an id is the one that counts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def find(self, key: str) -> Intent | None:
        if not self.path.exists():
            return None
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                intent = Intent.from_line(line)
                if intent is not None and intent.id == key:
                    return intent
        return None

    def append(self, intent: Intent) -> None:
        line = json.dumps(intent.as_json()) + "\n"
        with open(self.path, "a+b") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # a hand-written last line without a newline
                    line = "\n" + line
            fh.write(line.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def record(self, key: str, amount: int, currency: str) -> tuple[int, dict]:
        with self.lock:
            existing = self.find(key)
            if existing is None:
                intent = Intent(key, amount, currency)
                self.append(intent)
                return 201, intent.as_json()
            if existing.same_request(amount, currency):
                return 200, existing.as_json()
            return 409, {"error": "idempotency_conflict"}


class Handler(BaseHTTPRequestHandler):
    ledger: Ledger

    def _send(self, status: int, payload: dict) -> None:
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self):
        if urlsplit(self.path).path == "/healthz":
            return self._send(200, {"ok": True})
        self._send(404, {"error": "not_found"})

    def do_POST(self):
        if urlsplit(self.path).path != "/v1/intents":
            return self._send(404, {"error": "not_found"})
        body = self._body()
        key = self.headers.get("Idempotency-Key")
        if key is None or not key.strip():
            return self._send(400, {"error": "missing_idempotency_key"})
        try:
            amount, currency = Intent.parse_body(body)
        except InvalidBody:
            return self._send(400, {"error": "invalid_body"})
        self._send(*self.ledger.record(key, amount, currency))

    def log_message(self, fmt, *args):
        pass


def main() -> None:
    DATA_DIR.mkdir(exist_ok=True)
    Handler.ledger = Ledger(LEDGER)
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()


if __name__ == "__main__":
    main()
