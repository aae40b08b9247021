"""The judge's side of the judge apart (JUDGE.md): runs under the judge's uid.

`install(config)` is called by the trusted runner before any packet code is
imported, in a run the grader started in judge mode (the sandbox gave this
process a socket to the host supervisor on descriptor 4, and the supervisor
runs under the candidate's uid). From then on this process never imports,
loads or executes a byte of the submission:

- IMPORTS. A meta path finder, first in `sys.meta_path`, answers the name
  of every module of the workspace that the grader did not lay (the
  candidate's) with a `HostModule`: a module object whose attribute reads,
  writes and deletions are messages to a host process that imported the
  real one. Only packet code (a file the grader laid) may import one; an
  import the test framework or a library makes on its own finds nothing
  in the workspace. Installed modules and the standard library come first,
  as when the workspace is at the end of `sys.path`.
- DATA. What crosses is data (`gatehouse_wire`), decoded strictly into
  exact builtins here: a subclass of `int` that says yes to every `==`
  arrives as its integer. Other host objects arrive as `HostObject`
  handles whose `==` and `hash` are this process's own (identity), so no
  comparison a hidden test makes is decided by the candidate's code;
  dataclass instances arrive as `Record`s compared here, field by field,
  named tuples as tuples, enum members and exception classes as stand-ins
  built here from their names and values. Judge objects passed to the
  candidate's code (a fake clock, a recorder, a mock) are callbacks: the
  host may call them and read or set their public attributes, nothing
  whose name starts with an underscore (no `__globals__`, `__closure__`,
  frames or code objects), and what they answer is again data.
- PROGRAMS. Every program packet code starts through `subprocess`
  (`Popen`, `run`, `os.system`, ...) is started by the host supervisor,
  under the candidate's uid, with this process's descriptors for its
  stdin, stdout and stderr; `poll`, `wait` and signals go through the
  supervisor too. `local_popen` starts the packet's own helpers (a fake
  upstream) here instead. `os.fork` and the exec/spawn family are refused:
  a child of this process would run with the judge's uid.
- FILES. This process's umask lets the candidate's uid (same group) read
  and write what packet code creates for it: pytest's temporary folders
  and `tempfile`'s are opened to the group. Files the grader marked
  judge-only (the hidden tests, helpers, fixtures) are unreadable to it.
- LIMITS. Every message is bounded (`gatehouse_wire`); a host that sends
  nothing for `call_secs` while a call is in progress is killed, and the
  call fails with `HostError`; the next call starts a fresh host. A host
  that exits mid-call fails that call the same way.

`host_module(name)` is the one API packet code needs that in-process
testing did not: the host's copy of any module (`host_module("time")`),
for the tests that watch what the candidate's code does with the standard
library (patch `time.sleep` to fail, count `urlopen` calls).
"""

import builtins
import collections
import collections.abc
import enum
import importlib.abc
import importlib.machinery
import io
import os
import signal
import _socket
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import weakref

import gatehouse_wire as wire

HOST_FD = 4
JUDGE = None

_real_popen = subprocess.Popen
# Bound now: packet code may patch time for the candidate's process, and the
# patch is mirrored here (see `_Mirrored`); the judge keeps its own clock.
_monotonic = time.monotonic
_real_socketpair = _socket.socketpair
_AF_UNIX, _SOCK_STREAM = _socket.AF_UNIX, _socket.SOCK_STREAM
_real_kill = os.kill
_real_killpg = os.killpg
_real_system = os.system


_FAULT_FRAME = __import__("re").compile(r'\s*File "([^"]+)", line (\d+) in (\S+)')


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


class HostError(Exception):
    """The candidate's code could not answer: its process ended, hung past
    the call limit, or broke the wire's rules. Fails the test that called."""


def host_module(name, root=None):
    """The host's module `name` (imported there if needed): a standard
    module as the candidate's code sees it, or one of the workspace. With
    `root`, a host of its own whose working folder and first `sys.path`
    entry is that folder (a disposable copy the packet prepared, with the
    candidate's patch applied there)."""
    if JUDGE is None:
        if root is not None:
            raise HostError("host_module(root=...) needs a run judged apart")
        return importlib.import_module(name)
    return JUDGE.module(name, None if root is None else os.fspath(root))


def in_judge():
    return JUDGE is not None


# ------------------------------------------------------------------ supervisor


class Supervisor:
    """Requests to the host supervisor; thread-safe, answers matched by id.

    The sandbox starts the supervisor as a shell waiting for one newline on
    its socket (`lang::python::HOST_ARGV`): a run that never asks it for
    anything (a detector script that reads files) starts no interpreter
    under the candidate's uid. `wake` sends that newline, once, before
    any message; the runner wakes it at once for test runs (they nearly
    always need it: the interpreter starts while the tests are collected),
    and a script's first request wakes it otherwise."""

    def __init__(self, sock):
        self.wire = wire.Wire(sock)
        self.send_lock = threading.Lock()
        self.read_lock = threading.Lock()
        self.answers = {}
        self.cond = threading.Condition()
        self.next = 1
        self.gone = None
        self.woken = False

    def wake(self):
        with self.send_lock:
            self._wake()

    def _wake(self):
        if not self.woken:
            self.woken = True
            try:
                self.wire.sock.sendall(b"\n")
            except OSError as e:
                self.gone = "it could not be started (%s)" % e.__class__.__name__

    def request(self, op, fds=(), timeout=20.0, **fields):
        if self.gone:
            raise HostError("the host supervisor is gone (%s): the candidate's uid started nothing more" % self.gone)
        with self.cond:
            rid = self.next
            self.next += 1
        fields.update(op=op, id=rid)
        with self.send_lock:
            self._wake()
            if self.gone:
                raise HostError("the host supervisor is gone (%s)" % self.gone)
            try:
                if fds:
                    self.wire.send_fds(fields, fds)
                else:
                    self.wire.send(fields)
            except wire.PeerGone as e:
                self.gone = str(e)
                raise HostError("the host supervisor is gone (%s)" % e)
        deadline = None if timeout is None else _monotonic() + timeout
        while True:
            with self.cond:
                if rid in self.answers:
                    return self.answers.pop(rid)
            if self.read_lock.acquire(timeout=0.05):
                try:
                    with self.cond:
                        if rid in self.answers:
                            return self.answers.pop(rid)
                    try:
                        msg = self.wire.recv(deadline=min(deadline, _monotonic() + 0.2) if deadline else _monotonic() + 0.2)
                    except TimeoutError:
                        msg = None
                    except (wire.PeerGone, wire.ProtocolError) as e:
                        self.gone = str(e)
                        raise HostError("the host supervisor is gone (%s)" % e)
                    if type(msg) is dict:
                        with self.cond:
                            self.answers[msg.get("re")] = msg
                            self.cond.notify_all()
                finally:
                    self.read_lock.release()
            if deadline is not None and _monotonic() > deadline:
                # Stopped or stuck (the candidate's uid can signal it): what
                # follows fails at once instead of waiting again.
                self.gone = "it did not answer %s within %.0f s" % (op, timeout)
                raise HostError("the host supervisor did not answer %s within %.0f s" % (op, timeout))


# ------------------------------------------------------------------ proxies


def _j():
    if JUDGE is None:
        raise HostError("no judge is installed")
    return JUDGE


