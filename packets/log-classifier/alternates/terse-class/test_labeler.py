import io
import json
import urllib.error

import pytest

import classify_logs


def fake_urlopen(answers, sent):
    def urlopen(request, timeout=None):
        sent.append(request.data)
        answer = answers(request) if callable(answers) else answers
        if isinstance(answer, Exception):
            raise answer
        payload = json.dumps({"choices": [{"message": {"content": answer}}]}).encode()
        return io.BytesIO(payload)
    return urlopen


def logfile(tmp_path, lines):
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_each_request_is_small(monkeypatch, tmp_path):
    sent = []
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", fake_urlopen("INFO", sent))
    lines = [f"job {n} moved {n * 3} rows" for n in range(120)]
    assert classify_logs.classify_file(logfile(tmp_path, lines)) == ["INFO"] * 120
    assert max(len(b) for b in sent) < 600


def test_repeats_are_free(monkeypatch, tmp_path):
    sent = []
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", fake_urlopen("WARN", sent))
    classify_logs.classify_file(logfile(tmp_path, ["disk slow"] * 20 + ["fan loud"] * 5))
    assert len(sent) == 2


@pytest.mark.parametrize("answer", ["ERROR WARN", "maybe", "", urllib.error.URLError("down")])
def test_bad_answers_fail(monkeypatch, tmp_path, answer):
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", fake_urlopen(answer, []))
    with pytest.raises((Exception, SystemExit)):
        classify_logs.classify_file(logfile(tmp_path, ["thing happened"]))


def test_main_exits_nonzero_when_down(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(classify_logs.urllib.request, "urlopen", fake_urlopen(urllib.error.URLError("refused"), []))
    try:
        code = classify_logs.main([logfile(tmp_path, ["thing happened"])])
    except SystemExit as exc:
        code = exc.code
    assert code not in (0, None)
    assert "INFO" not in capsys.readouterr().out
