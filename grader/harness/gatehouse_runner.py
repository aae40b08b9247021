"""Gatehouse's trusted test runner.

The grader runs every evidence-producing test command (steps, mutants,
witnessed runs, the self-test's red and green, detector scripts) through
this file instead of ``python3 -m pytest`` or ``python3 -m unittest``:

    python3 -I -B --check-hash-based-pycs always \\
        /gatehouse/gatehouse_runner.py pytest|unittest|script ARGS...

``-I`` keeps the working directory, ``PYTHON*`` variables and user
site-packages off ``sys.path``, and this file sits on a read-only mount
(``/gatehouse``) the command cannot write. So a submission's ``pytest.py``,
``pytest/``, ``sitecustomize.py`` or ``*.pth`` cannot stand in for the
runner: pytest, unittest and the standard library are imported before any
file of the workspace is importable, and the workspace is then appended to
the END of ``sys.path`` (pytest runs with ``--import-mode=append``), so no
workspace file ever shadows an installed module. Ingestion set the
submission's bytecode caches aside; ``-B`` writes none and hash-based ones
are always checked against their source: only the submitted source runs. Pytest plugins are never
autoloaded (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``): the plugins installed
with the interpreter are loaded by name, packaging metadata in the
workspace never is.

Each result is written, as it happens, as one JSON line to file descriptor
3 (a pipe the grader reads from outside the sandbox), tagged with the run's
nonce, which the runner takes from the environment and then erases from
``os.environ`` and from the process's own environment block:

    {"t": "start", "runner": "pytest"}
    {"t": "collected", "ids": [...]}
    {"t": "run", "id": ...}  (a test starts: the one a crash of this
     process, which takes the runner along, happened in)
    {"t": "case", "id": ..., "classname": ..., "name": ..., "status": ...,
     "message": ..., "raised_in": "file:line", "raised_by": role,
     "test_by": role of the test's own file (skips and xfails),
     "us": CPU microseconds (its own and its children's) from its start to
     its report; calibration weighs twins by it}
    {"t": "collect-error", "id": ..., "message": ...}
    {"t": "audit", "kind": ..., "event": ..., "detail": ..., "file": ...,
     "line": N, "via": "direct"|"library", "test": ...}
    {"t": "integrity", "what": ..., "change": ..., "test": ...}
    {"t": "plugin", "file": ..., "hooks": [...]}  (a workspace conftest or plugin that loaded)
    {"t": "end", "exit": N, "counts": {...}}

Status is one of passed, failed, error, skipped, xfailed, xpassed. The
runner ends the process with ``os._exit`` right after the ``end`` record,
so ``atexit`` hooks and lingering threads of the candidate's code never run
after the results were reported.

THE RUNTIME AUDIT. Before any workspace file can be imported the runner
installs a PEP 578 audit hook, which no Python code can remove. It reports
(once per kind, file and line) what the candidate's code does that honest
code has no reason to do while tests run: reaching frames
(``sys._getframe``, ``tb_frame``, ``gi_frame``), the collector
(``gc.get_objects``/``get_referrers``/``get_referents``), tracing
(``sys.settrace``/``setprofile``), swapping a function's ``__code__`` or
defaults, building code objects, ``ctypes``, opening the grader's files.
An event is the candidate's when the innermost frame with a file is a
workspace file that the grader did not lay (``via: direct``), or when only
library frames lie between it and such a file (``via: library``). The
grader decides what each kind means for the run it asked for.

INTEGRITY. Every callable of pytest, pluggy, unittest and this runner
(module globals and class attributes) is recorded before the first test
module is imported (for pytest: once it is configured, at session start),
and compared after collection and after every test; a replaced, removed
or added one is reported and undone.

The runner's own code binds what it uses (``os.write``, ``os._exit``, its
JSON encoder) before any candidate code runs, so replacing a module
attribute cannot change what it writes. The grader cross-checks the stream
against the process's exit status, the JUnit file the step names, the test
ids recorded at self-test and the canary tests it planted.
"""

import os
import sys

