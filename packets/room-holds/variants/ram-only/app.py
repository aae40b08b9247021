"""Room holds: POST /holds with Idempotency-Key replay, persisted in SQLite.

Run with `python3 app.py` (127.0.0.1:8080). Everything lives in
./data/holds.db next to this file. See ASSUMPTIONS.md for every choice the
brief left open.
"""

import hashlib
import json
import sqlite3
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST, PORT = "127.0.0.1", 8080
DATA_DIR = Path(__file__).resolve().parent / "data"
DB_PATH = DATA_DIR / "holds.db"
MAX_BODY = 16 * 1024

# One writer at a time: the check for a key and the insert must not interleave.
WRITE_LOCK = threading.Lock()
SEEN = {}  # key -> (fingerprint, status, body)


class Invalid(Exception):
    pass


def connect():
    DATA_DIR.mkdir(exist_ok=True)
    conn = sqlite3.connect(DB_PATH)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS holds ("
        " hold_id TEXT PRIMARY KEY, room_id TEXT NOT NULL, guest_email TEXT NOT NULL,"
        " nights INTEGER NOT NULL, status TEXT NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS idempotency ("
        " key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,"
        " status INTEGER NOT NULL, body TEXT NOT NULL)"
    )
    conn.commit()
    return conn


def parse_hold(raw):
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Invalid("body is not JSON")
    if not isinstance(data, dict):
        raise Invalid("body is not a JSON object")
    room_id, email, nights = data.get("room_id"), data.get("guest_email"), data.get("nights")
    if not isinstance(room_id, str) or not room_id.strip():
        raise Invalid("room_id must be a non-empty string")
    if not isinstance(email, str) or "@" not in email:
        raise Invalid("guest_email must be a string with an @")
    if type(nights) is not int or nights < 1:
        raise Invalid("nights must be an integer >= 1")
    return {"room_id": room_id, "guest_email": email, "nights": nights}


def fingerprint(hold):
    canonical = json.dumps(hold, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def create_hold(key, hold):
    """Returns (status, body_text) for a valid hold request."""
    with WRITE_LOCK:
        conn = connect()
        try:
            if key is not None:
                row = SEEN.get(key)
                if row is not None:
                    if row[0] != fingerprint(hold):
                        return 409, json.dumps({"error": "idempotency_conflict"})
                    return row[1], row[2]
            hold_id = uuid.uuid4().hex
            body = json.dumps(
                {"hold_id": hold_id, "room_id": hold["room_id"], "nights": hold["nights"], "status": "held"}
            )
            conn.execute(
                "INSERT INTO holds VALUES (?, ?, ?, ?, 'held')",
                (hold_id, hold["room_id"], hold["guest_email"], hold["nights"]),
            )
            if key is not None:
                SEEN[key] = (fingerprint(hold), 201, body)
            conn.commit()
            return 201, body
        finally:
            conn.close()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def _reply(self, status, text):
        raw = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self):
        if self.path != "/holds":
            return self._reply(404, json.dumps({"error": "not_found"}))
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            return self._reply(400, json.dumps({"error": "invalid_body", "detail": "bad Content-Length"}))
        raw = self.rfile.read(length)
        key = self.headers.get("Idempotency-Key")
        if key is not None and (not key.strip() or len(key) > 255):
            return self._reply(400, json.dumps({"error": "invalid_idempotency_key"}))
        try:
            hold = parse_hold(raw)
        except Invalid as exc:
            return self._reply(400, json.dumps({"error": "invalid_body", "detail": str(exc)}))
        status, body = create_hold(key, hold)
        self._reply(status, body)


if __name__ == "__main__":
    connect().close()
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
