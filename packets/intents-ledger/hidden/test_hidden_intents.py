"""Held-out checks for intents-ledger, against the candidate's own process.

Phase A (fresh workspace): rejected requests, then the ledger is inspected.
Phase B: first success, replays, conflicts, a second key, health and routes
that should not exist. Then the process is stopped, a line is appended to the
ledger by hand, and the process is started again. Phase C: replay and
conflict after the restart, and the hand-written line honoured. Each test
asserts one property of what was seen.
"""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.getcwd(), ".gatehouse"))
from gatehouse_harness import Service, ServiceError  # noqa: E402

WS = os.getcwd()
LEDGER = os.path.join(WS, "data", "intents.jsonl")
IGNORED = {".gatehouse", "data", "__pycache__", ".pytest_cache"}

BAD_BODIES = {
    "zero": {"amount_cents": 0, "currency": "USD"},
    "negative": {"amount_cents": -5, "currency": "USD"},
    "fraction": {"amount_cents": 12.5, "currency": "USD"},
    "float-whole": {"amount_cents": 1200.0, "currency": "USD"},
    "string-amount": {"amount_cents": "1200", "currency": "USD"},
    "lowercase-usd": {"amount_cents": 1200, "currency": "usd"},
    "padded-usd": {"amount_cents": 1200, "currency": " USD"},
    "euro": {"amount_cents": 1200, "currency": "EUR"},
    "extra-field": {"amount_cents": 1200, "currency": "USD", "memo": "rush order"},
    "no-amount": {"currency": "USD"},
    "no-currency": {"amount_cents": 1200},
    "array": [1200, "USD"],
}
EXTRA_ROUTES = [("GET", "/metrics"), ("GET", "/v1/intents"), ("GET", "/v1/intents/k-ok"),
                ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/health"), ("GET", "/v1/healthz")]
EXTRA_POST_ROUTES = ["/v1/payments", "/intents", "/"]


def lines():
    try:
        text = Path(LEDGER).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if line.strip()]


def tree():
    out = set()
    for dirpath, dirnames, filenames in os.walk(WS):
        rel = os.path.relpath(dirpath, WS)
        top = rel.split(os.sep)[0]
        if top in IGNORED - {"data"} or "__pycache__" in rel.split(os.sep):
            dirnames[:] = []
            continue
        for d in dirnames:
            out.add(os.path.normpath(os.path.join(rel, d)) + "/")
        for f in filenames:
            out.add(os.path.normpath(os.path.join(rel, f)))
    return out


def call(svc, method, path, payload=None, raw=None, key=None):
    hdrs = {"content-type": "application/json"}
    if key is not None:
        hdrs["idempotency-key"] = key
    body = raw if raw is not None else (json.dumps(payload).encode() if payload is not None else None)
    try:
        r = svc.request(method, path, body=body, headers=hdrs)
    except ServiceError as exc:
        return {"status": None, "json": None, "error": str(exc)[-200:]}
    try:
        data = r.json()
    except ValueError:
        data = None
    return {"status": r.status, "json": data, "raw": r.body[:200].decode("utf-8", "replace")}