_write = os.write
_exit = os._exit
_fstat = os.fstat
_getcwd = os.getcwd
_realpath = os.path.realpath
_isinstance = isinstance
_getattr = getattr
_str = str
_int = int
_len = len
_sorted = sorted
_repr = repr
_getframe = sys._getframe
_process_time = __import__("time").process_time
_times = os.times


def _clock():
    """CPU seconds of this process (to the nanosecond) and of the children
    it has waited for (in clock ticks): what a test costs. CPU, not wall
    time, so that a loaded machine measures about the same."""
    t = _times()
    return _process_time() + t[2] + t[3]


def _cost_us(begun):
    return _int((_clock() - begun) * 1e6)
from _thread import get_ident as _get_ident  # noqa: E402

CHANNEL_FD = 3
WORKSPACE = _getcwd()
TOOLS = os.path.dirname(os.path.abspath(__file__))


def _take_env(name):
    """Reads `name`, then erases it from os.environ and from the process's
    environment block (what /proc/self/environ shows)."""
    value = os.environ.pop(name, "")
    if not value:
        return value
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
        prefix = (name + "=").encode()
        i = 0
        while environ[i] is not None:
            entry = environ[i]
            if entry.startswith(prefix):
                addr = ctypes.cast(environ, ctypes.POINTER(ctypes.c_void_p))[i]
                ctypes.memset(addr + len(prefix), ord("x"), len(entry) - len(prefix))
            i += 1
    except Exception:  # noqa: BLE001 - best effort; the value still works
        pass
    return value


# ------------------------------------------------------------------ encoding


def _enc_str(s, _replace=str.replace, _ord=ord, _join="".join):
    out = []
    for ch in s:
        o = _ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or 0xD800 <= o <= 0xDFFF:
            out.append("\\u%04x" % o)
        else:
            out.append(ch)
    return '"' + _join(out) + '"'


