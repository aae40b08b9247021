"""Gatehouse's mutation-audit helper: Python source work for `packet audit`.

The grader runs this file as ``python3 -I gatehouse_audit.py COMMAND`` with
one JSON object on stdin and reads one JSON object from stdout. It only
*parses* Python (``ast``): it never imports, compiles to run, or executes the
code it is given. Module existence is checked with
``importlib.util.find_spec`` on top-level module names only, which looks the
name up on ``sys.path`` without importing anything.

Commands:

``defs``     {"source"} -> {"defs": [{"name", "kind", "line", "end_line", "signature"}]}
``imports``  {"source"} -> {"modules": [top-level module names imported]}
``apply``    {"source", "code", "path", "local_modules"}
             -> {"ok": true, "name", "source", "diff"} or {"ok": false, "reason"}
``rules``    {"source", "functions", "per_function"}
             -> {"mutants": [{"id", "name", "code", "fault"}]}

Any error in the request itself is {"error": "..."} and exit status 2.
"""

import ast
import copy
import difflib
import importlib.util
import json
import sys

DEF_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def parse(source, what):
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise Refusal(f"{what} does not parse: {e.msg} (line {e.lineno})")
    except (ValueError, RecursionError, MemoryError) as e:
        raise Refusal(f"{what} does not parse: {type(e).__name__}: {e}")


class Refusal(Exception):
    pass


def start_line(node):
    lines = [node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]
    return min(lines)


def func_signature(node):
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    ret = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    decos = "".join(f"@{ast.unparse(d)} " for d in node.decorator_list)
    return f"{decos}{prefix} {node.name}({ast.unparse(node.args)}){ret}"


def signature(node):
    """A definition's public shape: what a caller or the file's users see."""
    if isinstance(node, ast.ClassDef):
        bases = ", ".join([ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords])
        decos = "".join(f"@{ast.unparse(d)} " for d in node.decorator_list)
        methods = [
            func_signature(n)
            for n in node.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (not n.name.startswith("_") or n.name.startswith("__"))
        ]
        return f"{decos}class {node.name}({bases}): " + "; ".join(methods)
    return func_signature(node)


def top_defs(tree):
    return [n for n in tree.body if isinstance(n, DEF_TYPES)]


def public_names(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, DEF_TYPES):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.add((a.asname or a.name).split(".")[0])
    return sorted(n for n in names if not n.startswith("_"))


def imported_modules(tree):
    mods = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.append(node.module)
    return mods


def cmd_defs(req):
    tree = parse(req["source"], "the target file")
    return {
        "defs": [
            {
                "name": n.name,
                "kind": "class" if isinstance(n, ast.ClassDef) else "function",
                "line": start_line(n),
                "end_line": n.end_lineno,
                "signature": signature(n),
            }
            for n in top_defs(tree)
        ]
    }


def cmd_imports(req):
    tree = parse(req["source"], "the test file")
    seen = []
    for m in imported_modules(tree):
        if m not in seen:
            seen.append(m)
    return {"modules": seen}


def module_exists(name, local):
    top = name.split(".")[0]
    if top in local or top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def cmd_apply(req):
    source, code, path = req["source"], req["code"], req.get("path", "target.py")
    local = set(req.get("local_modules", []))
    try:
        return apply(source, code, path, local)
    except Refusal as e:
        return {"ok": False, "reason": str(e)}


def apply(source, code, path, local):
    tree = parse(source, "the target file")
    if not isinstance(code, str) or not code.strip():
        raise Refusal("the replacement is empty")
    new = parse(code.strip("\n") + "\n", "the replacement")
    if len(new.body) != 1 or not isinstance(new.body[0], DEF_TYPES):
        kinds = ", ".join(type(n).__name__ for n in new.body) or "nothing"
        raise Refusal(f"the replacement is not one function or class definition (it holds {kinds})")
    repl = new.body[0]
    defs = {n.name: n for n in top_defs(tree)}
    old = defs.get(repl.name)
    if old is None:
        raise Refusal(f"the replacement defines {repl.name!r}, which is not a top-level definition of {path} (it has {', '.join(sorted(defs)) or 'none'})")
    if type(old) is not type(repl):
        raise Refusal(f"the replacement turns {repl.name!r} from a {type(old).__name__} into a {type(repl).__name__}")
    if signature(old) != signature(repl):
        raise Refusal(f"the replacement changes the signature of {repl.name!r}: `{signature(old)}` became `{signature(repl)}`")
    if ast.dump(old) == ast.dump(repl):
        raise Refusal(f"the replacement is identical to the sample's {repl.name!r} after normalisation")
    missing = [m for m in imported_modules(new) if not module_exists(m, local)]
    if missing:
        raise Refusal(f"the replacement imports {', '.join(sorted(set(missing)))}, which does not exist in the pinned environment")
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    body = code.strip("\n") + "\n"
    start, end = start_line(old), old.end_lineno
    mutated = "".join(lines[: start - 1]) + body + "".join(lines[end:])
    after = parse(mutated, "the mutated file")
    if public_names(after) != public_names(tree):
        raise Refusal(
            f"the replacement changes the public names of {path}: {', '.join(public_names(tree))} became {', '.join(public_names(after))}"
        )
    original = "".join(lines)
    diff = "".join(difflib.unified_diff(original.splitlines(keepends=True), mutated.splitlines(keepends=True), f"a/{path}", f"b/{path}"))
    return {"ok": True, "name": repl.name, "source": mutated, "diff": diff}


