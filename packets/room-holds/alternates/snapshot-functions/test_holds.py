import http.client
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))


def start():
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=1)
            c.request("POST", "/nope", body=b"{}")
            c.getresponse().read()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail("app.py never answered")


def stop(proc):
    proc.terminate()
    proc.wait(timeout=5)


def hold(body, key=None):
    c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=5)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    c.request("POST", "/holds", body=json.dumps(body), headers=headers)
    r = c.getresponse()
    return r.status, json.loads(r.read())


@pytest.fixture
def server():
    shutil.rmtree(os.path.join(ROOT, "data"), ignore_errors=True)
    proc = start()
    yield proc
    if proc.poll() is None:
        stop(proc)
    shutil.rmtree(os.path.join(ROOT, "data"), ignore_errors=True)


GUEST = {"room_id": "A1", "guest_email": "g@h.io", "nights": 1}


def test_same_key_same_body_same_answer(server):
    assert hold(GUEST, "x") == hold(GUEST, "x")


def test_same_key_other_body_is_409(server):
    hold(GUEST, "y")
    assert hold({**GUEST, "nights": 4}, "y")[0] == 409


def test_keys_survive_restart(server):
    first = hold(GUEST, "z")
    stop(server)
    again = start()
    try:
        assert hold(GUEST, "z") == first
        assert hold({**GUEST, "room_id": "B2"}, "z")[0] == 409
    finally:
        stop(again)


def test_zero_nights_rejected(server):
    assert hold({**GUEST, "nights": 0}, "w")[0] == 400