def _enc(v, _dict=dict, _list=list, _tuple=tuple, _bool=bool):
    """A JSON encoder of the runner's own: `json` is a module the
    candidate's code could change."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if _isinstance(v, _int):
        return _int.__repr__(v)
    if _isinstance(v, _str):
        return _enc_str(v)
    if _isinstance(v, _dict):
        return "{" + ",".join(_enc_str(_str(k)) + ":" + _enc(v[k]) for k in _sorted(v)) + "}"
    if _isinstance(v, (_list, _tuple)):
        return "[" + ",".join(_enc(x) for x in v) + "]"
    return _enc_str(_repr(v))


class Channel:
    def __init__(self, nonce):
        self.nonce = nonce
        self.fd = None
        self.ino = None
        try:
            st = _fstat(CHANNEL_FD)
            # Children the candidate's code starts do not inherit it.
            os.set_inheritable(CHANNEL_FD, False)
            self.fd = CHANNEL_FD
            self.ino = (st.st_dev, st.st_ino)
        except OSError:
            self.fd = None

    def send(self, record, _encode=str.encode):
        fd = self.fd
        if fd is None:
            return
        try:
            st = _fstat(fd)
        except OSError:
            self.fd = None
            return
        if (st.st_dev, st.st_ino) != self.ino:
            # Descriptor 3 is no longer the grader's pipe: someone replaced
            # it to blind the runner. Stop here; the grader sees a run that
            # never finished.
            _exit(86)
        record = dict(record)
        record["nonce"] = self.nonce
        data = _encode(_enc(record) + "\n", "utf-8", "surrogatepass")
        while data:
            try:
                n = _write(fd, data)
            except OSError:
                self.fd = None
                return
            data = data[n:]


def _short(text):
    text = str(text or "")
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:200]


def _last_line(text):
    lines = [l for l in str(text or "").strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


# ------------------------------------------------------------------ roles


class Roles:
    """Tells whose a source file is: the candidate's (a workspace file the
    grader did not lay), the grader's (a file it laid, recognised by its
    content, wherever a packet command copied it), or a library's (the
    interpreter's prefix, site-packages, the grader's tools)."""

    def __init__(self, grader_digests):
        self.grader = frozenset(grader_digests)
        prefixes = {TOOLS + "/"}
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__)):
            if p:
                prefixes.add(_realpath(p).rstrip("/") + "/")
                prefixes.add(p.rstrip("/") + "/")
        for p in list(sys.path):
            if p and os.path.isabs(p) and not p.startswith(WORKSPACE):
                prefixes.add(p.rstrip("/") + "/")
        self.prefixes = tuple(sorted(prefixes))
        self.cache = {}

    def role(self, filename):
        r = self.cache.get(filename)
        if r is not None:
            return r
        if not filename or filename[0] == "<":
            r = "library" if filename.startswith("<frozen") else "synthetic"
        elif filename.startswith(self.prefixes):
            r = "library"
        else:
            real = _realpath(filename)
            if real.startswith(self.prefixes):
                r = "library"
            elif self.grader and self._digest(real) in self.grader:
                r = "grader"
            else:
                r = "candidate"
        self.cache[filename] = r
        return r

    def _digest(self, path):
        try:
            import hashlib

            with open(path, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return ""

    def short(self, filename):
        if filename.startswith(WORKSPACE + "/"):
            return filename[len(WORKSPACE) + 1 :]
        return filename


# ------------------------------------------------------------------ audit

# Audit events the runner watches, by kind.
_FRAME_ATTRS = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"))
_WATCH = frozenset(
    (
        "sys._getframe",
        "sys._current_frames",
        "object.__getattr__",
        "object.__setattr__",
        "object.__delattr__",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "code.__new__",
        "open",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.addressof",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "sys.addaudithook",
    )
)
MAX_AUDIT_RECORDS = 100


class Audit:
    def __init__(self, channel, roles):
        self.channel = channel
        self.roles = roles
        self.seen = set()
        self.busy = set()
        self.dropped = 0
        self.test = ""
        self.protected = ()

    def install(self):
        sys.addaudithook(self.hook)

    def hook(self, event, args, _watch=_WATCH, _ident=_get_ident):
        if event not in _watch:
            return
        me = _ident()
        if me in self.busy:
            return
        self.busy.add(me)
        try:
            self._event(event, args)
        except Exception:  # noqa: BLE001 - the hook must never break a run
            pass
        finally:
            self.busy.discard(me)

    def _event(self, event, args):
        kind, detail = self._kind(event, args)
        if kind is None:
            return
        frame = _getframe(2)
        via = "direct"
        where = None
        while frame is not None:
            fn = frame.f_code.co_filename
            role = self.roles.role(fn)
            if role == "candidate":
                where = (fn, frame.f_lineno)
                break
            if role in ("grader",) or fn.startswith(TOOLS + "/"):
                return
            if role == "library":
                via = "library"
            frame = frame.f_back
        if where is None:
            return
        if kind == "open" and via == "library":
            kind = "open-via-library"
        if kind in ("code-swap", "defaults-swap") and detail.get("owner") == "candidate":
            # The candidate changing its own function is its business.
            return
        key = (kind, where[0], where[1])
        if key in self.seen:
            return
        if len(self.seen) >= MAX_AUDIT_RECORDS:
            self.dropped += 1
            return
        self.seen.add(key)
        rec = {
            "t": "audit",
            "kind": kind,
            "event": event,
            "detail": detail.get("text", ""),
            "file": self.roles.short(where[0]),
            "line": where[1],
            "via": via,
            "test": self.test,
        }
        self.channel.send(rec)

    def _kind(self, event, args):
        if event in ("sys._getframe", "sys._current_frames"):
            return "frames", {"text": event}
        if event == "object.__getattr__":
            name = args[1] if len(args) > 1 else ""
            if name in _FRAME_ATTRS:
                return "frames", {"text": "reads ." + str(name)}
            return None, None
        if event in ("object.__setattr__", "object.__delattr__"):
            obj, name = args[0], args[1]
            if name in ("__code__", "__defaults__", "__kwdefaults__"):
                code = getattr(obj, "__code__", None)
                owner = self.roles.role(code.co_filename) if code is not None else "library"
                what = getattr(obj, "__qualname__", "?")
                kind = "code-swap" if name == "__code__" else "defaults-swap"
                return kind, {"text": "sets %s.%s" % (what, name), "owner": owner}
            if _isinstance(obj, type):
                mod = getattr(obj, "__module__", "") or ""
                return "class-patch", {"text": "sets %s.%s.%s" % (mod, obj.__qualname__, name)}
            return None, None
        if event.startswith("gc."):
            return "gc", {"text": event}
        if event in ("sys.settrace", "sys.setprofile"):
            return "trace", {"text": event}
        if event == "code.__new__":
            return "code-new", {"text": "builds a code object"}
        if event.startswith("ctypes."):
            return "ctypes", {"text": event}
        if event == "sys.addaudithook":
            return "audit-hook", {"text": event}
        if event == "open":
            path = args[0]
            if _isinstance(path, int):
                return None, None
            try:
                path = os.fsdecode(path)
            except Exception:  # noqa: BLE001
                return None, None
            full = _realpath(os.path.join(_getcwd(), path))
            if full.startswith(TOOLS + "/") or full == TOOLS:
                return "open", {"text": "opens the grader's " + full}
            if self.roles.role(full) == "grader":
                return "open", {"text": "opens the grader's " + self.roles.short(full)}
            if full.startswith("/proc/") and ("/mem" in full or "/environ" in full or "/fd/" in full):
                return "open", {"text": "opens " + full}
            return None, None
        return None, None


# ------------------------------------------------------------------ integrity

_WATCHED_MODULES = ("pytest", "_pytest", "pluggy", "unittest", "__main__", "gatehouse_runner")


def _watched(name):
    for w in _WATCHED_MODULES:
        if name == w or name.startswith(w + "."):
            return True
    return False


def _callable_like(v):
    return callable(v) or _isinstance(v, (classmethod, staticmethod, property))


class Integrity:
    """The callables of the test framework and the runner, recorded before
    any candidate code runs, compared and restored after collection and
    after every test: a callable replaced, removed, or added to one of
    their classes is reported and undone."""

    def __init__(self, channel):
        self.channel = channel
        self.snap = []
        self.classes = []
        self.reported = set()

    def record(self):
        if JUDGE_MODE is not None:
            return
        snap = []
        classes = []
        for name, mod in list(sys.modules.items()):
            if not _watched(name) or mod is None:
                continue
            d = getattr(mod, "__dict__", None)
            if not _isinstance(d, dict):
                continue
            for k, v in list(d.items()):
                if _callable_like(v):
                    snap.append((d, name, k, v))
                if _isinstance(v, type) and getattr(v, "__module__", None) == name:
                    where = name + "." + v.__qualname__
                    classes.append((v, where, frozenset(v.__dict__)))
                    for ck, cv in list(v.__dict__.items()):
                        if _callable_like(cv):
                            snap.append((v, where, ck, cv))
        self.snap = snap
        self.classes = classes

    def _report(self, what, change, test):
        if what not in self.reported:
            self.reported.add(what)
            self.channel.send({"t": "integrity", "what": what, "change": change, "test": test})

    def check(self, test):
        if JUDGE_MODE is not None:
            return []
        changed = []
        for owner, where, k, v in self.snap:
            if _isinstance(owner, dict):
                now = owner.get(k, _MISSING)
            else:
                now = owner.__dict__.get(k, _MISSING)
            if now is v:
                continue
            change = "removed" if now is _MISSING else "replaced"
            what = where + "." + k
            changed.append(what)
            self._report(what, change, test)
            try:
                if _isinstance(owner, dict):
                    owner[k] = v
                else:
                    type.__setattr__(owner, k, v)
            except Exception:  # noqa: BLE001 - reported; cannot put it back
                pass
        for cls, where, keys in self.classes:
            for k in list(cls.__dict__):
                if k in keys or not _callable_like(cls.__dict__[k]):
                    continue
                what = where + "." + k
                changed.append(what)
                self._report(what, "added", test)
                try:
                    type.__delattr__(cls, k)
                except Exception:  # noqa: BLE001
                    pass
        return changed


class _Missing:
    pass


_MISSING = _Missing()


def _finish(channel, code, counts):
    if JUDGE_MODE is not None:
        JUDGE_MODE.finish()
        channel.send({"t": "judge-counts", "counts": dict(JUDGE_MODE.counts)})
    channel.send({"t": "end", "exit": code, "counts": counts})
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    _exit(code)


def _raised_in(tb, roles):
    """Where an exception came from: the innermost frame that is not the
    framework's own, as (role, "file:line")."""
    best = None
    while tb is not None:
        code = tb.tb_frame.f_code
        role = roles.role(code.co_filename)
        if role != "library" or best is None:
            best = (role, "%s:%d" % (roles.short(code.co_filename), tb.tb_lineno))
        tb = tb.tb_next
    return best


