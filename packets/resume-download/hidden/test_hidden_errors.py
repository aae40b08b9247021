"""Held-out error answers: ResumeError, and the partial file is left alone."""

from __future__ import annotations

import pytest

import fetch
from hidden_origin import Origin, payload


@pytest.fixture(autouse=True)
def paths(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch, "DEST", tmp_path / "data.bin")
    monkeypatch.setattr(fetch, "PART", tmp_path / "data.bin.part")


@pytest.mark.parametrize("status", [404, 416, 500, 503])
def test_hidden_error_status_keeps_partial(status):
    origin = Origin(payload(100), mode="status", status=status)
    try:
        fetch.PART.write_bytes(b"kept-bytes")
        with pytest.raises(fetch.ResumeError):
            fetch.fetch(origin.url)
        assert fetch.PART.read_bytes() == b"kept-bytes"
        assert not fetch.DEST.exists()
    finally:
        origin.close()


def test_hidden_error_status_on_fresh_download():
    origin = Origin(payload(100), mode="status", status=500)
    try:
        with pytest.raises(fetch.ResumeError):
            fetch.fetch(origin.url)
        assert not fetch.DEST.exists()
    finally:
        origin.close()


def test_hidden_error_is_still_a_runtime_error():
    assert issubclass(fetch.ResumeError, RuntimeError)
