"""Held-out resume cases: 206 at the right offset, crashes mid-body, bad ranges."""

from __future__ import annotations

import pytest

import fetch
from hidden_origin import assert_complete, paths, payload, serve  # noqa: F401 (fixtures)


def test_hidden_resume_fresh_sends_no_range(serve):
    origin = serve(payload(3000))
    assert fetch.fetch(origin.url) == fetch.DEST
    assert origin.ranges == [None]
    assert_complete(origin.body)


def test_hidden_resume_large_offset_one_request(serve):
    body = payload(200_000)
    origin = serve(body)
    fetch.PART.write_bytes(body[:123_457])
    assert fetch.fetch(origin.url) == fetch.DEST
    assert origin.ranges == ["bytes=123457-"]
    assert_complete(body)


def test_hidden_resume_one_byte_missing(serve):
    body = payload(4096)
    origin = serve(body)
    fetch.PART.write_bytes(body[:-1])
    fetch.fetch(origin.url)
    assert origin.ranges == ["bytes=4095-"]
    assert fetch.DEST.read_bytes() == body


def test_hidden_resume_crash_mid_body_keeps_part(serve):
    body = payload(5000)
    broken = serve(body, cut_after=1800)
    with pytest.raises(fetch.ResumeError):
        fetch.fetch(broken.url)
    assert not fetch.DEST.exists(), "DEST must not appear before the file is complete"
    assert fetch.PART.read_bytes() == body[:1800], "what arrived must stay in PART"

    healthy = serve(body)
    assert fetch.fetch(healthy.url) == fetch.DEST
    assert healthy.ranges == ["bytes=1800-"]
    assert_complete(body)


def test_hidden_resume_crash_during_resume(serve):
    body = payload(6000)
    fetch.PART.write_bytes(body[:1000])
    broken = serve(body, cut_after=700)
    with pytest.raises(fetch.ResumeError):
        fetch.fetch(broken.url)
    assert broken.ranges == ["bytes=1000-"]
    assert not fetch.DEST.exists()
    assert fetch.PART.read_bytes() == body[:1700]

    healthy = serve(body)
    fetch.fetch(healthy.url)
    assert healthy.ranges == ["bytes=1700-"]
    assert fetch.DEST.read_bytes() == body


def test_hidden_resume_206_from_wrong_offset_is_refused(serve):
    body = payload(64)
    fetch.PART.write_bytes(body[:10])
    origin = serve(body, mode="shifted")
    with pytest.raises(fetch.ResumeError):
        fetch.fetch(origin.url)
    assert origin.ranges == ["bytes=10-"]
    assert fetch.PART.read_bytes() == body[:10], "a bad 206 must not touch PART"
    assert not fetch.DEST.exists()


def test_hidden_resume_206_without_content_range_is_refused(serve):
    # Nothing says where the bytes start, so nothing says they start at the
    # offset asked for: ResumeError, PART as it was.
    body = payload(64)
    fetch.PART.write_bytes(body[:10])
    origin = serve(body, mode="no-range")
    with pytest.raises(fetch.ResumeError):
        fetch.fetch(origin.url)
    assert origin.ranges == ["bytes=10-"]
    assert fetch.PART.read_bytes() == body[:10], "a bad 206 must not touch PART"
    assert not fetch.DEST.exists()
