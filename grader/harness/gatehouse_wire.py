"""The wire between the judge and the host (JUDGE.md), both sides.

A message is one JSON document, framed by a 4-byte big-endian length, on
an AF_UNIX stream socket. Values inside a message are *data* in a tagged
form, so that a list, a tuple, a set and a dict with non-string keys stay
what they are, and nothing on the wire is ever executed, unpickled or
looked up by name beyond the fixed tables here:

    null, true, false, numbers, strings      themselves
    {"L": [..]} list     {"T": [..]} tuple    {"S": [..]} set
    {"F": [..]} frozenset    {"D": [[k, v], ..]} dict
    {"B": base64} bytes      {"BA": base64} bytearray
    {"I": "digits"} an int beyond 2**53   {"X": "nan"|"inf"|"-inf"}
    {"Dec": text}  {"Frac": [n, d]}  {"Dt": iso}  {"Date": iso}
    {"Time": iso}  {"Td": [days, seconds, microseconds]}
    {"P": text} a pure or concrete POSIX path
    {"Cpx": [re, im]} complex

Each side adds its own tags for what is not data (handles, callbacks,
records, stand-ins); `Codec.decode_other` sees those. Decoding is strict:
an unknown tag, a tag object with more than one key, a wrong arity, a
nesting deeper than `MAX_DEPTH` or a message longer than `MAX_MESSAGE` is
a `ProtocolError` naming what was wrong; the reader never trusts a length
it has not checked.
"""

import binascii
import json
import math
import os
import select
import socket
import struct
import time

# The standard value modules are imported on first use (`_values`): the
# host supervisor frames messages but never carries one of these values,
# and a run that never calls the candidate's code never needs them.
datetime = decimal = fractions = pathlib = None
_VALUE_MODULES = frozenset(("datetime", "decimal", "fractions", "pathlib"))


def _values():
    global datetime, decimal, fractions, pathlib
    if pathlib is None:
        import datetime as _datetime
        import decimal as _decimal
        import fractions as _fractions
        import pathlib as _pathlib

        datetime, decimal, fractions = _datetime, _decimal, _fractions
        pathlib = _pathlib

MAX_MESSAGE = 16 << 20
MAX_DEPTH = 64
# What the judge accepts from one host over a whole run.
MAX_RUN_BYTES = 256 << 20
INT_EXACT = 2**53

_HEADER = struct.Struct(">I")
# What the wire calls while a call is in progress, bound now: packet code
# may patch the standard library (time.monotonic, select, json) for the
# candidate's process, and such a patch is mirrored here too.
_monotonic = time.monotonic
_select = select.select
_dumps = json.dumps
_loads = json.loads
# Bound now: a test may patch the socket module's functions.
_send_fds = socket.send_fds
_recv_fds = socket.recv_fds


class ProtocolError(Exception):
    """A message broke the wire's rules (too big, too deep, malformed)."""


class PeerGone(Exception):
    """The other side closed the connection or did not answer in time."""


