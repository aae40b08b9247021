"""Tests for agent_run.py and replay.sh (unittest; also collected by pytest).

    python3 -m unittest -v test_driver

Every case runs the real driver as a subprocess against the shipped toy
service (whose access log is the truth) and a model: fake_model.py with a
--script, or a tiny in-thread endpoint for failures the fake cannot play.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agent_run  # noqa: E402

FIELDS = {"ts", "kind", "name", "bytes_in", "bytes_out", "error", "duplicate_of"}


def start_script(script, workdir, tag, *args):
    port_file = os.path.join(workdir, tag + ".port")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), "--port", "0", "--port-file", port_file]
                            + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(port_file):
            with open(port_file) as fh:
                text = fh.read().strip()
            if text:
                return proc, int(text)
        time.sleep(0.025)
    proc.kill()
    raise RuntimeError(script + " did not start")


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def serve_stub(mode, delay=0.0):
    """Start a misbehaving model endpoint in a thread. Returns (server, url, hits list)."""
    hits = []

    class Stub(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hits.append(time.time())
            if mode == "503":
                code, body = 503, b"overloaded"
            elif mode == "prose":
                code, body = 200, json.dumps({"choices": [{"message": {"content": "I think the secret exists."}}]}).encode()
            elif mode == "slow":
                time.sleep(delay)
                code, body = 200, json.dumps({"choices": [{"message": {"content": '{"actions": [], "done": true}'}}]}).encode()
            else:
                code, body = 500, b""
            try:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d/v1/chat/completions" % server.server_address[1], hits


def g(path):
    return {"method": "GET", "path": path}


def reply(actions, done=False):
    return {"actions": actions, "done": done}


class DriverCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.access_log = os.path.join(self.dir, "access.jsonl")
        self.toy, port = start_script("toy_service.py", self.dir, "toy", "--log", self.access_log)
        self.toy_url = "http://127.0.0.1:%d" % port
        self.ledger = os.path.join(self.dir, "ledger.jsonl")
        self.extra = []

    def tearDown(self):
        for proc in [self.toy] + self.extra:
            proc.kill()
            proc.wait()
        self.tmp.cleanup()

    def model_from_script(self, script):
        path = os.path.join(self.dir, "script%d.json" % len(self.extra))
        with open(path, "w") as fh:
            json.dump(script, fh)
        proc, port = start_script("fake_model.py", self.dir, "m%d" % len(self.extra), "--script", path)
        self.extra.append(proc)
        return "http://127.0.0.1:%d/v1/chat/completions" % port

    def drive(self, llm_url):
        env = dict(os.environ, TOY_BASE_URL=self.toy_url, LLM_ENDPOINT=llm_url, LEDGER_PATH=self.ledger)
        proc = subprocess.run([sys.executable, os.path.join(HERE, "agent_run.py")], env=env, timeout=60,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return proc.returncode, read_jsonl(self.ledger), proc.stderr

    def access(self):
        return read_jsonl(self.access_log)

    def check_ledger(self, rows):
        """Every row well formed, duplicate_of right, one tool row per request the service saw."""
        for i, row in enumerate(rows):
            self.assertEqual(set(row), FIELDS)
            earlier = [j for j in range(i) if (rows[j]["kind"], rows[j]["name"], rows[j]["error"])
                       == (row["kind"], row["name"], row["error"])]
            self.assertEqual(row["duplicate_of"], earlier[0] if earlier else None)
        self.assertEqual([r["name"] for r in rows if r["kind"] == "tool"],
                         ["%s %s" % (a["method"], a["path"]) for a in self.access()])


class HappyPath(DriverCase):
    def test_task_then_done_exits_0(self):
        url = self.model_from_script([
            reply([g("/health"), g("/items")]),
            reply([{"method": "POST", "path": "/items", "body": {"name": "tea"}}]),
            reply([g("/items")]),
            reply([], done=True),
        ])
        code, rows, _ = self.drive(url)
        self.assertEqual(code, 0)
        self.assertEqual([a["status"] for a in self.access()], [200, 200, 201, 200])
        listings = [r["bytes_out"] for r in rows if r["name"] == "GET /items"]
        self.assertGreater(listings[1], listings[0])  # the second listing carries the new item
        self.check_ledger(rows)

    def test_shipped_rehearsal_script(self):
        proc, port = start_script("fake_model.py", self.dir, "shipped")
        self.extra.append(proc)
        code, rows, err = self.drive("http://127.0.0.1:%d/v1/chat/completions" % port)
        self.assertEqual(code, 0)
        self.assertEqual([a["path"] for a in self.access()].count("/secret"), 1)
        self.assertIn("not sent", err)
        self.check_ledger(rows)


class Caps(DriverCase):
    def test_secret_asked_once_model_cap_twelve(self):
        url = self.model_from_script([reply([g("/secret"), g("/Secret/"), g("/secret?again=1")])] * 15)
        code, rows, err = self.drive(url)
        self.assertEqual(code, 1)
        self.assertEqual(len([r for r in rows if r["kind"] == "model"]), agent_run.MODEL_CAP)
        self.assertEqual([a["path"] for a in self.access()], ["/secret"])
        self.assertIn("never said done", err)
        self.check_ledger(rows)

    def test_tool_cap_twenty(self):
        code, rows, err = self.drive(self.model_from_script([reply([g("/items")] * 25)]))
        self.assertEqual(code, 1)
        self.assertEqual(len(self.access()), 20)
        self.assertIn("20 tool calls used", err)
        self.check_ledger(rows)

    def test_exactly_twenty_then_done_is_fine(self):
        code, rows, _ = self.drive(self.model_from_script([reply([g("/health")] * 20), reply([], True)]))
        self.assertEqual(code, 0)
        self.assertEqual(len(self.access()), 20)

    def test_unknown_route_is_a_dead_end_too(self):
        code, rows, _ = self.drive(self.model_from_script([reply([g("/admin"), g("/admin")]), reply([g("/admin")]),
                                                           reply([], True)]))
        self.assertEqual(code, 0)
        self.assertEqual(len(self.access()), 1)


class RepeatedErrors(DriverCase):
    def test_three_identical_tool_errors(self):
        bad = {"method": "POST", "path": "/items", "body": {"name": ""}}
        code, rows, err = self.drive(self.model_from_script([reply([bad] * 5)]))
        self.assertEqual(code, 1)
        self.assertEqual([r["error"] for r in rows if r["kind"] == "tool"], ["HTTP 400"] * 3)
        self.assertEqual(len(self.access()), 3)
        self.check_ledger(rows)

    def test_streak_resets_after_success(self):
        bad = {"method": "POST", "path": "/items", "body": 7}
        code, rows, _ = self.drive(self.model_from_script([reply([bad, bad, g("/health"), bad, bad]), reply([], True)]))
        self.assertEqual(code, 0)
        self.assertEqual(len(self.access()), 5)

    def test_model_errors(self):
        for mode, expected in (("503", "HTTP 503"), ("prose", "unparseable reply")):
            with self.subTest(mode=mode):
                server, url, hits = serve_stub(mode)
                try:
                    code, rows, _ = self.drive(url)
                finally:
                    server.shutdown()
                    server.server_close()
                self.assertEqual(code, 1)
                self.assertEqual(len(hits), 3)
                self.assertEqual([(r["kind"], r["error"], r["duplicate_of"]) for r in rows],
                                 [("model", expected, None), ("model", expected, 0), ("model", expected, 0)])

    def test_model_down(self):
        code, rows, _ = self.drive("http://127.0.0.1:%d/v1/chat/completions" % free_port())
        self.assertEqual(code, 1)
        self.assertEqual([r["error"] for r in rows], ["refused"] * 3)


class Refusals(DriverCase):
    def test_only_plain_get_and_post_run(self):
        code, rows, _ = self.drive(self.model_from_script([
            reply([{"method": "PUT", "path": "/items"}, {"method": "GET", "path": "https://example.com/"},
                   {"path": "/health"}, ["GET", "/health"], {"method": "GET", "path": "/it ems"},
                   {"method": "GET", "path": "/items"}]),
            reply([], True)]))
        self.assertEqual(code, 0)
        self.assertEqual([r["name"] for r in rows if r["kind"] == "tool"], ["GET /items"])
        self.check_ledger(rows)

    def test_done_reply_actions_are_not_run(self):
        code, rows, _ = self.drive(self.model_from_script([reply([g("/health")], done=True)]))
        self.assertEqual(code, 0)
        self.assertEqual(self.access(), [])


class WallClock(unittest.TestCase):
    def test_budget_halts_in_process(self):
        server, url, hits = serve_stub("slow", delay=3)
        saved = (agent_run.DRIVER_SECONDS, agent_run.REQUEST_SECONDS)
        agent_run.DRIVER_SECONDS, agent_run.REQUEST_SECONDS = 0.8, 0.25
        with tempfile.TemporaryDirectory() as tmp:
            ledger = os.path.join(tmp, "ledger.jsonl")
            run = agent_run.new_run({"toy": "http://127.0.0.1:9", "llm": url, "ledger": ledger, "model": "x"})
            t0 = time.monotonic()
            try:
                with self.assertRaises(agent_run.StopRun) as caught:
                    agent_run.drive(run)
            finally:
                agent_run.DRIVER_SECONDS, agent_run.REQUEST_SECONDS = saved
                server.shutdown()
                server.server_close()
            self.assertLess(time.monotonic() - t0, 2)
            self.assertTrue("wall-clock" in str(caught.exception) or "times in a row" in str(caught.exception))
            self.assertTrue(all(r["error"] == "timed out" for r in read_jsonl(ledger)))


def mine():
    out = subprocess.run(["ps", "-eo", "args="], stdout=subprocess.PIPE, text=True).stdout
    return sorted(l for l in out.splitlines() if HERE in l and ("toy_service.py" in l or "fake_model.py" in l
                                                                 or "agent_run.py" in l))


class Replay(unittest.TestCase):
    def test_cold_replay_cleans_up(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if k not in ("TOY_BASE_URL", "LLM_ENDPOINT", "LEDGER_PATH")}
            before = mine()
            proc = subprocess.run(["sh", os.path.join(HERE, "replay.sh")], cwd=tmp, env=env, timeout=60,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(proc.returncode, 0, proc.stdout)
            self.assertEqual(mine(), before)
            rows = read_jsonl(os.path.join(tmp, "ledger.jsonl"))  # the default LEDGER_PATH, relative to cwd
            self.assertEqual(sum(r["name"] == "GET /secret" for r in rows), 1)

    def test_sigterm_stops_everything(self):
        server, url, hits = serve_stub("slow", delay=30)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                env = {k: v for k, v in os.environ.items() if k != "TOY_BASE_URL"}
                env.update(LLM_ENDPOINT=url, LEDGER_PATH=os.path.join(tmp, "ledger.jsonl"))
                before = mine()
                proc = subprocess.Popen(["sh", os.path.join(HERE, "replay.sh")], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                end = time.monotonic() + 10
                while not hits and time.monotonic() < end:
                    time.sleep(0.05)
                self.assertEqual(len(mine()), len(before) + 2)
                proc.send_signal(signal.SIGTERM)
                self.assertNotEqual(proc.wait(timeout=5), 0)
                time.sleep(0.2)
                self.assertEqual(mine(), before)
        finally:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    unittest.main()
