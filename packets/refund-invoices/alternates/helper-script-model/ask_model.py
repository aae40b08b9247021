"""Send artifacts/prompt.txt to the metered model endpoint; save the raw reply to artifacts/model.md.

    MODEL_BASE_URL=... MODEL_API_KEY=... python3 ask_model.py

Used once, after `gate.py model`. Standard library only.
"""
import json
import os
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMPT = HERE / "artifacts" / "prompt.txt"
REPLY = HERE / "artifacts" / "model.md"


def main() -> int:
    base = os.environ.get("MODEL_BASE_URL")
    if not base:
        print("set MODEL_BASE_URL (the metered endpoint, ending in /v1)", file=sys.stderr)
        return 2
    if not (HERE / "artifacts" / "model_allowed.at").is_file():
        print("run `python3 gate.py model` first", file=sys.stderr)
        return 2
    body = json.dumps({"model": os.environ.get("MODEL_NAME", "default"),
                       "messages": [{"role": "user", "content": PROMPT.read_text(encoding="utf-8")}]}).encode()
    request = urllib.request.Request(
        base.rstrip("/") + "/chat/completions", data=body, method="POST",
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")})
    with urllib.request.urlopen(request, timeout=60) as response:
        reply = json.loads(response.read())["choices"][0]["message"]["content"]
    REPLY.write_text(reply, encoding="utf-8")
    print("saved", REPLY.relative_to(HERE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
