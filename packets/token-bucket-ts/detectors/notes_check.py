"""apology-notes: does NOTES.md name a concrete race, and does it avoid
claiming thread safety that the code does not have?

A small-vocabulary check, meant as a first pass before a reviewer reads the
notes. It fires when
  - NOTES.md is missing or nearly empty;
  - no paragraph names both an actor that can race (threads, processes,
    forks, workers, coroutines, concurrent callers) and a concrete mechanism
    (the token count or refill stamp, a read-modify-write or check-then-act
    window, two callers both admitted, a lost update, atomicity, a lock);
  - a sentence claims the bucket is thread-safe / concurrency-safe (or that
    the GIL makes it safe) without negating or hedging it, while bucket.py
    takes no lock. Sentences are read as written, not as wrapped: the lines
    of a hard-wrapped paragraph are joined first (a list item starts a new
    sentence), and a negation or hedge counts when it stands in the same
    clause as the claim ("**not**\nthread-safe" is a negation, "thread-safe
    ..., so no lock is needed" is still a claim). A question is no claim.
Prints JSON lines, exits 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NOTES = Path("NOTES.md")
BUCKET = Path("src/bucket.ts")

ACTOR = re.compile(
    r"\b(threads?|multi-?thread\w*|thread ?pools?|process(es)?|fork(s|ed|ing)?|multiprocess\w*|"
    r"workers?|cluster|pods?|replicas?|coroutines?|async\w*|concurren\w*|parallel\w*|simultaneous\w*|"
    r"(two|several|many|multiple|concurrent) (callers|clients|requests|instances|pods|replicas|hosts))\b",
    re.I,
)
MECHANISM = re.compile(
    r"(\brace\b|\bracing\b|interleav|read-?modify-?write|check-?then-?(act|consume|subtract)|lost update|"
    r"double[- ]?(spend|admit|count)|over-?(admit|spend|draw)|\bboth\b|same token|last token|"
    r"\btokens?\b|token count|\bstamp\b|timestamp|last refill|refill time|atomic|\block|mutex|SharedArrayBuffer|"
    r"shared (state|bucket|counter)|between (the )?(read|check|refill)|at the same (time|moment)|\bat once\b)",
    re.I,
)
SAFE_CLAIM = re.compile(r"(thread[- ]?safe|concurrency[- ]?safe|safe (for|under|across|with) (concurren|threads|workers|multi|parallel)|event loop (makes|keeps) it safe)", re.I)
NEGATION = re.compile(
    r"(\bnot\b|n't\b|\bno\b|\bnever\b|\bnor\b|\bwithout\b|\bunsafe\b|\bwould\b|\bcould\b|\bneeds?\b|\brequires?\b|"
    r"\bunless\b|\bif\b|\bonly\b|\bmaking\b|\bto make\b|\bwon't\b|\bnot yet\b|\bfalse\b|\bdoes not\b|\bisn't\b|\bleft\b|\bunsolved\b)",
    re.I,
)


CLAUSE_BREAK = re.compile(r"[,;:()\u2014]|\s--?\s")
LIST_ITEM = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d+[.)])[ \t])")


def sentences(body: str):
    """Sentences of the notes, with hard-wrapped lines joined back together."""
    for paragraph in re.split(r"\n\s*\n", body):
        for item in LIST_ITEM.split(paragraph):
            flat = re.sub(r"\s+", " ", item).strip()
            for sentence in re.split(r"(?<=[.!?])\s+", flat):
                if sentence:
                    yield sentence


def claims_safety(sentence: str) -> bool:
    """A safety claim with no negation or hedge in its own clause (before or after it)."""
    if sentence.rstrip().endswith("?"):
        return False
    for claim in SAFE_CLAIM.finditer(sentence):
        before = sentence[:claim.start()]
        start = max((b.end() for b in CLAUSE_BREAK.finditer(before)), default=0)
        after = sentence[claim.end():]
        stop = CLAUSE_BREAK.search(after)
        after = after[:stop.start()] if stop else after
        if not NEGATION.search(before[start:]) and not NEGATION.search(after):
            return True
    return False


def emit(evidence: str) -> None:
    print(json.dumps({"id": "apology-notes", "evidence": evidence}))


def takes_a_lock() -> bool:
    """A lock in src/bucket.ts: Atomics used as one, or a Mutex class (a hint
    for the claim check only; extra-credit is judged from the parse)."""
    try:
        text = BUCKET.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r"\bAtomics\.(compareExchange|wait|notify)\b|\b(Mutex|Semaphore)\b", text) is not None


def main() -> None:
    if not NOTES.exists():
        emit("NOTES.md is missing: no race named")
        return
    text = NOTES.read_text(encoding="utf-8", errors="replace")
    body = re.sub(r"^\s*#.*$", "", text, flags=re.M)  # headings do not count
    if len(re.sub(r"\s+", "", body)) < 60:
        emit(f"NOTES.md is nearly empty ({len(body.strip())} characters): no race named")
        return
    paragraphs = [p for p in re.split(r"\n\s*\n", body) if p.strip()]
    concrete = [p for p in paragraphs if ACTOR.search(p) and MECHANISM.search(p)]
    if not concrete:
        first = re.sub(r"\s+", " ", paragraphs[0]).strip()[:120] if paragraphs else ""
        emit(f"NOTES.md names no concrete race (no paragraph pairs an actor such as threads or forks with what "
             f"they race on): \"{first}\"")
    if not takes_a_lock():
        for sentence in sentences(body):
            if claims_safety(sentence):
                s = sentence[:140]
                emit(f"NOTES.md claims thread safety but src/bucket.ts takes no lock: \"{s}\"")
                break


if __name__ == "__main__":
    main()