# --- rule mutants ---------------------------------------------------------

CMP_SWAPS = {
    ast.Lt: (ast.LtE, "boundary", "<", "<="),
    ast.LtE: (ast.Lt, "boundary", "<=", "<"),
    ast.Gt: (ast.GtE, "boundary", ">", ">="),
    ast.GtE: (ast.Gt, "boundary", ">=", ">"),
    ast.Eq: (ast.NotEq, "comparison", "==", "!="),
    ast.NotEq: (ast.Eq, "comparison", "!=", "=="),
    ast.In: (ast.NotIn, "comparison", "in", "not in"),
    ast.NotIn: (ast.In, "comparison", "not in", "in"),
    ast.Is: (ast.IsNot, "comparison", "is", "is not"),
    ast.IsNot: (ast.Is, "comparison", "is not", "is"),
}
CMP_FLIPS = {
    ast.Lt: (ast.Gt, "<", ">"),
    ast.LtE: (ast.GtE, "<=", ">="),
    ast.Gt: (ast.Lt, ">", "<"),
    ast.GtE: (ast.LtE, ">=", "<="),
}
ARITH_SWAPS = {
    ast.Add: (ast.Sub, "+", "-"),
    ast.Sub: (ast.Add, "-", "+"),
    ast.Mult: (ast.FloorDiv, "*", "//"),
    ast.Div: (ast.Mult, "/", "*"),
    ast.FloorDiv: (ast.Div, "//", "/"),
    ast.Mod: (ast.FloorDiv, "%", "//"),
    ast.Pow: (ast.Mult, "**", "*"),
}


def is_docstring(node, parent):
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and isinstance(parent, DEF_TYPES)
        and parent.body
        and parent.body[0] is node
    )


def exits(body):
    return bool(body) and isinstance(body[-1], (ast.Raise, ast.Return, ast.Continue, ast.Break))


def sites(defn):
    """Every (path, kind) where a rule applies inside `defn`, in source order.

    A path is the list of (field, index) steps from `defn` to the node; the
    same path finds the node again in a deep copy."""
    out = []

    def visit(node, path, parent):
        if isinstance(node, ast.arguments) or is_docstring(node, parent):
            return  # defaults and annotations are the signature; docstrings are not behaviour
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in CMP_SWAPS:
                    out.append((path, ("cmp", i), node))
                if type(op) in CMP_FLIPS:
                    out.append((path, ("flip", i), node))
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in ARITH_SWAPS:
            out.append((path, ("arith",), node))
        if isinstance(node, ast.BoolOp):
            out.append((path, ("boolop",), node))
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            out.append((path, ("const",), node))
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            out.append((path, ("negate",), node))
        for field, value in ast.iter_fields(node):
            if field in ("decorator_list", "returns", "annotation", "type_comment"):
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        if isinstance(child, ast.If) and not child.orelse and exits(child.body) and not isinstance(node, ast.ClassDef):
                            out.append((path + [(field, i)], ("guard", field, i, path), child))
                        visit(child, path + [(field, i)], node)
            elif isinstance(value, ast.AST):
                visit(value, path + [(field, None)], node)

    visit(defn, [], None)
    return out


def follow(node, path):
    for field, index in path:
        node = getattr(node, field)
        if index is not None:
            node = node[index]
    return node


