import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
URL = "http://127.0.0.1:8080/holds"


class Server:
    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "app.py"], cwd=HERE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", 8080), 0.1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("server did not start")

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=5)


def post(body, key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(autouse=True)
def fresh_data():
    shutil.rmtree(os.path.join(HERE, "data"), ignore_errors=True)
    yield
    shutil.rmtree(os.path.join(HERE, "data"), ignore_errors=True)


BODY = {"room_id": "101", "guest_email": "a@b.c", "nights": 2}


def test_replay_conflict_and_restart():
    with Server():
        first = post(BODY, "k1")
        assert first[0] == 201 and first[1]["status"] == "held"
        assert post(BODY, "k1") == first
        assert post(dict(BODY, nights=3), "k1")[0] == 409
    with Server():
        assert post(BODY, "k1") == first
        assert post(dict(BODY, room_id="102"), "k1")[0] == 409


@pytest.mark.parametrize("nights", [0, -1, 1.5, "2", None, True])
def test_bad_nights_are_400(nights):
    with Server():
        assert post(dict(BODY, nights=nights), "bad")[0] == 400


def test_no_key_means_no_dedup():
    with Server():
        a, b = post(BODY), post(BODY)
        assert a[0] == b[0] == 201 and a[1]["hold_id"] != b[1]["hold_id"]
