"""Shipped tests for classify_logs.py. They never talk to a real model: they
replace urllib.request.urlopen inside the module and look at what would have
gone over the wire.

    python3 -m pytest -q test_classify_logs.py
"""

import json
import urllib.error

import pytest

import classify_logs


class Wire:
    """Stands in for urlopen: counts requests and their bytes, answers `label`."""

    def __init__(self, label="WARN"):
        self.label = label
        self.sizes = []

    def __call__(self, request, timeout=None):
        self.sizes.append(len(request.data or b""))
        body = {"choices": [{"message": {"role": "assistant", "content": self.label}}]}
        return _Response(json.dumps(body).encode("utf-8"))


class _Response:
    def __init__(self, raw):
        self._raw = raw

    def read(self):
        return self._raw

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def write_log(tmp_path, lines):
    path = tmp_path / "app.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_request_size_does_not_follow_the_file(monkeypatch, tmp_path):
    # Sixty different lines with no level word in them, so every line needs the model.
    lines = [f"worker {i} finished batch {i * 7} in {i % 13} ms" for i in range(60)]
    wire = Wire()
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", wire)
    labels = classify_logs.classify_file(write_log(tmp_path, lines))
    assert labels == ["WARN"] * 60
    average = sum(wire.sizes) / max(len(wire.sizes), 1)
    assert average < 800, f"average request is {average:.0f} bytes: the whole log is riding along"


def test_unreachable_endpoint_is_not_info(monkeypatch, tmp_path):
    def refused(request, timeout=None):
        raise urllib.error.URLError("connection refused")

    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", refused)
    path = write_log(tmp_path, ["kernel: watchdog did not answer on cpu3"])
    try:
        labels = classify_logs.classify_file(path)
    except (Exception, SystemExit):
        return  # raising (or exiting) is the honest answer
    pytest.fail(f"an unreachable endpoint produced labels {labels!r}")
