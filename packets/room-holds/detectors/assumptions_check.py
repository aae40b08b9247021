"""thin-assumptions: does ASSUMPTIONS.md name the choices the brief left open?

A first pass for the reviewer (the assumptions criterion is auto-override):
the file must say where holds and keys are stored, what a replay answers,
what a reused key with another body answers, what happens without the
header, and what invalid input gets. Missing file: see no-assumptions.
"""

import json
import re
from pathlib import Path

TOPICS = [
    ("the store", r"\b(disk|file|sqlite|json ?lines?|jsonl|database|db|on-disk|persist\w*)\b"),
    ("what a replay answers", r"\b(replay\w*|same response|same hold|same status|201)\b"),
    ("what a reused key with another body answers", r"\b(409|conflict\w*)\b"),
    ("what happens without the header",
     r"\b(no|without|missing|absent|omit\w*)\b[^.\n]{0,40}\b(key|header)\b|\bkey\b[^.\n]{0,30}\b(optional|required|mandatory)\b"),
    ("what invalid input gets", r"\b(400|422|invalid|reject\w*|validat\w*)\b"),
]


def main():
    path = Path("ASSUMPTIONS.md")
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    words = len(re.findall(r"\w+", text))
    missing = [name for name, rx in TOPICS if not re.search(rx, text, re.IGNORECASE)]
    if words < 40:
        missing.insert(0, "substance (%d words)" % words)
    if missing:
        print(json.dumps({"id": "thin-assumptions", "provenance": "claimed",
                          "evidence": "ASSUMPTIONS.md does not state: " + "; ".join(missing)}))


if __name__ == "__main__":
    main()
