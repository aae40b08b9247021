"""Held-out error answers: ResumeError, and the partial file is left alone."""

from __future__ import annotations

import pytest

import fetch
from hidden_origin import paths, payload, serve  # noqa: F401 (fixtures)


@pytest.mark.parametrize("status", [404, 416, 500, 503])
def test_hidden_error_status_keeps_partial(serve, status):
    origin = serve(payload(100), mode="status", status=status)
    fetch.PART.write_bytes(b"kept-bytes")
    with pytest.raises(fetch.ResumeError):
        fetch.fetch(origin.url)
    assert fetch.PART.read_bytes() == b"kept-bytes"
    assert not fetch.DEST.exists()


def test_hidden_error_status_on_fresh_download(serve):
    origin = serve(payload(100), mode="status", status=500)
    with pytest.raises(fetch.ResumeError):
        fetch.fetch(origin.url)
    assert not fetch.DEST.exists()


def test_hidden_error_is_still_a_runtime_error():
    assert issubclass(fetch.ResumeError, RuntimeError)
