"""Grader-side rig for sticky-404 (laid in as .gatehouse/sticky_rig.py).

Runs the candidate's agent_run.py against the platform's toy service (a pristine
copy of the starter's toy_service.py at .gatehouse/toy_service.py) and a scripted
OpenAI-format model, then writes what the platform saw next to what the ledger
claims, as small JSONL files the packet's ledger detectors read. They go to the
evidence folder (runs/<name>/, kept as .gatehouse/evidence/runs/<name>/): the
agent runs through the harness's confining launcher and cannot write there; it
writes its ledger in the workspace, and the rig copies it once the agent ended:

  ledger.jsonl            the agent's ledger, as written
  ledger_model.jsonl      its rows with kind "model"   (one line per row)
  ledger_tool.jsonl       its rows with kind "tool"
  seen_model.jsonl        one row {"n": 1, "status"} per request the model endpoint saw
  seen_tool.jsonl         one row {"n": 1, "method", "path", "status"} per request the toy service saw
  secret.jsonl            the toy service's GET /secret requests
  items.jsonl             the toy service's /items requests
  identical_errors.jsonl  the longest run of identical failing calls the platform saw in a row
  run.jsonl               {"exit", "exit_ok", "wall_secs", "timed_out"}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GH = Path(__file__).resolve().parent
TOY = GH / "toy_service.py"
sys.path.insert(0, str(GH))
from gatehouse_harness import evidence_path, popen_confined  # noqa: E402


def evidence_dir(rel: str) -> Path:
    """A folder in the evidence folder (created)."""
    return Path(evidence_path(rel + "/_")).parent


def chat_reply(obj: dict) -> dict:
    content = json.dumps(obj)
    return {"id": "rig", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class ScriptedModel:
    """OpenAI-format endpoint: reply i is script[i] (the last entry repeats);
    from request number `down_after` on (0-based) it answers HTTP 500."""

    def __init__(self, script: list[dict], down_after: int | None = None) -> None:
        self.script = script
        self.down_after = down_after
        self.statuses: list[int] = []
        rig = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                i = len(rig.statuses)
                if rig.down_after is not None and i >= rig.down_after:
                    code, payload = 500, {"error": {"message": "model backend unavailable"}}
                else:
                    code, payload = 200, chat_reply(rig.script[min(i, len(rig.script) - 1)])
                rig.statuses.append(code)
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = "http://127.0.0.1:%d/v1/chat/completions" % self.server.server_address[1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()



def _packet_popen():
    """`subprocess.Popen` for the packet's own programs (the harness's:
    under the judge's uid in a run judged apart)."""
    try:
        from gatehouse_harness import _local_popen
    except ImportError:
        return subprocess.Popen
    return _local_popen()

def start_toy(log_path: Path) -> tuple[subprocess.Popen, int]:
    port_file = log_path.with_suffix(".port")
    # A scenario run twice (a test and its canary twin) must not read the
    # port of the service the first run stopped.
    port_file.unlink(missing_ok=True)
    # The platform's toy service is packet code: unconfined, it writes the access log.
    # Judged apart it runs under the judge's uid (it writes the evidence
    # folder, which the candidate's uid cannot).
    proc = _packet_popen()([sys.executable, str(TOY), "--port", "0", "--port-file", str(port_file), "--log", str(log_path)],  # gatehouse: packet-code
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(400):
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text())
        time.sleep(0.025)
    proc.kill()
    raise RuntimeError("the toy service did not start")


