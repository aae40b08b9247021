import json
import urllib.error

import pytest

import classify_logs


def test_refused_raises_endpoint_down(monkeypatch, tmp_path):
    def refused(request, timeout=None):
        raise urllib.error.URLError("refused")

    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", refused)
    path = tmp_path / "a.log"
    path.write_text("heartbeat missed twice\n")
    with pytest.raises(classify_logs.EndpointDown):
        classify_logs.classify_file(str(path))
