"""Held-out 200-after-Range cases: the server ignored Range, so start over."""

from __future__ import annotations

import pytest

import fetch
from hidden_origin import assert_complete, paths, payload, serve  # noqa: F401 (fixtures)


@pytest.fixture
def stubborn(serve):
    return serve(payload(2500), mode="ignore")


def test_hidden_200_replaces_garbage_partial(stubborn):
    fetch.PART.write_bytes(b"\x00garbage\x00" * 20)
    fetch.fetch(stubborn.url)
    assert stubborn.ranges == ["bytes=180-"]
    assert_complete(stubborn.body)


def test_hidden_200_replaces_true_prefix(stubborn):
    # PART holds the real first bytes; appending a full 200 would repeat them.
    fetch.PART.write_bytes(stubborn.body[:700])
    fetch.fetch(stubborn.url)
    assert fetch.DEST.read_bytes() == stubborn.body
    assert fetch.DEST.stat().st_size == len(stubborn.body)


def test_hidden_200_replaces_partial_longer_than_file(stubborn):
    fetch.PART.write_bytes(b"Z" * 4000)
    fetch.fetch(stubborn.url)
    assert fetch.DEST.read_bytes() == stubborn.body


def test_hidden_200_twice_in_a_row_is_stable(stubborn):
    fetch.PART.write_bytes(b"Q" * 9)
    fetch.fetch(stubborn.url)
    fetch.DEST.unlink()
    fetch.PART.write_bytes(b"R" * 11)
    fetch.fetch(stubborn.url)
    assert fetch.DEST.read_bytes() == stubborn.body
