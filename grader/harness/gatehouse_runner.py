"""Gatehouse's trusted test runner.

The grader runs every evidence-producing test command (steps, mutants,
witnessed runs, the self-test's red and green) through this file instead of
``python3 -m pytest`` or ``python3 -m unittest``:

    python3 -I /gatehouse/gatehouse_runner.py pytest ARGS...
    python3 -I /gatehouse/gatehouse_runner.py unittest ARGS...
    python3 -I /gatehouse/gatehouse_runner.py script PATH ARGS...

``-I`` keeps the working directory, ``PYTHON*`` variables and user
site-packages off ``sys.path``, and this file sits on a read-only mount
(``/gatehouse``) the command cannot write. So a submission's ``pytest.py``,
``pytest/``, ``sitecustomize.py`` or ``*.pth`` cannot stand in for the
runner: pytest, unittest and the standard library are imported before any
file of the workspace is importable, and the workspace is then appended to
the END of ``sys.path`` (pytest runs with ``--import-mode=append``), so no
workspace file ever shadows an installed module.

Each result is written, as it happens, as one JSON line to file descriptor
3 (a pipe the grader reads from outside the sandbox), tagged with the run's
nonce, which the runner takes from the environment and then erases from
``os.environ`` and from the process's own environment block:

    {"t": "start", "runner": "pytest"}
    {"t": "case", "id": ..., "classname": ..., "name": ..., "status": ..., "message": ...}
    {"t": "collect-error", "id": ..., "message": ...}
    {"t": "end", "exit": N, "counts": {...}}

The runner ends the process with ``os._exit`` right after the ``end``
record, so ``atexit`` hooks and lingering threads of the candidate's code
never run after the results were reported. The grader cross-checks the
stream against the process's exit status, the JUnit file the step names,
and the set of test ids the packet's hidden tests define; a stream without
its ``end`` record is a runner that did not finish.
"""

import json
import os
import sys

CHANNEL_FD = 3
WORKSPACE = os.getcwd()


def _take_nonce():
    """Reads the nonce, then erases it from os.environ and from the
    process's environment block (what /proc/self/environ shows)."""
    nonce = os.environ.pop("GATEHOUSE_NONCE", "")
    if not nonce:
        return nonce
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
        prefix = b"GATEHOUSE_NONCE="
        i = 0
        while environ[i] is not None:
            entry = environ[i]
            if entry.startswith(prefix):
                addr = ctypes.cast(environ, ctypes.POINTER(ctypes.c_void_p))[i]
                ctypes.memset(addr + len(prefix), ord("x"), len(entry) - len(prefix))
            i += 1
    except Exception:  # noqa: BLE001 - best effort; the nonce still works
        pass
    return nonce


class Channel:
    def __init__(self, nonce):
        self.nonce = nonce
        try:
            os.fstat(CHANNEL_FD)
            # Children the candidate's code starts do not inherit it.
            os.set_inheritable(CHANNEL_FD, False)
            self.fd = CHANNEL_FD
        except OSError:
            self.fd = None

    def send(self, record):
        if self.fd is None:
            return
        record = dict(record)
        record["nonce"] = self.nonce
        data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        while data:
            try:
                n = os.write(self.fd, data)
            except OSError:
                self.fd = None
                return
            data = data[n:]


def _short(text):
    text = str(text or "")
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:200]


