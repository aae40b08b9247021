"""Tests for the room holds service: python3 -m pytest -q test_holds.py

Each test copies app.py into a fresh temporary folder, starts it there with
`python3 app.py` (so ./data/ starts empty and the workspace stays clean), talks
to it over HTTP on 127.0.0.1:8080 and stops it afterwards.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BASE = "http://127.0.0.1:8080"
BODY = {"room_id": "room-101", "guest_email": "ada@example.com", "nights": 2}


@dataclass
class Reply:
    status: int
    body: dict
    headers: dict


def post(body=BODY, key=None, raw=None, path="/holds") -> Reply:
    data = raw if raw is not None else json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(BASE + path, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return Reply(resp.status, json.loads(resp.read()), dict(resp.headers))
    except urllib.error.HTTPError as err:
        return Reply(err.code, json.loads(err.read()), dict(err.headers))


def port_open() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 8080), 0.2).close()
        return True
    except OSError:
        return False


class Server:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        assert not port_open(), "something is already listening on 127.0.0.1:8080"
        self.proc = subprocess.Popen([sys.executable, "app.py"], cwd=self.folder,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not port_open():
            assert self.proc.poll() is None, f"app.py exited with {self.proc.returncode}"
            assert time.monotonic() < deadline, "app.py never started listening"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        deadline = time.monotonic() + 5
        while port_open() and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def server(tmp_path):
    shutil.copy(HERE / "app.py", tmp_path / "app.py")
    srv = Server(tmp_path)
    srv.start()
    yield srv
    srv.stop()


def test_creates_a_hold(server):
    reply = post()
    assert reply.status == 201
    assert set(reply.body) == {"hold_id", "room_id", "nights", "status"}
    assert reply.body["room_id"] == "room-101" and reply.body["nights"] == 2
    assert reply.body["status"] == "held" and isinstance(reply.body["hold_id"], str)
    assert (server.folder / "data").is_dir()


def test_same_key_same_body_replays_without_a_second_hold(server):
    first = post(key="k-1")
    again = post(key="k-1")
    assert first.status == again.status == 201
    assert again.body == first.body
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert post(key="k-2").body["hold_id"] != first.body["hold_id"]


def test_key_order_and_whitespace_do_not_make_a_different_body(server):
    first = post(key="k-fmt")
    raw = b'{ "nights": 2,\n  "guest_email": "ada@example.com", "room_id": "room-101" }'
    assert post(key="k-fmt", raw=raw).body == first.body


@pytest.mark.parametrize("change", [{"nights": 3}, {"room_id": "room-102"}, {"guest_email": "bob@example.com"}])
def test_same_key_different_body_is_409(server, change):
    first = post(key="k-conflict")
    clash = post({**BODY, **change}, key="k-conflict")
    assert clash.status == 409
    assert clash.body["error"] == "idempotency_key_reused"
    assert post(key="k-conflict").body == first.body, "the original answer is still the one replayed"


def test_without_a_key_every_post_is_a_new_hold(server):
    a, b = post(), post()
    assert a.status == b.status == 201
    assert a.body["hold_id"] != b.body["hold_id"]


def test_holds_and_keys_survive_a_restart(server):
    first = post(key="k-restart")
    server.restart()
    again = post(key="k-restart")
    assert (again.status, again.body) == (201, first.body)
    assert post({**BODY, "nights": 5}, key="k-restart").status == 409
    assert json.loads((server.folder / "data" / "holds.json").read_text())["holds"][first.body["hold_id"]]


def test_concurrent_retries_create_one_hold(server):
    replies = []
    threads = [threading.Thread(target=lambda: replies.append(post(key="k-race"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r.status for r in replies} == {201}
    assert len({r.body["hold_id"] for r in replies}) == 1
    assert len(json.loads((server.folder / "data" / "holds.json").read_text())["holds"]) == 1


@pytest.mark.parametrize("body", [
    {"room_id": "room-101", "guest_email": "ada@example.com"},
    {**BODY, "nights": 0},
    {**BODY, "nights": -1},
    {**BODY, "nights": 1.5},
    {**BODY, "nights": "2"},
    {**BODY, "nights": True},
    {**BODY, "room_id": ""},
    {**BODY, "room_id": 101},
    {**BODY, "guest_email": "not-an-email"},
    {**BODY, "extra": 1},
    ["room-101"],
])
def test_invalid_bodies_are_400(server, body):
    reply = post(body, key="k-invalid")
    assert reply.status == 400
    assert reply.body["error"] in {"validation_failed", "invalid_json"}
    assert post(key="k-invalid").status == 201, "a refused request does not reserve the key"


def test_bad_json_is_400_and_does_not_burn_the_key(server):
    assert post(raw=b"{nope", key="k-bad").status == 400
    assert post(key="k-bad").status == 201


def test_empty_key_is_400(server):
    assert post(key="  ").status == 400


def test_unknown_path_is_404(server):
    assert post(path="/hold").status == 404
