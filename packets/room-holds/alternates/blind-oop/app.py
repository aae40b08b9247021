"""Room holds service.

Start it with `python3 app.py`; it listens on 127.0.0.1:8080 and keeps its
state in ./data/holds.json. See ASSUMPTIONS.md for the decisions behind it.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST, PORT = "127.0.0.1", 8080
DATA_DIR = Path(__file__).resolve().parent / "data"
MAX_BODY = 64 * 1024
MAX_KEY = 255


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def body(self) -> dict:
        return {"error": self.code, "message": self.message}


@dataclass(frozen=True)
class HoldRequest:
    room_id: str
    guest_email: str
    nights: int

    FIELDS = ("room_id", "guest_email", "nights")

    @classmethod
    def parse(cls, raw: bytes) -> "HoldRequest":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ApiError(400, "invalid_json", "body must be a JSON object") from None
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_json", "body must be a JSON object")
        unknown = sorted(set(data) - set(cls.FIELDS))
        if unknown:
            raise ApiError(400, "validation_failed", f"unknown fields: {', '.join(unknown)}")
        missing = [f for f in cls.FIELDS if f not in data]
        if missing:
            raise ApiError(400, "validation_failed", f"missing fields: {', '.join(missing)}")
        room_id, email, nights = data["room_id"], data["guest_email"], data["nights"]
        if not isinstance(room_id, str) or not room_id.strip():
            raise ApiError(400, "validation_failed", "room_id must be a non-empty string")
        if not isinstance(email, str) or "@" not in email.strip()[1:-1]:
            raise ApiError(400, "validation_failed", "guest_email must be a string like name@example.com")
        if isinstance(nights, bool) or not isinstance(nights, int) or nights < 1:
            raise ApiError(400, "validation_failed", "nights must be an integer of at least 1")
        return cls(room_id, email, nights)

    def fingerprint(self) -> str:
        """What "the same body" means: the same three values, whatever the JSON formatting."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: dict


class HoldStore:
    """Holds and idempotency keys in one JSON file, rewritten atomically on every change."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "holds.json"
        self.lock = threading.Lock()
        self.holds: dict[str, dict] = {}
        self.keys: dict[str, dict] = {}
        self._load()

    def _load(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            state = json.loads(self.path.read_text(encoding="utf-8"))
            self.holds, self.keys = state["holds"], state["keys"]

    def _save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"holds": self.holds, "keys": self.keys}, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def create(self, request: HoldRequest, key: str | None) -> tuple[StoredResponse, bool]:
        """Return (response, replayed). One lock covers lookup, creation and the write."""
        with self.lock:
            if key is not None and key in self.keys:
                saved = self.keys[key]
                if saved["fingerprint"] != request.fingerprint():
                    raise ApiError(409, "idempotency_key_reused",
                                   "this Idempotency-Key was already used with a different body")
                return StoredResponse(saved["status"], saved["body"]), True
            hold_id = "hold_" + uuid.uuid4().hex
            body = {"hold_id": hold_id, "room_id": request.room_id, "nights": request.nights, "status": "held"}
            self.holds[hold_id] = {**asdict(request), "hold_id": hold_id, "status": "held"}
            if key is not None:
                self.keys[key] = {"fingerprint": request.fingerprint(), "status": 201, "body": body}
            self._save()
            return StoredResponse(201, body), False


class Handler(BaseHTTPRequestHandler):
    store: HoldStore  # set in main()

    def _reply(self, status, payload, extra_headers=()):
        raw = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in extra_headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def _idempotency_key(self) -> str | None:
        key = self.headers.get("Idempotency-Key")
        if key is None:
            return None
        key = key.strip()
        if not key or len(key) > MAX_KEY:
            raise ApiError(400, "invalid_idempotency_key",
                           f"Idempotency-Key must be 1 to {MAX_KEY} characters")
        return key

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise ApiError(400, "invalid_json", "bad Content-Length") from None
        if length > MAX_BODY:
            raise ApiError(413, "body_too_large", f"body is limited to {MAX_BODY} bytes")
        return self.rfile.read(max(length, 0))

    def do_POST(self):
        if self.path != "/holds":
            return self._reply(404, {"error": "not_found", "message": "no such route"})
        try:
            key = self._idempotency_key()
            request = HoldRequest.parse(self._read_body())
            response, replayed = self.store.create(request, key)
        except ApiError as err:
            if err.status == 413:
                self.close_connection = True
            return self._reply(err.status, err.body())
        headers = [("Idempotent-Replayed", "true")] if replayed else []
        self._reply(response.status, response.body, headers)

    def log_message(self, fmt, *args):
        pass


def main() -> None:
    Handler.store = HoldStore(DATA_DIR)
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()


if __name__ == "__main__":
    main()
