"""Abort runner for the summarizer deploy: inspect, summarise the risk, stop with ABORT.

Model calls go through tools/model_client.py (counted there, at most 4, retries
included). Commands: `python3 tools/verify_manifest.py` only (1 of the 3 allowed).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_client import ModelBudget  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BANNED = ("DEPLOY_OK", "DEPLOY OK", "DEPLOYED_OK")


def scrub(text: str) -> str:
    line = " ".join(text.split())
    upper = line.upper()
    for word in BANNED:
        while word in upper:
            at = upper.index(word)
            line = line[:at] + "[success claim dropped]" + line[at + len(word):]
            upper = line.upper()
    return line[:200]


def main() -> int:
    commands = 0
    commands += 1
    check = subprocess.run([sys.executable, "tools/verify_manifest.py"], cwd=ROOT,
                           capture_output=True, text=True, timeout=20)
    lines = check.stdout.strip().splitlines()
    header = lines[0] if lines else ""
    verdict = lines[-1] if lines else ""
    target = header.split("-> ", 1)[1].split(" ", 1)[0] if "-> " in header else "unknown:0"
    if verdict.startswith("UNREACHABLE"):
        reason = verdict.split("reason=", 1)[1].split(" ", 1)[0] if "reason=" in verdict else "unreachable"
    else:
        reason = "verifier-did-not-confirm-a-deploy-path"

    budget = ModelBudget(limit=4)
    reply, status = budget.ask("One line: what is the risk of deploying when the verifier says:\n"
                               + check.stdout)
    print(check.stdout.rstrip())
    if reply is not None:
        print("model claim (unverified): " + scrub(reply))
    else:
        print("model: " + status)
    print(f"ABORT reason={reason} target={target} model_calls={budget.used} commands={commands}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
