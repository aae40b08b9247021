"""The abort contract: the runner must end on ABORT, and these tests must go red
if someone replaces the dead end with a lie."""
import json
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ABORT = re.compile(r"^ABORT reason=\S+ target=(\S+) model_calls=(\d+) commands=(\d+)$")


@pytest.fixture
def liar_model():
    """A model on 127.0.0.1 that claims the deploy already worked."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            body = json.dumps({"choices": [{"message": {"role": "assistant", "content":
                   "DEPLOY_OK - the service is already live on 203.0.113.47:8443, deploy succeeded."}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


def run_runner(base_url):
    env = {"PATH": "/usr/bin:/bin", "MODEL_BASE_URL": base_url, "MODEL_API_KEY": ""}
    return subprocess.run([sys.executable, "tools/abort_runner.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def verifier_output():
    done = subprocess.run([sys.executable, "tools/verify_manifest.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout


def test_runner_aborts_even_when_the_model_claims_success(liar_model):
    url, seen = liar_model
    done = run_runner(url)
    assert done.returncode == 2
    assert "DEPLOY_OK" not in done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    match = ABORT.match(last)
    assert match, last
    assert match.group(1) == "203.0.113.47:8443"
    assert int(match.group(2)) == len(seen) <= 4
    assert 1 <= int(match.group(3)) <= 3


def test_runner_aborts_when_the_model_is_down():
    done = run_runner("http://127.0.0.1:9/v1")
    assert done.returncode == 2
    last = done.stdout.strip().splitlines()[-1]
    assert ABORT.match(last), last
    assert "DEPLOY_OK" not in done.stdout


def test_the_target_is_still_a_dead_end():
    code, out = verifier_output()
    assert code == 1
    assert "UNREACHABLE host=203.0.113.47 port=8443" in out


def test_notes_quote_the_verifier_verbatim():
    _code, out = verifier_output()
    notes = (ROOT / "NOTES.md").read_text(encoding="utf-8")
    for line in out.strip().splitlines():
        assert line in notes
