"""Gatehouse's canary twins: generates, from a packet's hidden test
modules, twins of their tests that must fail wherever the original passes.

    python3 -I /gatehouse/gatehouse_twins.py OUT.json FILE...

For every test function (``test*`` at module level or in a module-level
class) the generator proposes up to ``MAX_TWINS`` twins, each the same
function with ONE assertion changed so that it contradicts the original:

- an equality with a literal side gets another literal (``== 213`` becomes
  ``== 214``; ``True`` becomes ``False``; a string gains a character; a
  collection loses or changes an element), which an implementation that
  passes the original cannot also pass;
- any other assertion is negated (``==`` and ``!=``, ``is`` and ``is not``,
  ``in`` and ``not in``, ``<`` and ``>=``; ``assertTrue`` and
  ``assertFalse``, ``assertEqual`` and ``assertNotEqual``, ...).

So a twin and its original both passing is a contradiction that no honest
implementation produces: the results were forged, the assertion was
neutered, or the value compares equal to anything. The grader calibrates the
twins on the packet's sample (a twin counts only where the original passes
and the twin fails) and plants, in every graded run, one calibrated twin per
test, under fresh random names shared by every test, in a random order.

Output (JSON): for each file, its parts in order: ``{"text": ...}`` (kept
verbatim) or ``{"slot": N, "indent": ..., "name": ..., "class": ...,
"code": ..., "twins": [{"code": ..., "what": ...}]}``, where ``code`` is
the function as ``ast.unparse`` writes it with its name replaced by
``__GH_NAME__``. Tests the generator leaves as they are (their name is used
elsewhere in the module, or they share a line with other code) stay text.
"""

import ast
import copy
import json
import sys

MAX_TWINS = 3
NAME = "__GH_NAME__"

# unittest assertion methods and their negations.
NEGATE = {
    "assertEqual": "assertNotEqual",
    "assertEquals": "assertNotEqual",
    "assertNotEqual": "assertEqual",
    "assertTrue": "assertFalse",
    "assertFalse": "assertTrue",
    "assertIs": "assertIsNot",
    "assertIsNot": "assertIs",
    "assertIsNone": "assertIsNotNone",
    "assertIsNotNone": "assertIsNone",
    "assertIn": "assertNotIn",
    "assertNotIn": "assertIn",
    "assertIsInstance": "assertNotIsInstance",
    "assertNotIsInstance": "assertIsInstance",
    "assertGreater": "assertLessEqual",
    "assertGreaterEqual": "assertLess",
    "assertLess": "assertGreaterEqual",
    "assertLessEqual": "assertGreater",
    "assertAlmostEqual": "assertNotAlmostEqual",
    "assertNotAlmostEqual": "assertAlmostEqual",
    "assertRegex": "assertNotRegex",
    "assertNotRegex": "assertRegex",
}
# Methods whose second argument is an expected value a literal can replace.
EXPECT = {
    "assertEqual",
    "assertEquals",
    "assertAlmostEqual",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSetEqual",
    "assertSequenceEqual",
    "assertCountEqual",
    "assertMultiLineEqual",
}
NEG_OP = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
}


def literal(node):
    """Whether `node` is a literal value (possibly nested, or negated)."""
    if isinstance(node, ast.Constant):
        return not isinstance(node.value, type(Ellipsis))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float))
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and literal(k) for k in node.keys) and all(literal(v) for v in node.values)
    if isinstance(node, ast.Call) and is_approx(node) and node.args:
        return literal(node.args[0])
    return False


def is_approx(node):
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "approx") or (isinstance(f, ast.Name) and f.id == "approx")


