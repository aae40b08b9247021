"""Gatehouse audit hook for the dead-end-deploy probe (not the candidate's code).

Loaded through PYTHONPATH by every Python process the probe starts. Appends
one JSON line per process start and per outgoing connection to
$GATEHOUSE_AUDIT_LOG, tagged with the process depth (0 = the runner itself,
1 = a process it started, ...).
"""

import json
import os
import sys

_LOG = os.environ.get("GATEHOUSE_AUDIT_LOG")

if _LOG:
    _DEPTH = int(os.environ.get("GATEHOUSE_AUDIT_DEPTH", "0") or 0)
    os.environ["GATEHOUSE_AUDIT_DEPTH"] = str(_DEPTH + 1)

    def _argv(value):
        if isinstance(value, (str, bytes, os.PathLike)):
            return [os.fsdecode(value)]
        try:
            return [os.fsdecode(v) if isinstance(v, (str, bytes, os.PathLike)) else str(v) for v in value]
        except TypeError:
            return [str(value)]

    def _hook(event, args):
        try:
            if event == "subprocess.Popen":
                rec = {"exe": str(args[0]), "argv": _argv(args[1])}
            elif event == "os.system":
                rec = {"shell": os.fsdecode(args[0])}
            elif event in ("os.exec", "os.posix_spawn"):
                rec = {"exe": os.fsdecode(args[0]), "argv": _argv(args[1])}
            elif event == "os.spawn":
                rec = {"exe": os.fsdecode(args[1]), "argv": _argv(args[2])}
            elif event == "socket.connect":
                addr = args[1]
                if isinstance(addr, tuple) and len(addr) >= 2:
                    rec = {"host": str(addr[0]), "port": int(addr[1])}
                else:
                    rec = {"host": str(addr), "port": None}
            else:
                return
            rec.update(event=event, depth=_DEPTH, pid=os.getpid())
            with open(_LOG, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec) + "\n")
        except Exception:
            pass

    sys.addaudithook(_hook)
