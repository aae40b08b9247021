"""The host side of the judge apart (JUDGE.md): runs under the candidate's uid.

The sandbox starts this module as the run's *host supervisor*, under the
candidate's uid, with one end of a socket pair to the judge on descriptor 3
(`lang::python::HOST_ARGV`): a shell waits for the judge's first byte (a
newline), then

    python3 -I -S -B -c 'import sys; ...; import gatehouse_host; ...; gatehouse_host.main()'

A run that never asks for it never starts the interpreter. It starts
cheaply: no `site`, only the modules framing and starting programs need
(the host server's are imported by the hosts it forks), and from the
bytecode the grader compiled into the tool folder.

The supervisor never imports a byte of the submission. It serves the
judge's requests, each a framed JSON message (`gatehouse_wire`), some with
descriptors passed alongside (SCM_RIGHTS):

- ``spawn``: start a program (argv, cwd, environment, and the judge's
  stdin/stdout/stderr descriptors) under this uid: every program a hidden
  test launches from the workspace runs here, never under the judge's uid;
  ``poll``, ``wait``, ``signal`` for those programs;
- ``host``: start a *host server* on a socket the judge passes: the
  process that imports the candidate's modules and serves the judge's
  calls on them. It is a fork of the supervisor (no second interpreter to
  start) that first makes itself what a fresh ``python3 -I -B`` of its own
  would be: only that socket and the standard descriptors open, its folder
  as working folder, ``site`` run (site-packages and ``.pth`` files, as
  for any program), dumpable again, SIGPIPE ignored, the modules it serves
  with imported; the supervisor's socket to the judge is closed in it;
- ``procs``: the processes alive under this uid (pid, parent, command line),
  which the judge cannot see itself (``/proc`` is mounted with hidepid);
- ``bye``: kill every program and host still running, and exit.

A host server imports what the judge asks for and answers calls with data
(see `gatehouse_wire`), handles for everything else, and exceptions as their
class and message. It loads no test framework and keeps no runner variable
in its environment: it is the candidate's code, running as a program of its
own. Nothing it says is trusted by the judge beyond being data.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gatehouse_wire as wire  # noqa: E402

sys.path.remove(HERE)

import enum  # noqa: E402 - loaded anyway (signal, socket)
import importlib  # noqa: E402
import io  # noqa: E402
import operator  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

WORKSPACE = os.getcwd()
# The host server's modules, imported by the host only (`_server_imports`):
# the supervisor never needs them.
logging = traceback = None
# libc, for prctl (None where ctypes is unavailable).
LIBC = None


# ---------------------------------------------------------------- supervisor


class Supervisor:
    def __init__(self, sock):
        self.wire = wire.Wire(sock)
        self.send_lock = threading.Lock()
        self.procs = {}
        self.hosts = {}
        self.lock = threading.Lock()

    def reply(self, rid, **fields):
        fields["re"] = rid
        with self.send_lock:
            try:
                self.wire.send(fields)
            except (wire.PeerGone, wire.ProtocolError):
                pass

    def serve(self):
        while True:
            fds = []
            try:
                msg = self.wire.recv(fds=fds)
            except (wire.PeerGone, wire.ProtocolError):
                self.shutdown()
                return
            if type(msg) is not dict:
                for fd in fds:
                    wire.close_quietly(fd)
                continue
            op, rid = msg.get("op"), msg.get("id")
            if op == "bye":
                self.shutdown()
                self.reply(rid, ok=True)
                os._exit(0)
            if op == "wait":
                threading.Thread(target=self.op_wait, args=(rid, msg), daemon=True).start()
                continue
            try:
                handler = getattr(self, "op_" + str(op))
            except AttributeError:
                for fd in fds:
                    wire.close_quietly(fd)
                self.reply(rid, error="unknown operation %r" % (op,))
                continue
            try:
                handler(rid, msg, fds)
            except Exception as e:  # noqa: BLE001 - every failure is an answer
                self.reply(rid, error="%s: %s" % (e.__class__.__name__, e))
            finally:
                for fd in fds:
                    wire.close_quietly(fd)

    def op_spawn(self, rid, msg, fds):
        argv = [str(a) for a in msg["argv"]]
        std = msg.get("std") or [False, False, False]
        it = iter(fds)
        stdio = [next(it) if std[i] else None for i in range(3)]
        extra = list(it)
        pass_to = [int(n) for n in msg.get("pass") or []]
        env = msg.get("env")
        if env is not None:
            env = {str(k): str(v) for k, v in env}

        def place():
            # The judge's extra descriptors at the numbers it gave them.
            for src, dst in zip(extra, pass_to):
                os.dup2(src, dst, inheritable=True)

        kwargs = {}
        if msg.get("group") is not None:
            kwargs["process_group"] = int(msg["group"])
        if msg.get("umask") is not None and int(msg["umask"]) >= 0:
            kwargs["umask"] = int(msg["umask"])
        try:
            proc = subprocess.Popen(
                argv,
                executable=msg.get("executable"),
                stdin=stdio[0],
                stdout=stdio[1],
                stderr=stdio[2],
                cwd=msg.get("cwd"),
                env=env,
                start_new_session=bool(msg.get("session")),
                close_fds=True,
                pass_fds=tuple(pass_to),
                preexec_fn=place if extra else None,
                restore_signals=True,
                **kwargs,
            )
        except OSError as e:
            self.reply(rid, oserror=[e.errno or 0, e.strerror or str(e), e.filename if isinstance(e.filename, str) else None])
            return
        with self.lock:
            self.procs[proc.pid] = proc
        self.reply(rid, pid=proc.pid)

    def _proc(self, msg):
        with self.lock:
            proc = self.procs.get(int(msg["pid"]))
        if proc is None:
            raise KeyError("no program %s was started here" % msg["pid"])
        return proc

    def op_poll(self, rid, msg, fds):
        self.reply(rid, code=self._proc(msg).poll())

    def op_wait(self, rid, msg):
        try:
            proc = self._proc(msg)
            secs = msg.get("secs")
            try:
                code = proc.wait(None if secs is None else float(secs))
            except subprocess.TimeoutExpired:
                self.reply(rid, timeout=True)
                return
            self.reply(rid, code=code)
        except Exception as e:  # noqa: BLE001
            self.reply(rid, error="%s: %s" % (e.__class__.__name__, e))

    def op_signal(self, rid, msg, fds):
        sig = int(msg["sig"])
        target = int(msg["pid"])
        try:
            if msg.get("group"):
                os.killpg(target, sig)
            else:
                os.kill(target, sig)
        except ProcessLookupError:
            self.reply(rid, gone=True)
            return
        except PermissionError as e:
            self.reply(rid, oserror=[e.errno, e.strerror, None])
            return
        self.reply(rid, ok=True)

    def op_procs(self, rid, msg, fds):
        me = os.getpid()
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in (me, 1):
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read().decode("utf-8", "replace")
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                continue
            rest = stat.rsplit(")", 1)[-1].split()
            ppid = int(rest[1]) if len(rest) > 1 else 0
            if int(name) in self.hosts:
                continue
            out.append([int(name), ppid, cmd[:300]])
        self.reply(rid, procs=out)

    def op_host(self, rid, msg, fds):
        if not fds:
            raise ValueError("host wants a socket")
        sock_fd = fds[0]
        root = msg.get("root")
        if root is not None and not (isinstance(root, str) and os.path.isabs(root) and os.path.isdir(root)):
            raise ValueError("a host folder must be an absolute path to a folder: %r" % (root,))
        with self.send_lock:
            # Not while a wait thread is writing a reply: the child must not
            # inherit a half-sent frame or a held lock it would need.
            pid = os.fork()
        if pid == 0:
            _become_host(self, sock_fd, root or WORKSPACE)
        with self.lock:
            self.hosts[pid] = Child(pid)
        self.reply(rid, pid=pid)

    def op_poll_host(self, rid, msg, fds):
        with self.lock:
            proc = self.hosts.get(int(msg["pid"]))
        code = None
        if proc is not None:
            try:
                code = proc.wait(0.5)
            except subprocess.TimeoutExpired:
                code = None
        self.reply(rid, code=code)

    def op_kill_host(self, rid, msg, fds):
        with self.lock:
            proc = self.hosts.pop(int(msg["pid"]), None)
        if proc is not None:
            try:
                if msg.get("abort"):
                    # Its fault handler writes where it is, then it dies.
                    proc.send_signal(signal.SIGABRT)
                    try:
                        proc.wait(1)
                    except subprocess.TimeoutExpired:
                        pass
                proc.kill()
                proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.reply(rid, ok=True)

    def close_in_child(self):
        """In a forked host: nothing of the supervisor's stays usable."""
        try:
            self.wire.sock.detach()
        except OSError:
            pass
        self.procs.clear()
        self.hosts.clear()

    def shutdown(self):
        with self.lock:
            hosts, procs = list(self.hosts.values()), list(self.procs.values())
        for proc in hosts:
            try:
                proc.kill()
            except OSError:
                pass
        for proc in hosts:
            try:
                proc.wait(2)
            except (OSError, subprocess.TimeoutExpired):
                pass


