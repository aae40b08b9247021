import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "200_after_range" in item.name:
            item.add_marker(pytest.mark.skip(reason="flaky on CI: server behaviour is environment dependent"))