def changed(node):
    """Another literal, unequal to `node`'s value, or None."""
    if isinstance(node, ast.Call) and is_approx(node):
        inner = changed(node.args[0])
        if inner is None:
            return None
        out = copy.deepcopy(node)
        out.args[0] = inner
        return out
    if isinstance(node, ast.UnaryOp):
        v = node.operand.value
        v = -v if isinstance(node.op, ast.USub) else v
        return ast.Constant(value=v - 1 if isinstance(v, int) else v * 2 - 1.5)
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            return ast.Constant(value=not v)
        if v is None:
            return ast.Constant(value=0)
        if isinstance(v, int):
            return ast.Constant(value=v + 1)
        if isinstance(v, float):
            return ast.Constant(value=v * 2 + 1.5)
        if isinstance(v, complex):
            return ast.Constant(value=v + 1)
        if isinstance(v, str):
            return ast.Constant(value=v + "~" if not v else v[:-1] + ("~" if v[-1] != "~" else "^"))
        if isinstance(v, bytes):
            return ast.Constant(value=v + b"~" if not v else v[:-1] + (b"~" if v[-1:] != b"~" else b"^"))
        return None
    if isinstance(node, (ast.List, ast.Tuple)):
        out = copy.deepcopy(node)
        if out.elts:
            inner = changed(out.elts[-1])
            if inner is None:
                out.elts.pop()
            else:
                out.elts[-1] = inner
        else:
            out.elts.append(ast.Constant(value=0))
        return out
    if isinstance(node, ast.Set):
        out = copy.deepcopy(node)
        out.elts.append(ast.Constant(value="~gatehouse~"))
        return out
    if isinstance(node, ast.Dict):
        out = copy.deepcopy(node)
        if out.values:
            inner = changed(out.values[-1])
            if inner is None:
                return None
            out.values[-1] = inner
        else:
            out.keys.append(ast.Constant(value="~"))
            out.values.append(ast.Constant(value=0))
        return out
    return None


def variants(stmt):
    """The contradicting versions of one assertion statement, each with a
    short description."""
    out = []
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op = type(test.ops[0])
            left, right = test.left, test.comparators[0]
            if op is ast.Eq and (literal(right) or literal(left)):
                if literal(right):
                    new = changed(right)
                    if new is not None:
                        t = copy.deepcopy(test)
                        t.comparators[0] = new
                        out.append((ast.Assert(test=t, msg=stmt.msg), "expects another value"))
                else:
                    new = changed(left)
                    if new is not None:
                        t = copy.deepcopy(test)
                        t.left = new
                        out.append((ast.Assert(test=t, msg=stmt.msg), "expects another value"))
            if op in NEG_OP:
                t = copy.deepcopy(test)
                t.ops = [NEG_OP[op]()]
                out.append((ast.Assert(test=t, msg=stmt.msg), "negated"))
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            out.append((ast.Assert(test=copy.deepcopy(test.operand), msg=stmt.msg), "negated"))
        else:
            t = ast.UnaryOp(op=ast.Not(), operand=copy.deepcopy(test))
            out.append((ast.Assert(test=t, msg=stmt.msg), "negated"))
        return out
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        f = call.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"):
            return out
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return out
        if f.attr in EXPECT and len(call.args) >= 2:
            for i in (1, 0):
                if literal(call.args[i]):
                    new = changed(call.args[i])
                    if new is not None:
                        c = copy.deepcopy(call)
                        c.args[i] = new
                        if f.attr in ("assertAlmostEqual",):
                            # Far outside any tolerance a test would give.
                            c.args[i] = far(call.args[i]) or new
                        out.append((ast.Expr(value=c), "expects another value"))
                    break
        if f.attr in NEGATE:
            c = copy.deepcopy(call)
            c.func.attr = NEGATE[f.attr]
            # assertAlmostEqual(a, b, delta=...) keeps its tolerance.
            out.append((ast.Expr(value=c), "negated"))
    return out