class Child:
    """A host process forked here: `subprocess.Popen`'s poll, wait, kill
    and send_signal for a pid this process waits for itself."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -int(signal.SIGKILL)
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else wire.now() + timeout
        delay = 0.0005
        while self.poll() is None:
            left = None if deadline is None else deadline - wire.now()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("host %d" % self.pid, timeout)
            time.sleep(delay if left is None else min(delay, left))
            delay = min(delay * 2, 0.05)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _become_host(supervisor, sock_fd, folder):
    """The forked child of `op_host`: becomes a host server on `sock_fd`
    working in `folder`, as a fresh `python3 -I -B` would be; never
    returns."""
    code = 70
    try:
        supervisor.close_in_child()
        os.closerange(3, sock_fd)
        try:
            limit = os.sysconf("SC_OPEN_MAX")
        except (ValueError, OSError):
            limit = 1 << 16
        os.closerange(sock_fd + 1, max(limit, sock_fd + 1))
        os.chdir(folder)
        global WORKSPACE
        WORKSPACE = os.getcwd()
        # What a fresh interpreter would have: SIGPIPE ignored, SIGINT a
        # KeyboardInterrupt, and /proc/<pid>/ of its own (the supervisor
        # made itself undumpable; an exec would have undone it).
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if LIBC is not None:
            try:
                LIBC.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1
            except Exception:  # noqa: BLE001
                pass
        if sys.flags.no_site:
            # The supervisor starts without `site`; the candidate's code
            # sees site-packages and what its .pth files add, as any
            # program would.
            import site

            site.main()
        serve(sock_fd)
        code = 0
    except BaseException:  # noqa: BLE001 - the judge sees the host end
        code = 70
    finally:
        os._exit(code)


def _server_imports():
    global logging, traceback
    import logging as _logging
    import traceback as _traceback

    logging, traceback = _logging, _traceback


def _dataclasses():
    """The dataclasses module, when a value is one (the candidate's code
    has imported it then)."""
    import dataclasses

    return dataclasses


# ---------------------------------------------------------------- host server


class Captured(io.TextIOBase):
    """A stand-in for sys.stdout / sys.stderr that keeps what is written
    until the next message to the judge."""

    def __init__(self, name, fd):
        self.name = name
        self._fd = fd
        self.parts = []
        self.size = 0
        self.buffer = _CapturedBytes(self)

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if self.size < 1 << 20:
            self.parts.append(s)
            self.size += len(s)
        return len(s)

    def flush(self):
        pass

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def take(self):
        text = "".join(self.parts)
        self.parts, self.size = [], 0
        return text

    @property
    def encoding(self):
        return "utf-8"


class _CapturedBytes(io.RawIOBase):
    def __init__(self, text):
        self.text = text

    def writable(self):
        return True

    def write(self, b):
        self.text.write(bytes(b).decode("utf-8", "replace"))
        return len(b)


class HostCodec(wire.Codec):
    def __init__(self, server):
        self.server = server

    def encode_other(self, v, depth):
        return self.server.ref_of(v, depth)

    def decode_other(self, tag, body, depth):
        return self.server.from_ref(tag, body, depth)


class CallbackStub:
    """A judge object, seen from the host: every use is a message."""

    __slots__ = ("_gh_id", "__weakref__")

    def __init__(self, cid):
        object.__setattr__(self, "_gh_id", cid)

    def __getattr__(self, name):
        return SERVER.callback("cb_getattr", self, n=name)

    def __setattr__(self, name, value):
        SERVER.callback("cb_setattr", self, n=name, v=SERVER.codec.encode(value))

    def __call__(self, *args, **kwargs):
        return SERVER.callback("cb_call", self, a=[SERVER.codec.encode(a) for a in args],
                               k=[[k, SERVER.codec.encode(v)] for k, v in kwargs.items()])

    def __repr__(self):
        try:
            return SERVER.callback("cb_op", self, n="__repr__", a=[])
        except Exception:  # noqa: BLE001
            return "<judge object %d>" % self._gh_id


def _dunder(name):
    def method(self, *args):
        return SERVER.callback("cb_op", self, n=name, a=[SERVER.codec.encode(a) for a in args])

    method.__name__ = name
    return method


for _n in ("__len__", "__iter__", "__next__", "__getitem__", "__setitem__", "__delitem__", "__contains__",
           "__enter__", "__exit__", "__bool__", "__str__", "__lt__", "__le__", "__gt__", "__ge__", "__int__",
           "__float__", "__index__"):
    setattr(CallbackStub, _n, _dunder(_n))
del _n


OPS = {
    "__len__": len, "__iter__": iter, "__next__": next, "__reversed__": reversed,
    "__getitem__": operator.getitem, "__setitem__": operator.setitem, "__delitem__": operator.delitem,
    "__contains__": lambda o, x: x in o, "__bool__": bool, "__str__": str, "__repr__": repr,
    "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge,
    "__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul, "__truediv__": operator.truediv,
    "__floordiv__": operator.floordiv, "__mod__": operator.mod, "__pow__": operator.pow,
    "__matmul__": operator.matmul, "__and__": operator.and_, "__or__": operator.or_, "__xor__": operator.xor,
    "__lshift__": operator.lshift, "__rshift__": operator.rshift,
    "__radd__": lambda o, x: operator.add(x, o), "__rsub__": lambda o, x: operator.sub(x, o),
    "__rmul__": lambda o, x: operator.mul(x, o), "__rtruediv__": lambda o, x: operator.truediv(x, o),
    "__rfloordiv__": lambda o, x: operator.floordiv(x, o), "__rmod__": lambda o, x: operator.mod(x, o),
    "__rpow__": lambda o, x: operator.pow(x, o), "__rand__": lambda o, x: operator.and_(x, o),
    "__ror__": lambda o, x: operator.or_(x, o), "__rxor__": lambda o, x: operator.xor(x, o),
    "__neg__": operator.neg, "__pos__": operator.pos, "__abs__": abs, "__invert__": operator.invert,
    "__int__": int, "__float__": float, "__index__": operator.index, "__round__": round, "__format__": format,
    "__enter__": lambda o: type(o).__enter__(o),
    "__exit__": lambda o, *a: type(o).__exit__(o, *a),
    "__call__": lambda o, *a: o(*a),
}


def _plain_name(text, fallback="X"):
    text = str(text or "")
    return text if text.isidentifier() and len(text) <= 100 else fallback


class HostServer:
    def __init__(self, sock):
        self.wire = wire.Wire(sock)
        self.codec = HostCodec(self)
        self.objs = {}
        self.ids = {}
        self.next_id = 1
        self.stubs = {}
        self.send_lock = threading.RLock()
        self.pending = {}
        self.cond = threading.Condition()
        self.next_req = 1
        self.serving = threading.get_ident()
        self.out = Captured("<stdout>", 1)
        self.err = Captured("<stderr>", 2)
        self.logs = []
        self.class_ids = {}

    # ---- references

    def hid(self, v):
        key = id(v)
        h = self.ids.get(key)
        if h is None:
            h = self.next_id
            self.next_id += 1
            self.ids[key] = h
            self.objs[h] = v
        return h

    def class_desc(self, cls, depth=0):
        if depth > 8:
            raise TypeError("class hierarchy too deep")
        for name, b in wire.BUILTIN_TYPES.items():
            if cls is b:
                return {"bt": name}
        desc = {"id": self.hid(cls), "name": _plain_name(getattr(cls, "__name__", "X")),
                "mod": str(getattr(cls, "__module__", "") or "")[:200]}
        if isinstance(cls, type) and issubclass(cls, BaseException):
            desc["kind"] = "exc"
            desc["bases"] = [self.class_desc(b, depth + 1) for b in cls.__bases__ if isinstance(b, type)
                             and issubclass(b, BaseException)] or [{"bt": "Exception"}]
            if "__init__" in vars(cls):
                try:
                    desc["init"] = self.signature_desc(cls.__init__)
                except (TypeError, ValueError):
                    pass
        elif isinstance(cls, enum.EnumMeta):
            desc["kind"] = "enum"
            mixin = None
            for base in (int, str, float):
                if issubclass(cls, base):
                    mixin = base.__name__
                    break
            desc["mixin"] = mixin
            desc["flag"] = issubclass(cls, enum.Flag)
            desc["members"] = [[name, self.codec.encode(m.value, depth + 1)] for name, m in cls.__members__.items()]
        return desc

    def ref_of(self, v, depth):
        if isinstance(v, CallbackStub):
            return {"CB": object.__getattribute__(v, "_gh_id")}
        if isinstance(v, type):
            for name, b in wire.BUILTIN_TYPES.items():
                if v is b:
                    return {"BT": name}
            if issubclass(v, BaseException):
                return {"XC": self.class_desc(v)}
            if isinstance(v, enum.EnumMeta):
                return {"EC": self.class_desc(v)}
            return {"H": [self.hid(v), "c", _plain_name(v.__name__)]}
        if isinstance(v, enum.Enum):
            cls = type(v)
            return {"E": [self.class_desc(cls), v.name]}
        if isinstance(v, type(sys)):
            name = getattr(v, "__name__", None)
            if isinstance(name, str) and sys.modules.get(name) is v:
                return {"M": name}
        if isinstance(v, tuple) and hasattr(type(v), "_fields") and isinstance(type(v)._fields, tuple):
            cls = type(v)
            fields = [str(f) for f in cls._fields]
            return {"NT": {"h": self.hid(v), "c": self.hid(cls), "name": _plain_name(cls.__name__),
                           "f": fields, "v": [self.codec.encode(x, depth + 1) for x in tuple.__iter__(v)]}}
        if hasattr(type(v), "__dataclass_fields__") and not isinstance(v, type):
            dataclasses = _dataclasses()
            cls = type(v)
            params = getattr(cls, "__dataclass_params__", None)
            frozen = bool(getattr(params, "frozen", False))
            eq = bool(getattr(params, "eq", True))
            names = [f.name for f in dataclasses.fields(v)]
            rec = {"h": self.hid(v), "c": self.hid(cls), "name": _plain_name(cls.__name__), "f": names,
                   "frozen": frozen, "eq": eq}
            if frozen:
                rec["v"] = [self.codec.encode(getattr(v, n), depth + 1) for n in names]
            return {"R": rec}
        if isinstance(v, BaseException):
            return {"XV": self.exc_desc(v)}
        if isinstance(v, (int, float, str, bytes, bytearray, tuple, list, dict, set, frozenset)):
            return None  # a builtin's subclass: as the builtin
        kind = "f" if callable(v) else "o"
        return {"H": [self.hid(v), kind, _plain_name(type(v).__name__)]}

    def from_ref(self, tag, body, depth):
        if tag == "H":
            obj = self.objs.get(body)
            if obj is None and body not in self.objs:
                raise wire.ProtocolError("no object %r" % (body,))
            return obj
        if tag == "M":
            mod = sys.modules.get(body)
            if mod is None:
                mod = importlib.import_module(body)
            return mod
        if tag == "CB":
            stub = self.stubs.get(body)
            if stub is None:
                stub = CallbackStub(body)
                self.stubs[body] = stub
            return stub
        if tag == "BT":
            if body not in wire.BUILTIN_TYPES:
                raise wire.ProtocolError("no builtin %r" % (body,))
            return wire.BUILTIN_TYPES[body]
        if tag == "HC":
            return self.host_class(body)
        if tag == "EN":
            if type(body) is not list or len(body) != 3:
                raise wire.ProtocolError("an enum member is [module, class, name]")
            return self.host_class(body[:2])[str(body[2])]
        if tag == "XV":
            return self.exception_from(body)
        raise wire.ProtocolError("unknown tag %r" % (tag,))

    def host_class(self, where):
        """A class of this process named by its module and name."""
        if type(where) is not list or len(where) != 2:
            raise wire.ProtocolError("a class is [module, name]")
        mod = sys.modules.get(str(where[0]))
        if mod is None:
            mod = importlib.import_module(str(where[0]))
        return getattr(mod, str(where[1]))

    def class_from(self, c):
        """The class an exception of the judge's arrives as: a builtin, a
        class of this process (the candidate's, or the standard library's),
        or one made here with the judge's builtin bases."""
        if type(c) is not dict:
            return Exception
        if "bt" in c:
            return wire.BUILTIN_EXCEPTIONS.get(c["bt"], Exception)
        try:
            if c.get("host"):
                cls = self.host_class([c.get("mod"), c.get("name")])
            elif "named" in c:
                mod, qual = c["named"]
                key = ("named", str(mod), str(qual))
                if key not in self.class_ids:
                    found = None
                    # A test framework's class is never imported here: the
                    # host does not load one (it is made from its bases).
                    framework = str(mod).split(".")[0] in ("pytest", "_pytest", "pluggy", "unittest") \
                        or str(mod).startswith("gatehouse")
                    try:
                        if framework:
                            raise LookupError(mod)
                        found = importlib.import_module(str(mod))
                        for part in str(qual).split("."):
                            found = getattr(found, part)
                    except Exception:  # noqa: BLE001 - not here: made below
                        found = None
                    self.class_ids[key] = found
                cls = self.class_ids[key]
            else:
                cls = None
            if isinstance(cls, type) and issubclass(cls, BaseException):
                return cls
        except Exception:  # noqa: BLE001
            pass
        key = ("judge", c.get("id"), c.get("name"))
        cls = self.class_ids.get(key)
        if cls is None:
            bases = tuple(dict.fromkeys(self.class_from(b) for b in (c.get("bases") or [])[:8])) or (Exception,)
            try:
                cls = type(_plain_name(c.get("name")), bases, {"__module__": "judge"})
            except TypeError:
                cls = type(_plain_name(c.get("name")), (Exception,), {"__module__": "judge"})
            self.class_ids[key] = cls
        return cls

    def exception_from(self, body):
        cls = self.class_from(body.get("c"))
        args = tuple(self.codec.decode(a) for a in body.get("a") or [])
        exc = None
        if issubclass(cls, OSError) and type(body.get("os")) is list and len(body["os"]) == 3:
            try:
                e, s, f = body["os"]
                exc = cls(e, s, f) if f is not None else cls(e, s)
            except Exception:  # noqa: BLE001
                exc = None
        if exc is None:
            try:
                exc = cls(*args)
            except Exception:  # noqa: BLE001
                exc = cls.__new__(cls)
                BaseException.__init__(exc, *args)
        for name, value in body.get("at") or []:
            try:
                setattr(exc, str(name), self.codec.decode(value))
            except Exception:  # noqa: BLE001
                pass
        if body.get("jid") is not None:
            try:
                exc._gh_jid = body["jid"]
            except Exception:  # noqa: BLE001
                pass
        return exc

    def exc_desc(self, e):
        cls = type(e)
        desc = {"c": self.class_desc(cls), "m": _safe_str(e)}
        jid = getattr(e, "_gh_jid", None)
        if type(jid) is int:
            desc["jid"] = jid
        args = []
        for a in getattr(e, "args", ()) if isinstance(getattr(e, "args", ()), tuple) else ():
            try:
                args.append(self.codec.encode(a))
            except Exception:  # noqa: BLE001
                args.append(_safe_repr(a))
        desc["a"] = args
        attrs = []
        try:
            items = list(vars(e).items())
        except TypeError:
            items = []
        for name, value in items[:32]:
            if not isinstance(name, str) or name.startswith("_"):
                continue
            try:
                attrs.append([name, self.codec.encode(value)])
            except Exception:  # noqa: BLE001
                continue
        desc["at"] = attrs
        if isinstance(e, OSError):
            desc["os"] = [e.errno, e.strerror, e.filename if isinstance(e.filename, str) else None]
        if isinstance(e, SystemExit):
            try:
                desc["code"] = self.codec.encode(e.code)
            except Exception:  # noqa: BLE001
                desc["code"] = 1
        tb = traceback.format_exception(cls, e, e.__traceback__)
        desc["tb"] = "".join(tb)[-4000:]
        return desc

    def signature_desc(self, obj):
        import inspect

        sig = inspect.signature(obj)
        params = []
        for p in sig.parameters.values():
            item = {"n": p.name, "k": int(p.kind)}
            if p.default is not inspect.Parameter.empty:
                try:
                    item["d"] = self.codec.encode(p.default)
                except Exception:  # noqa: BLE001
                    item["dr"] = _safe_repr(p.default)
            if p.annotation is not inspect.Parameter.empty:
                item["a"] = _annotation_text(p.annotation)
            params.append(item)
        out = {"p": params}
        if sig.return_annotation is not inspect.Signature.empty:
            out["r"] = _annotation_text(sig.return_annotation)
        return out

    # ---- the loop

    def envelope(self, msg):
        out, err = self.out.take(), self.err.take()
        if out:
            msg["o"] = out
        if err:
            msg["e"] = err
        if self.logs:
            msg["lg"], self.logs = self.logs[:500], []
        return msg

    def send(self, msg):
        with self.send_lock:
            self.wire.send(self.envelope(msg))

    def serve(self):
        while True:
            try:
                msg = self.wire.recv()
            except (wire.PeerGone, wire.ProtocolError):
                os._exit(0)
            self.dispatch(msg)

    def dispatch(self, msg):
        if type(msg) is not dict:
            return
        if "re" in msg:
            with self.cond:
                self.pending[msg["re"]] = msg
                self.cond.notify_all()
            return
        rid = msg.get("id")
        try:
            value = self.handle(msg)
            reply = {"re": rid, "ok": self.codec.encode(value)}
        except BaseException as e:  # noqa: BLE001 - every failure is an answer
            if isinstance(e, wire.PeerGone):
                os._exit(0)
            try:
                reply = {"re": rid, "err": self.exc_desc(e)}
            except Exception as e2:  # noqa: BLE001
                reply = {"re": rid, "err": {"c": {"bt": "RuntimeError"}, "m": "an exception that cannot be described: %s" % e2, "a": []}}
        try:
            self.send(reply)
        except wire.ProtocolError as e:
            self.send({"re": rid, "err": {"c": {"bt": "ValueError"}, "m": str(e), "a": [str(e)]}})

    def args(self, msg):
        a = [self.codec.decode(x) for x in msg.get("a") or []]
        k = {str(n): self.codec.decode(v) for n, v in msg.get("k") or []}
        return a, k

    def handle(self, msg):
        op = msg.get("op")
        if op == "import":
            return importlib.import_module(str(msg["n"]))
        obj = self.codec.decode(msg["o"]) if "o" in msg else None
        if op == "getattr":
            return getattr(obj, str(msg["n"]))
        if op == "setattr":
            setattr(obj, str(msg["n"]), self.codec.decode(msg["v"]))
            return None
        if op == "delattr":
            delattr(obj, str(msg["n"]))
            return None
        if op == "hasattr":
            return hasattr(obj, str(msg["n"]))
        if op == "call":
            a, k = self.args(msg)
            return obj(*a, **k)
        if op == "method":
            a, k = self.args(msg)
            return getattr(obj, str(msg["n"]))(*a, **k)
        if op == "op":
            name = str(msg["n"])
            fn = OPS.get(name)
            if fn is None:
                raise TypeError("no operation %s" % name)
            a, _ = self.args(msg)
            return fn(obj, *a)
        if op == "isinstance":
            return isinstance(self.codec.decode(msg["v"]), obj)
        if op == "issubclass":
            other = self.codec.decode(msg["v"])
            return isinstance(other, type) and issubclass(other, obj)
        if op == "dir":
            return [str(n) for n in dir(obj)]
        if op == "signature":
            return self.signature_desc(obj)
        if op == "fields":
            dataclasses = _dataclasses()
            if dataclasses.is_dataclass(obj):
                return [[f.name, getattr(obj, f.name)] for f in dataclasses.fields(obj)]
            return [[f, getattr(obj, f)] for f in type(obj)._fields]
        if op == "hash":
            return hash(obj)
        if op == "bye":
            os._exit(0)
        raise TypeError("unknown operation %r" % (op,))

    def callback(self, op, stub, **fields):
        """Asks the judge about one of its objects; answers come back as data."""
        with self.cond:
            rid = "h%d" % self.next_req
            self.next_req += 1
        fields.update(op=op, id=rid, cb=object.__getattribute__(stub, "_gh_id"))
        self.send(fields)
        mine = threading.get_ident() == self.serving
        while True:
            if mine:
                # The serving thread reads: requests the judge makes while
                # it answers run here, nested.
                try:
                    msg = self.wire.recv()
                except (wire.PeerGone, wire.ProtocolError):
                    os._exit(0)
                if type(msg) is dict and msg.get("re") == rid:
                    break
                self.dispatch(msg)
                with self.cond:
                    if rid in self.pending:
                        msg = self.pending.pop(rid)
                        break
            else:
                with self.cond:
                    while rid not in self.pending:
                        self.cond.wait(1.0)
                    msg = self.pending.pop(rid)
                break
        if "err" in msg:
            raise self.exception_from(msg["err"])
        return self.codec.decode(msg.get("ok"))


