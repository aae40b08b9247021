"""Schemathesis hooks for the stateful fuzz of `/api/v1` (openapi.rs).

Each operation is called with its own credential: an API token for the
integration operations, the candidate's link token for submitting and for
witnessed runs. A stateful step that follows the document's `submit`
link carries the new assignment's token instead, and keeps it;
of the bearer values the fuzzer makes up (the document names a bearer
scheme), one in five is sent as it is, so refusals of unknown tokens stay
in the run. Beside the bodies and values the fuzzer makes up, those a real
client sends: an assignment of a published packet, a zip the grader takes,
the starter tree (its tests fail, so a red run is accepted), the id of a
graded submission. Every call is logged as one JSON line `[method, path
template, status]` (the method sent: the coverage phase also tries methods
a path does not take) for the test to read.

Set by the test: GH_FUZZ_API_TOKEN, GH_FUZZ_LINK_TOKEN, GH_FUZZ_GRADED_ID,
GH_FUZZ_SUBMISSION_ZIP and GH_FUZZ_RED_ZIP (paths), GH_FUZZ_LOG (a path).
"""

import json
import os
import re
import zlib

import schemathesis
from hypothesis import strategies as st

ENV = os.environ
API_TOKEN = ENV["GH_FUZZ_API_TOKEN"]
LINK_TOKEN = ENV["GH_FUZZ_LINK_TOKEN"]
GRADED_ID = ENV["GH_FUZZ_GRADED_ID"]
LOG = ENV["GH_FUZZ_LOG"]


def _read(name):
    with open(ENV[name], "rb") as f:
        return f.read()


SUBMISSION_ZIP = _read("GH_FUZZ_SUBMISSION_ZIP")
RED_ZIP = _read("GH_FUZZ_RED_ZIP")

SUBMIT = ("POST", "/api/v1/submissions")
WITNESS = ("POST", "/api/v1/witness/{kind}")
SUBMISSION = ("GET", "/api/v1/submissions/{id}")
RECEIPT = ("GET", "/api/v1/submissions/{id}/receipt")
# The operations a candidate's link token is the credential of.
LINK_OPERATIONS = {SUBMIT, WITNESS}
PUBLIC = {("GET", "/api/v1/openapi.json")}


# A link's value: a real token (64 hex digits), never one made up.
REAL_BEARER = re.compile(r"Bearer [0-9a-f]{64}")
ASSIGNMENTS = ("POST", "/api/v1/assignments")
NEW_ASSIGNMENTS = [
    {"packet": "null-status", "candidate_name": "Grace Hopper", "email": "grace@example.com"},
    {
        "packet": "null-status",
        "candidate_name": "Katherine Johnson",
        "email": "kj@example.org",
        "deadline": "2099-01-31T17:00:00Z",
        "time_box_minutes": 90,
        "results": "immediately",
        "max_submissions": 2,
    },
]


def _key(operation):
    return (operation.method.upper(), operation.path)


@schemathesis.hook
def before_generate_body(context, strategy):
    key = _key(context.operation)
    if key == ASSIGNMENTS:
        return st.one_of(st.sampled_from(NEW_ASSIGNMENTS), strategy)
    if key == SUBMIT:
        return st.one_of(st.just({"file": SUBMISSION_ZIP}), strategy)
    if key == WITNESS:
        return st.one_of(st.just({"file": RED_ZIP}), strategy)
    return strategy


@schemathesis.hook
def before_generate_path_parameters(context, strategy):
    key = _key(context.operation)
    if key in (SUBMISSION, RECEIPT):
        return st.one_of(st.just({"id": GRADED_ID}), strategy)
    if key == WITNESS:
        return st.one_of(st.just({"kind": "red"}), strategy)
    return strategy


@schemathesis.hook
def before_call(context, case, kwargs):
    key = _key(case.operation)
    if key in PUBLIC:
        return
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
    given = next((v for k, v in (case.headers or {}).items() if k.lower() == "authorization"), None)
    made_up = isinstance(given, str) and zlib.crc32(given.encode("utf-8", "replace")) % 5 == 0
    if isinstance(given, str) and (REAL_BEARER.fullmatch(given) or made_up):
        headers["Authorization"] = given
    else:
        token = LINK_TOKEN if key in LINK_OPERATIONS else API_TOKEN
        headers["Authorization"] = f"Bearer {token}"
    case.headers = headers


@schemathesis.hook
def after_call(context, case, response):
    _, path = _key(case.operation)
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps([response.request.method.upper(), path, response.status_code]) + "\n")