class HostObject:
    """A handle on an object of the host. Its `==` and `hash` are
    identity; everything else is a message."""

    __slots__ = ("_gh_gen", "_gh_id", "_gh_kind", "_gh_type", "_gh_path", "_gh_root", "_gh_label", "__weakref__")

    def __init__(self, gen, hid, kind, tname, path=None, root=None):
        object.__setattr__(self, "_gh_root", root)
        object.__setattr__(self, "_gh_gen", gen)
        object.__setattr__(self, "_gh_id", hid)
        object.__setattr__(self, "_gh_kind", kind)
        object.__setattr__(self, "_gh_type", tname)
        # How it was reached from a module (module, attribute, ...), when it
        # was: a fresh host after a crash finds the same class or function
        # again the same way.
        object.__setattr__(self, "_gh_path", path)
        object.__setattr__(self, "_gh_label", None)

    def __getattr__(self, name):
        if name == "__signature__":
            return _j().signature(self)
        if name.startswith("_gh_"):
            raise AttributeError(name)
        return _j().call(self, "getattr", n=name)

    def __setattr__(self, name, value):
        _j().call(self, "setattr", n=name, v=value)

    def __delattr__(self, name):
        _j().call(self, "delattr", n=name)

    def __call__(self, *args, **kwargs):
        return _j().call(self, "call", a=args, k=kwargs)

    def __repr__(self):
        try:
            text = _j().op(self, "__repr__")
        except Exception as e:  # noqa: BLE001
            text = "<%s from the candidate's code (repr failed: %s)>" % (self._gh_type, e.__class__.__name__)
        return text if isinstance(text, str) else "<%s from the candidate's code>" % self._gh_type

    def __str__(self):
        text = _j().op(self, "__str__")
        if not isinstance(text, str):
            raise TypeError("__str__ of the candidate's %s returned %s" % (self._gh_type, type(text).__name__))
        return text

    def __instancecheck__(self, other):
        return bool(_j().call(self, "isinstance", v=other))

    def __subclasscheck__(self, other):
        return bool(_j().call(self, "issubclass", v=other))

    def __mro_entries__(self, bases):
        # Subclassing the candidate's class in a hidden test gives a class
        # of the judge's (a Protocol, an ABC used structurally).
        return ()

    def __dir__(self):
        return list(_j().call(self, "dir"))

    def __reduce_ex__(self, protocol):
        raise TypeError("a handle on the candidate's %s cannot be pickled" % self._gh_type)

    def __bool__(self):
        value = _j().op(self, "__bool__")
        if type(value) is not bool:
            raise TypeError("__bool__ of the candidate's %s returned %s" % (self._gh_type, type(value).__name__))
        return value


def _proxy_op(name):
    def method(self, *args):
        return _j().op(self, name, *args)

    method.__name__ = name
    return method


for _name in ("__len__", "__iter__", "__next__", "__reversed__", "__getitem__", "__setitem__", "__delitem__",
              "__contains__", "__enter__", "__exit__", "__lt__", "__le__", "__gt__", "__ge__", "__add__",
              "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__", "__neg__", "__pos__",
              "__abs__", "__invert__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__matmul__",
              "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__",
              "__rand__", "__ror__", "__rxor__", "__int__", "__float__", "__index__", "__round__", "__format__"):
    setattr(HostObject, _name, _proxy_op(_name))
del _name


class Record(HostObject):
    """A dataclass instance of the host: a handle whose `==` compares the
    class and the field values here (fetched as data), as a dataclass's own
    `__eq__` would; frozen ones carry their values and hash them."""

    __slots__ = ("_gh_fields", "_gh_values", "_gh_eq", "_gh_class")

    def __init__(self, gen, hid, cls_id, tname, fields, values, eq, root=None):
        HostObject.__init__(self, gen, hid, "o", tname, None, root)
        object.__setattr__(self, "_gh_fields", tuple(fields))
        object.__setattr__(self, "_gh_values", values)
        object.__setattr__(self, "_gh_eq", eq)
        object.__setattr__(self, "_gh_class", cls_id)

    def _gh_current(self):
        values = object.__getattribute__(self, "_gh_values")
        if values is not None:
            return values
        pairs = _j().call(self, "fields")
        return tuple(v for _, v in pairs)

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_gh_values")
        fields = object.__getattribute__(self, "_gh_fields")
        if values is not None and name in fields:
            return values[fields.index(name)]
        return HostObject.__getattr__(self, name)

    def __eq__(self, other):
        if not object.__getattribute__(self, "_gh_eq"):
            return self is other
        if not isinstance(other, Record):
            return NotImplemented
        if (self._gh_type, self._gh_fields) != (other._gh_type, other._gh_fields):
            return NotImplemented
        return self._gh_current() == other._gh_current()

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        values = object.__getattribute__(self, "_gh_values")
        if not object.__getattribute__(self, "_gh_eq"):
            return object.__hash__(self)
        if values is None:
            raise TypeError("unhashable type: '%s'" % self._gh_type)
        return hash((self._gh_type, values))

    def __repr__(self):
        try:
            pairs = zip(self._gh_fields, self._gh_current())
            return "%s(%s)" % (self._gh_type, ", ".join("%s=%r" % p for p in pairs))
        except Exception:  # noqa: BLE001
            return HostObject.__repr__(self)


class HostModule(types.ModuleType):
    """A module of the candidate's (or the host's copy of any module):
    attribute reads, writes and deletions are messages to the host, which
    imports the real one. Addressed by name, so a fresh host after a crash
    serves the same module object here."""

    def __init__(self, name, is_package=False, root=None):
        super().__init__(name)
        object.__setattr__(self, "_gh_package", is_package)
        object.__setattr__(self, "_gh_root", root)
        if is_package:
            object.__setattr__(self, "__path__", [])

    def __getattr__(self, name):
        if name.startswith("_gh_") or name in ("__path__", "__file__", "__cached__", "__builtins__"):
            raise AttributeError(name)
        if name == "__signature__":
            raise AttributeError(name)
        return _j().module_call(self.__name__, "getattr", self._gh_root, n=name)

    def __setattr__(self, name, value):
        if name.startswith("__") and name.endswith("__"):
            object.__setattr__(self, name, value)
            return
        _j().module_call(self.__name__, "setattr", self._gh_root, n=name, v=value)

    def __delattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            object.__delattr__(self, name)
            return
        _j().module_call(self.__name__, "delattr", self._gh_root, n=name)

    def __dir__(self):
        return list(_j().module_call(self.__name__, "dir", self._gh_root))

    @property
    def __dict__(self):
        # What monkeypatch and mock read to put an attribute back: the
        # host's namespace (the import system uses the real dict directly).
        return _HostDict(self)

    def __repr__(self):
        return "<module %r served by the host>" % self.__name__


class _HostDict(collections.abc.Mapping):
    """A served module's namespace as a mapping, read on the host: what
    `monkeypatch` and `mock.patch` look up in `module.__dict__` to put back
    afterwards is the host's value, not this process's empty module dict."""

    def __init__(self, module):
        self._module = module

    def __getitem__(self, name):
        try:
            return getattr(self._module, name)
        except AttributeError:
            raise KeyError(name) from None

    def __iter__(self):
        return iter(dir(self._module))

    def __len__(self):
        return len(dir(self._module))


class _HostLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return HostModule(spec.name, spec.submodule_search_locations is not None)

    def exec_module(self, module):
        _j().import_module(module.__name__)


# ------------------------------------------------------------------ the codec


class JudgeCodec(wire.Codec):
    def __init__(self, judge):
        self.judge = judge

    def encode_other(self, v, depth):
        return self.judge.encode_ref(v, depth)

    def decode_other(self, tag, body, depth):
        return self.judge.decode_ref(tag, body, depth)


_NAME_PREFIXES_REFUSED = ("_", "f_", "gi_", "cr_", "ag_", "tb_", "co_", "func_", "im_")


