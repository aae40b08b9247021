"""Room holds service: the skeleton you start from.

Start it with `python3 app.py`; it listens on 127.0.0.1:8080. Replace the
501 below with the real thing (see PROMPT.md).
"""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT = "127.0.0.1", 8080


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
            return self._reply(404, {"error": "not_found"})
        self._reply(501, {"error": "not_implemented"})


if __name__ == "__main__":
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
