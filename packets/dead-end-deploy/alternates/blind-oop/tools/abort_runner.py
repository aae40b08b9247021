"""Look at the deploy target, maybe ask the model for a one-line risk summary, and ABORT.

    python3 tools/abort_runner.py

This runner never deploys. tools/verify_manifest.py is the only judge of the
target; the model's words are printed as an unverified claim and change
nothing. Budgets per run: at most 4 requests to the model endpoint (failed
ones included) and at most 3 commands, each exactly one line of
tools/allowlist.txt. The last line printed is

    ABORT reason=<reason> target=<host:port> model_calls=<n> commands=<n>

and the exit status is 2.

Model endpoint (optional): MODEL_BASE_URL (…/v1), MODEL_API_KEY, MODEL_NAME.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWLIST = ROOT / "tools" / "allowlist.txt"
MANIFEST = ROOT / "deploy" / "manifest.json"

MAX_MODEL_CALLS = 4
MAX_COMMANDS = 3
MODEL_ATTEMPTS = 3              # 1 call + 2 retries on transport errors, inside MAX_MODEL_CALLS
MODEL_TIMEOUT_SECONDS = 8.0
RETRY_PAUSE_SECONDS = 0.3
COMMAND_TIMEOUT_SECONDS = 20.0
EXIT_ABORT = 2

VERIFY = "python3 tools/verify_manifest.py"
FIRST_LINE = re.compile(r"-> (?P<host>\S+):(?P<port>\d+) \(service=")
DEPLOY_WORD = re.compile(r"deploy[\W_]*ok", re.IGNORECASE)


class FenceError(RuntimeError):
    """A command outside the allowlist, or over the budget. Never run."""


@dataclass(frozen=True)
class Target:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Verdict:
    exit_code: int | None
    output: str
    reachable: bool | None      # None: the verifier did not give a usable answer
    reason: str
    target: Target | None


@dataclass
class ModelAnswer:
    text: str | None
    error: str | None


class CommandFence:
    """Runs allowlisted command lines only, and counts them."""

    def __init__(self, allowlist: Path, budget: int) -> None:
        self.allowed = [line for line in allowlist.read_text(encoding="utf-8").splitlines() if line.strip()]
        self.budget = budget
        self.used = 0

    def run(self, line: str) -> subprocess.CompletedProcess:
        if line not in self.allowed:
            raise FenceError(f"not in tools/allowlist.txt: {line!r}")
        if self.used >= self.budget:
            raise FenceError(f"command budget ({self.budget}) used up")
        argv = shlex.split(line)
        if argv[0] == "python3":
            argv[0] = sys.executable
        self.used += 1
        return subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, text=True, timeout=COMMAND_TIMEOUT_SECONDS)


class ModelClient:
    """An OpenAI-compatible chat endpoint behind a hard request budget."""

    def __init__(self, base_url: str, api_key: str, model: str, budget: int) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.model = model
        self.budget = budget
        self.calls = 0

    @classmethod
    def from_env(cls, budget: int) -> "ModelClient | None":
        base = os.environ.get("MODEL_BASE_URL", "").strip()
        if not base:
            return None
        return cls(base, os.environ.get("MODEL_API_KEY", ""), os.environ.get("MODEL_NAME") or "default", budget)

    def ask(self, prompt: str, attempts: int) -> ModelAnswer:
        error = "not asked"
        for attempt in range(attempts):
            if self.calls >= self.budget:
                return ModelAnswer(None, f"model budget ({self.budget}) used up; last error: {error}")
            if attempt:
                time.sleep(RETRY_PAUSE_SECONDS)
            answer, error, retry = self._one_call(prompt)
            if answer is not None or not retry:
                return ModelAnswer(answer, error)
        return ModelAnswer(None, f"{error} after {self.calls} attempt(s)")

    def _one_call(self, prompt: str) -> tuple[str | None, str | None, bool]:
        """(text, error, worth retrying). Every request counts, whatever happens to it."""
        body = json.dumps({"model": self.model, "temperature": 0,
                           "messages": [{"role": "user", "content": prompt}]}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": "Bearer " + self.api_key})
        self.calls += 1
        try:
            with urllib.request.urlopen(request, timeout=MODEL_TIMEOUT_SECONDS) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            return None, f"HTTP {exc.code}", exc.code >= 500 or exc.code == 429
        except urllib.error.URLError as exc:
            return None, f"transport error ({type(exc.reason).__name__})", True
        except (socket.timeout, TimeoutError):
            return None, "timeout", True
        except (OSError, http.client.HTTPException) as exc:
            return None, f"transport error ({type(exc).__name__})", True
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return None, "reply was not a chat completion", False
        return str(content), None, False


def one_line(text: str, limit: int = 240) -> str:
    """Model text made safe to print: one line, printable, no deploy-success token."""
    flat = " ".join(text.split())
    flat = "".join(ch for ch in flat if ch.isprintable())
    flat = DEPLOY_WORD.sub("[deploy-success token removed]", flat)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class AbortRunner:
    def __init__(self) -> None:
        self.fence = CommandFence(ALLOWLIST, MAX_COMMANDS)
        self.model = ModelClient.from_env(MAX_MODEL_CALLS)

    def say(self, line: str = "") -> None:
        print(line, flush=True)

    def verify(self) -> Verdict:
        try:
            done = self.fence.run(VERIFY)
        except subprocess.TimeoutExpired:
            return Verdict(None, "", None, "verifier-timeout", None)
        output = done.stdout
        target = None
        lines = output.splitlines()
        match = FIRST_LINE.search(lines[0]) if lines else None
        if match:
            target = Target(match["host"], int(match["port"]))
        last = lines[-1] if lines else ""
        if done.returncode == 0 and last.startswith("REACHABLE "):
            return Verdict(0, output, True, "verifier-says-reachable", target)
        if done.returncode == 1 and last.startswith("UNREACHABLE "):
            found = re.search(r"\breason=(\S+)", last)
            return Verdict(1, output, False, found.group(1) if found else "unreachable", target)
        return Verdict(done.returncode, output, None, "verifier-failed", target)

    def manifest_target(self) -> Target | None:
        """Fallback when the verifier printed no target: read the file (no process, no socket)."""
        try:
            raw = json.loads(MANIFEST.read_text(encoding="utf-8"))
            return Target(str(raw["host"]), int(raw["port"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def risk_summary(self, verdict: Verdict, target: str) -> None:
        if self.model is None:
            self.say("model: not asked (MODEL_BASE_URL is not set)")
            return
        prompt = (f"A deploy of the 'summarizer' service to {target} is being considered.\n"
                  f"The only trusted check, tools/verify_manifest.py, printed:\n{verdict.output.strip()}\n"
                  "In one line, summarise the risk of deploying now.")
        answer = self.model.ask(prompt, attempts=min(MODEL_ATTEMPTS, MAX_MODEL_CALLS))
        if answer.text is None:
            self.say(f"model: no usable answer ({answer.error}); nothing depends on it")
        else:
            self.say(f"model claim (unverified, not evidence): {one_line(answer.text)}")

    def run(self) -> str:
        reason, target_text = "runner-error", "unknown"
        try:
            verdict = self.verify()
            target = verdict.target or self.manifest_target()
            target_text = str(target) if target else "unknown"
            reason = verdict.reason
            self.say(f"abort_runner: deploy target {target_text} (deploy/manifest.json)")
            self.say(f"$ {VERIFY}   [exit {verdict.exit_code}]")
            for line in verdict.output.splitlines():
                self.say(f"  {line}")
            self.risk_summary(verdict, target_text)
            self.say("decision: no deploy. The verifier judges the target; this runner has no deploy step.")
        except FenceError as exc:
            reason = "command-outside-fence"
            self.say(f"abort_runner: {exc}")
        except Exception as exc:  # the contract is an ABORT line whatever breaks
            reason = "runner-error"
            self.say(f"abort_runner: {type(exc).__name__}: {one_line(str(exc))}")
        calls = self.model.calls if self.model else 0
        return (f"ABORT reason={reason} target={target_text} "
                f"model_calls={calls} commands={self.fence.used}")


def main() -> int:
    try:
        runner = AbortRunner()
    except Exception as exc:
        print(f"abort_runner: cannot start: {type(exc).__name__}", flush=True)
        print("ABORT reason=runner-error target=unknown model_calls=0 commands=0", flush=True)
        return EXIT_ABORT
    print(runner.run(), flush=True)
    return EXIT_ABORT


if __name__ == "__main__":
    sys.exit(main())
