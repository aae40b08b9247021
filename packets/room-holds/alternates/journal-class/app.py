"""Room holds service: POST /holds on 127.0.0.1:8080, state in ./data/.

Every accepted hold is appended, with the Idempotency-Key (if any), the
request fingerprint and the exact response, to ./data/journal.jsonl and
fsync'd before the response leaves. At start the journal is read back, so
a restart forgets nothing.
"""

import hashlib
import json
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT = "127.0.0.1", 8080
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class BadRequest(Exception):
    pass


def parse_hold(raw):
    try:
        body = json.loads(raw or b"")
    except ValueError:
        raise BadRequest("body is not JSON")
    if not isinstance(body, dict):
        raise BadRequest("body is not an object")
    room, email, nights = body.get("room_id"), body.get("guest_email"), body.get("nights")
    if not isinstance(room, str) or not room:
        raise BadRequest("room_id must be a non-empty string")
    if not isinstance(email, str) or not email:
        raise BadRequest("guest_email must be a non-empty string")
    if isinstance(nights, bool) or not isinstance(nights, int) or nights < 1:
        raise BadRequest("nights must be an integer >= 1")
    return {"room_id": room, "guest_email": email, "nights": nights}


def fingerprint(hold):
    return hashlib.sha256(json.dumps(hold, sort_keys=True).encode()).hexdigest()


class Journal:
    def __init__(self, directory):
        self.path = os.path.join(directory, "journal.jsonl")
        self.directory = directory
        self.lock = threading.Lock()
        self.by_key = {}
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        entry = json.loads(line)
                        if entry.get("key"):
                            self.by_key[entry["key"]] = entry

    def place(self, key, hold):
        """(status, body) for a valid hold request."""
        fp = fingerprint(hold)
        with self.lock:
            if key is not None and key in self.by_key:
                entry = self.by_key[key]
                if entry["fingerprint"] != fp:
                    return 409, {"error": "idempotency_key_reused", "detail": "this key was used with a different body"}
                return entry["status"], entry["response"]
            response = {"hold_id": "h_" + uuid.uuid4().hex[:16], "room_id": hold["room_id"], "nights": hold["nights"], "status": "held"}
            entry = {"key": key, "fingerprint": fp, "hold": hold, "status": 201, "response": response}
            os.makedirs(self.directory, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            if key is not None:
                self.by_key[key] = entry
            return 201, response


JOURNAL = None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _reply(self, status, payload):
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self):
        if self.path != "/holds":
            return self._reply(404, {"error": "not_found"})
        key = self.headers.get("Idempotency-Key")
        if key is not None and not key.strip():
            return self._reply(400, {"error": "empty_idempotency_key"})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            hold = parse_hold(self.rfile.read(length))
        except BadRequest as exc:
            return self._reply(400, {"error": "invalid_request", "detail": str(exc)})
        status, body = JOURNAL.place(key, hold)
        self._reply(status, body)


if __name__ == "__main__":
    JOURNAL = Journal(DATA_DIR)
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
