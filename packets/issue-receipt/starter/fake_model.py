"""A deterministic stand-in for the model: an OpenAI-style chat-completions
endpoint on 127.0.0.1, standard library only.

    python3 fake_model.py --port 8765
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 python3 agent.py fixtures/issue_142.json

It looks for the issue id in the request (`"id": 142` from the fixture's JSON,
or `issue #142`) and answers with the full new text of the source file in one
fenced ```python block. It does not read your workspace: it only knows the
answers it was started with. Usage is counted from bytes, the same way the
grader's replay counts it:

    prompt_tokens     = ceil(bytes of the request body / 4)
    completion_tokens = ceil(bytes of the answer text / 4)

Options: --answers FILE (a JSON object: issue id -> file text, merged over
the built-in ones), --log FILE (one JSON line per request it served),
--throttle (answer every request with HTTP 429).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWERS = {
    "142": '"""URL slugs for article titles."""\n\nimport re\n\n\n'
    "def slugify(title: str) -> str:\n"
    '    """Lower-case `title` and join its runs of letters and digits with single dashes."""\n'
    '    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")\n',
}
ISSUE_ID = re.compile(r'"id"\s*:\s*(\d+)|issue\s*#\s*(\d+)', re.I)


def issue_of(body: dict) -> str | None:
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            found = ISSUE_ID.search(content)
            if found:
                return found.group(1) or found.group(2)
    return None


def answer_for(body: dict, answers: dict) -> str:
    issue = issue_of(body)
    if issue is None or issue not in answers:
        return "I can't tell which issue this is. Include the issue JSON in your message."
    return f"Here is the whole file with the fix:\n\n```python\n{answers[issue]}```\n"


def make_handler(answers: dict, log_path: str | None, throttle: bool):
    lock = threading.Lock()
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, payload: dict) -> None:
            raw = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if status == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            row = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
            if not self.path.rstrip("/").endswith("/chat/completions"):
                status, payload, usage = 404, {"error": {"message": "not found"}}, (0, 0)
            elif throttle:
                status, payload, usage = 429, {"error": {"message": "rate limited"}}, (0, 0)
            else:
                try:
                    body = json.loads(raw)
                    assert isinstance(body, dict)
                except (ValueError, AssertionError):
                    status, payload, usage = 400, {"error": {"message": "body is not a JSON object"}}, (0, 0)
                else:
                    text = answer_for(body, answers)
                    usage = (math.ceil(len(raw) / 4), math.ceil(len(text.encode("utf-8")) / 4))
                    status = 200
                    payload = {
                        "id": "fake",
                        "object": "chat.completion",
                        "model": "fake-model",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                  "total_tokens": usage[0] + usage[1]},
                    }
            with lock:
                served[0] += 1
                row.update(n=served[0], status=status, prompt_tokens=usage[0],
                           completion_tokens=usage[1], total_tokens=usage[0] + usage[1])
                if log_path:
                    with open(log_path, "a", encoding="utf-8") as fh:
                        fh.write(json.dumps(row) + "\n")
            self._send(status, payload)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--answers")
    parser.add_argument("--log")
    parser.add_argument("--throttle", action="store_true")
    args = parser.parse_args(argv)
    answers = dict(ANSWERS)
    if args.answers:
        with open(args.answers, encoding="utf-8") as fh:
            answers.update({str(k): v for k, v in json.load(fh).items()})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(answers, args.log, args.throttle))
    print(f"fake model on http://127.0.0.1:{args.port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