def _callback_name_ok(name):
    return isinstance(name, str) and name.isidentifier() and not name.startswith(_NAME_PREFIXES_REFUSED)


# ------------------------------------------------------------------ one host


class Host:
    def __init__(self, judge, gen, root=None):
        self.judge = judge
        self.gen = gen
        self.root = root
        # The C-level socketpair: a test may have patched `socket.socket`.
        mine, theirs = _real_socketpair(_AF_UNIX, _SOCK_STREAM)
        try:
            extra = {} if root is None else {"root": root}
            answer = judge.supervisor.request("host", fds=[theirs.fileno()], **extra)
        finally:
            theirs.close()
        if "pid" not in answer:
            mine.close()
            raise HostError("the host supervisor could not start a host: %s" % answer.get("error", answer))
        self.pid = answer["pid"]
        self.wire = wire.Wire(mine, budget=wire.MAX_RUN_BYTES)
        self.sock = mine
        self.dead = None
        self.lock = threading.RLock()
        self.next = 1

    def kill(self, why, abort=False):
        if self.dead is None:
            self.dead = why
            try:
                self.sock.close()
            except OSError:
                pass
            try:
                self.judge.supervisor.request("kill_host", pid=self.pid, abort=abort, timeout=10)
            except HostError:
                pass


class Judge:
    def __init__(self, config, supervisor):
        self.workspace = config.get("workspace") or "/workspace"
        self.laid = frozenset(config.get("laid") or ())
        self.call_secs = float(config.get("call_secs") or 30.0)
        self.supervisor = supervisor
        self.codec = JudgeCodec(self)
        self.hosts = {}
        self.by_gen = {}
        self.gen = 0
        # The host whose message is being read (handles decode as its own).
        self.active = None
        self.handles = {}
        self.modules = {}
        self.callbacks = {}
        self.callback_ids = {}
        self.next_cb = 1
        self.standins = {}
        self.remote_pids = {}
        self.resolving = False
        self.target = None
        # Told when a host ends mid-call: (kind, message, frame).
        self.on_host_end = None
        self.sent_exceptions = []
        self.mirrored = {}
        self.lock = threading.RLock()
        self.counts = {"calls": 0, "hosts": 0, "callbacks": 0, "spawns": 0}
        # File name -> what `_asked_by_packet_code` makes of its frames.
        self.file_kinds = {}

    # ---- hosts

    @property
    def host(self):
        return self.hosts.get(None)

    def current(self, root=None):
        host = self.hosts.get(root)
        if host is None or host.dead is not None:
            if root is not None and len(self.hosts) >= 16 and root not in self.hosts:
                raise HostError("more than 16 host folders in one run")
            self.gen += 1
            self.counts["hosts"] += 1
            host = Host(self, self.gen, root)
            self.hosts[root] = host
            self.by_gen[host.gen] = host
        return host

    def module(self, name, root=None):
        key = (root, name)
        mod = self.modules.get(key)
        if mod is None:
            mod = HostModule(name, root=root)
            self.modules[key] = mod
        self.import_module(name, root)
        return mod

    def import_module(self, name, root=None):
        self.request({"op": "import", "n": name}, "import %s" % name, root)

    def module_call(self, name, op, root=None, **fields):
        fields["o"] = {"M": name}
        attr = fields.get("n")
        value = self.request(dict(fields, op=op), "%s %s.%s" % (op, name, attr or ""), root)
        if op == "getattr" and isinstance(value, HostObject) and not isinstance(value, Record):
            if object.__getattribute__(value, "_gh_path") is None and object.__getattribute__(value, "_gh_kind") in ("c", "f"):
                object.__setattr__(value, "_gh_path", (name, attr))
        return value

    def live_id(self, obj):
        """The handle's id in the current host: a class or function reached
        from a module is found again in a fresh host; anything else from a
        host that ended is gone with it."""
        gen = object.__getattribute__(obj, "_gh_gen")
        root = object.__getattribute__(obj, "_gh_root")
        host = self.current(root)
        if gen == host.gen:
            return object.__getattribute__(obj, "_gh_id")
        path = object.__getattribute__(obj, "_gh_path")
        if not path:
            raise HostError("a handle on the candidate's %s from a host that has ended (its process ended in an earlier call)"
                            % object.__getattribute__(obj, "_gh_type"))
        self.resolving = True
        try:
            fresh = self.module(path[0], root)
            value = fresh
            for name in path[1:]:
                value = getattr(value, name)
        finally:
            self.resolving = False
        if not isinstance(value, HostObject):
            raise HostError("%s is no longer a handle in the fresh host" % ".".join(path))
        new_gen = object.__getattribute__(value, "_gh_gen")
        new_id = object.__getattribute__(value, "_gh_id")
        object.__setattr__(obj, "_gh_gen", new_gen)
        object.__setattr__(obj, "_gh_id", new_id)
        self.handles[(new_gen, new_id)] = obj
        return new_id

    def describe(self, obj):
        path = object.__getattribute__(obj, "_gh_path")
        if path:
            return ".".join(path)
        label = object.__getattribute__(obj, "_gh_label")
        if label:
            return label
        return "the candidate's %s" % object.__getattribute__(obj, "_gh_type")

    def call(self, obj, op, **fields):
        with self.lock:
            root = object.__getattribute__(obj, "_gh_root")
            fields["o"] = {"H": self.live_id(obj)}
            name = fields.get("n")
            if op == "call":
                what = "%s()" % self.describe(obj)
            elif op == "op":
                what = "%s of %s" % (name, self.describe(obj))
            else:
                what = "%s %s of %s" % (op, name or "", self.describe(obj))
            value = self.request(dict(fields, op=op), what, root)
            if op == "getattr" and isinstance(value, HostObject) and not isinstance(value, Record):
                path = object.__getattribute__(obj, "_gh_path")
                if path and object.__getattribute__(value, "_gh_path") is None and object.__getattribute__(value, "_gh_kind") in ("c", "f"):
                    object.__setattr__(value, "_gh_path", tuple(path) + (name,))
                elif not path and not object.__getattribute__(value, "_gh_label"):
                    # A method of an instance: named by its class, for the
                    # messages a reviewer reads.
                    owner = object.__getattribute__(obj, "_gh_label") or object.__getattribute__(obj, "_gh_type")
                    object.__setattr__(value, "_gh_label", "%s.%s" % (owner, name))
            return value

    def op(self, obj, name, *args):
        return self.call(obj, "op", n=name, a=args)

    def signature(self, obj):
        desc = self.call(obj, "signature")
        return _signature_from(desc)

    def request(self, msg, what, root=None):
        with self.lock:
            host = self.current(root)
            outer = self.target
            self.target = host
            try:
                if outer is None:
                    # A judge exception the candidate's code may hand back
                    # as itself: only those sent during this call.
                    self.sent_exceptions = []
                self.counts["calls"] += 1
                if "a" in msg:
                    msg["a"] = [self.codec.encode(a) for a in msg["a"]]
                if "k" in msg:
                    msg["k"] = [[str(k), self.codec.encode(v)] for k, v in dict(msg["k"]).items()]
                if "v" in msg:
                    msg["v"] = self.codec.encode(msg["v"])
                rid = host.next
                host.next += 1
                msg["id"] = rid
                try:
                    host.wire.send(msg)
                except wire.PeerGone as e:
                    host.kill(str(e))
                    raise HostError("the candidate's code is not running any more (%s), at %s" % (e, what))
                except wire.ProtocolError as e:
                    raise HostError("%s: %s" % (what, e))
                return self._await(host, rid, what)
            finally:
                self.target = outer

    def _await(self, host, rid, what):
        while True:
            try:
                msg = host.wire.recv(deadline=_monotonic() + self.call_secs)
            except TimeoutError:
                # SIGABRT first: the host's fault handler writes where it hung.
                host.kill("it did not answer within %g s" % self.call_secs, abort=True)
                frame = self._fault_frame(host)
                raise self._ended(
                    "hang", "the candidate's code did not answer within %g s during %s" % (self.call_secs, what), frame,
                    " (its process was ended; the next call starts a fresh one)")
            except wire.PeerGone:
                code = self._host_exit(host)
                host.kill("its process ended")
                frame = self._fault_frame(host)
                if code is None:
                    how, kind = "ended", "exit"
                elif code < 0:
                    how, kind = "was killed by %s" % _signal_name(-code), "signal"
                else:
                    how, kind = "exited with status %d" % code, "exit"
                raise self._ended(kind, "the candidate's process %s during %s" % (how, what), frame, "")
            except wire.ProtocolError as e:
                host.kill(str(e))
                raise self._ended("wire", "the candidate's process broke the wire's rules during %s: %s" % (what, e), None, "")
            if type(msg) is not dict:
                host.kill("a message that is not an object")
                raise self._ended("wire", "the candidate's process sent a message that is not an object during %s" % what, None, "")
            self._replay(msg)
            if "re" in msg:
                if msg["re"] != rid:
                    continue
                if "err" in msg:
                    self.active = host
                    raise self.exception_from(msg["err"], what)
                try:
                    self.active = host
                    return self.codec.decode(msg.get("ok"))
                except (wire.ProtocolError, RecursionError) as e:
                    host.kill(str(e))
                    raise self._ended("wire", "the candidate's process answered %s with something that is not data: %s" % (what, e), None, "")
            elif "op" in msg:
                self.active = host
                self._callback(host, msg)

    def _ended(self, kind, message, frame, tail):
        """The HostError of a host that ended mid-call, told to the runner
        (`on_host_end`) so the receipt names it."""
        if frame:
            message = "%s (at %s)" % (message, frame)
        if self.on_host_end is not None:
            try:
                self.on_host_end(kind, message, frame)
            except Exception:  # noqa: BLE001 - naming it must not hide it
                pass
        return HostError(message + tail)

    def _host_exit(self, host):
        """The host's exit status (negative: the signal that killed it), or
        None when the supervisor cannot tell."""
        try:
            answer = self.supervisor.request("poll_host", pid=host.pid, timeout=2)
        except HostError:
            return None
        code = answer.get("code")
        return code if type(code) is int else None

    def _fault_frame(self, host):
        """The innermost frame in the candidate's code of what the host's
        fault handler wrote when it died (a crash, or the SIGABRT the judge
        sends a host that hangs): `file:line in function`. Written by the
        candidate's process, so shown to the reviewer, never judged."""
        path = "/tmp/.gatehouse-host-%d.fault" % host.pid
        try:
            with open(path, "rb") as f:
                text = f.read(64 << 10).decode("utf-8", "replace")
        except OSError:
            return None
        ws = (host.root or self.workspace).rstrip("/") + "/"
        for line in text.splitlines():
            m = _FAULT_FRAME.match(line)
            if m and m.group(1).startswith(ws):
                rel = m.group(1)[len(ws):]
                if rel not in self.laid:
                    return "%s:%s in %s" % (rel, m.group(2), m.group(3))
        return None

    def _replay(self, msg):
        out, err, logs = msg.get("o"), msg.get("e"), msg.get("lg")
        if isinstance(out, str) and out:
            try:
                sys.stdout.write(out)
                sys.stdout.flush()
            except Exception:  # noqa: BLE001
                pass
        if isinstance(err, str) and err:
            try:
                sys.stderr.write(err)
                sys.stderr.flush()
            except Exception:  # noqa: BLE001
                pass
        if isinstance(logs, list) and logs:
            import logging

            for item in logs[:500]:
                if type(item) is not list or len(item) != 5:
                    continue
                name, level, _, text, exc = item
                if not isinstance(name, str) or type(level) is not int or not isinstance(text, str):
                    continue
                logger = logging.getLogger(name) if name and name != "root" else logging.getLogger()
                record = logger.makeRecord(name, level, "(candidate)", 0, text, None, None)
                if isinstance(exc, str):
                    record.exc_text = exc
                saved = logging.lastResort
                logging.lastResort = None
                manager = logging.Logger.manager
                warned = manager.emittedNoHandlerWarning
                manager.emittedNoHandlerWarning = True
                try:
                    if logger.isEnabledFor(level):
                        logger.handle(record)
                finally:
                    logging.lastResort = saved
                    manager.emittedNoHandlerWarning = warned

    def _callback(self, host, msg):
        rid = msg.get("id")
        self.counts["callbacks"] += 1
        try:
            obj = self.callbacks.get(msg.get("cb"))
            if obj is None:
                raise LookupError("no judge object %r was passed to the candidate's code" % (msg.get("cb"),))
            op = msg.get("op")
            if op == "cb_call":
                args = [self.codec.decode(a) for a in msg.get("a") or []]
                kwargs = {str(k): self.codec.decode(v) for k, v in msg.get("k") or []}
                value = obj(*args, **kwargs)
            elif op == "cb_getattr":
                name = msg.get("n")
                if not _callback_name_ok(name):
                    raise AttributeError("the candidate's code may not read %r of a judge object" % (name,))
                value = getattr(obj, name)
            elif op == "cb_setattr":
                name = msg.get("n")
                if not _callback_name_ok(name):
                    raise AttributeError("the candidate's code may not set %r of a judge object" % (name,))
                setattr(obj, name, self.codec.decode(msg.get("v")))
                value = None
            elif op == "cb_op":
                name = msg.get("n")
                fn = _CALLBACK_OPS.get(name)
                if fn is None:
                    raise TypeError("the candidate's code may not use %r on a judge object" % (name,))
                value = fn(obj, *[self.codec.decode(a) for a in msg.get("a") or []])
            else:
                raise TypeError("unknown callback %r" % (op,))
            reply = {"re": rid, "ok": self.codec.encode(value)}
        except wire.ProtocolError as e:
            host.kill(str(e))
            raise HostError("the candidate's process broke the wire's rules in a callback: %s" % e)
        except BaseException as e:  # noqa: BLE001 - the candidate's code gets the exception
            if isinstance(e, (KeyboardInterrupt, SystemExit)) and not isinstance(e, SystemExit):
                raise
            reply = {"re": rid, "err": self.judge_exc_desc(e)}
        try:
            host.wire.send(reply)
        except (wire.PeerGone, wire.ProtocolError) as e:
            host.kill(str(e))

    # ---- values

    def encode_ref(self, v, depth):
        target = self.target.root if self.target is not None else None
        if isinstance(v, HostModule):
            if object.__getattribute__(v, "_gh_root") != target:
                raise HostError("module %s of one host folder passed to another" % v.__name__)
            return {"M": v.__name__}
        if isinstance(v, HostObject):
            if object.__getattribute__(v, "_gh_root") != target:
                raise HostError("a handle on the candidate's %s passed to another host folder" % object.__getattribute__(v, "_gh_type"))
            return {"H": self.live_id(v)}
        if isinstance(v, _NTStandIn):
            ref = v._gh_ref
            if ref is not None and self.target is not None and ref[0] == self.target.gen:
                return {"H": ref[1]}
            return {"T": [self.codec.encode(x, depth + 1) for x in tuple.__iter__(v)]}
        if isinstance(v, type):
            for name, b in wire.BUILTIN_TYPES.items():
                if v is b:
                    return {"BT": name}
            where = getattr(v, "_gh_where", None)
            if where is not None:
                return {"HC": list(where)}
        if isinstance(v, enum.Enum):
            where = getattr(type(v), "_gh_where", None)
            if where is not None:
                return {"EN": [where[0], where[1], v.name]}
        if isinstance(v, BaseException):
            return {"XV": self.judge_exc_desc(v)}
        return {"CB": self.callback_id(v)}

    def callback_id(self, obj):
        key = id(obj)
        cid = self.callback_ids.get(key)
        if cid is None or self.callbacks.get(cid) is not obj:
            cid = self.next_cb
            self.next_cb += 1
            self.callback_ids[key] = cid
            self.callbacks[cid] = obj
        return cid

    def judge_exc_desc(self, e):
        desc = {"c": self.class_for_host(type(e)), "m": _safe_str(e)}
        if len(self.sent_exceptions) < 10000:
            self.sent_exceptions.append(e)
            desc["jid"] = len(self.sent_exceptions) - 1
        args = []
        for a in getattr(e, "args", ()) or ():
            try:
                args.append(self.codec.encode(a))
            except Exception:  # noqa: BLE001
                args.append(_safe_str(a))
        desc["a"] = args
        attrs = []
        try:
            items = list(vars(e).items())
        except TypeError:
            items = []
        for name, value in items[:32]:
            if isinstance(name, str) and not name.startswith("_"):
                try:
                    attrs.append([name, self.codec.encode(value)])
                except Exception:  # noqa: BLE001
                    continue
        desc["at"] = attrs
        return desc

    def class_for_host(self, cls):
        for name, b in wire.BUILTIN_EXCEPTIONS.items():
            if cls is b:
                return {"bt": name}
        where = getattr(cls, "_gh_where", None)
        if where is not None:
            return {"host": True, "mod": where[0], "name": where[1]}
        mod = getattr(cls, "__module__", "") or ""
        bases = [self.class_for_host(b) for b in cls.__bases__ if isinstance(b, type) and issubclass(b, BaseException)]
        # The host looks the class up by its module and name first (the
        # standard library's, or a module both sides have, like a laid
        # fixture); a class it cannot find is made there from these bases.
        return {"named": [mod, cls.__qualname__], "id": id(cls), "name": _plain(cls.__name__),
                "bases": bases or [{"bt": "Exception"}]}

    def decode_ref(self, tag, body, depth):
        if tag == "H":
            if type(body) is not list or len(body) != 3:
                raise wire.ProtocolError("a handle is [id, kind, type]")
            hid, kind, tname = body
            if type(hid) is not int or kind not in ("c", "f", "o") or not isinstance(tname, str):
                raise wire.ProtocolError("a malformed handle")
            return self.handle(hid, kind, _plain(tname))
        if tag == "M":
            if not isinstance(body, str) or not all(p.isidentifier() for p in body.split(".")):
                raise wire.ProtocolError("a module name that is not a dotted name")
            root = self.active.root if self.active is not None else None
            mod = self.modules.get((root, body))
            if mod is None:
                mod = HostModule(body, root=root)
                self.modules[(root, body)] = mod
            return mod
        if tag == "CB":
            if body not in self.callbacks:
                raise wire.ProtocolError("a judge object that was never passed")
            return self.callbacks[body]
        if tag == "BT":
            if body not in wire.BUILTIN_TYPES:
                raise wire.ProtocolError("no builtin %r" % (body,))
            return wire.BUILTIN_TYPES[body]
        if tag == "XC":
            return self.standin_class(body)
        if tag == "EC":
            return self.standin_class(body)
        if tag == "E":
            if type(body) is not list or len(body) != 2 or not isinstance(body[1], str):
                raise wire.ProtocolError("an enum member is [class, name]")
            cls = self.standin_class(body[0])
            try:
                return cls[body[1]]
            except KeyError:
                raise wire.ProtocolError("%s has no member %r" % (cls.__name__, body[1][:60]))
        if tag == "NT":
            return self.namedtuple_of(body, depth)
        if tag == "R":
            return self.record_of(body, depth)
        if tag == "XV":
            return self.exception_value(body)
        raise wire.ProtocolError("an unknown tag %r" % (tag[:40],))

    def handle(self, hid, kind, tname):
        host = self.active
        key = (host.gen, hid)
        h = self.handles.get(key)
        if h is None:
            h = HostObject(host.gen, hid, kind, tname, None, host.root)
            self.handles[key] = h
        return h

    def record_of(self, body, depth):
        if type(body) is not dict:
            raise wire.ProtocolError("a record is an object")
        hid, cid, name, fields = body.get("h"), body.get("c"), body.get("name"), body.get("f")
        if type(hid) is not int or type(cid) is not int or not isinstance(name, str) or type(fields) is not list:
            raise wire.ProtocolError("a malformed record")
        if not all(isinstance(f, str) and f.isidentifier() for f in fields):
            raise wire.ProtocolError("a record's fields are not names")
        values = None
        if "v" in body:
            raw = body["v"]
            if type(raw) is not list or len(raw) != len(fields):
                raise wire.ProtocolError("a record's values do not match its fields")
            values = tuple(self.codec.decode(x, depth + 1) for x in raw)
        host = self.active
        key = (host.gen, hid)
        h = self.handles.get(key)
        if isinstance(h, Record):
            if values is not None:
                object.__setattr__(h, "_gh_values", values)
            return h
        h = Record(host.gen, hid, cid, _plain(name), fields, values, bool(body.get("eq", True)), host.root)
        self.handles[key] = h
        return h

    def namedtuple_of(self, body, depth):
        if type(body) is not dict:
            raise wire.ProtocolError("a named tuple is an object")
        name, fields, raw = body.get("name"), body.get("f"), body.get("v")
        if not isinstance(name, str) or type(fields) is not list or type(raw) is not list or len(raw) != len(fields):
            raise wire.ProtocolError("a malformed named tuple")
        if not all(isinstance(f, str) and f.isidentifier() and not f.startswith("_") for f in fields):
            raise wire.ProtocolError("a named tuple's fields are not names")
        key = ("nt", _plain(name), tuple(fields))
        cls = self.standins.get(key)
        if cls is None:
            base = collections.namedtuple(_plain(name), fields)
            cls = type(_plain(name), (_NTStandIn, base), {})
            self.standins[key] = cls
        values = [self.codec.decode(x, depth + 1) for x in raw]
        inst = cls(*values)
        ref = (self.active.gen, body.get("h")) if type(body.get("h")) is int else None
        object.__setattr__(inst, "_gh_ref", ref)
        return inst

    def standin_class(self, desc, depth=0):
        if type(desc) is not dict:
            raise wire.ProtocolError("a class is described by an object")
        if "bt" in desc:
            cls = wire.BUILTIN_TYPES.get(desc["bt"])
            if cls is None:
                raise wire.ProtocolError("no builtin %r" % (desc["bt"],))
            return cls
        if depth > 8:
            raise wire.ProtocolError("a class hierarchy deeper than 8")
        name, mod, kind = desc.get("name"), desc.get("mod"), desc.get("kind")
        if not isinstance(name, str) or not isinstance(mod, str) or kind not in ("exc", "enum"):
            raise wire.ProtocolError("a malformed class description")
        key = (kind, mod, _plain(name))
        cls = self.standins.get(key)
        if cls is not None:
            return cls
        if kind == "exc":
            raw_bases = desc.get("bases")
            if type(raw_bases) is not list or not raw_bases:
                raise wire.ProtocolError("an exception class without bases")
            bases = []
            for b in raw_bases[:8]:
                base = self.standin_class(b, depth + 1)
                if not (isinstance(base, type) and issubclass(base, BaseException)):
                    raise wire.ProtocolError("an exception class based on %r" % (base,))
                if base in (KeyboardInterrupt, GeneratorExit, BaseException):
                    base = Exception
                bases.append(base)
            ns = {"__module__": mod, "_gh_where": (mod, _plain(name)), "_gh_root": self.active.root if self.active else None}
            try:
                cls = _StandInMeta(_plain(name), tuple(dict.fromkeys(bases)), ns)
            except TypeError:
                cls = _StandInMeta(_plain(name), (Exception,), ns)
            init = desc.get("init")
            if type(init) is dict:
                try:
                    sig = _signature_from(init)
                    original = cls.__init__

                    def __init__(self, *args, **kwargs):
                        original(self, *args)
                        for k, v in kwargs.items():
                            setattr(self, k, v)

                    __init__.__signature__ = sig
                    cls.__init__ = __init__
                except (ValueError, TypeError):
                    pass
        else:
            members = desc.get("members")
            if type(members) is not list:
                raise wire.ProtocolError("an enum without members")
            pairs = []
            for item in members[:1000]:
                if type(item) is not list or len(item) != 2 or not isinstance(item[0], str) or not item[0].isidentifier():
                    raise wire.ProtocolError("a malformed enum member")
                pairs.append((item[0], self.codec.decode(item[1], depth + 1)))
            mixin = {"int": int, "str": str, "float": float}.get(desc.get("mixin"))
            base = enum.Flag if desc.get("flag") else enum.Enum
            if mixin is not None and base is enum.Flag and mixin is int:
                base = enum.IntFlag
                mixin = None
            try:
                cls = base(_plain(name), pairs, module=mod, type=mixin) if mixin else base(_plain(name), pairs, module=mod)
            except (TypeError, ValueError) as e:
                raise wire.ProtocolError("an enum that cannot be built here: %s" % e)
            cls._gh_where = (mod, _plain(name))
        self.standins[key] = cls
        return cls

    def exception_value(self, body):
        if type(body) is not dict:
            raise wire.ProtocolError("an exception is described by an object")
        jid = body.get("jid")
        if type(jid) is int and 0 <= jid < len(self.sent_exceptions):
            # The judge's own exception (raised by a callback), back through
            # the candidate's code: itself, with its traceback.
            return self.sent_exceptions[jid]
        cls = self.standin_class(body.get("c") or {"bt": "Exception"})
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise wire.ProtocolError("an exception of a class that is not one")
        if cls in (KeyboardInterrupt, GeneratorExit, BaseException) or (
            issubclass(cls, BaseException) and not issubclass(cls, Exception) and cls is not SystemExit
        ):
            cls = HostError
        raw_args = body.get("a") or []
        args = []
        for a in raw_args[:32] if type(raw_args) is list else []:
            args.append(self.codec.decode(a))
        message = body.get("m") if isinstance(body.get("m"), str) else ""
        exc = None
        if cls is SystemExit:
            code = self.codec.decode(body["code"]) if "code" in body else (args[0] if args else None)
            exc = SystemExit(code)
        elif issubclass(cls, OSError) and type(body.get("os")) is list and len(body["os"]) == 3:
            errno_, strerror, filename = body["os"]
            try:
                exc = cls(errno_, strerror, filename) if filename is not None else cls(errno_, strerror)
            except Exception:  # noqa: BLE001
                exc = None
        if exc is None:
            try:
                exc = type.__call__(cls, *args)
            except Exception:  # noqa: BLE001
                exc = cls.__new__(cls)
                BaseException.__init__(exc, *args)
        for item in (body.get("at") or [])[:32]:
            if type(item) is list and len(item) == 2 and isinstance(item[0], str) and not item[0].startswith("_"):
                try:
                    setattr(exc, item[0], self.codec.decode(item[1]))
                except Exception:  # noqa: BLE001
                    pass
        if not exc.args and message:
            exc.args = (message,)
        tb = body.get("tb")
        if isinstance(tb, str) and tb:
            try:
                exc.add_note("in the candidate's process:\n" + tb[-2000:])
            except Exception:  # noqa: BLE001
                pass
        return exc

    def exception_from(self, body, what):
        try:
            return self.exception_value(body)
        except wire.ProtocolError as e:
            return HostError("%s failed, and its exception could not be read: %s" % (what, e))

    # ---- spawning

    def spawn(self, popen, args, executable, cwd, env, fds, pass_fds, session, group, umask):
        send, std = [], []
        for fd in fds:
            if fd is None:
                std.append(False)
            else:
                std.append(True)
                send.append(fd)
        send += list(pass_fds)
        env_pairs = None if env is None else [[os.fsdecode(k), os.fsdecode(v)] for k, v in env.items()]
        answer = self.supervisor.request(
            "spawn", fds=send, argv=[os.fsdecode(a) for a in args],
            executable=None if executable is None else os.fsdecode(executable),
            cwd=None if cwd is None else os.fsdecode(cwd), env=env_pairs, std=std,
            **{"pass": list(pass_fds), "session": bool(session), "group": None if group in (None, -1) else group,
               "umask": umask})
        if "oserror" in answer:
            errno_, strerror, filename = answer["oserror"]
            raise OSError(errno_, strerror, filename) if filename else OSError(errno_, strerror)
        if "pid" not in answer:
            raise OSError(0, "the host supervisor could not start %r: %s" % (args[:1], answer.get("error")))
        self.counts["spawns"] += 1
        self.remote_pids[answer["pid"]] = popen
        return answer["pid"]

    def procs(self):
        """Processes alive under the candidate's uid: (pid, ppid, command)."""
        answer = self.supervisor.request("procs")
        return [tuple(p) for p in answer.get("procs") or []]

    def laid_files(self):
        return self.laid

    def mirror(self, module, name, value):
        """Sets (or, with `_MISSING`, deletes) `module.name` here and in the
        host's copy; the first change remembers both originals, and setting
        this process's original back sets the host's back."""
        key = (module.__name__, name)
        saved = self.mirrored.get(key)
        host = self.module(module.__name__)
        if saved is None:
            local = types.ModuleType.__getattribute__(module, "__dict__").get(name, _MISSING)
            try:
                remote = getattr(host, name)
            except AttributeError:
                remote = _MISSING
            saved = self.mirrored[key] = (local, remote)
        if value is _MISSING:
            types.ModuleType.__delattr__(module, name)
        else:
            types.ModuleType.__setattr__(module, name, value)
        if value is saved[0]:
            del self.mirrored[key]
            value = saved[1]
        if value is _MISSING:
            try:
                delattr(host, name)
            except AttributeError:
                pass
        else:
            setattr(host, name, value)

    def finish(self):
        if not self.supervisor.woken:
            # Nothing was started: the waiting shell ends when this process
            # closes the socket.
            return
        try:
            self.supervisor.request("bye", timeout=10)
        except HostError:
            pass