def stop_proc(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(3)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def read_jsonl(path: Path) -> list:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            rows.append(None)
    return rows


def write_jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def split_ledger(rows: list, outdir: Path) -> None:
    objs = [r for r in rows if isinstance(r, dict)]
    write_jsonl(outdir / "ledger_model.jsonl", [r for r in objs if r.get("kind") == "model"])
    write_jsonl(outdir / "ledger_tool.jsonl", [r for r in objs if r.get("kind") == "tool"])
    write_jsonl(outdir / "ledger_secret.jsonl",
                [r for r in objs if r.get("kind") == "tool" and str(r.get("name", "")).replace(" ", "").upper() == "GET/SECRET"])


def longest_identical_failures(model_statuses: list[int], access: list[dict]) -> list[dict]:
    best: list[dict] = []
    streams = [
        [{"call": "model", "status": s} for s in model_statuses],
        [{"call": f"{a['method']} {a['path']}", "status": a["status"]} for a in access],
    ]
    for stream in streams:
        run: list[dict] = []
        for event in stream:
            if event["status"] >= 400 and run and run[-1] == event:
                run.append(event)
            elif event["status"] >= 400:
                run = [event]
            else:
                run = []
            if len(run) > len(best):
                best = list(run)
    return best


def write_evidence(outdir: Path, ledger_path: Path, model_statuses: list[int], access: list[dict],
                   exit_code: int | None, wall: float, timed_out: bool) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(ledger_path)
    if ledger_path.exists() and ledger_path.resolve() != (outdir / "ledger.jsonl").resolve():
        (outdir / "ledger.jsonl").write_bytes(ledger_path.read_bytes())
    split_ledger(rows, outdir)
    write_jsonl(outdir / "seen_model.jsonl", [{"n": 1, "status": s} for s in model_statuses])
    write_jsonl(outdir / "seen_tool.jsonl", [dict(n=1, method=a["method"], path=a["path"], status=a["status"]) for a in access])
    write_jsonl(outdir / "secret.jsonl", [a for a in access if a["method"] == "GET" and a["path"] == "/secret"])
    write_jsonl(outdir / "items.jsonl", [a for a in access if a["path"] == "/items"])
    write_jsonl(outdir / "identical_errors.jsonl", longest_identical_failures(model_statuses, access))
    write_jsonl(outdir / "run.jsonl", [{"exit": exit_code, "exit_ok": exit_code in (0, 1) and not timed_out,
                                        "wall_secs": round(wall, 3), "timed_out": timed_out}])


class Run:
    def __init__(self, name, exit_code, rows, model_statuses, access, output):
        self.name, self.exit_code, self.rows = name, exit_code, rows
        self.model_statuses, self.access, self.output = model_statuses, access, output

    @property
    def model_rows(self):
        return [r for r in self.rows if isinstance(r, dict) and r.get("kind") == "model"]

    @property
    def tool_rows(self):
        return [r for r in self.rows if isinstance(r, dict) and r.get("kind") == "tool"]


def run_agent(name: str, script: list[dict], down_after: int | None = None, timeout: float = 30.0) -> Run:
    """Run `python3 agent_run.py` once, confined; keep the evidence under runs/<name>/
    of the evidence folder."""
    outdir = evidence_dir("runs/" + name)
    access_log = outdir / "access.jsonl"
    ledger = Path(".gatehouse/agent-ledgers") / (name + ".jsonl")
    ledger.parent.mkdir(parents=True, exist_ok=True)
    for p in (access_log, ledger, outdir / "ledger.jsonl"):
        if p.exists():
            p.unlink()
    toy, port = start_toy(access_log)
    model = ScriptedModel(script, down_after)
    env = dict(os.environ, TOY_BASE_URL=f"http://127.0.0.1:{port}", LLM_ENDPOINT=model.endpoint, LEDGER_PATH=str(ledger))
    t0 = time.monotonic()
    timed_out = False
    out_path = outdir / "agent.out"
    with open(out_path, "wb") as out:
        proc = popen_confined([sys.executable, "agent_run.py"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code, timed_out = None, True
    wall = time.monotonic() - t0
    model.stop()
    stop_proc(toy)
    access = [a for a in read_jsonl(access_log) if isinstance(a, dict)]
    write_evidence(outdir, ledger, list(model.statuses), access, code, wall, timed_out)
    return Run(name, code, read_jsonl(ledger), list(model.statuses), access,
               out_path.read_text(errors="replace")[-2000:])
