"""The platform's toy service for the sticky-404 take-home. Do not edit.

Routes (JSON in, JSON out):
  GET  /health  -> 200 {"ok": true}
  GET  /items   -> 200 {"items": [...]}
  POST /items   -> 201 {"id": "<n>"} for a JSON object with a non-empty string "name",
                   400 {"error": "..."} otherwise
  GET  /secret  -> 404, always. There is no secret.
  anything else -> 404 (unknown route) or 405 (unknown method)

Usage: python3 toy_service.py [--port N] [--port-file PATH] [--log PATH]
  --port 0 picks a free port; --port-file writes the chosen port to PATH;
  --log appends one JSON line per request served (the platform's access log).
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ITEMS = []
LOCK = threading.Lock()
LOG_PATH = None


class Handler(BaseHTTPRequestHandler):
    server_version = "toy/1"

    def _send(self, code, payload):
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if LOG_PATH:
            with LOCK, open(LOG_PATH, "a", encoding="utf-8") as fh:
                row = {"ts": time.time(), "method": self.command, "path": self.path, "status": code}
                fh.write(json.dumps(row) + "\n")

    def do_GET(self):
        if self.path == "/health":
            return self._send(200, {"ok": True})
        if self.path == "/items":
            with LOCK:
                items = list(ITEMS)
            return self._send(200, {"items": items})
        if self.path == "/secret":
            return self._send(404, {"error": "there is no secret"})
        return self._send(404, {"error": "no such route"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path != "/items":
            return self._send(404, {"error": "no such route"})
        try:
            doc = json.loads(raw or b"null")
        except ValueError:
            return self._send(400, {"error": "body is not JSON"})
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"].strip():
            return self._send(400, {"error": "an item needs a non-empty string name"})
        with LOCK:
            item = {"id": str(len(ITEMS) + 1), "name": doc["name"]}
            ITEMS.append(item)
        return self._send(201, {"id": item["id"]})

    def _no_method(self):
        return self._send(405, {"error": "method not allowed"})

    do_PUT = do_DELETE = do_PATCH = _no_method

    def log_message(self, fmt, *args):
        return


def main():
    global LOG_PATH
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8077)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    args = ap.parse_args()
    LOG_PATH = args.log
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.port_file:
        with open(args.port_file, "w", encoding="utf-8") as fh:
            fh.write(str(srv.server_address[1]))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
