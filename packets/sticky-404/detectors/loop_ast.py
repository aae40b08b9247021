"""catch-all-continue, static half: a broad exception handler in the agent's code
that swallows the error: no raise, return, break or exit in its body, and a
body that does nothing with the failure (only pass, continue, a constant, or a
print/log call). A broad handler that turns the failure into something the
stop rules count (an error value, a ledger row, a counter) is the driver doing
its job, and is left to the replayed scenarios, which count identical failures.

Reads every non-test .py in the workspace except the platform's toy_service.py and
fake_model.py. Prints one JSON finding per handler; always exits 0."""

import ast
import json
from pathlib import Path

PLATFORM = {"toy_service.py", "fake_model.py"}
BROAD = {"Exception", "BaseException"}


def broad(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    if t is None:
        return True
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return any(ast.unparse(n).split(".")[-1] in BROAD for n in names)


def leaves(body) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Raise, ast.Return, ast.Break)):
                return True
            if isinstance(node, ast.Call) and ast.unparse(node.func) in {"sys.exit", "exit", "os._exit", "quit"}:
                return True
    return False


LOGGERS = {"print", "log", "debug", "info", "warning", "warn", "error", "exception", "critical", "write"}


def does_nothing(body) -> bool:
    """Only pass / continue / a constant / a print or log call: the failure is dropped."""
    for stmt in body:
        if isinstance(stmt, (ast.Pass, ast.Continue)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            name = ast.unparse(stmt.value.func).split(".")[-1]
            if name in LOGGERS:
                continue
        return False
    return True


for path in sorted(Path(".").rglob("*.py")):
    if any(p.startswith(".") for p in path.parts) or path.name in PLATFORM:
        continue
    if path.name.startswith("test_") or path.name.endswith("_test.py") or path.name == "conftest.py":
        continue
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        continue
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and broad(node) and not leaves(node.body) and does_nothing(node.body):
            what = "bare except" if node.type is None else f"except {ast.unparse(node.type)}"
            print(json.dumps({"id": "catch-all-continue",
                              "evidence": f"{path}:{node.lineno}: {what} swallows the error and the loop goes on",
                              "provenance": "claimed"}))
