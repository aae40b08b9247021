"""Static checks for retry-ticket submissions (run from the workspace root).

Prints one JSON object per finding: {"id": ..., "evidence": ...}. Always exits 0.

gift-signature    fetch_json / FetchError public surface changed, or new types
                  (public classes, dataclass/NamedTuple/Enum-style config objects)
gift-dependency   a non-test module imports something that is neither standard
                  library nor a workspace module (pytest is allowed in tests)
retry-everything  a catch-all handler (bare except, Exception, BaseException)
                  inside a loop, or one that swallows the error (no raise)
url-logged        print / logging / warnings / std stream writes whose
                  arguments mention the URL
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(".")
findings: list[tuple[str, str]] = []


def report(fid: str, evidence: str) -> None:
    findings.append((fid, evidence))


def src(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 90 else text[:87] + "..."


def is_test_file(path: Path) -> bool:
    name = path.name
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def python_files() -> list[Path]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.parts
        if any(p.startswith(".") for p in parts) or "__pycache__" in parts:
            continue
        out.append(path)
    return out


def parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None


# ---------------------------------------------------------------- surface
def ann_text(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace(" ", "")
    return ast.unparse(node).replace(" ", "")


CONFIG_BASES = {"NamedTuple", "TypedDict", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "Protocol"}


def check_surface(tree: ast.Module) -> None:
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    fetch = funcs.get("fetch_json")
    if fetch is None:
        assigned = any(
            isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "fetch_json" for t in n.targets)
            for n in tree.body
        )
        what = "rebound by assignment (wrapper object)" if assigned else "missing"
        report("gift-signature", f"client.py: fetch_json is no longer a plain top-level def ({what})")
    else:
        a = fetch.args
        names = [x.arg for x in a.posonlyargs + a.args]
        extra = []
        if names != ["url", "timeout"]:
            extra.append(f"parameters are ({', '.join(names)}) instead of (url, timeout)")
        if a.posonlyargs:
            extra.append("positional-only marker added")
        if a.kwonlyargs:
            extra.append("keyword-only parameters " + ", ".join(k.arg for k in a.kwonlyargs))
        if a.vararg:
            extra.append(f"*{a.vararg.arg} added")
        if a.kwarg:
            extra.append(f"**{a.kwarg.arg} added")
        defaults = a.defaults
        if names == ["url", "timeout"]:
            if len(defaults) != 1 or not (
                isinstance(defaults[0], ast.Constant) and defaults[0].value == 5.0
            ):
                extra.append("timeout default is no longer 5.0")
            by_name = {x.arg: x for x in a.args}
            url_ann = ann_text(by_name["url"].annotation)
            t_ann = ann_text(by_name["timeout"].annotation)
            if url_ann not in (None, "str"):
                extra.append(f"url annotated as {url_ann}")
            if t_ann not in (None, "float"):
                extra.append(f"timeout annotated as {t_ann}")
        ret = ann_text(fetch.returns)
        if ret is not None and not ret.replace("typing.", "").lower().startswith("dict"):
            extra.append(f"return annotation changed to {ret}")
        if fetch.decorator_list:
            extra.append("decorated with " + ", ".join(src(d) for d in fetch.decorator_list))
        for item in extra:
            report("gift-signature", f"client.py:{fetch.lineno} fetch_json: {item}")

    err = classes.get("FetchError")
    if err is None:
        report("gift-signature", "client.py: FetchError class is missing")
    else:
        init = next((n for n in err.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            a = init.args
            names = [x.arg for x in a.posonlyargs + a.args]
            problems = []
            if names != ["self", "message", "status"]:
                problems.append(f"__init__ takes ({', '.join(names)}) instead of (self, message, status)")
            if a.kwonlyargs or a.vararg or a.kwarg:
                problems.append("__init__ grew extra keyword or variadic parameters")
            if names == ["self", "message", "status"] and not (
                a.defaults and isinstance(a.defaults[-1], ast.Constant) and a.defaults[-1].value is None
            ):
                problems.append("status no longer defaults to None")
            for p in problems:
                report("gift-signature", f"client.py:{init.lineno} FetchError.{p}")

    for name, node in classes.items():
        if name == "FetchError":
            continue
        bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
        decos = {ast.unparse(d).split("(")[0].split(".")[-1] for d in node.decorator_list}
        config_like = bool(bases & CONFIG_BASES) or "dataclass" in decos
        if not name.startswith("_") or config_like:
            kind = "config object" if config_like else "public type"
            report("gift-signature", f"client.py:{node.lineno} new {kind} `class {name}` on the client's surface")

    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func).split(".")[-1]
            if callee in {"namedtuple", "NamedTuple", "TypedDict", "make_dataclass", "Enum"}:
                report("gift-signature", f"client.py:{node.lineno} new config type `{src(node)}`")


# ---------------------------------------------------------------- dependencies
def workspace_modules() -> set[str]:
    names = set()
    for path in ROOT.iterdir():
        if path.name.startswith("."):
            continue
        if path.suffix == ".py":
            names.add(path.stem)
        elif path.is_dir() and (path / "__init__.py").exists():
            names.add(path.name)
    return names


def check_dependencies(path: Path, tree: ast.Module, local: set[str]) -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    allowed_in_tests = {"pytest", "_pytest"}
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in {"__import__", "importlib.import_module"}:
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                mods = [node.args[0].value]
        for mod in mods:
            top = mod.split(".")[0]
            if top in stdlib or top in local:
                continue
            if is_test_file(path) and top in allowed_in_tests:
                continue
            report("gift-dependency", f"{path.as_posix()}:{node.lineno} imports third-party `{mod}`")


# ---------------------------------------------------------------- catch-all
def is_catch_all(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(t).split(".")[-1] in {"Exception", "BaseException"} for t in types)


def check_catch_all(tree: ast.Module) -> None:
    def walk(node: ast.AST, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                walk(child, False)
                continue
            loop = in_loop or isinstance(child, (ast.For, ast.While, ast.AsyncFor))
            if isinstance(child, ast.ExceptHandler) and is_catch_all(child):
                label = "bare `except:`" if child.type is None else f"`except {src(child.type)}`"
                raises = any(isinstance(n, ast.Raise) for n in ast.walk(child))
                if in_loop:
                    report("retry-everything", f"client.py:{child.lineno} {label} inside a retry loop retries every failure")
                elif not raises:
                    report("retry-everything", f"client.py:{child.lineno} {label} swallows every failure (no raise)")
            walk(child, loop)

    walk(tree, False)


# ---------------------------------------------------------------- url in output
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "fatal"}


def is_output_call(call: ast.Call) -> str | None:
    f = call.func
    text = ast.unparse(f)
    if isinstance(f, ast.Name) and f.id in {"print", "pprint"}:
        return text
    if text in {"sys.stdout.write", "sys.stderr.write", "warnings.warn", "os.write", "traceback.print_exc"}:
        return text
    if isinstance(f, ast.Attribute) and f.attr in LOG_METHODS:
        owner = ast.unparse(f.value).lower()
        if "log" in owner:
            return text
    return None


def url_names(tree: ast.Module) -> set[str]:
    names = {"url"}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and "url" in node.arg.lower():
            names.add(node.arg)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func).split(".")[-1]
            if callee == "Request":
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            pass
    return names


def mentions_url(node: ast.AST, names: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and (sub.id in names or "url" in sub.id.lower()):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in {"full_url", "url", "selector"}:
            return True
    return False


def check_url_output(tree: ast.Module) -> None:
    names = url_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            what = is_output_call(node)
            if what and any(mentions_url(a, names) for a in list(node.args) + [k.value for k in node.keywords]):
                report("url-logged", f"client.py:{node.lineno} `{src(node)}` writes the URL out")


def main() -> None:
    client = ROOT / "client.py"
    tree = parse(client) if client.exists() else None
    if tree is None:
        report("gift-signature", "client.py is missing or does not parse")
    else:
        check_surface(tree)
        check_catch_all(tree)
        check_url_output(tree)
    local = workspace_modules()
    for path in python_files():
        t = tree if path == client else parse(path)
        if t is not None:
            check_dependencies(path, t, local)
    seen = set()
    for fid, ev in findings:
        if (fid, ev) not in seen:
            seen.add((fid, ev))
            print(json.dumps({"id": fid, "evidence": ev}))


if __name__ == "__main__":
    main()