def _raised_in_context(value, roles):
    """Where the exception `value` was raised while handling came from,
    following `__context__` a few links: the first that is not the
    framework's own, or None."""
    seen = 0
    ctx = _getattr(value, "__context__", None)
    while ctx is not None and seen < 8:
        found = _raised_in(_getattr(ctx, "__traceback__", None), roles)
        if found is not None and found[0] != "library":
            return found
        ctx = _getattr(ctx, "__context__", None)
        seen += 1
    return None


def _plugins_from_the_interpreter():
    """The `pytest11` entry points of distributions installed with the
    interpreter (read before the workspace is on sys.path), to load by
    name now that autoload is off."""
    names = []
    try:
        from importlib.metadata import distributions

        for dist in distributions():
            for ep in dist.entry_points:
                if ep.group == "pytest11":
                    names.append(ep.value.split(":")[0])
    except Exception:  # noqa: BLE001
        pass
    return names


# ------------------------------------------------------------------ pytest


def _share_parsed_modules():
    """pytest parses a test's whole module again for every failure it
    reports (its cache of parsed modules lives for one report), so in a
    module of some size a failing test costs several times what it costs
    passing. The parsed modules are shared across reports, by their text:
    the same text parses to the same tree, so every report reads as before.
    Done before the framework's callables are recorded (`Integrity`)."""
    try:
        from _pytest._code import code as pytest_code
    except ImportError:
        return
    original = _getattr(pytest_code, "getstatementrange_ast", None)
    if original is None:
        return
    import ast
    import warnings

    parsed = {}

    def getstatementrange_ast(lineno, source, assertion=False, astnode=None):
        if astnode is None:
            text = _str(source)
            astnode = parsed.get(text)
            if astnode is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    astnode = ast.parse(text, "source", "exec")
                if _len(parsed) < 64:
                    parsed[text] = astnode
        return original(lineno, source, assertion, astnode)

    pytest_code.getstatementrange_ast = getstatementrange_ast


