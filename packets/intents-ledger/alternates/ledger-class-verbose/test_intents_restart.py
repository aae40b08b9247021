"""My extra tests: restart behaviour and hand-written ledger lines.

    python3 -m unittest test_intents_restart.py
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


def start():
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", 8088), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("app.py did not listen")


def stop(proc):
    proc.terminate()
    proc.wait(timeout=5)


def post(key, body):
    req = urllib.request.Request("http://127.0.0.1:8088/v1/intents", data=json.dumps(body).encode(),
                                 headers={"Idempotency-Key": key, "Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class Restart(unittest.TestCase):
    def setUp(self):
        if os.path.exists(LEDGER):
            os.remove(LEDGER)

    def test_conflict_survives_a_restart(self):
        proc = start()
        try:
            self.assertEqual(post("r1", {"amount_cents": 10, "currency": "USD"})[0], 201)
        finally:
            stop(proc)
        proc = start()
        try:
            self.assertEqual(post("r1", {"amount_cents": 10, "currency": "USD"}), (200, {"id": "r1", "amount_cents": 10, "currency": "USD"}))
            self.assertEqual(post("r1", {"amount_cents": 11, "currency": "USD"}), (409, {"error": "idempotency_conflict"}))
        finally:
            stop(proc)
        with open(LEDGER, encoding="utf-8") as fh:
            self.assertEqual(len([l for l in fh if l.strip()]), 1)

    def test_a_line_written_while_down_counts(self):
        os.makedirs(os.path.dirname(LEDGER), exist_ok=True)
        with open(LEDGER, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": "hand", "amount_cents": 5, "currency": "USD"}) + "\n")
        proc = start()
        try:
            self.assertEqual(post("hand", {"amount_cents": 6, "currency": "USD"})[0], 409)
            self.assertEqual(post("hand", {"amount_cents": True, "currency": "USD"})[0], 400)
        finally:
            stop(proc)


if __name__ == "__main__":
    unittest.main()