def _plain(text):
    text = str(text or "")
    return text if text.isidentifier() and len(text) <= 100 else "X"


def _safe_str(e):
    try:
        return str(e)[:2000]
    except Exception:  # noqa: BLE001
        return "<unprintable>"


class _StandInMeta(type):
    """The class of a stand-in for one of the candidate's exception classes:
    `isinstance`, `except` and `pytest.raises` work here as for any class;
    calling it builds the candidate's own exception in the host (its
    `__init__` runs there) and brings it back as a stand-in instance."""

    def __call__(cls, *args, **kwargs):
        where = cls.__dict__.get("_gh_where")
        j = JUDGE
        if where is None or j is None:
            return type.__call__(cls, *args, **kwargs)
        root = cls.__dict__.get("_gh_root")
        j.module(where[0], root)
        value = j.module_call(where[0], "method", root, n=where[1], a=args, k=kwargs)
        if not isinstance(value, cls):
            raise HostError("%s.%s(...) did not build an exception of that class" % where)
        return value


class _NTStandIn(tuple):
    """A named tuple of the host's, as a tuple here; methods it defines are
    called on the host's instance."""

    def __getattr__(self, name):
        if name.startswith("_gh_"):
            raise AttributeError(name)
        ref = object.__getattribute__(self, "_gh_ref")
        if ref is None:
            raise AttributeError(name)
        j = _j()
        host = j.by_gen.get(ref[0])
        if host is None or host.dead is not None or j.hosts.get(host.root) is not host:
            raise HostError("a named tuple from a host that has ended")
        return j.request({"op": "getattr", "o": {"H": ref[1]}, "n": name}, "%s of a named tuple" % name, host.root)