class Wire:
    """A framed JSON channel over a connected stream socket."""

    def __init__(self, sock, limit=MAX_MESSAGE, budget=None):
        self.sock = sock
        self.limit = limit
        self.budget = budget
        self.received = 0
        self._buf = b""

    def send(self, obj):
        data = _dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        if len(data) > self.limit:
            raise ProtocolError("a message of %d bytes is over the %d-byte limit" % (len(data), self.limit))
        try:
            self.sock.sendall(_HEADER.pack(len(data)) + data)
        except OSError as e:
            raise PeerGone("the other side is gone (%s)" % e.__class__.__name__)

    def send_fds(self, obj, fds):
        data = _dumps(obj, separators=(",", ":")).encode("utf-8")
        frame = _HEADER.pack(len(data)) + data
        try:
            sent = _send_fds(self.sock, [frame], list(fds))
            if sent < len(frame):
                self.sock.sendall(frame[sent:])
        except OSError as e:
            raise PeerGone("the other side is gone (%s)" % e.__class__.__name__)

    def _fill(self, n, deadline, fds=None):
        while len(self._buf) < n:
            if deadline is not None:
                left = deadline - _monotonic()
                if left <= 0:
                    raise TimeoutError("no message within the time allowed")
                ready, _, _ = _select([self.sock], [], [], left)
                if not ready:
                    raise TimeoutError("no message within the time allowed")
            try:
                if fds is not None:
                    chunk, got, _, _ = _recv_fds(self.sock, 1 << 16, 16)
                    fds.extend(got)
                else:
                    chunk = self.sock.recv(1 << 16)
            except InterruptedError:
                continue
            except OSError as e:
                raise PeerGone("the other side is gone (%s)" % e.__class__.__name__)
            if not chunk:
                raise PeerGone("the other side closed the connection")
            self._buf += chunk

    def recv(self, deadline=None, fds=None):
        """The next message (decoded JSON), or TimeoutError at `deadline`
        (a `time.monotonic()` value), PeerGone at EOF, ProtocolError on a
        message over the limits. With `fds` (a list), descriptors passed
        alongside are appended to it."""
        self._fill(4, deadline, fds)
        (n,) = _HEADER.unpack(self._buf[:4])
        if n > self.limit:
            raise ProtocolError("a message announced %d bytes, over the %d-byte limit" % (n, self.limit))
        if self.budget is not None and self.received + n > self.budget:
            raise ProtocolError("the run's messages passed %d bytes" % self.budget)
        self._fill(4 + n, deadline, fds)
        data, self._buf = self._buf[4 : 4 + n], self._buf[4 + n :]
        self.received += 4 + n
        try:
            return _loads(data.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError) as e:
            raise ProtocolError("a message is not JSON (%s)" % str(e)[:100])


# ------------------------------------------------------------------ values


def _b64(b):
    return binascii.b2a_base64(b, newline=False).decode("ascii")


def _unb64(text):
    """base64.b64decode(text, validate=True), without importing base64
    (and `re`) for it: only the alphabet and trailing padding."""
    raw = text.encode("ascii", "replace")
    if raw.rstrip(b"=").translate(None, _B64_ALPHABET) or len(raw) - len(raw.rstrip(b"=")) > 2:
        raise ValueError("not base64")
    try:
        return binascii.a2b_base64(raw)
    except binascii.Error as e:
        raise ValueError(str(e))


_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