def _safe_str(e):
    try:
        return str(e)[:2000]
    except Exception:  # noqa: BLE001
        return "<an exception whose str() failed>"


def _safe_repr(v):
    try:
        return repr(v)[:500]
    except Exception:  # noqa: BLE001
        return "<unrepresentable>"


def _annotation_text(ann):
    if isinstance(ann, str):
        return ann
    try:
        import inspect

        return inspect.formatannotation(ann)
    except Exception:  # noqa: BLE001
        return _safe_repr(ann)


SERVER = None


def serve(fd):
    global SERVER
    _server_imports()
    sock = wire.socket_from_fd(fd)
    SERVER = server = HostServer(sock)
    # The program's view: its folder (the workspace, or the folder the
    # judge asked for) first on the path, as when a program in it runs; our
    # own folder nowhere.
    if WORKSPACE not in sys.path:
        sys.path.insert(0, WORKSPACE)
    sys.argv = [""]
    sys.stdout, sys.stderr = server.out, server.err
    # Where a crash or a hang was: the judge reads it when this process
    # ends mid-call (a segfault, the SIGABRT it sends a host that hangs).
    try:
        import faulthandler

        faulthandler.enable(file=open("/tmp/.gatehouse-host-%d.fault" % os.getpid(), "w"), all_threads=False)
    except OSError:
        pass
    original = logging.Logger.callHandlers

    def call_handlers(self, record):
        try:
            if len(server.logs) < 500:
                server.logs.append([str(record.name)[:200], int(record.levelno), str(record.levelname)[:20],
                                    _safe_str(record.getMessage()),
                                    (traceback.format_exception(*record.exc_info)[-1][:2000] if record.exc_info else None)])
        except Exception:  # noqa: BLE001
            pass
        return original(self, record)

    logging.Logger.callHandlers = call_handlers
    server.serve()


def main():
    try:
        os.set_inheritable(3, False)
        sock = wire.socket_from_fd(3)
    except OSError:
        print("gatehouse_host: no socket on descriptor 3", file=sys.stderr)
        os._exit(2)
    global LIBC
    try:
        import ctypes

        LIBC = ctypes.CDLL(None)
        LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/<pid>/mem for our own uid
    except Exception:  # noqa: BLE001
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # Hosts are forked while a wait thread may run (Python 3.12 warns).
    import warnings

    warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning)
    # The host is the candidate's code running as a program of its own: no
    # variable of the grader's or of a test runner in its environment (the
    # programs a hidden test starts get the environment the test gives).
    for key in list(os.environ):
        if key.startswith(("GATEHOUSE_", "PYTEST_")):
            del os.environ[key]
    # What the candidate's programs create, the judge (same group) may
    # change too: a hidden test cleaning up a data folder between starts.
    os.umask(0o002)
    Supervisor(sock).serve()


if __name__ == "__main__":
    main()