_CALLBACK_OPS = {
    "__len__": len, "__iter__": iter, "__next__": next, "__getitem__": lambda o, k: o[k],
    "__setitem__": lambda o, k, v: o.__setitem__(k, v), "__delitem__": lambda o, k: o.__delitem__(k),
    "__contains__": lambda o, x: x in o, "__enter__": lambda o: o.__enter__(),
    "__exit__": lambda o, *a: o.__exit__(*a), "__bool__": bool, "__str__": str, "__repr__": repr,
    "__lt__": lambda o, x: o < x, "__le__": lambda o, x: o <= x, "__gt__": lambda o, x: o > x,
    "__ge__": lambda o, x: o >= x, "__int__": int, "__float__": float, "__index__": lambda o: o.__index__(),
}


def _signature_from(desc):
    import inspect

    if type(desc) is not dict or type(desc.get("p")) is not list:
        raise HostError("a signature that is not one")
    params = []
    for p in desc["p"][:256]:
        if type(p) is not dict or not isinstance(p.get("n"), str) or type(p.get("k")) is not int:
            raise HostError("a parameter that is not one")
        kw = {}
        if "d" in p:
            kw["default"] = JUDGE.codec.decode(p["d"]) if JUDGE else None
        elif "dr" in p:
            kw["default"] = _Unrepresentable(str(p["dr"]))
        if isinstance(p.get("a"), str):
            kw["annotation"] = p["a"]
        params.append(inspect.Parameter(p["n"], inspect._ParameterKind(p["k"]), **kw))
    ret = desc.get("r")
    if isinstance(ret, str):
        return inspect.Signature(params, return_annotation=ret)
    return inspect.Signature(params)


