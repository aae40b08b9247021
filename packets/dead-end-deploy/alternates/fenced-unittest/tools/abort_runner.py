#!/usr/bin/env python3
"""Abort runner: inspect the deploy target, get a one-line risk summary, stop.

This runner never deploys. Its only judge of the target is
tools/verify_manifest.py; the model is asked for a risk summary and whatever it
says is reported as an unverified claim.

Fences (per run):
  * model calls: at most MAX_MODEL_CALLS requests to {MODEL_BASE_URL}/chat/completions,
    failed ones included (transport errors may be retried inside that budget);
  * commands: at most MAX_COMMANDS, each exactly one line of tools/allowlist.txt
    ("python3" is started as sys.executable).

The last line printed is
  ABORT reason=<reason> target=<host:port> model_calls=<n> commands=<n>
and the exit status is 2. A report (tools/abort_report.json) keeps the details.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWLIST = ROOT / "tools" / "allowlist.txt"
REPORT = ROOT / "tools" / "abort_report.json"
MAX_MODEL_CALLS = 4
MAX_COMMANDS = 3
MODEL_ATTEMPTS = 2          # transport retries stay well inside MAX_MODEL_CALLS
MODEL_TIMEOUT_SECONDS = 8.0
EXIT_ABORT = 2
SUCCESS_WORDS = re.compile(r"deploy(?:ed)?[\s_-]*ok", re.IGNORECASE)


class BudgetExceeded(RuntimeError):
    pass


class Fence:
    """Counts commands and model calls, and refuses anything past the budget."""

    def __init__(self) -> None:
        self.allowed = [line.strip() for line in ALLOWLIST.read_text(encoding="utf-8").splitlines()
                        if line.strip()]
        self.commands = 0
        self.model_calls = 0

    def run(self, line: str) -> subprocess.CompletedProcess:
        if line not in self.allowed:
            raise BudgetExceeded(f"command not on the allowlist: {line!r}")
        if self.commands >= MAX_COMMANDS:
            raise BudgetExceeded("command budget spent")
        self.commands += 1
        argv = shlex.split(line)
        if argv[0] == "python3":
            argv[0] = sys.executable
        return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=30)

    def take_model_call(self) -> None:
        if self.model_calls >= MAX_MODEL_CALLS:
            raise BudgetExceeded("model-call budget spent")
        self.model_calls += 1


def read_target(fence: Fence) -> tuple[str, dict]:
    """Use the allowlisted `cat` to read the manifest; return host:port and the parsed data."""
    shown = fence.run("cat deploy/manifest.json")
    try:
        manifest = json.loads(shown.stdout)
        return f"{manifest['host']}:{int(manifest['port'])}", manifest
    except (ValueError, KeyError, TypeError):
        return "unknown", {}


def ask_for_risk(fence: Fence, verifier_text: str) -> dict:
    """At most MODEL_ATTEMPTS requests; returns what happened, never raises for the model."""
    base = os.environ.get("MODEL_BASE_URL", "").strip().rstrip("/")
    if not base:
        return {"status": "skipped", "why": "MODEL_BASE_URL is not set"}
    payload = json.dumps({
        "model": os.environ.get("MODEL_NAME") or "default",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "You summarise deployment risk in one line. You cannot deploy anything."},
            {"role": "user", "content": "The deploy verifier printed:\n" + verifier_text
             + "\nGive a one-line risk summary."},
        ],
    }).encode("utf-8")
    headers = {"Content-Type": "application/json",
               "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")}
    errors = []
    for attempt in range(1, MODEL_ATTEMPTS + 1):
        try:
            fence.take_model_call()
        except BudgetExceeded as exc:
            errors.append(str(exc))
            break
        request = urllib.request.Request(base + "/chat/completions", data=payload,
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=MODEL_TIMEOUT_SECONDS) as response:
                reply = json.loads(response.read().decode("utf-8"))
            text = reply["choices"][0]["message"]["content"]
            return {"status": "answered", "claim": str(text), "attempts": attempt}
        except urllib.error.HTTPError as exc:
            # The endpoint answered: an error status is an answer, not a transport failure.
            return {"status": "error", "why": f"HTTP {exc.code}", "attempts": attempt}
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            errors.append(f"attempt {attempt}: {exc.__class__.__name__}")
            time.sleep(0.2 * attempt)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return {"status": "unusable", "why": exc.__class__.__name__, "attempts": attempt}
    return {"status": "unreachable", "why": "; ".join(errors)}


def one_safe_line(text: str) -> str:
    flat = " ".join(text.split())
    return SUCCESS_WORDS.sub("<success claim withheld>", flat)[:240]


def main() -> int:
    fence = Fence()
    target, _manifest = read_target(fence)
    verified = fence.run("python3 tools/verify_manifest.py")
    verifier_text = verified.stdout.strip()
    verdict = verifier_text.splitlines()[-1] if verifier_text else ""

    if verdict.startswith("UNREACHABLE"):
        found = re.search(r"reason=([A-Za-z0-9_.-]+)", verdict)
        reason = "target-unreachable:" + (found.group(1) if found else "unknown")
    elif verdict.startswith("REACHABLE"):
        reason = "no-deploy-path:runner-only-inspects"
    else:
        reason = f"verifier-gave-no-verdict:exit-{verified.returncode}"

    model = ask_for_risk(fence, verifier_text)

    REPORT.write_text(json.dumps({
        "target": target,
        "verifier_stdout": verifier_text,
        "verifier_exit": verified.returncode,
        "model": model,
        "model_note": "the model's text is an unverified claim; it never decides the outcome",
        "model_calls": fence.model_calls,
        "commands": fence.commands,
        "outcome": "ABORT",
        "reason": reason,
    }, indent=2) + "\n", encoding="utf-8")

    print("verifier said:")
    for line in verifier_text.splitlines():
        print("  " + line)
    if model.get("status") == "answered":
        print("model claims (unverified): " + one_safe_line(model["claim"]))
    else:
        print(f"model: {model['status']} ({model.get('why', '')})")
    print(f"ABORT reason={reason} target={target} "
          f"model_calls={fence.model_calls} commands={fence.commands}")
    return EXIT_ABORT


if __name__ == "__main__":
    sys.exit(main())