def run_pytest(channel, config, args, audit, roles):
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    import pytest
    from _pytest import outcomes

    _share_parsed_modules()
    if JUDGE_MODE is not None:
        import gatehouse_judge

        gatehouse_judge.share_pytest_temp()

    plugins = _plugins_from_the_interpreter()
    ini = os.path.join(TOOLS, "pytest.ini")
    integrity = Integrity(channel)
    reports = {}
    raised = {}
    collecting = {}
    # When each test's reporting started: its cost, setup to teardown with
    # its failure report, is what calibration weighs a twin by.
    begun = {}
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "collect_errors": 0}
    skip_types = (outcomes.Skipped, outcomes.XFailed)

    class Reporter:
        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionstart(self, session):
            # The workspace's own plugins that loaded (conftest.py files,
            # `-p` modules), with the hooks they implement, for the record.
            for plugin in session.config.pluginmanager.get_plugins():
                f = getattr(plugin, "__file__", None)
                if _isinstance(f, str) and roles.role(f) == "candidate":
                    hooks = _sorted(n for n in dir(plugin) if n.startswith("pytest_"))
                    channel.send({"t": "plugin", "file": roles.short(f), "hooks": hooks[:40]})
            # Pytest is configured (its own legacy patches are in place) and
            # no test module is imported yet: this is the record.
            integrity.record()

        @pytest.hookimpl(tryfirst=True)
        def pytest_ignore_collect(self, collection_path, config):
            # In judge mode a test file of the candidate's is never
            # collected: importing it would run the candidate's code here.
            if JUDGE_MODE is None:
                return None
            path = _str(collection_path)
            if not path.startswith(WORKSPACE + "/") or not path.endswith(".py"):
                return None
            rel = path[_len(WORKSPACE) + 1 :]
            return True if rel not in JUDGE_MODE.laid_files() else None

        @pytest.hookimpl(tryfirst=True)
        def pytest_collectstart(self, collector):
            path = _getattr(collector, "path", None)
            if path is not None:
                collecting[collector.nodeid] = _str(path)

        @pytest.hookimpl(trylast=True)
        def pytest_collectreport(self, report):
            if report.failed:
                counts["collect_errors"] += 1
                channel.send({"t": "collect-error", "id": report.nodeid, "message": _crash(report)})
            elif report.skipped:
                rec = {"t": "collect-skip", "id": report.nodeid, "message": _crash(report)}
                lr = getattr(report, "longrepr", None)
                if _isinstance(lr, tuple) and _len(lr) == 3:
                    role = roles.role(_realpath(os.path.join(WORKSPACE, str(lr[0]))))
                    rec["raised_in"] = "%s:%s" % (roles.short(str(lr[0])), lr[1])
                    rec["raised_by"] = role
                    if report.nodeid in collecting:
                        rec["test_by"] = roles.role(collecting[report.nodeid])
                channel.send(rec)

        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(self, session):
            integrity.check("(collection)")
            channel.send({"t": "collected", "ids": [item.nodeid for item in session.items]})

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logstart(self, nodeid, location):
            audit.test = nodeid
            channel.send({"t": "run", "id": nodeid})
            begun[nodeid] = _clock()

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            exc = call.excinfo
            if exc is not None and _isinstance(exc.value, skip_types):
                found = _raised_in(exc.tb, roles)
                if found is None or found[0] == "library":
                    # A skip the framework raised on another's behalf (a
                    # unittest.SkipTest turned into pytest's skip inside
                    # the except block that caught it): who raised that.
                    found = _raised_in_context(exc.value, roles) or found
                if found is not None:
                    raised[item.nodeid] = found + (roles.role(_str(_getattr(item, "path", ""))),)

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(self, report):
            nodeid = report.nodeid
            if nodeid not in reports:
                reports[nodeid] = {"status": None, "message": ""}
            entry = reports[nodeid]
            xfail = hasattr(report, "wasxfail")
            if report.when == "call":
                if report.passed:
                    entry["status"] = entry["status"] or ("xpassed" if xfail else "passed")
                elif report.skipped:
                    entry["status"] = entry["status"] or ("xfailed" if xfail else "skipped")
                    entry["message"] = entry["message"] or _crash(report)
                else:
                    entry["status"] = "failed"
                    entry["message"] = _crash(report)
            elif report.failed:
                entry["status"] = "error"
                entry["message"] = entry["message"] or _crash(report)
            elif report.skipped and report.when == "setup":
                entry["status"] = "xfailed" if xfail else "skipped"
                entry["message"] = _crash(report)
            if report.when == "teardown":
                integrity.check(nodeid)
                self._emit(nodeid)

        def _emit(self, nodeid):
            entry = reports[nodeid]
            status = entry["status"] or "error"
            counts[status if status in counts else "skipped"] += 1
            path, _, rest = nodeid.partition("::")
            module = path[:-3] if path.endswith(".py") else path
            classname = module.replace("/", ".")
            name = rest
            if "::" in rest:
                cls, _, name = rest.rpartition("::")
                classname = classname + "." + cls.replace("::", ".")
            rec = {"t": "case", "id": nodeid, "classname": classname, "name": name, "status": status, "message": entry["message"]}
            if nodeid in begun:
                rec["us"] = _cost_us(begun.pop(nodeid))
            if nodeid in raised:
                rec["raised_by"], rec["raised_in"], rec["test_by"] = raised[nodeid]
            channel.send(rec)
            audit.test = ""

    fixed = ["-c", ini, "--rootdir", WORKSPACE, "--import-mode=append", "-p", "no:cacheprovider"]
    for p in plugins:
        fixed += ["-p", p]
    if config.get("noconftest") or JUDGE_MODE is not None:
        fixed.append("--noconftest")
    extra = list(config.get("extra_tests") or [])
    if WORKSPACE not in sys.path:
        sys.path.append(WORKSPACE)
    try:
        code = pytest.main(fixed + list(args) + extra, plugins=[Reporter()])
    except SystemExit as e:  # a plugin or the candidate's code called exit
        code = e.code if _isinstance(e.code, int) else 1
    code = int(code)
    _finish(channel, code, counts)