class Codec:
    """Data to and from the tagged form. Subclasses handle what is not
    data: `encode_other(v)` returns a tagged object or raises TypeError;
    `decode_other(tag, body)` returns a value or raises ProtocolError."""

    # Encoding: exact builtin types are themselves; a subclass of a builtin
    # arrives as the builtin (its own methods are never called to say what
    # it is: the base type's own slots read the value).

    def encode(self, v, depth=0):
        if depth > MAX_DEPTH:
            raise ProtocolError("a value nests deeper than %d levels" % MAX_DEPTH)
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return v if -INT_EXACT < v < INT_EXACT else {"I": int.__repr__(v)}
        if t is float:
            if math.isfinite(v):
                return v
            return {"X": "nan" if v != v else ("inf" if v > 0 else "-inf")}
        d = depth + 1
        if t is list:
            return {"L": [self.encode(x, d) for x in v]}
        if t is tuple:
            return {"T": [self.encode(x, d) for x in v]}
        if t is dict:
            return {"D": [[self.encode(k, d), self.encode(x, d)] for k, x in v.items()]}
        if t is set:
            return {"S": [self.encode(x, d) for x in v]}
        if t is frozenset:
            return {"F": [self.encode(x, d) for x in v]}
        if t is bytes:
            return {"B": _b64(v)}
        if t is bytearray:
            return {"BA": _b64(bytes(v))}
        std = self._standard(v, t)
        if std is not None:
            return std
        other = self.encode_other(v, depth)
        if other is not None:
            return other
        return self.encode_subclass(v, d)

    def _standard(self, v, t):
        if t is complex:
            return {"Cpx": [self.encode(v.real), self.encode(v.imag)]}
        mod = getattr(t, "__module__", None)
        # (pathlib's classes live in pathlib._local from Python 3.13.)
        if not isinstance(mod, str) or mod.partition(".")[0] not in _VALUE_MODULES:
            return None
        _values()
        if t is decimal.Decimal:
            return {"Dec": str(v)}
        if t is fractions.Fraction:
            return {"Frac": [self.encode(v.numerator), self.encode(v.denominator)]}
        if t is datetime.datetime:
            return {"Dt": v.isoformat()}
        if t is datetime.date:
            return {"Date": v.isoformat()}
        if t is datetime.time:
            return {"Time": v.isoformat()}
        if t is datetime.timedelta:
            return {"Td": [v.days, v.seconds, v.microseconds]}
        if t in (pathlib.PosixPath, pathlib.PurePosixPath):
            return {"P": str(v)}
        return None

    def encode_subclass(self, v, d):
        """A subclass of a builtin, as the builtin (read through the base
        type's own slots, never the subclass's methods)."""
        if isinstance(v, bool):
            return bool(int.__int__(v))
        if isinstance(v, int):
            return self.encode(int.__int__(v))
        if isinstance(v, float):
            return self.encode(float.__float__(v))
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, bytes):
            return {"B": _b64(bytes(memoryview(v)))}
        if isinstance(v, bytearray):
            return {"BA": _b64(bytes(memoryview(v)))}
        if isinstance(v, tuple):
            return {"T": [self.encode(x, d) for x in tuple.__iter__(v)]}
        if isinstance(v, list):
            return {"L": [self.encode(x, d) for x in list.__iter__(v)]}
        if isinstance(v, dict):
            return {"D": [[self.encode(k, d), self.encode(dict.__getitem__(v, k), d)] for k in dict.__iter__(v)]}
        if isinstance(v, frozenset):
            return {"F": [self.encode(x, d) for x in frozenset.__iter__(v)]}
        if isinstance(v, set):
            return {"S": [self.encode(x, d) for x in set.__iter__(v)]}
        _values()
        if isinstance(v, pathlib.PurePosixPath):
            return {"P": pathlib.PurePath.__str__(v)}
        if isinstance(v, datetime.datetime):
            return {"Dt": datetime.datetime.isoformat(v)}
        if isinstance(v, datetime.date):
            return {"Date": datetime.date.isoformat(v)}
        if isinstance(v, decimal.Decimal):
            return {"Dec": decimal.Decimal.__str__(v)}
        raise TypeError("%s cannot cross between the judge and the host" % _type_name(v))

    def encode_other(self, v, depth):
        return None

    # Decoding.

    def decode(self, o, depth=0):
        if depth > MAX_DEPTH:
            raise ProtocolError("a value nests deeper than %d levels" % MAX_DEPTH)
        t = type(o)
        if o is None or t is bool or t is str or t is int or t is float:
            return o
        if t is not dict or len(o) != 1:
            raise ProtocolError("a value is neither data nor a one-key tag: %s" % _clip(o))
        ((tag, body),) = o.items()
        d = depth + 1
        if tag == "L":
            return [self.decode(x, d) for x in _list(body, tag)]
        if tag == "T":
            return tuple(self.decode(x, d) for x in _list(body, tag))
        if tag == "S":
            return set(self.decode(x, d) for x in _list(body, tag))
        if tag == "F":
            return frozenset(self.decode(x, d) for x in _list(body, tag))
        if tag == "D":
            out = {}
            for pair in _list(body, tag):
                if type(pair) is not list or len(pair) != 2:
                    raise ProtocolError("a dict entry is not a [key, value] pair")
                out[self.decode(pair[0], d)] = self.decode(pair[1], d)
            return out
        if tag in ("B", "BA"):
            try:
                raw = _unb64(_str(body, tag))
            except ValueError:
                raise ProtocolError("bytes are not base64")
            return raw if tag == "B" else bytearray(raw)
        if tag == "I":
            text = _str(body, tag)
            if not text.lstrip("-").isdigit() or len(text) > 4301:
                raise ProtocolError("a big integer is not digits")
            return int(text)
        if tag == "X":
            if body not in ("nan", "inf", "-inf"):
                raise ProtocolError("an unknown float %s" % _clip(body))
            return float(body)
        if tag in _VALUE_TAGS:
            _values()
        try:
            if tag == "Dec":
                return decimal.Decimal(_str(body, tag))
            if tag == "Frac":
                n, den = _list(body, tag, 2)
                return fractions.Fraction(self._int(n), self._int(den))
            if tag == "Dt":
                return datetime.datetime.fromisoformat(_str(body, tag))
            if tag == "Date":
                return datetime.date.fromisoformat(_str(body, tag))
            if tag == "Time":
                return datetime.time.fromisoformat(_str(body, tag))
            if tag == "Td":
                days, secs, us = _list(body, tag, 3)
                return datetime.timedelta(days=self._int(days), seconds=self._int(secs), microseconds=self._int(us))
            if tag == "P":
                return pathlib.PosixPath(_str(body, tag))
            if tag == "Cpx":
                re_, im = _list(body, tag, 2)
                return complex(self._num(self.decode(re_, d)), self._num(self.decode(im, d)))
        except (ValueError, ArithmeticError, OverflowError) as e:
            raise ProtocolError("a %s value is malformed (%s)" % (tag, str(e)[:80]))
        return self.decode_other(tag, body, d)

    def _int(self, o):
        v = self.decode(o)
        if type(v) is not int:
            raise ProtocolError("expected an integer, got %s" % _clip(o))
        return v

    def _num(self, v):
        if type(v) not in (int, float):
            raise ProtocolError("expected a number")
        return v

    def decode_other(self, tag, body, depth):
        raise ProtocolError("an unknown tag %r" % tag[:40])