class _Unrepresentable:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


# ------------------------------------------------------------------ imports


class HostFinder(importlib.abc.MetaPathFinder):
    """Answers the candidate's modules with `HostModule`s, for packet code."""

    def __init__(self, judge):
        self.judge = judge
        self.loader = _HostLoader()

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if name != top:
            parent = sys.modules.get(top)
            if not isinstance(parent, HostModule):
                return None
            return importlib.machinery.ModuleSpec(name, self.loader, is_package=self._is_package(name))
        if not self._candidates(name):
            return None
        # Installed modules and the standard library come first, as when the
        # workspace is at the end of sys.path.
        if name in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(name) is not None:
            return None
        outside = [p for p in sys.path if p and not _under(p, self.judge.workspace)]
        if importlib.machinery.PathFinder.find_spec(name, outside) is not None:
            return None
        if not _asked_by_packet_code(self.judge):
            # The framework or a library reaching for a module of the
            # candidate's (a conftest, an optional dependency): it is not
            # loaded here, and nothing after this finder may load it either.
            raise ModuleNotFoundError("No module named %r (the candidate's modules are served to packet code only)" % name, name=name)
        return importlib.machinery.ModuleSpec(name, self.loader, is_package=self._is_package(name))

    def _candidates(self, name):
        ws = self.judge.workspace
        for rel in (name + ".py", os.path.join(name, "__init__.py")):
            if os.path.isfile(os.path.join(ws, rel)):
                return rel not in self.judge.laid
        if os.path.isdir(os.path.join(ws, name)) and name.isidentifier():
            return not any(p == name or p.startswith(name + "/") for p in self.judge.laid)
        try:
            for entry in os.listdir(ws):
                if entry.startswith(name + ".") and entry.endswith(".so"):
                    return True
        except OSError:
            pass
        return False

    def _is_package(self, name):
        return os.path.isdir(os.path.join(self.judge.workspace, *name.split(".")))