def _crash(report):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if message:
        return _short(message)
    lr = getattr(report, "longrepr", None)
    if _isinstance(lr, tuple) and _len(lr) == 3:
        return _short(lr[2])
    text = str(getattr(report, "longreprtext", "") or "")
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


# ---------------------------------------------------------------- unittest


def run_unittest(channel, config, args, audit, roles):
    import unittest
    import importlib.util

    import faulthandler

    # A crash in a C extension prints where it happened (pytest's own
    # plugin does the same for pytest runs).
    faulthandler.enable()
    integrity = Integrity(channel)
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "collect_errors": 0}
    begun = {}

    def case_fields(test):
        ident = test.id()
        classname, _, name = ident.rpartition(".")
        return ident, classname, name

    def raised_here():
        tb = sys.exc_info()[2]
        return _raised_in(tb, roles) if tb is not None else None

    class StreamingResult(unittest.TextTestResult):
        def startTest(self, test):
            audit.test = test.id()
            channel.send({"t": "run", "id": test.id()})
            begun[test.id()] = _clock()
            super().startTest(test)

        def stopTest(self, test):
            super().stopTest(test)
            integrity.check(test.id())
            audit.test = ""

        def _send(self, test, status, message="", raised=None):
            if status == "error" and test.__class__.__name__ in ("_FailedTest", "ModuleImportFailure", "_ErrorHolder"):
                counts["collect_errors"] += 1
                channel.send({"t": "collect-error", "id": test.id(), "message": _short(message)})
                return
            counts[status if status in counts else "skipped"] += 1
            ident, classname, name = case_fields(test)
            rec = {"t": "case", "id": ident, "classname": classname, "name": name, "status": status, "message": _short(message)}
            if ident in begun:
                rec["us"] = _cost_us(begun[ident])
            if raised is not None:
                rec["raised_by"], rec["raised_in"] = raised
                module = sys.modules.get(_getattr(type(test), "__module__", ""), None)
                rec["test_by"] = roles.role(_str(_getattr(module, "__file__", "") or ""))
            channel.send(rec)

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
            self._send(test, "skipped", reason, raised_here())

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._send(test, "xfailed", "expected failure", _raised_in(err[2], roles) if err and err[2] else None)

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._send(test, "xpassed", "unexpected success")

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None:
                failed = issubclass(err[0], test.failureException)
                self._send(subtest, "failed" if failed else "error", _last_line(self._exc_info_to_string(err, test)))

    class Runner(unittest.TextTestRunner):
        resultclass = StreamingResult

    extra = list(config.get("extra_tests") or [])

    class Program(unittest.TestProgram):
        def createTests(self, *a, **kw):
            super().createTests(*a, **kw)
            suites = [self.test]
            loader = unittest.TestLoader()
            for i, path in enumerate(extra):
                spec = importlib.util.spec_from_file_location("gatehouse_extra_%d" % i, os.path.join(WORKSPACE, path))
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                suites.append(loader.loadTestsFromModule(module))
            self.test = unittest.TestSuite(suites)
            integrity.check("(collection)")

    integrity.record()
    if WORKSPACE not in sys.path:
        sys.path.append(WORKSPACE)
    try:
        program = Program(module=None, argv=["python3 -m unittest"] + list(args), testRunner=Runner, exit=False)
        result = program.result
        code = 0 if result.wasSuccessful() else 1
        if result.testsRun == 0 and not result.errors:
            # `python -m unittest` exits 5 when no test ran (3.12+); say so on 3.11 too.
            code = 5
    except SystemExit as e:
        code = e.code if _isinstance(e.code, int) else 2
    _finish(channel, int(code), counts)


