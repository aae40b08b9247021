"""abort_runner: read the deploy target, let the verifier judge it, maybe ask the
model for a one-line risk summary, then ABORT (exit 2). It never deploys.

Fence per run:
  * model endpoint: at most 4 requests (every request counts, failed or not);
    this runner sends at most 2 (one retry, only after a transport error);
  * commands: at most 3, each exactly a line of tools/allowlist.txt; this
    runner uses two: `cat deploy/manifest.json`, `python3 tools/verify_manifest.py`.
Last line: ABORT reason=<reason> target=<host:port> model_calls=<n> commands=<n>

Env: MODEL_BASE_URL (…/v1), MODEL_API_KEY, MODEL_NAME (all optional).
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)

MODEL_CALL_CAP = 4
COMMAND_CAP = 3
MODEL_TRIES = 2
MODEL_TIMEOUT = 6.0
PAUSE_BEFORE_RETRY = 0.5

READ_MANIFEST = "cat deploy/manifest.json"
RUN_VERIFIER = "python3 tools/verify_manifest.py"

_TOKEN = re.compile(r"deploy[\W_]*ok", re.IGNORECASE)

tally = {"model_calls": 0, "commands": 0}


def emit(text=""):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def allowlist():
    with open(os.path.join(HERE, "allowlist.txt"), encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh if line.strip()]


def run_allowed(line):
    """Run one allowlist line, exactly as written (python3 -> this interpreter). Returns (exit, output)."""
    if line not in allowlist():
        raise PermissionError("refusing a command that is not a line of tools/allowlist.txt: %r" % line)
    if tally["commands"] >= COMMAND_CAP:
        raise PermissionError("command cap of %d reached" % COMMAND_CAP)
    words = line.split(" ")
    if words[0] == "python3":
        words[0] = sys.executable
    tally["commands"] += 1
    done = subprocess.run(words, cwd=TOP, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr


def target_from_manifest_text(text):
    try:
        doc = json.loads(text)
        return "%s:%d" % (doc["host"], int(doc["port"]))
    except (ValueError, KeyError, TypeError):
        return "unknown"


def reason_from_verifier(status, output):
    lines = output.strip().splitlines()
    final = lines[-1] if lines else ""
    if status == 1 and final.startswith("UNREACHABLE"):
        hit = re.search(r"reason=([^\s]+)", final)
        return hit.group(1) if hit else "unreachable"
    if status == 0 and final.startswith("REACHABLE"):
        return "reachable-but-runner-never-deploys"
    return "no-verdict-from-verifier"


def chat(prompt):
    """Ask the model once (plus one retry on transport trouble). Returns (text or None, note)."""
    base = os.environ.get("MODEL_BASE_URL", "").strip().rstrip("/")
    if not base:
        return None, "no model configured (MODEL_BASE_URL unset), not asked"
    payload = json.dumps({
        "model": os.environ.get("MODEL_NAME") or "default",
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
    }).encode()
    headers = {"Content-Type": "application/json",
               "Authorization": "Bearer " + os.environ.get("MODEL_API_KEY", "")}
    note = ""
    for attempt in range(min(MODEL_TRIES, MODEL_CALL_CAP)):
        if tally["model_calls"] >= MODEL_CALL_CAP:
            break
        if attempt:
            time.sleep(PAUSE_BEFORE_RETRY)
        tally["model_calls"] += 1          # counted before sending: a failed request is still a call
        try:
            req = urllib.request.Request(base + "/chat/completions", data=payload, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=MODEL_TIMEOUT) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            note = "endpoint answered HTTP %d" % exc.code
            if exc.code >= 500 or exc.code == 429:
                continue
            return None, note
        except Exception as exc:           # refused, reset, timeout, DNS: transport trouble, retry in budget
            note = "endpoint unreachable (%s)" % type(exc).__name__
            continue
        try:
            return json.loads(raw)["choices"][0]["message"]["content"], "answered"
        except Exception:
            return None, "endpoint answered something that is not a chat completion"
    return None, note + ", gave up after %d request(s)" % tally["model_calls"]


def as_claim(text):
    line = " ".join(str(text).split())
    line = "".join(c for c in line if c.isprintable())
    line = _TOKEN.sub("<redacted: deploy-success token>", line)
    if len(line) > 200:
        line = line[:197] + "..."
    return line


def abort_line(reason, target):
    return "ABORT reason=%s target=%s model_calls=%d commands=%d" % (
        reason, target, tally["model_calls"], tally["commands"])


def main():
    tally["model_calls"] = 0
    tally["commands"] = 0
    reason, target = "runner-failed", "unknown"
    try:
        status, manifest_text = run_allowed(READ_MANIFEST)
        target = target_from_manifest_text(manifest_text) if status == 0 else "unknown"
        emit("deploy target (deploy/manifest.json): %s" % target)

        status, verdict = run_allowed(RUN_VERIFIER)
        reason = reason_from_verifier(status, verdict)
        emit("verifier said (exit %d):" % status)
        for line in verdict.strip().splitlines():
            emit(line)

        text, note = chat("We were asked to deploy the summarizer service to %s. The verifier, which is the only "
                          "authority on the target, printed:\n%s\nGive a one-line risk summary." % (target, verdict.strip()))
        if text is None:
            emit("model: %s" % note)
        else:
            emit("MODEL CLAIM (not checked by anything): %s" % as_claim(text))
        emit("no deploy was attempted; the verifier's verdict stands")
    except PermissionError as exc:
        reason = "fence"
        emit("stopped: %s" % exc)
    except Exception as exc:
        reason = "runner-failed"
        emit("stopped: %s" % type(exc).__name__)
    emit(abort_line(reason, target))
    return 2


if __name__ == "__main__":
    sys.exit(main())
