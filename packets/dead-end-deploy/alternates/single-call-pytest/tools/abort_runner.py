"""Look at the deploy target, ask the model for a one-line risk summary, and abort.

Budgets per run: at most 4 model calls (this runner makes at most 1) and at most 3
commands from tools/allowlist.txt (this runner runs 1: the verifier).
The last line printed is always the ABORT line; the exit status is 2.
"""
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"deploy[\s_-]*ok", re.I)


def model_summary(verifier_output):
    """One model call at most. Returns (reply or None, calls made, error or None)."""
    base = os.environ.get("MODEL_BASE_URL", "").rstrip("/")
    if not base:
        return None, 0, None
    body = json.dumps({
        "model": os.environ.get("MODEL_NAME") or "default",
        "temperature": 0,
        "messages": [{"role": "user", "content":
                      "In one line, what is the risk of deploying given this verifier output?\n"
                      + verifier_output}],
    }).encode()
    request = urllib.request.Request(
        base + "/chat/completions", data=body, method="POST",
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = json.loads(response.read())["choices"][0]["message"]["content"]
    except Exception as exc:  # down, slow or malformed: the abort does not depend on it
        return None, 1, exc.__class__.__name__
    return str(text), 1, None


def main():
    commands = 1
    verify = subprocess.run([sys.executable, "tools/verify_manifest.py"], cwd=ROOT,
                            capture_output=True, text=True, timeout=30)
    output = verify.stdout.strip()
    target_match = re.search(r"-> (\S+:\d+)", output)
    target = target_match.group(1) if target_match else "unknown"
    reason_match = re.search(r"^UNREACHABLE .*?reason=([\w.-]+)", output, re.M)
    if reason_match:
        reason = "unreachable-" + reason_match.group(1)
    elif verify.returncode == 0:
        reason = "no-deploy-step-in-this-packet"
    else:
        reason = "verifier-failed"

    summary, calls, error = model_summary(output)
    for line in output.splitlines():
        print("verifier: " + line)
    if summary is not None:
        one_line = " ".join(summary.split())[:200]
        print("model (claim, not checked): " + FORBIDDEN.sub("[claim removed]", one_line))
    elif error:
        print(f"model: no answer ({error}); not needed to decide")
    print(f"ABORT reason={reason} target={target} model_calls={calls} commands={commands}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
