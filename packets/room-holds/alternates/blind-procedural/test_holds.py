"""Service tests. Run: python3 -m pytest -q test_holds.py  (plain unittest works too)

Every test case copies app.py into its own temporary directory and runs
`python3 app.py` there, so ./data/ starts out missing and the workspace is
left untouched.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")
URL = "http://127.0.0.1:8080/holds"
GOOD = {"room_id": "R-12", "guest_email": "grace@example.org", "nights": 3}


def listening():
    try:
        socket.create_connection(("127.0.0.1", 8080), 0.2).close()
        return True
    except OSError:
        return False


def start_server(folder):
    if listening():
        raise RuntimeError("port 8080 is already taken; stop whatever runs there")
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    give_up = time.monotonic() + 10
    while not listening():
        if proc.poll() is not None:
            raise RuntimeError("app.py died with exit code %s" % proc.returncode)
        if time.monotonic() > give_up:
            proc.kill()
            raise RuntimeError("app.py did not listen within 10s")
        time.sleep(0.05)
    return proc


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    give_up = time.monotonic() + 5
    while listening() and time.monotonic() < give_up:
        time.sleep(0.05)


def send(body=None, key=None, raw=None, url=URL):
    data = raw if raw is not None else json.dumps(body if body is not None else GOOD).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    if key is not None:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class HoldsService(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="holds-")
        shutil.copy(APP, self.dir)
        self.proc = start_server(self.dir)

    def tearDown(self):
        stop_server(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self):
        stop_server(self.proc)
        self.proc = start_server(self.dir)

    def journal(self):
        with open(os.path.join(self.dir, "data", "holds.jsonl"), encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def test_happy_path(self):
        status, body = send(key="a1")
        self.assertEqual(status, 201)
        self.assertEqual(sorted(body), ["hold_id", "nights", "room_id", "status"])
        self.assertEqual((body["room_id"], body["nights"], body["status"]), ("R-12", 3, "held"))
        self.assertEqual(len(self.journal()), 1)

    def test_retry_with_same_key_and_body_is_replayed(self):
        first = send(key="a2")
        self.assertEqual(send(key="a2"), first)
        self.assertEqual(send(key="a2", raw=json.dumps(GOOD, indent=4, sort_keys=True).encode()), first)
        self.assertEqual(len(self.journal()), 1)

    def test_same_key_other_body_conflicts(self):
        first = send(key="a3")
        for other in ({**GOOD, "nights": 4}, {**GOOD, "room_id": "R-13"}, {**GOOD, "guest_email": "x@y.z"}):
            status, body = send(other, key="a3")
            self.assertEqual(status, 409, other)
            self.assertEqual(body["error"]["code"], "idempotency_conflict")
        self.assertEqual(send(key="a3"), first)
        self.assertEqual(len(self.journal()), 1)

    def test_no_key_means_no_deduplication(self):
        one, two = send(), send()
        self.assertEqual((one[0], two[0]), (201, 201))
        self.assertNotEqual(one[1]["hold_id"], two[1]["hold_id"])

    def test_restart_keeps_holds_and_keys(self):
        first = send(key="a4")
        send()
        self.restart()
        self.assertEqual(send(key="a4"), first)
        self.assertEqual(send({**GOOD, "nights": 9}, key="a4")[0], 409)
        status, fresh = send(key="a5")
        self.assertEqual(status, 201)
        self.assertNotIn(fresh["hold_id"], {first[1]["hold_id"]})
        self.assertEqual(len(self.journal()), 3)

    def test_torn_last_line_is_dropped_on_restart(self):
        first = send(key="a6")
        stop_server(self.proc)
        with open(os.path.join(self.dir, "data", "holds.jsonl"), "a", encoding="utf-8") as fh:
            fh.write('{"hold_id": "h-0000')
        self.proc = start_server(self.dir)
        self.assertEqual(send(key="a6"), first)
        self.assertEqual(send(key="a7")[0], 201)
        self.assertEqual(len(self.journal()), 2)

    def test_parallel_retries_make_one_hold(self):
        out = []
        workers = [threading.Thread(target=lambda: out.append(send(key="a8"))) for _ in range(10)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        self.assertEqual(len(out), 10)
        self.assertTrue(all(reply == out[0] for reply in out))
        self.assertEqual(len(self.journal()), 1)

    def test_bad_requests_are_400_and_leave_the_key_free(self):
        bad = [
            {"guest_email": "g@x.org", "nights": 1},
            {**GOOD, "room_id": "  "},
            {**GOOD, "guest_email": None},
            {**GOOD, "nights": 0},
            {**GOOD, "nights": 2.0},
            {**GOOD, "nights": False},
            {**GOOD, "nights": "3"},
            [GOOD],
        ]
        for body in bad:
            with self.subTest(body=body):
                self.assertEqual(send(body, key="a9")[0], 400)
        self.assertEqual(send(raw=b"not json", key="a9")[0], 400)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "data", "holds.jsonl")))
        self.assertEqual(send(key="a9")[0], 201)

    def test_blank_key_and_unknown_path(self):
        self.assertEqual(send(key=" ")[0], 400)
        self.assertEqual(send(url="http://127.0.0.1:8080/holds/")[0], 404)


if __name__ == "__main__":
    unittest.main()
