"""My tests on top of the shipped ones: repeats, growth, bad answers."""

import json

import pytest

import classify_logs


class Wire:
    def __init__(self, answer="WARN"):
        self.answer = answer
        self.bodies = []

    def __call__(self, request, timeout=None):
        self.bodies.append(request.data or b"")
        raw = json.dumps({"choices": [{"message": {"content": self.answer}}]}).encode()
        return Answer(raw)


class Answer:
    def __init__(self, raw):
        self.raw = raw

    def read(self):
        return self.raw

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def log(tmp_path, lines, name="app.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def average(sizes):
    return sum(len(s) for s in sizes) / max(len(sizes), 1)


def test_identical_lines_cost_one_call(monkeypatch, tmp_path):
    wire = Wire()
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", wire)
    lines = ["disk /var at 91 percent"] * 40 + ["peer reset the upstream socket"] * 3
    labels = classify_logs.classify_file(log(tmp_path, lines))
    assert labels == ["WARN"] * 43
    assert len(wire.bodies) == 2


def test_request_size_flat_when_log_grows(monkeypatch, tmp_path):
    def run(count, name):
        wire = Wire()
        monkeypatch.setattr(classify_logs.urllib.request, "urlopen", wire)
        lines = [f"job {i} moved {i * 3} rows to shard {i % 5}" for i in range(count)]
        classify_logs.classify_file(log(tmp_path, lines, name))
        return average(wire.bodies)

    short, long = run(5, "short.log"), run(200, "long.log")
    assert long <= short * 1.2, f"{short:.0f} bytes per request for 5 lines, {long:.0f} for 200"


def test_line_that_names_its_level_needs_no_call(monkeypatch, tmp_path):
    wire = Wire()
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", wire)
    labels = classify_logs.classify_file(log(tmp_path, ["2026-09-16 ERROR db pool exhausted"]))
    assert labels == ["ERROR"] and wire.bodies == []


@pytest.mark.parametrize("answer", ["", "Sure! Here is my analysis", "CRITICAL", "ERROR WARN"])
def test_unusable_answer_is_an_error_not_info(monkeypatch, tmp_path, answer):
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", Wire(answer))
    try:
        labels = classify_logs.classify_file(log(tmp_path, ["heartbeat missed twice"]))
    except (Exception, SystemExit):
        return
    pytest.fail(f"answer {answer!r} became labels {labels!r}")


def test_cli_exits_non_zero_when_endpoint_down(monkeypatch, tmp_path, capsys):
    def refused(request, timeout=None):
        raise classify_logs.urllib.error.URLError("connection refused")

    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", refused)
    code = classify_logs.main([log(tmp_path, ["heartbeat missed twice"])])
    out = capsys.readouterr().out
    assert code != 0 and "INFO" not in out