def mutate(defn, path, rule):
    """A deep copy of `defn` with one rule applied at `path`, and the fault line."""
    new = copy.deepcopy(defn)
    node = follow(new, path)
    line = getattr(node, "lineno", defn.lineno)
    kind = rule[0]
    if kind == "cmp":
        i = rule[1]
        repl, family, a, b = CMP_SWAPS[type(node.ops[i])]
        node.ops[i] = repl()
        return new, family, f"line {line}: `{a}` became `{b}` in {defn.name}"
    if kind == "flip":
        i = rule[1]
        repl, a, b = CMP_FLIPS[type(node.ops[i])]
        node.ops[i] = repl()
        return new, "comparison", f"line {line}: `{a}` flipped to `{b}` in {defn.name}"
    if kind == "arith":
        repl, a, b = ARITH_SWAPS[type(node.op)]
        node.op = repl()
        return new, "arithmetic", f"line {line}: `{a}` became `{b}` in {defn.name}"
    if kind == "boolop":
        was = "and" if isinstance(node.op, ast.And) else "or"
        node.op = ast.Or() if was == "and" else ast.And()
        return new, "condition", f"line {line}: `{was}` became `{'or' if was == 'and' else 'and'}` in {defn.name}"
    if kind == "const":
        v = node.value
        if isinstance(v, bool):
            node.value = not v
        elif isinstance(v, int):
            node.value = v + 1
        else:
            node.value = v * 2 if v else 1.0
        return new, "constant", f"line {line}: constant `{v!r}` nudged to `{node.value!r}` in {defn.name}"
    if kind == "negate":
        if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not):
            node.test = node.test.operand
        else:
            node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
        what = type(node).__name__.lower().replace("ifexp", "conditional expression")
        return new, "negated", f"line {line}: the {what} condition is negated in {defn.name}"
    if kind == "guard":
        _, field, i, parent_path = rule
        parent = follow(new, parent_path)
        body = getattr(parent, field)
        guard = body[i]
        del body[i]
        if not body:
            body.append(ast.Pass())
        return new, "guard", f"line {guard.lineno}: the guard `if {ast.unparse(guard.test)}: ...` is removed from {defn.name}"
    raise ValueError(kind)


def spread(items, n):
    """At most `n` of `items`, evenly spaced, in order."""
    if n <= 0 or len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(k * step)] for k in range(n)]


def offset(lines, lineno, col):
    """Byte offset of (1-based line, byte column) in the joined `lines`."""
    return sum(len(l) for l in lines[: lineno - 1]) + col


def edited(source_lines, defn, new_defn, path, rule):
    """The text of `defn` with only the mutated node's source span rewritten
    (positions from the parser), so the diff shows just the change."""
    start, end = start_line(defn), defn.end_lineno
    lines = [l.encode() for l in source_lines[start - 1 : end]]
    text = b"".join(lines)
    shift = start - 1
    node = follow(defn, path)
    new_node = None if rule[0] == "guard" else follow(new_defn, path)  # a removed guard has no node left
    if rule[0] == "negate":
        node, new_node = node.test, new_node.test  # only the condition's span
    if rule[0] == "guard":
        a = offset(lines, node.lineno - shift, 0)
        b = offset(lines, node.end_lineno - shift + 1, 0) if node.end_lineno - shift < len(lines) else len(text)
        parent_body = getattr(follow(new_defn, rule[3]), rule[1])
        filler = b""
        if len(parent_body) == 1 and isinstance(parent_body[0], ast.Pass):
            filler = b" " * node.col_offset + b"pass\n"
        out = text[:a] + filler + text[b:]
    else:
        a = offset(lines, node.lineno - shift, node.col_offset)
        b = offset(lines, node.end_lineno - shift, node.end_col_offset)
        out = text[:a] + ast.unparse(new_node).encode() + text[b:]
    return out.decode()


def cmd_rules(req):
    source = req["source"]
    tree = parse(source, "the target file")
    source_lines = source.splitlines(keepends=True)
    wanted = req.get("functions") or []
    per = int(req.get("per_function", 0))
    defs = top_defs(tree)
    names = [d.name for d in defs]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise Refusal(f"no top-level definition named {', '.join(unknown)} (the file defines {', '.join(names) or 'none'})")
    out = []
    for d in defs:
        if wanted and d.name not in wanted:
            continue
        made, seen = [], set()
        original = ast.dump(d)
        for path, rule, _ in sites(d):
            new, family, fault = mutate(d, path, rule)
            dump = ast.dump(new)
            if dump == original or dump in seen:
                continue
            seen.add(dump)
            made.append((family, fault, edited(source_lines, d, new, path, rule)))
        for n, (family, fault, code) in enumerate(spread(made, per), 1):
            out.append({"id": f"rule-{d.name}-{n}-{family}", "name": d.name, "code": code, "fault": fault})
    return {"mutants": out}


COMMANDS = {"defs": cmd_defs, "imports": cmd_imports, "apply": cmd_apply, "rules": cmd_rules}


def main():
    sys.setrecursionlimit(4000)
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        print(json.dumps({"error": f"usage: gatehouse_audit.py {'|'.join(COMMANDS)} < request.json"}))
        return 2
    try:
        req = json.load(sys.stdin)
        print(json.dumps(COMMANDS[sys.argv[1]](req)))
        return 0
    except Refusal as e:
        print(json.dumps({"error": str(e)}))
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(json.dumps({"error": f"bad request: {type(e).__name__}: {e}"}))
        return 2


if __name__ == "__main__":
    sys.exit(main())
