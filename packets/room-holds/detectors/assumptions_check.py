"""thin-assumptions: is ASSUMPTIONS.md a real account of the open choices?

Whether a file states the choices the brief left open (the store, what a
replay answers, what a reused key with another body answers, what happens
without the header, what invalid input gets) is for the reviewer to judge:
people say these things in their own words ("the key wins and the first
response comes back" is an answer about a reused key). So the finding is kept
to what a machine can tell without guessing at wording:

  * the file has fewer than 40 words (a line or two), or
  * it touches none of the five topics, even in a broad vocabulary.

For the reviewer (the assumptions criterion is auto-override), the topics a
narrow keyword pass did not see are printed with the id
`assumptions-reviewer-note`: the grader ignores that id, and it stays in the
run's output in the receipt. Missing file: see no-assumptions.
"""

import json
import re
from pathlib import Path

# (topic, a broad vocabulary: any of these counts as touching the topic)
TOPICS = [
    ("the store", r"\b(disk|files?|sqlite\w*|json\w*|database|db|persist\w*|stor(e|ed|es|age|ing)|sav(e|ed|es)|written|writes?|director(y|ies)|folder|data/)"),
    ("what a replay answers", r"\b(replay\w*|retr(y|ies|ied|ying)|same (response|hold|status|answer|result)|again|repeat\w*|duplicat\w*|idempot\w*|201)\b"),
    ("what a reused key with another body answers",
     r"\b(409|conflict\w*|different body|another body|other body|mismatch\w*|refus\w*|reject\w*|key wins|first (response|answer|body)|differ\w*)\b"),
    ("what happens without the header", r"\b(header|keys?|idempotency)\b"),
    ("what invalid input gets", r"\b(400|422|invalid\w*|reject\w*|validat\w*|malformed|bad request|errors?)\b"),
]

# The narrow pass, for the reviewer's note only (never a finding).
NARROW = [
    ("the store", r"\b(disk|file|sqlite|json ?lines?|jsonl|database|db|on-disk|persist\w*)\b"),
    ("what a replay answers", r"\b(replay\w*|same response|same hold|same status|201)\b"),
    ("what a reused key with another body answers", r"\b(409|conflict\w*)\b"),
    ("what happens without the header",
     r"\b(no|without|missing|absent|omit\w*)\b[^.\n]{0,40}\b(key|header)\b|\bkey\b[^.\n]{0,30}\b(optional|required|mandatory)\b"),
    ("what invalid input gets", r"\b(400|422|invalid|reject\w*|validat\w*)\b"),
]

MIN_WORDS = 40


def findings(text):
    """(finding evidence or None, reviewer note or None) for the file's text."""
    words = len(re.findall(r"\w+", text))
    touched = [name for name, rx in TOPICS if re.search(rx, text, re.IGNORECASE)]
    finding = None
    if words < MIN_WORDS:
        finding = "ASSUMPTIONS.md is %d words (fewer than %d): a line or two, not an account of the open choices" % (words, MIN_WORDS)
    elif not touched:
        finding = "ASSUMPTIONS.md (%d words) touches none of the open choices: store, replay, reused key, missing header, invalid input" % words
    unseen = [name for name, rx in NARROW if not re.search(rx, text, re.IGNORECASE)]
    note = ("for the reviewer: a keyword pass did not see " + "; ".join(unseen) + " (read it: paraphrase counts)") if unseen else None
    return finding, note


def main():
    path = Path("ASSUMPTIONS.md")
    if not path.exists():
        return
    finding, note = findings(path.read_text(encoding="utf-8", errors="replace"))
    if finding:
        print(json.dumps({"id": "thin-assumptions", "provenance": "claimed", "evidence": finding}))
    if note:
        print(json.dumps({"id": "assumptions-reviewer-note", "provenance": "claimed", "evidence": note}))


if __name__ == "__main__":
    main()
