"""Payment intents intake: POST /v1/intents and GET /healthz on 127.0.0.1:8088.

Standard library only. The only state is ./data/intents.jsonl: one JSON line
per accepted intent, read back at start-up and before every decision.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent
DATA_DIR = ROOT / "data"
LEDGER = DATA_DIR / "intents.jsonl"
FIELDS = {"amount_cents", "currency"}
MAX_BODY = 64 * 1024

LOCK = threading.Lock()  # one decision (read ledger, maybe append) at a time


def read_ledger():
    records = {}
    if LEDGER.exists():
        with LEDGER.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    row = json.loads(line)
                    records[row["id"]] = row
    return records


def parse_intent(raw):
    """Returns the validated intent, or None when the body is not exactly the schema."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(body, dict) or set(body) != FIELDS:
        return None
    try:
        amount = int(round(float(body["amount_cents"])))
    except (TypeError, ValueError):
        return None
    currency = str(body["currency"]).strip().upper()
    if amount <= 0 or currency != "USD":
        return None
    return {"amount_cents": amount, "currency": currency}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def send_json(self, status, payload):
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        if urlsplit(self.path).path == "/healthz":
            return self.send_json(200, {"ok": True})
        self.send_json(404, {"error": "not_found"})

    def do_POST(self):
        if urlsplit(self.path).path != "/v1/intents":
            return self.send_json(404, {"error": "not_found"})
        key = self.headers.get("Idempotency-Key")
        if not key:
            return self.send_json(400, {"error": "missing_idempotency_key"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            return self.send_json(400, {"error": "invalid_body"})
        intent = parse_intent(self.rfile.read(length))
        if intent is None:
            return self.send_json(400, {"error": "invalid_body"})
        record = {"id": key, **intent}
        with LOCK:
            prior = read_ledger().get(key)
            if prior is not None:
                if prior == record:
                    return self.send_json(200, prior)
                return self.send_json(409, {"error": "idempotency_conflict"})
            DATA_DIR.mkdir(exist_ok=True)
            with LEDGER.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
                fh.flush()
        self.send_json(201, record)


if __name__ == "__main__":
    DATA_DIR.mkdir(exist_ok=True)
    ThreadingHTTPServer(("127.0.0.1", 8088), Handler).serve_forever()
