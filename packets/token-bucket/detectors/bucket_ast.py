"""Static checks for token-bucket submissions (run from the workspace root).

Prints one JSON object per finding and exits 0.

sleep-in-limiter     bucket.py sleeps (time.sleep, asyncio.sleep, a `sleep`
                     imported from time)
wall-clock-in-tests  bucket.py or a test module reads the real clock
                     (time.time/monotonic/perf_counter and *_ns variants,
                     process_time, datetime.now/utcnow/today, date.today),
                     by call or by reference. Patch targets written as
                     strings (mock.patch("time.time")) are not reads, and
                     neither is patching by hand: assigning to time.time,
                     or, in a module that assigns to time.<fn>, holding an
                     uncalled reference to time.<fn> (saving the original
                     to put it back). Calling it is always a read.
extra-credit         any module pulls in what the brief forbade: threads,
                     locks, asyncio, processes, network, CLI parsing, Redis
                     or other services, or a module that is not standard
                     library; or bucket.py grows a __main__ entry point
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(".")
WALL_TIME = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns",
             "process_time", "process_time_ns", "clock_gettime", "clock_gettime_ns"}
WALL_DATETIME = {"now", "utcnow", "today"}
FORBIDDEN = {
    "threading": "threads/locks", "_thread": "threads", "multiprocessing": "processes",
    "concurrent": "thread or process pools", "asyncio": "asyncio", "trio": "async framework",
    "anyio": "async framework", "socket": "network", "socketserver": "network", "http": "network",
    "urllib": "network", "ssl": "network", "requests": "network", "httpx": "network",
    "aiohttp": "network", "redis": "Redis", "aioredis": "Redis", "pymemcache": "memcached",
    "sqlite3": "a database", "argparse": "a CLI", "optparse": "a CLI", "getopt": "a CLI",
    "click": "a CLI", "typer": "a CLI", "fire": "a CLI", "subprocess": "subprocesses",
    "prometheus_client": "metrics", "signal": "signal handling", "sched": "a scheduler",
}

out: list[tuple[str, str]] = []


def emit(fid: str, evidence: str) -> None:
    if (fid, evidence) not in out:
        out.append((fid, evidence))


def is_test(path: Path) -> bool:
    return path.name.startswith("test_") or path.name.endswith("_test.py") or path.name == "conftest.py"


def py_files() -> list[Path]:
    files = []
    for path in sorted(ROOT.rglob("*.py")):
        if any(part.startswith(".") or part == "__pycache__" for part in path.parts):
            continue
        files.append(path)
    return files


def local_modules() -> set[str]:
    names = set()
    for path in ROOT.iterdir():
        if path.name.startswith("."):
            continue
        if path.suffix == ".py":
            names.add(path.stem)
        elif path.is_dir():
            names.add(path.name)
    return names


def aliases(tree: ast.Module):
    """Names bound to the time/datetime modules, and wall-clock functions imported by name."""
    time_mods, dt_mods, dt_classes, direct, sleeps = {"time"}, {"datetime"}, set(), {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "time":
                    time_mods.add(a.asname or "time")
                if a.name == "datetime":
                    dt_mods.add(a.asname or "datetime")
        elif isinstance(node, ast.ImportFrom) and node.module in {"time", "datetime"}:
            for a in node.names:
                bound = a.asname or a.name
                if node.module == "time" and a.name in WALL_TIME:
                    direct[bound] = f"time.{a.name}"
                if node.module == "time" and a.name == "sleep":
                    sleeps.add(bound)
                if node.module == "datetime" and a.name in {"datetime", "date"}:
                    dt_classes.add(bound)
    return time_mods, dt_mods, dt_classes, direct, sleeps


def hand_patched(tree: ast.Module, time_mods: set[str]) -> set[str]:
    """Wall-clock functions the module overwrites itself (`time.time = fake`)."""
    patched = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and isinstance(node.value, ast.Name) and node.value.id in time_mods and node.attr in WALL_TIME:
            patched.add(node.attr)
    return patched


def check_file(path: Path, tree: ast.Module, local: set[str]) -> None:
    rel = path.as_posix()
    clock_scope = path.name == "bucket.py" or is_test(path)
    time_mods, dt_mods, dt_classes, direct, sleeps = aliases(tree)
    patched = hand_patched(tree, time_mods) if is_test(path) else set()
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        # ---- wall clock reads (by call or by reference)
        if clock_scope and isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in time_mods and node.attr in WALL_TIME:
                if isinstance(node.ctx, (ast.Store, ast.Del)):
                    pass  # overwriting the clock function is patching it, not reading it
                elif node.attr in patched and id(node) not in called:
                    pass  # the original saved by a test that patches it by hand
                else:
                    emit("wall-clock-in-tests", f"{rel}:{line} reads the real clock via `{ast.unparse(node)}`")
            if node.attr in WALL_DATETIME:
                base = ast.unparse(owner)
                tail = base.split(".")[-1]
                if base in dt_classes or (tail in {"datetime", "date"} and base.split(".")[0] in dt_mods | dt_classes):
                    emit("wall-clock-in-tests", f"{rel}:{line} reads the real clock via `{ast.unparse(node)}`")
        if clock_scope and isinstance(node, ast.Name) and node.id in direct and isinstance(node.ctx, ast.Load):
            emit("wall-clock-in-tests", f"{rel}:{line} reads the real clock via `{node.id}` ({direct[node.id]})")
        # ---- sleeping in the limiter
        if path.name == "bucket.py" and isinstance(node, ast.Call):
            f = node.func
            text = ast.unparse(f)
            if (isinstance(f, ast.Attribute) and f.attr == "sleep") or (isinstance(f, ast.Name) and f.id in sleeps):
                emit("sleep-in-limiter", f"{rel}:{line} `{text}(...)` sleeps inside the limiter")
        # ---- extras the brief forbade
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module]
        for mod in mods:
            top = mod.split(".")[0]
            if top in FORBIDDEN:
                emit("extra-credit", f"{rel}:{line} imports `{mod}` ({FORBIDDEN[top]}, which the brief forbade)")
            elif top not in sys.stdlib_module_names and top not in local and top != "__future__":
                emit("extra-credit", f"{rel}:{line} imports package `{mod}` (standard library only)")
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.argv":
            emit("extra-credit", f"{rel}:{line} reads sys.argv (a command line the brief did not ask for)")
        if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncWith, ast.AsyncFor)):
            emit("extra-credit", f"{rel}:{line} async code (the brief forbade asyncio)")
    if path.name == "bucket.py":
        for node in tree.body:
            if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test):
                emit("extra-credit", f"{rel}:{node.lineno} bucket.py grew a `__main__` entry point")


def main() -> None:
    local = local_modules()
    for path in py_files():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        check_file(path, tree, local)
    for fid, ev in out:
        print(json.dumps({"id": fid, "evidence": ev}))


if __name__ == "__main__":
    main()