def _under(path, root):
    try:
        real = os.path.realpath(path or ".")
    except OSError:
        return False
    return real == root or real.startswith(root.rstrip("/") + "/")


_FRAMEWORK_PREFIXES = None


def _asked_by_packet_code(judge, depth=2, ours_answer=None):
    """Whether packet code asks (an import, a patch): the innermost frame
    that is not the import machinery, the standard library, an installed
    package or the grader's tools is a file the grader laid. With
    `ours_answer`, a frame of the grader's tools met on the way decides
    that answer instead (the judge's own machinery at work)."""
    frame = sys._getframe(depth)
    kinds = judge.file_kinds
    while frame is not None:
        fn = frame.f_code.co_filename
        kind = kinds.get(fn)
        if kind is None:
            kind = _file_kind(judge, fn)
            if len(kinds) < 20000:
                kinds[fn] = kind
        if kind is _OURS:
            if ours_answer is not None:
                return ours_answer
        elif kind is not _PASS:
            # _LAID, _CANDIDATE, or _PACKET: a file outside the workspace
            # that is not a library (packet code copied elsewhere, a
            # fixture folder in /tmp).
            return kind is not _CANDIDATE
        frame = frame.f_back
    return False


# What a frame's file is, to `_asked_by_packet_code` (cached per file name
# in `Judge.file_kinds`: the workspace, the laid files and the library
# folders do not change during a run).
_OURS, _PASS, _LAID, _CANDIDATE, _PACKET = "ours", "pass", "laid", "candidate", "packet"


def _file_kind(judge, fn):
    if fn.startswith("/gatehouse/"):
        return _OURS
    ws = judge.workspace.rstrip("/") + "/"
    if fn.startswith(ws):
        return _LAID if fn[len(ws):] in judge.laid else _CANDIDATE
    if fn.startswith("<") or _is_library(fn):
        return _PASS
    return _PACKET


_LIBRARY = None


def _is_library(fn):
    global _LIBRARY
    if _LIBRARY is None:
        import sysconfig

        roots = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            p = sysconfig.get_paths().get(key)
            if p:
                roots.add(os.path.realpath(p).rstrip("/") + "/")
                roots.add(p.rstrip("/") + "/")
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix):
            roots.add(p.rstrip("/") + "/lib/")
        for p in sys.path:
            if p and "site-packages" in p:
                roots.add(p.rstrip("/") + "/")
        _LIBRARY = tuple(sorted(roots))
    return fn.startswith(_LIBRARY)


# ------------------------------------------------------------------ mirrors


_MISSING = object()


_STDLIB = frozenset(sys.stdlib_module_names) - {"sys", "builtins", "importlib", "_frozen_importlib"}


def _is_stdlib(name):
    return name.partition(".")[0] in _STDLIB


