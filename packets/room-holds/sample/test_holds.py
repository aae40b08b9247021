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
    assert hold["status"] == "held" and hold["room_id"] == "12A" and hold["nights"] == 2
    assert isinstance(hold["hold_id"], str) and hold["hold_id"]


def test_same_key_same_body_replays_the_first_response(server):
    key = uuid.uuid4().hex
    first = post(body(), key)
    second = post(body(), key)
    third = post(body(), key)
    assert first[0] == 201
    assert second == first and third == first


def test_without_key_every_request_is_a_new_hold(server):
    a = post(body())
    b = post(body())
    assert a[0] == b[0] == 201
    assert a[1]["hold_id"] != b[1]["hold_id"]


def test_same_key_different_body_is_409_and_keeps_the_original(server):
    key = uuid.uuid4().hex
    first = post(body(), key)
    status, payload = post(body(nights=5), key)
    assert status == 409
    assert payload["error"] == "idempotency_conflict"
    assert post(body(room_id="99"), key)[0] == 409
    assert post(body(), key) == first


@pytest.mark.parametrize("nights", [0, -1, 1.5, "2", None, True])
def test_invalid_nights_is_400_and_stores_nothing(server, nights):
    key = uuid.uuid4().hex
    status, payload = post(body(nights=nights), key)
    assert status == 400 and payload["error"] == "invalid_body"
    # The key was not used up by the rejected request.
    assert post(body(), key)[0] == 201


def test_missing_nights_is_400(server):
    b = body()
    del b["nights"]
    assert post(b, uuid.uuid4().hex)[0] == 400


def test_restart_remembers_the_key():
    key = uuid.uuid4().hex
    proc = start_server()
    try:
        first = post(body(), key)
    finally:
        stop_server(proc)
    proc = start_server()
    try:
        assert post(body(), key) == first
        assert post(body(nights=3), key)[0] == 409
    finally:
        stop_server(proc)
