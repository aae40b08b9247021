"""Label each non-empty line of a log ERROR, WARN or INFO via a chat model.

    LLM_ENDPOINT=http://127.0.0.1:8080/v1/chat/completions python3 classify_logs.py app.log
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

LABELS = {"ERROR", "WARN", "INFO"}
INSTRUCTION = "Classify the log line. Reply with exactly one of: ERROR, WARN, INFO."
LINE_CAP = 300


class LabelFailure(Exception):
    pass


class LineLabeler:
    def __init__(self, url: str):
        self.url = url
        self.seen: dict[str, str] = {}

    def label(self, line: str) -> str:
        text = line.strip()
        if text in self.seen:
            return self.seen[text]
        for word in text.replace(":", " ").replace("[", " ").replace("]", " ").split():
            if word in LABELS:
                self.seen[text] = word
                return word
        self.seen[text] = self._ask(text[:LINE_CAP])
        return self.seen[text]

    def _ask(self, text: str) -> str:
        body = json.dumps({
            "messages": [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": text}],
            "temperature": 0,
        }).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=15) as resp:
                answer = json.loads(resp.read())["choices"][0]["message"]["content"]
        except Exception as exc:  # refused, HTTP error, malformed body: all the same to the caller
            raise LabelFailure(f"no label from {self.url}: {exc}") from exc
        answer = str(answer).strip()
        if answer not in LABELS:
            raise LabelFailure(f"model replied {answer[:30]!r}, which is not ERROR, WARN or INFO")
        return answer


def classify_file(path: str) -> list[str]:
    url = os.environ.get("LLM_ENDPOINT", "http://127.0.0.1:8080/v1/chat/completions")
    labeler = LineLabeler(url)
    with open(path, encoding="utf-8") as fh:
        return [labeler.label(l) for l in fh.read().splitlines() if l.strip()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 classify_logs.py LOGFILE", file=sys.stderr)
        return 2
    try:
        labels = classify_file(args[0])
    except LabelFailure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