# ------------------------------------------------------------------ script


def run_script(channel, config, args, audit, roles):
    """Runs a packet's own script (a detector or a driver) with the
    read-only harness first on sys.path, then the script's folder."""
    import runpy

    if not args:
        print("gatehouse_runner: script needs a path", file=sys.stderr)
        _exit(2)
    path = args[0]
    sys.path[:0] = [p for p in (TOOLS, os.path.dirname(os.path.abspath(path))) if p not in sys.path]
    sys.argv = list(args)
    channel.send({"t": "start", "runner": "script"})
    if JUDGE_MODE is not None:
        channel.send({"t": "judge", "apart": True})
        _tell_host_endings(channel, audit)
    integrity = Integrity(channel)
    integrity.record()
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif _isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - report like the interpreter would
        import traceback

        traceback.print_exc()
        code = 1
    integrity.check("(script)")
    _finish(channel, code, {})


JUDGE_MODE = None


def _start_judge(channel, config, wake):
    sys.path.insert(0, TOOLS)
    try:
        import gatehouse_judge
    finally:
        sys.path.remove(TOOLS)
    try:
        judge = gatehouse_judge.install(config, wake)
    except gatehouse_judge.HostError as e:
        print("gatehouse_runner: %s" % e, file=sys.stderr)
        _exit(3)
    return judge


