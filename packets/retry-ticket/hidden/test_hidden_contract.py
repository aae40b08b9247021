"""Hidden contract checks (run next to the original test_client.py)."""

from __future__ import annotations

import inspect
import urllib.request
from unittest import mock

import pytest

import client
from hidden_partner import Partner, ok, recorded_sleeps, status


def _ann(value: object) -> str:
    if isinstance(value, str):
        return value.replace(" ", "")
    return getattr(value, "__name__", repr(value))


def test_surface_parameters_are_plain() -> None:
    params = list(inspect.signature(client.fetch_json).parameters.values())
    assert [p.name for p in params] == ["url", "timeout"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    assert params[0].default is inspect.Parameter.empty
    assert params[1].default == 5.0


def test_surface_annotations_unchanged() -> None:
    sig = inspect.signature(client.fetch_json)
    url_ann = sig.parameters["url"].annotation
    timeout_ann = sig.parameters["timeout"].annotation
    assert url_ann is inspect.Parameter.empty or _ann(url_ann) == "str"
    assert timeout_ann is inspect.Parameter.empty or _ann(timeout_ann) == "float"
    ret = sig.return_annotation
    if ret is not inspect.Signature.empty:
        text = _ann(ret) if isinstance(ret, str) else str(ret)
        assert text.replace("typing.", "").lower().startswith("dict"), text


def test_surface_fetch_error_constructor() -> None:
    assert issubclass(client.FetchError, Exception)
    params = list(inspect.signature(client.FetchError.__init__).parameters.values())
    assert [p.name for p in params] == ["self", "message", "status"]
    assert params[2].default is None


def test_happy_path_over_loopback() -> None:
    with Partner([ok(b'{"rows": [{"id": 7}], "done": true}')]) as partner, recorded_sleeps(client):
        assert client.fetch_json(partner.url()) == {"rows": [{"id": 7}], "done": True}
        assert partner.hits == 1


def test_404_over_loopback_carries_status() -> None:
    with Partner([status(404)]) as partner, recorded_sleeps(client):
        with pytest.raises(client.FetchError) as caught:
            client.fetch_json(partner.url("/v1/missing"))
    assert caught.value.status == 404


def test_timeout_is_passed_to_urlopen() -> None:
    real = urllib.request.urlopen
    with Partner([ok()]) as partner, recorded_sleeps(client), \
            mock.patch("urllib.request.urlopen", wraps=real) as spy:
        client.fetch_json(partner.url(), timeout=2.5)
        client.fetch_json(partner.url())
    seen = []
    for call in spy.call_args_list:
        if "timeout" in call.kwargs:
            seen.append(call.kwargs["timeout"])
        elif len(call.args) >= 3:
            seen.append(call.args[2])
    assert seen == [2.5, 5.0]
