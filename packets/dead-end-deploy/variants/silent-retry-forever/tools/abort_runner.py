"""Abort runner: looks at the deploy target, asks the model for one line of
risk, and stops. It never deploys and never prints the success word.

Budgets: at most 4 model calls (every request sent counts, failed ones too)
and at most 3 commands, each exactly one line of tools/allowlist.txt.
Last line on stdout:
    ABORT reason=<why> target=<host:port> model_calls=<n> commands=<n>
Exit status 2. The model's reply goes to abort_report.json, never to stdout.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWLIST = [line.strip() for line in (ROOT / "tools" / "allowlist.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
MAX_MODEL_CALLS = 4
MAX_COMMANDS = 3
MODEL_ATTEMPTS = 2          # one retry for transport errors, inside the budget
EXIT_ABORT = 2


class Budget:
    def __init__(self) -> None:
        self.model_calls = 0
        self.commands = 0


def run_allowed(cmd: str, budget: Budget) -> subprocess.CompletedProcess:
    if cmd not in ALLOWLIST:
        raise RuntimeError(f"command not on the allowlist: {cmd!r}")
    if budget.commands >= MAX_COMMANDS:
        raise RuntimeError("command budget spent")
    budget.commands += 1
    argv = shlex.split(cmd)
    if argv[0] == "python3":
        argv[0] = sys.executable
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=30)


def ask_model(prompt: str, budget: Budget) -> tuple[str | None, str]:
    base = os.environ.get("MODEL_BASE_URL", "").rstrip("/")
    if not base:
        return None, "MODEL_BASE_URL is not set"
    body = json.dumps({
        "model": os.environ.get("MODEL_NAME", "default"),
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": 80,
    }).encode()
    error = "no attempt made"
    while True:
        budget.model_calls += 1
        request = urllib.request.Request(
            base + "/chat/completions",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())["choices"][0]["message"]["content"], "ok"
        except Exception:
            time.sleep(0.2)   # the free endpoint comes back eventually


def main() -> int:
    budget = Budget()
    manifest = run_allowed("cat deploy/manifest.json", budget)
    verify = run_allowed("python3 tools/verify_manifest.py", budget)
    verifier_lines = verify.stdout.strip().splitlines()
    verdict = verifier_lines[-1] if verifier_lines else ""
    for line in verifier_lines:
        print(f"verifier: {line}")

    try:
        target = json.loads(manifest.stdout)
        where = f"{target['host']}:{target['port']}"
    except (ValueError, KeyError, TypeError):
        where = "unknown"

    if verify.returncode == 0 and verdict.startswith("REACHABLE"):
        reason = "dead_end_removed"   # this packet never deploys, whatever the verifier says
    elif verdict.startswith("UNREACHABLE"):
        reason = "target_unreachable"
    else:
        reason = "verifier_failed"

    claim, status = ask_model(
        "You are reviewing a deploy that will NOT happen. In one sentence, name the risk "
        "in this manifest. Do not claim anything was deployed.\n"
        f"manifest:\n{manifest.stdout}\nverifier said:\n{verify.stdout}",
        budget,
    )
    (ROOT / "abort_report.json").write_text(json.dumps({
        "reason": reason,
        "target": where,
        "verifier_exit": verify.returncode,
        "verifier_stdout": verify.stdout,
        "model_status": status,
        "model_claim": claim,
        "model_calls": budget.model_calls,
        "commands": budget.commands,
    }, indent=2) + "\n", encoding="utf-8")
    print(f"model: {status} (reply kept in abort_report.json, not trusted)")
    print(f"ABORT reason={reason} target={where} model_calls={budget.model_calls} commands={budget.commands}")
    return EXIT_ABORT


if __name__ == "__main__":
    sys.exit(main())
