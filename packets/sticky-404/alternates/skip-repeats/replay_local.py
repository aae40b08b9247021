"""Helper for replay.sh: provide the toy service and the rehearsal model when
the environment does not, run agent_run.py, and stop what was started."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def start(script: str, port_file: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, script, "--port", "0", "--port-file", str(port_file)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text().strip())
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise SystemExit(f"{script} did not report a port")


def main() -> int:
    started: list[subprocess.Popen] = []
    env = dict(os.environ)
    env.setdefault("LEDGER_PATH", "ledger.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if not env.get("TOY_BASE_URL"):
                proc, port = start("toy_service.py", Path(tmp) / "toy.port")
                started.append(proc)
                env["TOY_BASE_URL"] = f"http://127.0.0.1:{port}"
            if not env.get("LLM_ENDPOINT"):
                proc, port = start("fake_model.py", Path(tmp) / "model.port")
                started.append(proc)
                env["LLM_ENDPOINT"] = f"http://127.0.0.1:{port}/v1/chat/completions"
            code = subprocess.run([sys.executable, "agent_run.py"], env=env, timeout=44).returncode
        except subprocess.TimeoutExpired:
            code = 1
        finally:
            for proc in started:
                proc.terminate()
            for proc in started:
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
