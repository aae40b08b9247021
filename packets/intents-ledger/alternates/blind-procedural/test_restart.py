"""Extra checks: restarts, lines already on disk, and rejections that must not write.

    python3 -m unittest test_restart.py
"""

import json
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.abspath(__file__))
STORE = os.path.join(ROOT, "data", "intents.jsonl")
ENDPOINT = "http://127.0.0.1:8088/v1/intents"


def boot():
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until = time.monotonic() + 10
    while time.monotonic() < until:
        if proc.poll() is not None:
            raise RuntimeError("app.py exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", 8088), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("app.py is not listening on 8088")


def halt(proc):
    proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def store_bytes():
    try:
        with open(STORE, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return b""


def post(key, body=None, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(ENDPOINT, data=data, method="POST")
    if key is not None:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


USD = lambda cents: {"amount_cents": cents, "currency": "USD"}  # noqa: E731


class RestartAndDisk(unittest.TestCase):
    def setUp(self):
        if os.path.exists(STORE):
            os.remove(STORE)
        self.proc = None

    def tearDown(self):
        if self.proc is not None:
            halt(self.proc)

    def test_every_answer_is_the_same_after_a_restart(self):
        self.proc = boot()
        answers = [post("r-1", USD(250)), post("r-1", USD(250)), post("r-1", USD(999))]
        self.assertEqual([a[0] for a in answers], [201, 200, 409])
        halt(self.proc)
        self.proc = boot()
        self.assertEqual(post("r-1", USD(250)), (200, answers[0][1]))
        self.assertEqual(post("r-1", USD(999)), answers[2])
        self.assertEqual(store_bytes().count(b"\n"), 1)

    def test_lines_written_before_start_count(self):
        os.makedirs(os.path.dirname(STORE), exist_ok=True)
        with open(STORE, "wb") as fh:
            fh.write(b'{"currency": "USD", "amount_cents": 42, "id": "pre-1"}\n')
            fh.write(b'{"id": "pre-2", "amount_cents": 7, "currency": "USD"}')  # no final newline
        self.proc = boot()
        self.assertEqual(post("pre-1", USD(42)), (200, {"id": "pre-1", "amount_cents": 42, "currency": "USD"}))
        self.assertEqual(post("pre-2", USD(8)), (409, {"error": "idempotency_conflict"}))
        self.assertEqual(post("fresh", USD(1))[0], 201)
        ids = [json.loads(line)["id"] for line in store_bytes().splitlines()]
        self.assertEqual(ids, ["pre-1", "pre-2", "fresh"])

    def test_rejected_requests_leave_the_store_alone(self):
        self.proc = boot()
        post("keep", USD(5))
        before = store_bytes()
        cases = [
            (None, USD(5), "missing_idempotency_key"),
            ("", USD(5), "missing_idempotency_key"),
            ("k", {"amount_cents": -1, "currency": "USD"}, "invalid_body"),
            ("k", {"amount_cents": 5.5, "currency": "USD"}, "invalid_body"),
            ("k", {"amount_cents": False, "currency": "USD"}, "invalid_body"),
            ("k", {"amount_cents": "5", "currency": "USD"}, "invalid_body"),
            ("k", {"currency": "USD"}, "invalid_body"),
            ("k", {"amount_cents": 5, "currency": "USD", "memo": ""}, "invalid_body"),
            ("k", "USD", "invalid_body"),
            ("keep", {"amount_cents": 0, "currency": "USD"}, "invalid_body"),
        ]
        for key, body, code in cases:
            with self.subTest(key=key, body=body):
                self.assertEqual(post(key, body), (400, {"error": code}))
        self.assertEqual(post("k", raw=b""), (400, {"error": "invalid_body"}))
        self.assertEqual(store_bytes(), before)


if __name__ == "__main__":
    unittest.main()
