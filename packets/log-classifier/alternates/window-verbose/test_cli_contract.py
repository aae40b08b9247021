"""My tests: the command line against a real local HTTP endpoint (stdlib
http.server in a thread), plus a urlopen stand-in for the payload check.
They rely only on the public surface: classify_file, main, the command line
and urllib.request.urlopen."""

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import classify_logs


class Endpoint:
    def __init__(self, answer="WARN", status=200):
        self.answer, self.status, self.bodies = answer, status, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.bodies.append(body)
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": outer.answer}}]}).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    made = []

    def make(**kw):
        e = Endpoint(**kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def cli(url, tmp_path, lines):
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = dict(os.environ, LLM_ENDPOINT=url)
    return subprocess.run([sys.executable, "classify_logs.py", str(log)], env=env, capture_output=True, text=True, timeout=60)


LINES = [f"replica {i} lag {i * 3} s on shard {i % 7}" for i in range(80)]


def test_cli_prints_one_label_per_line(endpoint, tmp_path):
    e = endpoint(answer="WARN")
    proc = cli(e.url, tmp_path, LINES[:5])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["WARN"] * 5


def test_request_bytes_do_not_grow_with_the_log(endpoint, tmp_path):
    short, long = endpoint(), endpoint()
    cli(short.url, tmp_path, LINES[:4])
    cli(long.url, tmp_path, LINES)
    avg = lambda e: sum(map(len, e.bodies)) / len(e.bodies)
    assert avg(long) < avg(short) * 1.3 + 100


def test_a_repeated_line_is_asked_once(endpoint, tmp_path):
    e = endpoint()
    proc = cli(e.url, tmp_path, ["gc pause 40ms", "queue depth 9"] * 15)
    assert proc.returncode == 0
    assert len(e.bodies) == 2


@pytest.mark.parametrize("answer,status", [("INFO", 500), ("ERROR WARN", 200), ("Sure, it is INFO", 200), ("", 200)])
def test_bad_endpoint_fails_the_run(endpoint, tmp_path, answer, status):
    e = endpoint(answer=answer, status=status)
    proc = cli(e.url, tmp_path, ["replica 3 lag 9 s"])
    assert proc.returncode != 0
    assert proc.stdout.strip() == ""


def test_refused_connection_fails_the_run(tmp_path):
    e = Endpoint()
    url = e.url
    e.close()
    proc = cli(url, tmp_path, ["replica 3 lag 9 s"])
    assert proc.returncode != 0
    assert "INFO" not in proc.stdout
