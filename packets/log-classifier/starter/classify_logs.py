"""Label every line of a log file ERROR, WARN or INFO with a chat model.

The model sits behind an OpenAI-style chat-completions endpoint whose full URL
is read from the LLM_ENDPOINT environment variable.

    LLM_ENDPOINT=http://127.0.0.1:8080/v1/chat/completions \
        python3 classify_logs.py app.log

prints one label per non-empty line of app.log, in order.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

ENDPOINT = os.environ.get("LLM_ENDPOINT", "http://127.0.0.1:8080/v1/chat/completions")
LABELS = ("ERROR", "WARN", "INFO")
SYSTEM = "You sort log lines. Answer with one word only: ERROR, WARN or INFO."


def ask_model(messages: list[dict]) -> str:
    """POST one chat request and return the assistant's text."""
    data = json.dumps({"messages": messages, "temperature": 0}).encode("utf-8")
    request = urllib.request.Request(
        ENDPOINT,
        data=data,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        body = json.loads(response.read().decode("utf-8"))
    return body["choices"][0]["message"]["content"].strip()


def classify_line(line: str, context: str) -> str:
    """Label one line; `context` is what the model gets to see around it."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Here is the log:\n" + context + "\n\nLabel this line:\n" + line},
    ]
    return ask_model(messages)


def classify_file(path: str) -> list[str]:
    """One label per non-empty line of the file at `path`, in order."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return [classify_line(line, text) for line in text.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 classify_logs.py LOGFILE", file=sys.stderr)
        return 2
    for label in classify_file(args[0]):
        print(label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