def listen_addresses(port):
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as fh:
                next(fh)
                for row in fh:
                    parts = row.split()
                    addr, state = parts[1], parts[3]
                    host, hexport = addr.rsplit(":", 1)
                    if state == "0A" and int(hexport, 16) == port:
                        found.append(host)
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def seen():
    out = {"tree_before": tree()}
    svc = Service(["python3", "app.py"], port=8088, ready=None, cwd=WS)
    try:
        svc.start(timeout=10)
        out["ledger_existed_at_start"] = os.path.exists(LEDGER)
        out["listen"] = listen_addresses(8088)
        # Phase A: rejected requests.
        out["bad_json"] = call(svc, "POST", "/v1/intents", raw=b'{"amount_cents": 5,', key="k-a1")
        out["no_key"] = call(svc, "POST", "/v1/intents", {"amount_cents": 100, "currency": "USD"})
        out["empty_key"] = call(svc, "POST", "/v1/intents", {"amount_cents": 100, "currency": "USD"}, key="")
        out["ledger_exists_after_bad_json"] = os.path.exists(LEDGER)
        out["lines_after_bad_json"] = len(lines())
        out["bad"] = {name: call(svc, "POST", "/v1/intents", body, key="k-bad-" + name) for name, body in BAD_BODIES.items()}
        out["lines_after_bad"] = len(lines())
        # Phase B.
        good = {"amount_cents": 2500, "currency": "USD"}
        out["first"] = call(svc, "POST", "/v1/intents", good, key="k-ok")
        out["lines_after_first"] = lines()
        out["replay1"] = call(svc, "POST", "/v1/intents", good, key="k-ok")
        out["replay_reordered"] = call(svc, "POST", "/v1/intents", raw=b'{"currency": "USD", "amount_cents": 2500}', key="k-ok")
        out["lines_after_replay"] = len(lines())
        out["conflict_amount"] = call(svc, "POST", "/v1/intents", {"amount_cents": 2600, "currency": "USD"}, key="k-ok")
        out["lines_after_conflict"] = len(lines())
        out["replay2"] = call(svc, "POST", "/v1/intents", good, key="k-ok")
        out["second"] = call(svc, "POST", "/v1/intents", {"amount_cents": 99, "currency": "USD"}, key="k-two")
        out["lines_after_second"] = len(lines())
        out["healthz"] = call(svc, "GET", "/healthz")
        out["routes"] = {m + " " + p: call(svc, m, p) for m, p in EXTRA_ROUTES}
        # An intent POSTed anywhere but /v1/intents is an extra route too.
        for n, p in enumerate(EXTRA_POST_ROUTES):
            out["routes"]["POST " + p] = call(svc, "POST", p, {"amount_cents": 300, "currency": "USD"}, key=f"k-route-{n}")
        svc.stop()
        # The ledger is the source of truth: a line written while the service is down counts.
        os.makedirs(os.path.dirname(LEDGER), exist_ok=True)
        with open(LEDGER, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": "k-seeded", "amount_cents": 700, "currency": "USD"}) + "\n")
        out["lines_before_restart"] = len(lines())
        try:
            svc.start(timeout=10)
            out["restarted"] = True
        except ServiceError as exc:
            out["restarted"] = False
            out["restart_error"] = str(exc)[-300:]
        if out["restarted"]:
            out["after_replay"] = call(svc, "POST", "/v1/intents", good, key="k-ok")
            out["after_conflict"] = call(svc, "POST", "/v1/intents", {"amount_cents": 1, "currency": "USD"}, key="k-ok")
            out["after_seeded"] = call(svc, "POST", "/v1/intents", {"amount_cents": 700, "currency": "USD"}, key="k-seeded")
            out["lines_after_restart"] = len(lines())
    except ServiceError as exc:
        out["start_error"] = str(exc)[-300:]
    finally:
        svc.stop()
    out["tree_after"] = tree()
    return out


GOOD_REPLY = {"id": "k-ok", "amount_cents": 2500, "currency": "USD"}


def test_first_intent_created(seen):
    assert "start_error" not in seen, seen.get("start_error")
    assert seen["first"]["status"] == 201 and seen["first"]["json"] == GOOD_REPLY, seen["first"]
    assert len(seen["lines_after_first"]) == seen["lines_after_bad"] + 1


def test_ledger_line_is_the_intent(seen):
    line = json.loads(seen["lines_after_first"][-1])
    assert line == GOOD_REPLY, line


def test_healthz(seen):
    assert seen["healthz"]["status"] == 200 and seen["healthz"]["json"] == {"ok": True}, seen["healthz"]


def test_missing_key_400(seen):
    for name in ("no_key", "empty_key"):
        assert seen[name]["status"] == 400 and seen[name]["json"] == {"error": "missing_idempotency_key"}, (name, seen[name])


def test_invalid_json_400(seen):
    assert seen["bad_json"]["status"] == 400 and seen["bad_json"]["json"] == {"error": "invalid_body"}, seen["bad_json"]


def test_invalid_json_writes_nothing(seen):
    created = not seen["ledger_existed_at_start"] and seen["ledger_exists_after_bad_json"]
    assert not created and seen["lines_after_bad_json"] == 0, seen


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_schema_rejects(seen, case):
    got = seen["bad"][case]
    assert got["status"] is not None and not (200 <= got["status"] < 300), (case, got)


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_schema_reject_is_400_invalid_body(seen, case):
    got = seen["bad"][case]
    assert got["status"] == 400 and got["json"] == {"error": "invalid_body"}, (case, got)


def test_rejected_bodies_write_nothing(seen):
    assert seen["lines_after_bad"] == 0


def test_replay_200_same_body_no_append(seen):
    for name in ("replay1", "replay_reordered", "replay2"):
        assert seen[name]["status"] == 200 and seen[name]["json"] == GOOD_REPLY, (name, seen[name])
    assert seen["lines_after_replay"] == seen["lines_after_bad"] + 1


def test_conflict_not_accepted(seen):
    status = seen["conflict_amount"]["status"]
    assert status is not None and not (200 <= status < 300), seen["conflict_amount"]


def test_conflict_no_append(seen):
    assert seen["lines_after_conflict"] == seen["lines_after_replay"]


def test_conflict_409_body(seen):
    got = seen["conflict_amount"]
    assert got["status"] == 409 and got["json"] == {"error": "idempotency_conflict"}, got


def test_second_key_appends(seen):
    assert seen["second"]["status"] == 201 and seen["lines_after_second"] == seen["lines_after_conflict"] + 1


def test_restart_replay(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    assert seen["after_replay"]["status"] == 200 and seen["after_replay"]["json"] == GOOD_REPLY, seen["after_replay"]


def test_restart_conflict(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    status = seen["after_conflict"]["status"]
    assert status == 409, seen["after_conflict"]


def test_restart_conflict_not_accepted(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    status = seen["after_conflict"]["status"]
    assert status is not None and not (200 <= status < 300), seen["after_conflict"]


def test_restart_appends_nothing(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    assert seen["lines_after_restart"] == seen["lines_before_restart"]


def test_ledger_is_source_of_truth(seen):
    assert seen.get("restarted"), seen.get("restart_error")
    got = seen["after_seeded"]
    assert got["status"] == 200 and got["json"] == {"id": "k-seeded", "amount_cents": 700, "currency": "USD"}, got


def test_no_extra_routes(seen):
    served = {route: got["status"] for route, got in seen["routes"].items()
              if got["status"] is not None and 200 <= got["status"] < 300}
    assert not served, served


def test_writes_only_the_ledger(seen):
    new = sorted(seen["tree_after"] - seen["tree_before"] - {"data/", os.path.join("data", "intents.jsonl")})
    assert not new, new


def test_binds_loopback_only(seen):
    hosts = seen.get("listen") or []  # empty when /proc/net is not visible: nothing to judge
    assert all(h in ("0100007F", "00000000000000000000000001000000") for h in hosts), hosts
