"""Label every line of a log file ERROR, WARN or INFO with a chat model.

The model sits behind an OpenAI-style chat-completions endpoint whose full URL
is read from the LLM_ENDPOINT environment variable.

    LLM_ENDPOINT=http://127.0.0.1:8080/v1/chat/completions \
        python3 classify_logs.py app.log

prints one label per non-empty line of app.log, in order. Each request carries
one line (cut to MAX_LINE characters), never the file. A line that already
names its level is labelled locally; an identical line is asked about once.
An unreachable endpoint or an answer that is not a label stops the run with a
non-zero exit: there is no default label.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request

DEFAULT_ENDPOINT = "http://127.0.0.1:8080/v1/chat/completions"
LABELS = ("ERROR", "WARN", "INFO")
SYSTEM = "You sort log lines. Answer with one word only: ERROR, WARN or INFO."
MAX_LINE = 400
LEVEL_WORD = re.compile(r"\b(ERROR|WARN|INFO)\b")


class ModelError(RuntimeError):
    """The endpoint could not be reached or gave no usable label."""


def endpoint() -> str:
    return os.environ.get("LLM_ENDPOINT", DEFAULT_ENDPOINT)


def ask_model(line: str) -> str:
    """Ask for the label of one line; raise ModelError instead of guessing."""
    payload = {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": line[:MAX_LINE]},
        ],
        "temperature": 0,
        "max_tokens": 3,
    }
    request = urllib.request.Request(
        endpoint(),
        data=json.dumps(payload).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            body = json.loads(response.read().decode("utf-8"))
        content = body["choices"][0]["message"]["content"]
    except urllib.error.HTTPError as exc:
        raise ModelError(f"endpoint answered HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ModelError(f"endpoint unreachable: {exc}") from exc
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelError("endpoint answer is not a chat completion") from exc
    words = str(content).strip().split()
    label = words[0] if len(words) == 1 else ""
    if label not in LABELS:
        raise ModelError(f"model answered {str(content)[:40]!r}, not a label")
    return label


def classify_lines(lines: list[str], cache: dict[str, str] | None = None) -> list[str]:
    cache = {} if cache is None else cache
    labels = []
    for line in lines:
        key = line.strip()
        if key not in cache:
            named = LEVEL_WORD.search(key)
            cache[key] = named.group(1) if named else ask_model(key)
        labels.append(cache[key])
    return labels


def classify_file(path: str) -> list[str]:
    """One label per non-empty line of the file at `path`, in order."""
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    return classify_lines(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 classify_logs.py LOGFILE", file=sys.stderr)
        return 2
    try:
        labels = classify_file(args[0])
    except ModelError as exc:
        print(f"classify_logs: {exc}", file=sys.stderr)
        return 3
    for label in labels:
        print(label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