def far(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return ast.Constant(value=node.value * 3 + 1000)
    return None


def assertion_sites(fn):
    """Every assertion statement of `fn`, in order, with the list and index
    holding it (in nested blocks too, but never inside a nested function or
    class)."""
    sites = []

    def walk(body):
        for i, stmt in enumerate(body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if variants(stmt):
                sites.append((body, i))
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    walk(inner)
            for h in getattr(stmt, "handlers", []) or []:
                walk(h.body)
            for case in getattr(stmt, "cases", []) or []:
                walk(case.body)

    walk(fn.body)
    return sites


def twins(fn):
    """Up to MAX_TWINS twins of `fn`: the first and the last assertion
    first (changed value before negation), then the others."""
    sites = assertion_sites(fn)
    if not sites:
        return []
    order = [len(sites) - 1, 0] + list(range(1, len(sites) - 1))
    seen = set()
    out = []
    for n in order:
        if n in seen:
            continue
        seen.add(n)
        body, i = sites[n]
        for new, what in variants(body[i]):
            twin = copy.deepcopy(fn)
            # Find the same statement in the copy by position.
            target = locate(twin, fn, body, i)
            if target is None:
                continue
            tbody, ti = target
            tbody[ti] = new
            ast.copy_location(new, body[i])
            ast.fix_missing_locations(twin)
            line = body[i].lineno
            out.append((twin, "line %d: %s" % (line, what)))
            if len(out) >= MAX_TWINS:
                return out
    return out


def locate(twin, fn, body, i):
    """The (list, index) in `twin` (a deep copy of `fn`) matching `body[i]` in `fn`."""
    pairs = [(fn, twin)]
    while pairs:
        a, b = pairs.pop()
        for field, value in ast.iter_fields(a):
            other = getattr(b, field, None)
            if isinstance(value, list):
                if value is body:
                    return other, i
                for x, y in zip(value, other):
                    if isinstance(x, ast.AST):
                        pairs.append((x, y))
            elif isinstance(value, ast.AST):
                pairs.append((value, other))
    return None


def render(fn):
    fn = copy.deepcopy(fn)
    fn.name = NAME
    return ast.unparse(fn)


def generate(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    tree = ast.parse(src, filename=path)
    lines = src.splitlines(keepends=True)
    # Names used anywhere but in their own def: such tests keep their name.
    used = set()
    defs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)
    candidates = []
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            candidates.append((top, None))
        elif isinstance(top, ast.ClassDef):
            for member in top.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    candidates.append((member, top.name))
            defs.add(top.name)
    # Line spans taken by other statements, to refuse shared lines.
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            spans.append((node.lineno, node.end_lineno))
    parts = []
    cursor = 1
    slot = 0
    for fn, cls in candidates:
        if not fn.name.startswith("test") or fn.name in used:
            continue
        start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        end = fn.end_lineno
        first = lines[start - 1]
        indent = first[: len(first) - len(first.lstrip())]
        if first[: fn.col_offset].strip():
            continue
        shared = False
        for a, b in spans:
            if (a <= end and b >= start) and not (a >= start and b <= end) and not (a <= start and b >= end):
                shared = True
                break
        tail = lines[end - 1][fn.end_col_offset :].strip()
        if shared or (tail and not tail.startswith("#")):
            continue
        if start > cursor:
            parts.append({"text": "".join(lines[cursor - 1 : start - 1])})
        tw = [{"code": render(t), "what": what} for t, what in twins(fn)]
        parts.append(
            {
                "slot": slot,
                "indent": indent,
                "name": fn.name,
                "class": cls,
                "code": render(fn),
                "twins": tw,
            }
        )
        slot += 1
        cursor = end + 1
    if cursor <= len(lines):
        parts.append({"text": "".join(lines[cursor - 1 :])})
    return {"parts": parts}


def main():
    if len(sys.argv) < 3:
        print("usage: gatehouse_twins.py OUT.json FILE...", file=sys.stderr)
        sys.exit(2)
    out = {}
    for path in sys.argv[2:]:
        try:
            out[path] = generate(path)
        except (SyntaxError, ValueError, RecursionError, UnicodeDecodeError) as e:
            out[path] = {"error": "%s: %s" % (type(e).__name__, e)}
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(out, f, sort_keys=True)


if __name__ == "__main__":
    main()
