"""Tests for the room-holds service. Most run against the service on 8080;
the restart test runs its own two processes on a free port (HOLDS_PORT) so it
never races a server another test left behind."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
GUEST = {"room_id": "A1", "guest_email": "g@h.io", "nights": 1}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(port=8080):
    env = dict(os.environ, HOLDS_PORT=str(port))
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail("app.py never listened on %d" % port)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=5)


def hold(port, body, key=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    c.request("POST", "/holds", body=json.dumps(body), headers=headers)
    r = c.getresponse()
    return r.status, json.loads(r.read())


def wipe():
    shutil.rmtree(os.path.join(ROOT, "data"), ignore_errors=True)


@pytest.fixture
def server():
    wipe()
    proc = start()
    yield 8080
    stop(proc)
    wipe()


def test_same_key_same_body_same_answer(server):
    assert hold(server, GUEST, "x") == hold(server, GUEST, "x")


def test_same_key_other_body_is_409(server):
    hold(server, GUEST, "y")
    assert hold(server, {**GUEST, "nights": 4}, "y")[0] == 409


def test_keys_survive_restart_on_a_free_port():
    wipe()
    port = free_port()
    first_proc = start(port)
    try:
        first = hold(port, GUEST, "z")
    finally:
        stop(first_proc)
    again = start(port)
    try:
        assert hold(port, GUEST, "z") == first
        assert hold(port, {**GUEST, "room_id": "B2"}, "z")[0] == 409
    finally:
        stop(again)
        wipe()


def test_zero_nights_rejected(server):
    assert hold(server, {**GUEST, "nights": 0}, "w")[0] == 400
