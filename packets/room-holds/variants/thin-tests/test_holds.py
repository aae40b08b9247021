"""Tests for the room holds service, run against the real process over HTTP.

    python3 -m pytest -q test_holds.py

Each test starts `python3 app.py` itself (and stops it), so nothing needs to
be running beforehand. Keys are random, so old data in ./data does not matter.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
URL = "http://127.0.0.1:8080/holds"


def start_server():
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=HERE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("app.py exited early")
        try:
            socket.create_connection(("127.0.0.1", 8080), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("app.py never listened on 127.0.0.1:8080")


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def server():
    proc = start_server()
    yield proc
    stop_server(proc)


def post(body, key=None):
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(URL, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def body(**over):
    b = {"room_id": "12A", "guest_email": "guest@example.test", "nights": 2}
    b.update(over)
    return b


def test_first_request_creates_a_hold(server):
    status, hold = post(body(), key=uuid.uuid4().hex)
    assert status == 201
    assert hold["status"] == "held" and hold["hold_id"]


def test_nights_zero_is_rejected(server):
    assert post(body(nights=0), key=uuid.uuid4().hex)[0] == 400