def _crash(report):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if message:
        return _short(message)
    text = str(getattr(report, "longreprtext", "") or "")
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def _last_line(text):
    lines = [l for l in str(text or "").strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def _finish(channel, code, counts):
    channel.send({"t": "end", "exit": code, "counts": counts})
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


# ------------------------------------------------------------------ pytest


def run_pytest(channel, args):
    import pytest

    ini = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytest.ini")
    if WORKSPACE not in sys.path:
        sys.path.append(WORKSPACE)
    reports = {}
    order = []
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "collect_errors": 0}

    class Reporter:
        @pytest.hookimpl(trylast=True)
        def pytest_collectreport(self, report):
            if report.failed:
                counts["collect_errors"] += 1
                channel.send({"t": "collect-error", "id": report.nodeid, "message": _crash(report)})
            elif report.skipped:
                channel.send({"t": "collect-skip", "id": report.nodeid, "message": _crash(report)})

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            channel.send({"t": "collected", "ids": [item.nodeid for item in session.items]})

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(self, report):
            nodeid = report.nodeid
            if nodeid not in reports:
                reports[nodeid] = {"status": None, "message": ""}
                order.append(nodeid)
            entry = reports[nodeid]
            if report.when == "call":
                if report.passed:
                    entry["status"] = entry["status"] or "passed"
                elif report.skipped:
                    # xfail reports as skipped in JUnit too.
                    entry["status"] = entry["status"] or "skipped"
                else:
                    entry["status"] = "failed"
                    entry["message"] = _crash(report)
            elif report.failed:
                entry["status"] = "error"
                entry["message"] = entry["message"] or _crash(report)
            elif report.skipped and report.when == "setup":
                entry["status"] = "skipped"
            if report.when == "teardown":
                self._emit(nodeid)

        def _emit(self, nodeid):
            entry = reports[nodeid]
            status = entry["status"] or "error"
            counts[status] += 1
            path, _, rest = nodeid.partition("::")
            module = path[:-3] if path.endswith(".py") else path
            classname = module.replace("/", ".")
            name = rest
            if "::" in rest:
                cls, _, name = rest.rpartition("::")
                classname = classname + "." + cls.replace("::", ".")
            channel.send({"t": "case", "id": nodeid, "classname": classname, "name": name, "status": status, "message": entry["message"]})

    fixed = ["-c", ini, "--rootdir", WORKSPACE, "--import-mode=append", "-p", "no:cacheprovider"]
    try:
        code = pytest.main(fixed + list(args), plugins=[Reporter()])
    except SystemExit as e:  # a plugin or the candidate's code called exit
        code = e.code if isinstance(e.code, int) else 1
    code = int(code)
    _finish(channel, code, counts)


# ---------------------------------------------------------------- unittest


def run_unittest(channel, args):
    import unittest

    if WORKSPACE not in sys.path:
        sys.path.append(WORKSPACE)
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "collect_errors": 0}

    def case_fields(test):
        ident = test.id()
        classname, _, name = ident.rpartition(".")
        return ident, classname, name

    class StreamingResult(unittest.TextTestResult):
        def _send(self, test, status, message=""):
            if status == "error" and test.__class__.__name__ in ("_FailedTest", "ModuleImportFailure", "_ErrorHolder"):
                counts["collect_errors"] += 1
                channel.send({"t": "collect-error", "id": test.id(), "message": _short(message)})
                return
            counts[status] += 1
            ident, classname, name = case_fields(test)
            channel.send({"t": "case", "id": ident, "classname": classname, "name": name, "status": status, "message": _short(message)})

        def addSuccess(self, test):
            super().addSuccess(test)
            self._send(test, "passed")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._send(test, "failed", _last_line(self._exc_info_to_string(err, test)))

        def addError(self, test, err):
            super().addError(test, err)
            self._send(test, "error", _last_line(self._exc_info_to_string(err, test)))

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._send(test, "skipped", reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._send(test, "skipped", "expected failure")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._send(test, "failed", "unexpected success")

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None:
                failed = issubclass(err[0], test.failureException)
                self._send(subtest, "failed" if failed else "error", _last_line(self._exc_info_to_string(err, test)))

    class Runner(unittest.TextTestRunner):
        resultclass = StreamingResult

    try:
        program = unittest.main(module=None, argv=["python3 -m unittest"] + list(args), testRunner=Runner, exit=False)
        result = program.result
        code = 0 if result.wasSuccessful() else 1
        if result.testsRun == 0 and not result.errors:
            # `python -m unittest` exits 5 when no test ran (3.12+); say so on 3.11 too.
            code = 5
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    _finish(channel, int(code), counts)


# ------------------------------------------------------------------ script


def run_script(channel, args):
    """Runs a packet's own script (a detector or a driver) with the
    read-only harness first on sys.path, then the script's folder."""
    import runpy

    if not args:
        print("gatehouse_runner: script needs a path", file=sys.stderr)
        os._exit(2)
    path = args[0]
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [p for p in (here, os.path.dirname(os.path.abspath(path))) if p not in sys.path]
    sys.argv = list(args)
    channel.send({"t": "start", "runner": "script"})
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - report like the interpreter would
        import traceback

        traceback.print_exc()
        code = 1
    _finish(channel, code, {})


def main():
    nonce = _take_nonce()
    channel = Channel(nonce)
    if len(sys.argv) < 2 or sys.argv[1] not in ("pytest", "unittest", "script"):
        print("usage: gatehouse_runner.py pytest|unittest|script ARGS...", file=sys.stderr)
        os._exit(2)
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "script":
        run_script(channel, args)
        return
    channel.send({"t": "start", "runner": kind})
    if kind == "pytest":
        run_pytest(channel, args)
    else:
        run_unittest(channel, args)


if __name__ == "__main__":
    main()