def _tell_host_endings(channel, audit):
    """A host that ends mid-call (a crash, a hang, a broken message) is
    named in the run's record with the test that was running."""
    def told(kind, message, frame):
        channel.send({"t": "host-ended", "kind": kind, "message": message, "frame": frame or "", "test": audit.test})

    JUDGE_MODE.on_host_end = told


def _config(text):
    if not text:
        return {}
    try:
        import json

        value = json.loads(text)
        return value if _isinstance(value, dict) else {}
    except ValueError:
        return {}


def main():
    nonce = _take_env("GATEHOUSE_NONCE")
    config = _config(_take_env("GATEHOUSE_RUN"))
    channel = Channel(nonce)
    if len(sys.argv) < 2 or sys.argv[1] not in ("pytest", "unittest", "script"):
        print("usage: gatehouse_runner.py pytest|unittest|script ARGS...", file=sys.stderr)
        _exit(2)
    kind, args = sys.argv[1], sys.argv[2:]
    roles = Roles(config.get("grader_files") or ())
    audit = Audit(channel, roles)
    if config.get("judge"):
        # JUDGE MODE: the candidate's code runs in a host process under
        # another uid (gatehouse_judge); none of it ever runs here, so there
        # is nothing for the audit hook or the framework record to watch.
        global JUDGE_MODE
        # A script (a detector) starts the host supervisor only if it asks
        # for it; tests nearly always do, so theirs starts at once.
        JUDGE_MODE = _start_judge(channel, config, kind != "script")
    else:
        audit.install()
    if kind == "script":
        run_script(channel, config, args, audit, roles)
        return
    channel.send({"t": "start", "runner": kind})
    if JUDGE_MODE is not None:
        channel.send({"t": "judge", "apart": True})
        _tell_host_endings(channel, audit)
    if kind == "pytest":
        run_pytest(channel, config, args, audit, roles)
    else:
        run_unittest(channel, config, args, audit, roles)


if __name__ == "__main__":
    main()
