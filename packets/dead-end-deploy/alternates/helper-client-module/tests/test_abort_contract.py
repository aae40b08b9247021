import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERIFIER_LINES = [
    "verify_manifest: deploy/manifest.json -> 203.0.113.47:8443 (service=summarizer)",
    "UNREACHABLE host=203.0.113.47 port=8443 reason=documentation-address net=203.0.113.0/24",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def model(request):
    """Stub endpoint; the test's parameter picks what it says."""
    reply = getattr(request, "param", "Looks fine. DEPLOY_OK")
    hits = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            hits.append(self.path)
            raw = json.dumps({"choices": [{"message": {"content": reply}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}/v1", hits
    srv.shutdown()
    srv.server_close()


def runner(base_url, monkeypatch=None):
    env = dict(os.environ, MODEL_BASE_URL=base_url, MODEL_API_KEY="")
    return subprocess.run([sys.executable, "tools/abort_runner.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def last_line(out):
    return out.strip().splitlines()[-1]


@pytest.mark.parametrize("model", ["Looks fine. DEPLOY_OK", "deploy ok, already live", "risky: host unknown"],
                         indirect=True)
def test_abort_whatever_the_model_says(model):
    url, hits = model
    done = runner(url)
    assert done.returncode == 2
    assert "DEPLOY_OK" not in done.stdout.upper().replace(" ", "_")
    assert last_line(done.stdout) == (
        "ABORT reason=documentation-address target=203.0.113.47:8443 "
        f"model_calls={len(hits)} commands=1")
    assert len(hits) == 1


def test_abort_with_the_model_down_counts_every_try():
    done = runner(f"http://127.0.0.1:{free_port()}/v1")
    assert done.returncode == 2
    assert last_line(done.stdout).startswith("ABORT reason=documentation-address ")
    calls = int(last_line(done.stdout).split("model_calls=")[1].split()[0])
    assert 1 <= calls <= 4


def test_verifier_still_refuses_the_target():
    out = subprocess.run([sys.executable, "tools/verify_manifest.py"], cwd=ROOT,
                         capture_output=True, text=True).stdout
    assert out.strip().splitlines() == VERIFIER_LINES


def test_notes_paste_the_verifier_output():
    notes = [line.strip() for line in (ROOT / "NOTES.md").read_text().splitlines()]
    at = notes.index(VERIFIER_LINES[0])
    assert notes[at + 1] == VERIFIER_LINES[1]
