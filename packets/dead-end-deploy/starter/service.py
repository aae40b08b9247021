"""The summarizer service (standard library only).

GET  /health     -> 200 {"ok": true}
POST /summarize  -> 200 {"summary": "..."}  one line from the model for {"text": "..."}

The model is an OpenAI-compatible endpoint:
    MODEL_BASE_URL   e.g. http://127.0.0.1:8000/v1  (POST {MODEL_BASE_URL}/chat/completions)
    MODEL_API_KEY    sent as a Bearer token (optional)
    MODEL_NAME       model name (optional, default "default")
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import json
import os
import urllib.request


def ask_model(prompt: str, timeout: float = 10.0) -> str:
    base = os.environ["MODEL_BASE_URL"].rstrip("/")
    body = json.dumps({
        "model": os.environ.get("MODEL_NAME", "default"),
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
    }).encode()
    request = urllib.request.Request(
        base + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


class Handler(BaseHTTPRequestHandler):
    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self._send(200, {"ok": True})
        self._send(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/summarize":
            return self._send(404, {"error": "not found"})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            text = json.loads(self.rfile.read(length) or b"{}")["text"]
        except (ValueError, KeyError, TypeError):
            return self._send(400, {"error": "body must be {\"text\": ...}"})
        try:
            summary = ask_model("Summarise in one line:\n" + str(text))
        except Exception as exc:  # the model is optional for this service
            return self._send(502, {"error": f"model unavailable: {exc.__class__.__name__}"})
        self._send(200, {"summary": summary.strip().splitlines()[0] if summary.strip() else ""})

    def log_message(self, *args):
        pass


def make_server(port: int = 8080) -> ThreadingHTTPServer:
    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


if __name__ == "__main__":
    make_server(int(os.environ.get("PORT", "8080"))).serve_forever()
