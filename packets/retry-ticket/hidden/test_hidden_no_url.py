"""Hidden: the URL (it may carry a signed query string) never reaches output or logs."""

from __future__ import annotations

import logging
import warnings

import pytest

import client
from hidden_partner import Partner, closed_port_url, ok, quiet_host_logging_at_debug, recorded_sleeps, status

SECRET = "sig-4Q7ZK2"
PATH = "/v1/ledger/export"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(record.getMessage())
        except Exception:  # a malformed record still counts as text
            self.lines.append(str(record.msg) + " " + repr(record.args))


def _run(url: str):
    handler = _Collect()
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    previous_disable = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    try:
        with warnings.catch_warnings(record=True) as caught, recorded_sleeps(client), quiet_host_logging_at_debug():
            warnings.simplefilter("always")
            try:
                client.fetch_json(url)
            except client.FetchError:
                pass
    finally:
        logging.disable(previous_disable)
        for lg, level, disabled in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.disabled = disabled
    return handler.lines + [str(w.message) for w in caught]


def _assert_silent(capfd, lines) -> None:
    out, err = capfd.readouterr()
    for where, text in [("stdout", out), ("stderr", err), ("logs/warnings", "\n".join(lines))]:
        assert SECRET not in text, f"the signed URL leaked to {where}: {text[-300:]!r}"
        assert PATH not in text, f"the URL path leaked to {where}: {text[-300:]!r}"


def _url(partner: Partner) -> str:
    return partner.url(f"{PATH}?token={SECRET}&account=991")


def test_url_silent_on_success(capfd) -> None:
    with Partner([ok()]) as partner:
        lines = _run(_url(partner))
    _assert_silent(capfd, lines)


def test_url_silent_while_retrying(capfd) -> None:
    with Partner([status(429), status(503), ok()]) as partner:
        lines = _run(_url(partner))
    _assert_silent(capfd, lines)


def test_url_silent_when_giving_up(capfd) -> None:
    with Partner([status(503)] * 10, then=ok()) as partner:
        lines = _run(_url(partner))
    _assert_silent(capfd, lines)


@pytest.mark.parametrize("code", [401, 404, 500])
def test_url_silent_on_hard_failure(capfd, code: int) -> None:
    with Partner([status(code)], then=ok()) as partner:
        lines = _run(_url(partner))
    _assert_silent(capfd, lines)


def test_url_silent_on_bad_json(capfd) -> None:
    with Partner([(200, b"not json")], then=ok()) as partner:
        lines = _run(_url(partner))
    _assert_silent(capfd, lines)


def test_url_silent_when_unreachable(capfd) -> None:
    lines = _run(closed_port_url(f"{PATH}?token={SECRET}"))
    _assert_silent(capfd, lines)
