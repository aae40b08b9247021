"""Room holds service.

Start it with `python3 app.py` from the workspace folder; it listens on
127.0.0.1:8080 and appends everything it stores to ./data/holds.jsonl.
Decisions are written down in ASSUMPTIONS.md.
"""

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT = "127.0.0.1", 8080
DATA_DIR = "data"
JOURNAL = os.path.join(DATA_DIR, "holds.jsonl")
BODY_LIMIT = 16 * 1024
KEY_LIMIT = 200

# In-memory view of the journal, rebuilt at start-up. Guarded by LOCK.
HOLDS = {}      # hold_id -> journal entry
BY_KEY = {}     # idempotency key -> journal entry
LOCK = threading.Lock()


def problem(status, code, message):
    return status, {"error": {"code": code, "message": message}}


def load_journal():
    """Read ./data/holds.jsonl into HOLDS and BY_KEY; drop a torn last line."""
    os.makedirs(DATA_DIR, exist_ok=True)
    if not os.path.exists(JOURNAL):
        return
    with open(JOURNAL, "rb") as fh:
        raw = fh.read()
    complete = raw[: raw.rfind(b"\n") + 1]
    if len(complete) != len(raw):
        # A crash during the last append: that hold was never acknowledged.
        with open(JOURNAL, "r+b") as fh:
            fh.truncate(len(complete))
    for line in complete.splitlines():
        if line.strip():
            remember(json.loads(line))


def remember(entry):
    HOLDS[entry["hold_id"]] = entry
    if entry.get("idempotency_key") is not None:
        BY_KEY[entry["idempotency_key"]] = entry


def append_entry(entry):
    line = json.dumps(entry, sort_keys=True) + "\n"
    with open(JOURNAL, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def parse_hold(raw):
    """Return (fields, None) or (None, (status, error_body))."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return None, problem(400, "malformed_json", "the body is not valid JSON")
    if not isinstance(body, dict):
        return None, problem(400, "invalid_request", "the body must be a JSON object")
    room_id = body.get("room_id")
    email = body.get("guest_email")
    nights = body.get("nights")
    if not isinstance(room_id, str) or room_id.strip() == "":
        return None, problem(400, "invalid_request", "room_id is required and must be a non-empty string")
    if not isinstance(email, str) or email.strip() == "":
        return None, problem(400, "invalid_request", "guest_email is required and must be a non-empty string")
    if type(nights) is not int or nights < 1:
        return None, problem(400, "invalid_request", "nights is required and must be an integer >= 1")
    return {"room_id": room_id, "guest_email": email, "nights": nights}, None


def fingerprint(fields):
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def public_view(entry):
    return {"hold_id": entry["hold_id"], "room_id": entry["room_id"],
            "nights": entry["nights"], "status": entry["status"]}


def place_hold(fields, key):
    """Create a hold, or replay/refuse it for a known key. Returns (status, body)."""
    digest = fingerprint(fields)
    with LOCK:
        if key is not None and key in BY_KEY:
            earlier = BY_KEY[key]
            if earlier["request_sha256"] != digest:
                return problem(409, "idempotency_conflict",
                               "Idempotency-Key already used for a different request body")
            return 201, public_view(earlier)
        entry = dict(fields, hold_id="h-%06d" % (len(HOLDS) + 1), status="held",
                     idempotency_key=key, request_sha256=digest)
        append_entry(entry)  # on disk before anyone hears about it
        remember(entry)
        return 201, public_view(entry)


def read_key(headers):
    """Return (key or None, error or None)."""
    key = headers.get("Idempotency-Key")
    if key is None:
        return None, None
    if key.strip() == "" or len(key) > KEY_LIMIT:
        return None, problem(400, "invalid_idempotency_key",
                             "Idempotency-Key must be non-empty and at most %d characters" % KEY_LIMIT)
    return key, None


class Handler(BaseHTTPRequestHandler):
    def _reply(self, status, payload):
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self):
        if self.path != "/holds":
            return self._reply(*problem(404, "not_found", "only POST /holds exists"))
        key, err = read_key(self.headers)
        if err:
            return self._reply(*err)
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            return self._reply(*problem(411, "length_required", "send a Content-Length header"))
        if int(length) > BODY_LIMIT:
            self.close_connection = True
            return self._reply(*problem(413, "body_too_large", "the body is limited to %d bytes" % BODY_LIMIT))
        fields, err = parse_hold(self.rfile.read(int(length)))
        if err:
            return self._reply(*err)
        self._reply(*place_hold(fields, key))

    def log_message(self, fmt, *args):
        pass


if __name__ == "__main__":
    load_journal()
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
