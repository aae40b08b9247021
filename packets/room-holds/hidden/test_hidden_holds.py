"""Held-out replay checks for room-holds.

One scenario runs once against the candidate's own server (`python3 app.py`
on 127.0.0.1:8080, started by the grader's harness): a first request, the
same request again (twice), conflicting bodies on the same key, the first
body once more, invalid nights and invalid bodies on fresh keys, a one-night
hold, a request with no key, then a restart of the process and the same key
again. Each test asserts one property of what was seen.
"""

import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import Service, ServiceError  # noqa: E402

BODY = {"room_id": "R-204", "guest_email": "ada@example.test", "nights": 3}
INVALID_NIGHTS = {"zero": 0, "negative": -2, "fraction": 1.5, "word": "three", "null": None, "missing": ...}
# Bodies that are not the brief's {"room_id": string, "guest_email": string, "nights": integer}.
INVALID_BODIES = {
    "no-room": {k: v for k, v in BODY.items() if k != "room_id"},
    "room-number": dict(BODY, room_id=204),
    "no-email": {k: v for k, v in BODY.items() if k != "guest_email"},
    "email-number": dict(BODY, guest_email=7),
    "list": [BODY],
}


def _post(svc, body, key):
    headers = {"Idempotency-Key": key} if key else {}
    try:
        r = svc.request("POST", "/holds", json=body, headers=headers)
    except ServiceError as exc:
        return {"status": None, "json": None, "error": str(exc)}
    try:
        data = r.json()
    except ValueError:
        data = None
    return {"status": r.status, "json": data, "raw": r.body[:200]}


@pytest.fixture(scope="module")
def seen():
    svc = Service(["python3", "app.py"], port=8080, ready=None, cwd=os.getcwd())
    out = {}
    key = "hk-" + uuid.uuid4().hex
    try:
        svc.start(timeout=10)
        out["first"] = _post(svc, BODY, key)
        out["replay1"] = _post(svc, BODY, key)
        out["replay2"] = _post(svc, BODY, key)
        out["conflict_nights"] = _post(svc, dict(BODY, nights=7), key)
        out["conflict_room"] = _post(svc, dict(BODY, room_id="R-999"), key)
        out["replay3"] = _post(svc, BODY, key)
        for name, value in INVALID_NIGHTS.items():
            bad = dict(BODY)
            if value is ...:
                del bad["nights"]
            else:
                bad["nights"] = value
            out["invalid_" + name] = _post(svc, bad, "hk-bad-" + uuid.uuid4().hex)
        for name, bad in INVALID_BODIES.items():
            out["badbody_" + name] = _post(svc, bad, "hk-bad-" + uuid.uuid4().hex)
        # The smallest valid stay, and a client that sends no key (the brief: "may").
        out["one_night"] = _post(svc, dict(BODY, room_id="R-101", nights=1), "hk-" + uuid.uuid4().hex)
        out["keyless"] = _post(svc, dict(BODY, room_id="R-102"), None)
        try:
            svc.restart(timeout=10)
            out["restarted"] = True
        except ServiceError as exc:
            out["restarted"] = False
            out["restart_error"] = str(exc)[-300:]
        if out["restarted"]:
            out["after_restart"] = _post(svc, BODY, key)
            out["after_restart_conflict"] = _post(svc, dict(BODY, nights=9), key)
            out["after_restart_fresh"] = _post(svc, BODY, "hk-" + uuid.uuid4().hex)
    except ServiceError as exc:
        out["start_error"] = str(exc)[-300:]
    finally:
        svc.stop()
    return out


def _hold_id(resp):
    data = resp and resp.get("json")
    return data.get("hold_id") if isinstance(data, dict) else None


def test_first_post_creates_hold(seen):
    assert "start_error" not in seen, seen.get("start_error")
    first = seen["first"]
    assert first["status"] == 201, first
    data = first["json"]
    assert isinstance(data, dict) and isinstance(data.get("hold_id"), str) and data["hold_id"], first
    assert data.get("room_id") == BODY["room_id"] and data.get("nights") == BODY["nights"], first
    assert data.get("status") == "held", first


def test_replay_returns_same_hold(seen):
    first = _hold_id(seen.get("first"))
    assert first
    for name in ("replay1", "replay2", "replay3"):
        assert _hold_id(seen[name]) == first, (name, seen[name])


def test_replay_status_consistent(seen):
    first = seen["first"]["status"]
    got = {name: seen[name]["status"] for name in ("replay1", "replay2", "replay3", "after_restart") if name in seen}
    assert all(status == first for status in got.values()), {"first": first, **got}


def test_conflict_rejected_409(seen):
    for name in ("conflict_nights", "conflict_room"):
        assert seen[name]["status"] == 409, (name, seen[name])


def test_conflict_after_restart_409(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    assert seen["after_restart_conflict"]["status"] == 409, seen["after_restart_conflict"]


@pytest.mark.parametrize("case", sorted(INVALID_NIGHTS))
def test_invalid_nights_not_accepted(seen, case):
    status = seen["invalid_" + case]["status"]
    assert status is not None and not (200 <= status < 300), (case, seen["invalid_" + case])


@pytest.mark.parametrize("case", sorted(INVALID_NIGHTS))
def test_invalid_nights_is_client_error(seen, case):
    status = seen["invalid_" + case]["status"]
    assert status is not None and 400 <= status < 500, (case, seen["invalid_" + case])


@pytest.mark.parametrize("case", sorted(INVALID_BODIES))
def test_invalid_body_is_client_error(seen, case):
    status = seen["badbody_" + case]["status"]
    assert status is not None and 400 <= status < 500, (case, seen["badbody_" + case])


def test_one_night_is_a_hold(seen):
    got = seen["one_night"]
    data = got["json"]
    assert got["status"] == 201 and isinstance(data, dict) and data.get("nights") == 1, got


def test_request_without_key_is_not_a_server_error(seen):
    # Without the header the service may hold or refuse (the brief leaves it
    # open), but it answers: a 5xx (or no answer) is a crash on a valid body.
    got = seen["keyless"]
    assert got["status"] is not None and got["status"] < 500, got


def test_restart_replays_same_hold(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    assert _hold_id(seen["after_restart"]) == _hold_id(seen["first"]), seen["after_restart"]


def test_restart_serves_new_holds(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    fresh = seen["after_restart_fresh"]
    assert fresh["status"] == 201 and _hold_id(fresh) not in (None, _hold_id(seen["first"])), fresh
