import json
import threading
import urllib.request

import pytest

import service


@pytest.fixture
def server():
    srv = service.make_server(0)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_health(server):
    with urllib.request.urlopen(server + "/health", timeout=5) as response:
        assert json.loads(response.read()) == {"ok": True}
