"""Label every line of a log file ERROR, WARN or INFO with a chat model.

The model sits behind an OpenAI-style chat-completions endpoint whose full
URL is read from LLM_ENDPOINT:

    LLM_ENDPOINT=http://127.0.0.1:8080/v1/chat/completions \
        python3 classify_logs.py app.log

Design, briefly:

* The model sees a fixed, tiny window: the line being labelled plus, as
  context, the previous line, each cut to WINDOW_CHARS characters. The size
  of a request therefore never depends on the length of the file.
* Answers are memoised per run by the text of the line, so a line that
  appears many times costs one call.
* A line that already spells out its level (ERROR, WARN, INFO as a word)
  is labelled without a call.
* Anything that is not a clean answer -- connection refused, an HTTP error,
  a body that is not a chat completion, an answer that is not exactly one of
  the labels -- raises ClassificationError; the command line turns that
  into exit status 4 and prints no label at all.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field

VALID = ("ERROR", "WARN", "INFO")
WINDOW_CHARS = 240
EXPLICIT = re.compile(r"(?<![A-Za-z])(ERROR|WARN|INFO)(?![A-Za-z])")
SYSTEM_PROMPT = (
    "You label application log lines. The user message shows the previous "
    "line for context and the line to label. Reply with one word: ERROR, "
    "WARN or INFO."
)


class ClassificationError(Exception):
    """No trustworthy label could be obtained for a line."""


def _endpoint() -> str:
    return os.environ.get("LLM_ENDPOINT") or "http://127.0.0.1:8080/v1/chat/completions"


def _payload(previous: str, line: str) -> bytes:
    user = f"previous: {previous[:WINDOW_CHARS]}\nlabel this: {line[:WINDOW_CHARS]}"
    return json.dumps(
        {
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "max_tokens": 2,
        }
    ).encode("utf-8")


def _call(url: str, data: bytes) -> str:
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise ClassificationError(f"the endpoint answered HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ClassificationError(f"the endpoint is unreachable ({exc})") from exc
    try:
        return json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ClassificationError("the endpoint's answer is not a chat completion") from exc


def _as_label(answer: object) -> str:
    text = str(answer).strip()
    if text not in VALID:
        raise ClassificationError(f"the model answered {text[:40]!r}, which is not one of {', '.join(VALID)}")
    return text


@dataclass
class Run:
    """One run over one file: the endpoint and the answers memoised so far."""

    url: str
    memo: dict[str, str] = field(default_factory=dict)
    calls: int = 0

    def label(self, previous: str, line: str) -> str:
        key = line.strip()
        if key in self.memo:
            return self.memo[key]
        explicit = EXPLICIT.search(key)
        if explicit:
            result = explicit.group(1)
        else:
            self.calls += 1
            result = _as_label(_call(self.url, _payload(previous.strip(), key)))
        self.memo[key] = result
        return result


def classify_file(path: str) -> list[str]:
    """One label per non-empty line of the file at `path`, in order."""
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    run = Run(_endpoint())
    labels = []
    previous = ""
    for line in lines:
        labels.append(run.label(previous, line))
        previous = line
    return labels


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 classify_logs.py LOGFILE", file=sys.stderr)
        return 2
    try:
        labels = classify_file(args[0])
    except ClassificationError as exc:
        print(f"classify_logs.py: giving up: {exc}", file=sys.stderr)
        return 4
    sys.stdout.write("".join(f"{label}\n" for label in labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
