"""Unit tests for the holds service: the store is mocked, nothing touches the network."""

import json
from unittest import mock

import app


def test_valid_body_is_parsed():
    raw = json.dumps({"room_id": "12A", "guest_email": "a@b.co", "nights": 2}).encode()
    assert app.parse_hold(raw)["nights"] == 2


def test_create_hold_inserts_through_the_connection():
    conn = mock.MagicMock()
    conn.execute.return_value.fetchone.return_value = None
    with mock.patch.object(app, "connect", return_value=conn):
        status, body = app.create_hold("k1", {"room_id": "12A", "guest_email": "a@b.co", "nights": 2})
    assert status == 201
    assert conn.execute.called
    assert conn.commit.called


def test_replay_returns_stored_body():
    conn = mock.MagicMock()
    hold = {"room_id": "12A", "guest_email": "a@b.co", "nights": 2}
    conn.execute.return_value.fetchone.return_value = (app.fingerprint(hold), 201, '{"hold_id": "x"}')
    with mock.patch.object(app, "connect", return_value=conn):
        assert app.create_hold("k1", hold) == (201, '{"hold_id": "x"}')
