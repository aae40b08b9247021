"""Room holds. python3 app.py -> 127.0.0.1:8080. State: ./data/state.json."""

import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT = "127.0.0.1", 8080
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
STATE_FILE = os.path.join(DATA, "state.json")
LOCK = threading.Lock()


def load_state():
    try:
        with open(STATE_FILE, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {"holds": {}, "keys": {}}


def save_state(state):
    os.makedirs(DATA, exist_ok=True)
    tmp = STATE_FILE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, STATE_FILE)


def validate(body):
    if not isinstance(body, dict):
        return "expected a JSON object"
    if not isinstance(body.get("room_id"), str) or not body["room_id"].strip():
        return "room_id: non-empty string required"
    if not isinstance(body.get("guest_email"), str) or "@" not in body["guest_email"]:
        return "guest_email: an email address required"
    n = body.get("nights")
    if type(n) is not int or n < 1:
        return "nights: integer >= 1 required"
    return None


def create_hold(body, key):
    request = [body["room_id"], body["guest_email"], body["nights"]]
    with LOCK:
        state = load_state()
        if key is not None and key in state["keys"]:
            seen = state["keys"][key]
            if seen["request"] != request:
                return 409, {"error": "conflict", "message": "Idempotency-Key already used with a different request"}
            return seen["code"], seen["response"]
        hold_id = secrets.token_hex(8)
        response = {"hold_id": hold_id, "room_id": body["room_id"], "nights": body["nights"], "status": "held"}
        state["holds"][hold_id] = {"room_id": body["room_id"], "guest_email": body["guest_email"], "nights": body["nights"]}
        if key is not None:
            state["keys"][key] = {"request": request, "code": 201, "response": response}
        save_state(state)
        return 201, response


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
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            return self._reply(400, {"error": "bad_json"})
        problem = validate(body)
        if problem:
            return self._reply(400, {"error": "validation", "message": problem})
        self._reply(*create_hold(body, self.headers.get("Idempotency-Key") or None))


if __name__ == "__main__":
    os.makedirs(DATA, exist_ok=True)
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
