"""Extra tests beyond the frozen packet tests: restarts, pre-existing lines, more bad bodies.

    python3 -m unittest test_ledger_extra.py
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

HERE = os.path.dirname(os.path.abspath(__file__))
LEDGER = os.path.join(HERE, "data", "intents.jsonl")
BASE = "http://127.0.0.1:8088"


class Service:
    def __init__(self):
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "app.py"], cwd=HERE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("app.py exited early")
            try:
                socket.create_connection(("127.0.0.1", 8088), 0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise RuntimeError("nothing listens on 127.0.0.1:8088")
                time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def ledger_text():
    if not os.path.exists(LEDGER):
        return ""
    with open(LEDGER, encoding="utf-8") as fh:
        return fh.read()


def call(method, path, key=None, payload=None, raw=None):
    data = None
    if method == "POST":
        data = raw if raw is not None else json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(BASE + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return resp.status, json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read().decode("utf-8"))


def post(key, payload=None, raw=None):
    return call("POST", "/v1/intents", key, payload, raw)


class LedgerExtra(unittest.TestCase):
    def setUp(self):
        if os.path.exists(LEDGER):
            os.remove(LEDGER)
        self.service = Service()
        self.service.start()

    def tearDown(self):
        self.service.stop()

    def restart(self):
        self.service.stop()
        self.service.start()

    def test_answers_survive_a_restart(self):
        created = post("x-1", {"amount_cents": 700, "currency": "USD"})
        self.assertEqual(created[0], 201)
        self.restart()
        self.assertEqual(post("x-1", {"amount_cents": 700, "currency": "USD"}), (200, created[1]))
        self.assertEqual(post("x-1", {"amount_cents": 701, "currency": "USD"}),
                         (409, {"error": "idempotency_conflict"}))
        self.assertEqual(ledger_text().count("\n"), 1)

    def test_a_line_already_in_the_file_counts(self):
        self.service.stop()
        os.makedirs(os.path.dirname(LEDGER), exist_ok=True)
        with open(LEDGER, "w", encoding="utf-8") as fh:
            fh.write('{"id": "x-old", "amount_cents": 55, "currency": "USD"}')  # no trailing newline
        self.service.start()
        self.assertEqual(post("x-old", {"amount_cents": 55, "currency": "USD"}),
                         (200, {"id": "x-old", "amount_cents": 55, "currency": "USD"}))
        self.assertEqual(post("x-old", {"amount_cents": 56, "currency": "USD"})[0], 409)
        self.assertEqual(post("x-new", {"amount_cents": 1, "currency": "USD"})[0], 201)
        lines = ledger_text().splitlines()
        self.assertEqual([json.loads(l)["id"] for l in lines], ["x-old", "x-new"])

    def test_rejections_write_nothing(self):
        before = ledger_text()
        bad = [
            {"amount_cents": -5, "currency": "USD"},
            {"amount_cents": 1.0, "currency": "USD"},
            {"amount_cents": "100", "currency": "USD"},
            {"amount_cents": True, "currency": "USD"},
            {"amount_cents": 100, "currency": "usd"},
            {"amount_cents": 100},
            {"amount_cents": 100, "currency": "USD", "note": "x"},
            [100, "USD"],
        ]
        for payload in bad:
            with self.subTest(payload=payload):
                self.assertEqual(post("x-bad", payload), (400, {"error": "invalid_body"}))
        self.assertEqual(post("x-bad", raw=b'{"amount_cents": 1, "amount_cents": 2, "currency": "USD"}'),
                         (400, {"error": "invalid_body"}))
        self.assertEqual(post("", {"amount_cents": 1, "currency": "USD"}), (400, {"error": "missing_idempotency_key"}))
        self.assertEqual(ledger_text(), before)

    def test_conflict_leaves_history_alone(self):
        post("x-2", {"amount_cents": 10, "currency": "USD"})
        before = ledger_text()
        self.assertEqual(post("x-2", {"amount_cents": 11, "currency": "USD"})[0], 409)
        self.assertEqual(post("x-2", {"amount_cents": 10, "currency": "USD"})[0], 200)
        self.assertEqual(ledger_text(), before)

    def test_unknown_route_is_404(self):
        self.assertEqual(call("GET", "/v1/intents")[0], 404)
        self.assertEqual(call("POST", "/healthz", key="k", payload={})[0], 404)


if __name__ == "__main__":
    unittest.main()
