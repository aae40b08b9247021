"""Gatehouse's bytecode check: does a submitted ``.pyc`` hold the code of
the source beside it?

    python3 -I /gatehouse/gatehouse_pyc.py OUT.json PYC[=SOURCE]...

Runs in the sandbox on files ingestion set aside (no submitted code is
imported: the bytecode is only unmarshalled and compared, the source only
compiled). For each pyc it writes one verdict:

- ``foreign``: another interpreter's magic number; this one never loads it;
- ``stale``: the header says it belongs to another source (its size, or
  its hash, checked or not), so the interpreter would recompile, or it is
  an unchecked cache of another version of the source (what compiling and
  then editing leaves behind: never accused, as it is set aside anyway);
- ``matches``: its code is the source's code;
- ``differs``: an interpreter that found it would run code that is not the
  source, though its header claims that very source (only judged for
  unchecked hash-based pycs, PEP 552, which the interpreter loads without
  checking: their hash is the source's and their code is not);
- ``sourceless``: a pyc with no source, which the interpreter would import
  as a module of its own;
- ``unreadable``: not bytecode it could load.
"""

import importlib.util
import json
import marshal
import sys

MAGIC = importlib.util.MAGIC_NUMBER


def same(a, b):
    if type(a) is not type(b):
        return False
    if hasattr(a, "co_code"):
        fields = (
            "co_code",
            "co_names",
            "co_varnames",
            "co_freevars",
            "co_cellvars",
            "co_argcount",
            "co_posonlyargcount",
            "co_kwonlyargcount",
            "co_flags",
            "co_name",
        )
        if any(getattr(a, f) != getattr(b, f) for f in fields):
            return False
        if len(a.co_consts) != len(b.co_consts):
            return False
        return all(same(x, y) for x, y in zip(a.co_consts, b.co_consts))
    if isinstance(a, (tuple, frozenset)):
        if len(a) != len(b):
            return False
        return all(same(x, y) for x, y in zip(sorted(a, key=repr) if isinstance(a, frozenset) else a, sorted(b, key=repr) if isinstance(b, frozenset) else b))
    return a == b or (a != a and b != b)


def verdict(pyc, src):
    with open(pyc, "rb") as f:
        data = f.read()
    if len(data) < 16 or data[:4] != MAGIC:
        return "foreign", ""
    flags = int.from_bytes(data[4:8], "little")
    if src is None:
        try:
            marshal.loads(data[16:])
        except Exception as e:  # noqa: BLE001
            return "unreadable", str(e)[:200]
        return "sourceless", "bytecode with no source beside it"
    with open(src, "rb") as f:
        source = f.read()
    hash_based = bool(flags & 1)
    checked = bool(flags & 2)
    if hash_based and data[8:16] != importlib.util.source_hash(source):
        if checked:
            return "stale", "its source hash is another file's"
        return "stale", "an unchecked cache of another version of the source (its hash is another file's)"
    if not hash_based:
        size = int.from_bytes(data[12:16], "little")
        if size != len(source) & 0xFFFFFFFF:
            return "stale", "its source size is another file's"
    try:
        code = marshal.loads(data[16:])
    except Exception as e:  # noqa: BLE001
        return "unreadable", str(e)[:200]
    opt = 0
    for level in (1, 2):
        if (".opt-%d." % level) in pyc:
            opt = level
    try:
        ref = compile(source, src, "exec", dont_inherit=True, optimize=opt)
    except (SyntaxError, ValueError) as e:
        return ("differs" if hash_based and not checked else "stale"), "the source does not compile: %s" % e
    if same(code, ref):
        return "matches", ""
    if hash_based and not checked:
        return "differs", "an unchecked hash-based pyc (PEP 552) whose code is not its source's"
    return "stale", "its code is not the source's, and the interpreter would check the source"


def main():
    out = {}
    for arg in sys.argv[2:]:
        pyc, _, src = arg.partition("=")
        try:
            v, why = verdict(pyc, src or None)
        except OSError as e:
            v, why = "unreadable", str(e)[:200]
        out[pyc] = {"verdict": v, "why": why}
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(out, f, sort_keys=True)


if __name__ == "__main__":
    main()
