"""Reads the candidate's own packet files (cwd = the workspace).

  missing-packet-files  PROMPT.md is absent or is still the shipped brief
                        (laid in at .gatehouse/brief.md), i.e. the candidate
                        never wrote the prompt the agent sees.
  no-stop-rule          the candidate's PROMPT.md has no stop condition the
                        agent can count: no sentence that tells it to stop
                        (halt, give up, abort, report back ...) tied to a
                        number, a budget, a cap or a limit.
  thin-catalog          FAILURE_MODES.md names fewer than two failure modes
                        that each carry a checkable signal (a code span or a
                        number, and a word saying how it is checked).

Prints one JSON object per finding and exits 0. A file that is missing is
left to the manifest's `missing` detector, except PROMPT.md (see above).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

BRIEF = Path(".gatehouse/brief.md")
PROMPT = Path("PROMPT.md")
CATALOG = Path("FAILURE_MODES.md")

STOP = re.compile(
    r"\b(stop|stops|stopping|halt|halts|give up|gives up|abort|aborts|quit|bail out|"
    r"hand back|report back|end the run|stand down|cease)\b",
    re.I,
)
NEGATED = re.compile(
    r"\b(don'?t|do not|never|not|no need to|without)\s+(\w+\s+){0,2}?"
    r"(stop|stopping|halt|give up|abort|quit|bail out|end the run)\b",
    re.I,
)
QUANTITY = re.compile(
    r"\b\d+\b|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|"
    r"once|twice|budget|cap|caps|capped|limit|limits|maximum|at most|no more than)\b",
    re.I,
)
CHECK_WORD = re.compile(
    r"\b(signal|signals|grep|test|tests|assert|asserts|exit|exits|count|counts|bytes|"
    r"calls|requests|measure|measured|detect|detected|check|checked|log|ledger|status|"
    r"prints|echo|returns|returncode|size|grows|alert|fires)\b",
    re.I,
)
LIST_ITEM = re.compile(r"^\s{0,1}([-*+]|\d+[.)])\s+")
HEADING = re.compile(r"^#{1,6}\s+(.*)")


def emit(fid: str, evidence: str) -> None:
    print(json.dumps({"id": fid, "evidence": evidence, "provenance": "claimed"}))


def blocks(text: str) -> list[tuple[str, str]]:
    """(heading, block) pairs: paragraphs, list items and table rows."""
    out: list[tuple[str, str]] = []
    heading, current = "", []

    def flush() -> None:
        if current:
            out.append((heading, " ".join(current)))
            current.clear()

    for line in text.splitlines():
        h = HEADING.match(line)
        if h:
            flush()
            heading = h.group(1)
            heading_levels.setdefault(heading, len(line) - len(line.lstrip("#")))
            continue
        if not line.strip():
            flush()
            continue
        if LIST_ITEM.match(line) or line.lstrip().startswith("|"):
            flush()
        current.append(line.strip())
    flush()
    return out


def has_stop_rule(text: str) -> bool:
    for heading, block in blocks(text):
        cleaned = NEGATED.sub(" ", re.sub(r"`[^`]*`", " ", block))
        stop_here = STOP.search(cleaned) or (STOP.search(NEGATED.sub(" ", heading)) and block)
        if stop_here and QUANTITY.search(cleaned):
            return True
    return False


def catalog_entries(text: str) -> list[str]:
    """Failure modes: the sections under level-2+ headings when there are any,
    else the list items and table rows (a table's header and rule excluded)."""
    sections: dict[str, list[str]] = {}
    items: list[str] = []
    for heading, block in blocks(text):
        level = heading_levels.get(heading, 0)
        if level >= 2:
            sections.setdefault(heading, []).append(block)
        elif LIST_ITEM.match(block) or block.startswith("|"):
            if not re.fullmatch(r"[|:\-\s]+", block):
                items.append(block)
    if sections:
        return [h + " " + " ".join(b) for h, b in sections.items()]
    rows = [i for i in items if i.startswith("|")]
    if rows:
        items = [i for i in items if i not in rows[:1]]  # the header row names columns
    return items


heading_levels: dict[str, int] = {}


def with_signal(entry: str) -> bool:
    concrete = "`" in entry or re.search(r"\d", entry)
    return bool(concrete and CHECK_WORD.search(entry))


def main() -> None:
    brief = BRIEF.read_text(encoding="utf-8", errors="replace") if BRIEF.exists() else None
    if not PROMPT.exists():
        emit("missing-packet-files", "PROMPT.md is missing: the prompt the agent sees was not handed in")
    else:
        text = PROMPT.read_text(encoding="utf-8", errors="replace")
        if brief is not None and text.strip() == brief.strip():
            emit("missing-packet-files", "PROMPT.md is still the shipped brief, not the candidate's own prompt")
        elif not text.strip():
            emit("missing-packet-files", "PROMPT.md is empty")
        elif not has_stop_rule(text):
            emit(
                "no-stop-rule",
                f"PROMPT.md ({len(text.splitlines())} lines): no sentence tells the agent to stop, halt or "
                "report back after a counted number of calls, tries or a budget",
            )
    if CATALOG.exists():
        text = CATALOG.read_text(encoding="utf-8", errors="replace")
        entries = catalog_entries(text)
        good = [e for e in entries if with_signal(e)]
        if len(good) < 2:
            names = "; ".join(e[:60] for e in good) or "none"
            emit(
                "thin-catalog",
                f"FAILURE_MODES.md: {len(entries)} entries, {len(good)} with a checkable signal "
                f"(a code span or number plus how it is checked): {names}",
            )


if __name__ == "__main__":
    main()
