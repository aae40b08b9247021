"""A local stand-in for the metered model endpoint, for rehearsal. Do not edit.

It speaks the OpenAI chat-completions format on POST /v1/chat/completions and
answers with a scripted sequence of replies, one per call, whatever the prompt.
Each reply's content is a JSON object (as text):

  {"actions": [{"method": "GET", "path": "/items"},
               {"method": "POST", "path": "/items", "body": {"name": "..."}}],
   "done": false}

and, at the end of the script (and for every call after it):

  {"actions": [], "done": true, "summary": "..."}

A model is a proposer, not a boss: it may propose the same dead end twice.

Usage: python3 fake_model.py [--port N] [--port-file PATH] [--script FILE.json]
  --script replaces the built-in script with a JSON list of reply objects.
"""

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_SCRIPT = [
    {"actions": [{"method": "GET", "path": "/health"}, {"method": "GET", "path": "/items"}], "done": False},
    {"actions": [{"method": "POST", "path": "/items", "body": {"name": "buy milk"}}], "done": False},
    {"actions": [{"method": "GET", "path": "/secret"}, {"method": "GET", "path": "/items"}], "done": False},
    {"actions": [{"method": "GET", "path": "/secret"}], "done": False, "note": "the secret must be there, try again"},
    {"actions": [], "done": True, "summary": "health ok, one item created, /secret is a documented 404"},
]
DONE = {"actions": [], "done": True, "summary": "nothing left to do"}


class State:
    script = DEFAULT_SCRIPT
    calls = 0
    lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": "unknown path"}})
        try:
            json.loads(raw)
        except ValueError:
            return self._send(400, {"error": {"message": "body is not JSON"}})
        with State.lock:
            n = State.calls
            State.calls += 1
        reply = State.script[n] if n < len(State.script) else DONE
        content = json.dumps(reply)
        return self._send(200, {
            "id": "fake-%d" % n,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": len(raw) // 4 + len(content) // 4},
        })

    def _send(self, code, payload):
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8078)
    ap.add_argument("--port-file")
    ap.add_argument("--script")
    args = ap.parse_args()
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            State.script = json.load(fh)
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