class _Mirrored(types.ModuleType):
    """A standard-library module of the judge whose attributes packet code
    patches (`mock.patch("urllib.request.urlopen", ...)`,
    `monkeypatch.setattr(time, "sleep", ...)`): the patch is made here, as
    before, and the same attribute of the host's copy is set to the new
    value (a callback to it); putting the original back here puts the
    host's own original back there. In-process testing had one module for
    both; this keeps the two copies in step for what packet code changes.
    What the framework or a library sets is left to this process."""

    def __setattr__(self, name, value):
        j = JUDGE
        if j is None or name.startswith("__") or not _asked_by_packet_code(j, 2, False):
            return types.ModuleType.__setattr__(self, name, value)
        j.mirror(self, name, value)

    def __delattr__(self, name):
        j = JUDGE
        if j is None or name.startswith("__") or not _asked_by_packet_code(j, 2, False):
            return types.ModuleType.__delattr__(self, name)
        j.mirror(self, name, _MISSING)


def _mirror_loaded():
    for name, module in list(sys.modules.items()):
        if type(module) is types.ModuleType and _is_stdlib(name):
            try:
                module.__class__ = _Mirrored
            except TypeError:
                pass


_real_import = builtins.__import__
_real_import_module = importlib.import_module


_ModuleType = types.ModuleType
_modules = sys.modules


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    module = _real_import(name, globals, locals, fromlist, level)
    # Every import statement comes here: the cheap test first (a module
    # already mirrored, or not plain, is done).
    if not level and type(_modules.get(name)) is _ModuleType and _is_stdlib(name):
        _mirror_loaded()
    return module


def _import_module(name, package=None):
    module = _real_import_module(name, package)
    if type(_modules.get(name)) is _ModuleType and _is_stdlib(name):
        _mirror_loaded()
    return module


# ------------------------------------------------------------------ programs


class HostPopen(_real_popen):
    """`subprocess.Popen` for packet code in judge mode: the program runs
    under the candidate's uid, started by the host supervisor."""

    _gh_remote = True

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, process_group=-1):
        if isinstance(args, (str, bytes)):
            args = [args]
        elif isinstance(args, os.PathLike):
            args = [args]
        else:
            args = list(args)
        if shell:
            args = ["/bin/sh", "-c"] + args
            if executable:
                args[0] = executable
        if preexec_fn is not None or uid is not None or gid is not None or gids is not None:
            raise OSError(1, "a program started from a hidden test runs under the candidate's uid: "
                             "preexec_fn, user, group and extra_groups are not available")
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
               errwrite if errwrite != -1 else 2]
        try:
            self.pid = _j().spawn(self, args, executable, cwd, env, fds, tuple(pass_fds or ()),
                                  start_new_session, process_group, umask)
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _internal_poll(self, _deadstate=None, **_ignored):
        if self.returncode is None:
            try:
                answer = _j().supervisor.request("poll", pid=self.pid, timeout=10)
            except HostError:
                if _deadstate is not None:
                    self.returncode = _deadstate
                return self.returncode
            if answer.get("code") is not None:
                self.returncode = answer["code"]
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is not None:
            return self.returncode
        fields = {} if timeout is None else {"secs": float(timeout)}
        answer = _j().supervisor.request("wait", pid=self.pid, timeout=None if timeout is None else timeout + 10, **fields)
        return self._wait_answer(answer, timeout)

    def _wait_answer(self, answer, timeout):
        if answer.get("timeout"):
            raise subprocess.TimeoutExpired(self.args, timeout)
        if "code" in answer:
            self.returncode = answer["code"]
            return self.returncode
        raise HostError("waiting for %r: %s" % (self.args, answer.get("error")))

    def send_signal(self, sig):
        self.poll()
        if self.returncode is not None:
            return
        _j().supervisor.request("signal", pid=self.pid, sig=int(sig), group=False, timeout=10)

    def killpg(self, sig):
        """Signals the program's process group (it was started with a
        session or group of its own)."""
        _j().supervisor.request("signal", pid=self.pid, sig=int(sig), group=True, timeout=10)


def _kill(pid, sig):
    j = JUDGE
    if j is not None and (pid in j.remote_pids or (pid < -1 and -pid in j.remote_pids)):
        answer = j.supervisor.request("signal", pid=abs(pid), sig=int(sig), group=pid < 0, timeout=10)
        if answer.get("gone"):
            raise ProcessLookupError(3, "No such process")
        return None
    return _real_kill(pid, sig)


def _killpg(pgid, sig):
    j = JUDGE
    if j is not None and pgid in j.remote_pids:
        answer = j.supervisor.request("signal", pid=pgid, sig=int(sig), group=True, timeout=10)
        if answer.get("gone"):
            raise ProcessLookupError(3, "No such process")
        return None
    return _real_killpg(pgid, sig)


def _system(command):
    return subprocess.call(command, shell=True)


def _refused(name):
    def refuse(*args, **kwargs):
        raise OSError(1, "%s is not available to packet code in judge mode: a child of the judge would run "
                         "under the judge's uid; start programs with subprocess" % name)

    return refuse


class _LocalPopen(_real_popen):
    pass


def local_popen(*args, **kwargs):
    """Starts one of the packet's own programs (a fake upstream) under the
    judge's uid, where it can read what the candidate's code must not."""
    return _LocalPopen(*args, **kwargs)


# ------------------------------------------------------------------ files


def _open_to_group(path):
    try:
        os.chmod(path, 0o2770)
    except OSError:
        pass


def _share_temp_folders():
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        path = real_mkdtemp(*args, **kwargs)
        _open_to_group(path)
        return path

    tempfile.mkdtemp = mkdtemp


def share_pytest_temp():
    """pytest makes its temporary folders 0700; the candidate's programs
    work in them, so they are opened to the group (the candidate's uid is
    in the judge's group, nobody else is)."""
    try:
        from _pytest import tmpdir
    except ImportError:
        return
    factory = tmpdir.TempPathFactory
    real_getbasetemp, real_mktemp = factory.getbasetemp, factory.mktemp

    def getbasetemp(self):
        base = real_getbasetemp(self)
        _open_to_group(base)
        _open_to_group(base.parent)
        return base

    def mktemp(self, basename, numbered=True):
        path = real_mktemp(self, basename, numbered)
        _open_to_group(path)
        return path

    factory.getbasetemp = getbasetemp
    factory.mktemp = mktemp


# ------------------------------------------------------------------ install


def install(config, wake=True):
    """Makes this process the judge; returns the `Judge`. With `wake`, the
    host supervisor starts now (`Supervisor.wake`), else at the first
    request."""
    global JUDGE
    if JUDGE is not None:
        return JUDGE
    try:
        sock = _socket.socket(fileno=HOST_FD)
        os.set_inheritable(HOST_FD, False)
    except OSError as e:
        raise HostError("judge mode without a host supervisor on descriptor %d (%s)" % (HOST_FD, e))
    JUDGE = judge = Judge(config, Supervisor(sock))
    if wake:
        judge.supervisor.wake()
    os.umask(0o007)
    sys.meta_path.insert(0, HostFinder(judge))
    subprocess.Popen = HostPopen
    os.kill = _kill
    os.killpg = _killpg
    os.system = _system
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnv", "spawnve", "spawnvp", "spawnvpe",
                 "spawnl", "spawnle", "spawnlp", "spawnlpe", "execv", "execve", "execvp", "execvpe", "execl",
                 "execle", "execlp", "execlpe"):
        if hasattr(os, name):
            setattr(os, name, _refused("os." + name))
    _share_temp_folders()
    _mirror_loaded()
    builtins.__import__ = _import
    importlib.import_module = _import_module
    return judge