_VALUE_TAGS = frozenset(("Dec", "Frac", "Dt", "Date", "Time", "Td", "P"))


def _list(body, tag, n=None):
    if type(body) is not list or (n is not None and len(body) != n):
        raise ProtocolError("the %s tag wants a list%s" % (tag, "" if n is None else " of %d" % n))
    return body


def _str(body, tag):
    if type(body) is not str:
        raise ProtocolError("the %s tag wants a string" % tag)
    return body


def _clip(o):
    text = repr(o)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(v):
    t = type(v)
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", "?")
    return name if mod in ("builtins", "") else "%s.%s" % (mod, name)


# Builtin exception classes by name: what an exception may arrive as.
import builtins as _builtins  # noqa: E402

BUILTIN_EXCEPTIONS = {}

for _name in dir(_builtins):
    _obj = getattr(_builtins, _name)
    if isinstance(_obj, type) and issubclass(_obj, BaseException):
        BUILTIN_EXCEPTIONS[_name] = _obj
del _name, _obj

# Builtin classes by name a value may name (isinstance checks, annotations).
BUILTIN_TYPES = {
    n: getattr(_builtins, n)
    for n in ("object", "int", "float", "str", "bytes", "bytearray", "bool", "list", "tuple", "dict", "set",
              "frozenset", "complex", "type", "memoryview", "range", "slice")
}
BUILTIN_TYPES.update(BUILTIN_EXCEPTIONS)

# Names a side may ask of the other's objects (operators and protocols);
# anything else that starts with an underscore is refused.
DUNDERS = frozenset((
    "__call__", "__len__", "__iter__", "__next__", "__reversed__", "__getitem__", "__setitem__", "__delitem__",
    "__contains__", "__enter__", "__exit__", "__bool__", "__lt__", "__le__", "__gt__", "__ge__",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__", "__neg__", "__pos__",
    "__abs__", "__invert__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__matmul__",
    "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__", "__rand__",
    "__ror__", "__rxor__", "__int__", "__float__", "__index__", "__round__", "__format__", "__str__",
    "__repr__", "__await__",
))


def socket_from_fd(fd):
    """A socket object for an inherited descriptor (closed with it)."""
    return socket.socket(fileno=fd)


def now():
    return _monotonic()


def child_env(env):
    """The environment a host or program starts with: the given one, never
    a GATEHOUSE_ variable of the judge's."""
    return {k: v for k, v in env.items() if not k.startswith("GATEHOUSE_") and not k.startswith("PYTEST_")}


def close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass
