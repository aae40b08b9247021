"""Gatehouse's canary twins: generates, from a packet's hidden test
modules, twins of their tests that must fail wherever the original passes.

    python3 -I /gatehouse/gatehouse_twins.py OUT.json FILE...

For every test function (``test*`` at module level or in a module-level
class) the generator proposes up to ``MAX_TWINS`` (two) twins, each the same
function with ONE assertion changed so that it contradicts the original:

- an equality with a literal side gets another literal (``== 213`` becomes
  ``== 214``; ``True`` becomes ``False``; a string gains a character; a
  collection loses or changes an element), which an implementation that
  passes the original cannot also pass;
- any other assertion is negated (``==`` and ``!=``, ``is`` and ``is not``,
  ``in`` and ``not in``, ``<`` and ``>=``; ``assertTrue`` and
  ``assertFalse``, ``assertEqual`` and ``assertNotEqual``, ...);
- a test with no assertion of its own (its helpers assert) runs its body
  and then fails.

A twin of a parametrized test keeps only its first, middle and last rows
(``thin_rows``): it fails on each, and one contradicts the test as well as
all of them, at a fraction of the cost.

So a twin and its original both passing is a contradiction that no honest
implementation produces: the results were forged, the assertion was
neutered, or the value compares equal to anything. The grader calibrates the
twins on the packet's sample (a twin counts only where the original passes
and the twin fails, and what each costs is timed) and plants, in every
graded run, calibrated twins of some of the tests within a cost budget,
under fresh random names shared by every test, in a random order.

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

MAX_TWINS = 2
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


LIMIT = 1000


def value_of(node):
    """(True, value) when `node` is a constant expression (literals,
    containers of literals, arithmetic on them, such as ``[True] * 5 +
    [False]``), within small bounds; (False, None) otherwise."""
    try:
        v = _value(node)
    except (_NotConst, ArithmeticError, TypeError, ValueError, OverflowError, RecursionError):
        return False, None
    return True, v


class _NotConst(Exception):
    pass


def _bounded(v):
    if isinstance(v, (list, tuple, set, frozenset, dict, str, bytes)) and len(v) > LIMIT * 10:
        raise _NotConst()
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**30:
        raise _NotConst()
    return v


def _value(node):
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            raise _NotConst()
        return node.value
    if isinstance(node, ast.UnaryOp):
        v = _value(node.operand)
        if isinstance(node.op, ast.USub):
            return _bounded(-v)
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Not):
            return not v
        raise _NotConst()
    if isinstance(node, ast.BinOp):
        a, b = _value(node.left), _value(node.right)
        op = node.op
        if isinstance(op, ast.Mult):
            for x, y in ((a, b), (b, a)):
                if isinstance(x, (list, tuple, str, bytes)) and isinstance(y, int) and len(x) * max(y, 0) > LIMIT:
                    raise _NotConst()
            return _bounded(a * b)
        if isinstance(op, ast.Add):
            return _bounded(a + b)
        if isinstance(op, ast.Sub):
            return _bounded(a - b)
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return a // b
        if isinstance(op, ast.Mod) and not isinstance(a, (str, bytes)):
            return a % b
        if isinstance(op, ast.Pow) and isinstance(b, int) and abs(b) <= 64:
            return _bounded(a**b)
        raise _NotConst()
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_value(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _NotConst()
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    raise _NotConst()


def other_value(v):
    """A value unequal to `v` of the same shape, or raises _NotConst."""
    if isinstance(v, bool):
        return not v
    if v is None:
        return 0
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise _NotConst()
        return v * 2 + 1.5
    if isinstance(v, complex):
        return v + 1
    if isinstance(v, str):
        return "~" if not v else v[:-1] + ("~" if v[-1] != "~" else "^")
    if isinstance(v, bytes):
        return b"~" if not v else v[:-1] + (b"~" if v[-1:] != b"~" else b"^")
    if isinstance(v, (list, tuple)):
        items = list(v)
        if not items:
            items = [0]
        else:
            try:
                items[-1] = other_value(items[-1])
            except _NotConst:
                items.pop()
        return type(v)(items) if isinstance(v, tuple) else items
    if isinstance(v, (set, frozenset)):
        return type(v)(set(v) | {"~gatehouse~"})
    if isinstance(v, dict):
        out = dict(v)
        if out:
            k = list(out)[-1]
            out[k] = other_value(out[k])
        else:
            out["~"] = 0
        return out
    raise _NotConst()


def as_node(v):
    text = repr(v)
    if len(text) > 20000:
        raise _NotConst()
    node = ast.parse(text, mode="eval").body
    if _value(node) != v:
        raise _NotConst()
    return node


def is_approx(node):
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "approx") or (isinstance(f, ast.Name) and f.id == "approx")


def literal(node):
    """Whether `node` is an expected value a twin can replace: a constant
    expression, or ``approx(...)`` of one."""
    if isinstance(node, ast.Call) and is_approx(node) and node.args:
        return literal(node.args[0])
    return value_of(node)[0]


def changed(node):
    """Another constant, unequal to `node`'s value, or None."""
    if isinstance(node, ast.Call) and is_approx(node):
        inner = changed(node.args[0])
        if inner is None:
            return None
        out = copy.deepcopy(node)
        out.args[0] = inner
        return out
    ok, v = value_of(node)
    if not ok:
        return None
    try:
        return as_node(other_value(v))
    except (_NotConst, SyntaxError, ValueError, TypeError, ArithmeticError, RecursionError):
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
    ok, v = value_of(node)
    if ok and isinstance(v, (int, float)) and not isinstance(v, bool):
        return ast.Constant(value=v * 3 + 1000)
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


def expected_name(stmt):
    """The name an equality assertion compares with (``assert x ==
    expected``, ``self.assertEqual(x, expected)``), or None."""
    if isinstance(stmt, ast.Assert):
        t = stmt.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
            for side in (t.comparators[0], t.left):
                if isinstance(side, ast.Name):
                    return side.id
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        c = stmt.value
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr in EXPECT and len(c.args) >= 2:
            for side in (c.args[1], c.args[0]):
                if isinstance(side, ast.Name):
                    return side.id
    return None


def param_columns(fn):
    """`name` -> (decorator index, column) for each argument of a
    ``pytest.mark.parametrize`` decorator whose rows are literal."""
    out = {}
    for d, dec in enumerate(fn.decorator_list):
        if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "parametrize"):
            continue
        if len(dec.args) < 2 or not isinstance(dec.args[0], ast.Constant) or not isinstance(dec.args[0].value, str):
            continue
        names = [n.strip() for n in dec.args[0].value.split(",") if n.strip()]
        if not isinstance(dec.args[1], (ast.List, ast.Tuple)):
            continue
        for col, name in enumerate(names):
            out[name] = (d, col, len(names))
    return out


def row_values(row, width):
    """The value nodes of one parametrize row (a tuple, a list, a lone
    value, or ``pytest.param(...)``)."""
    if isinstance(row, ast.Call) and isinstance(row.func, ast.Attribute) and row.func.attr == "param":
        return row.args
    if width == 1:
        return None
    if isinstance(row, (ast.Tuple, ast.List)):
        return row.elts
    return None


def param_twin(fn, name, cols):
    """A twin whose parametrize rows expect another `name` in every row."""
    d, col, width = cols[name]
    twin = copy.deepcopy(fn)
    rows = twin.decorator_list[d].args[1].elts
    if not rows:
        return None
    for r, row in enumerate(rows):
        values = row_values(row, width)
        if values is None and width == 1:
            new = changed(row)
            if new is None:
                return None
            rows[r] = new
            continue
        if values is None or len(values) != width:
            return None
        new = changed(values[col])
        if new is None:
            return None
        values[col] = new
    ast.fix_missing_locations(twin)
    return twin


def assigned_twin(fn, name, before):
    """A twin whose one top-level ``name = <constant>`` (before the
    assertion) assigns another constant."""
    hits = [
        i
        for i, st in enumerate(fn.body)
        if isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name)
        and st.targets[0].id == name
    ]
    if len(hits) != 1 or hits[0] >= before:
        return None
    i = hits[0]
    new = changed(fn.body[i].value)
    if new is None:
        return None
    twin = copy.deepcopy(fn)
    twin.body[i].value = new
    ast.fix_missing_locations(twin)
    return twin


def twins(fn):
    """Up to MAX_TWINS twins of `fn`: twins that expect another value
    first (a literal in the assertion, the local it compares with, or the
    parametrize column it compares with), then negations; within each, the
    last assertion first, then the first, then the others."""
    sites = assertion_sites(fn)
    if not sites:
        return [tail_twin(fn)] if fn.body else []
    order = [len(sites) - 1, 0] + list(range(1, len(sites) - 1))
    order = list(dict.fromkeys(order))
    cols = param_columns(fn)
    candidates = []
    for rank, n in enumerate(order):
        body, i = sites[n]
        name = expected_name(body[i])
        # A name that is also an input (`f(code) == code`) is another test
        # when changed, not a contradiction: only names used nowhere but as
        # the expected side of assertions are changed.
        if name is not None and only_expected(fn, name):
            twin = None
            if name in cols:
                twin = param_twin(fn, name, cols)
            elif body is fn.body:
                twin = assigned_twin(fn, name, i)
            target = locate(twin, fn, body, i) if twin is not None else None
            if target is not None:
                guard(twin, *target)
                candidates.append((0, rank, twin, "line %d: expects another %s" % (body[i].lineno, name)))
        for new, what in variants(body[i]):
            twin = copy.deepcopy(fn)
            target = locate(twin, fn, body, i)
            if target is None:
                continue
            tbody, ti = target
            tbody[ti] = new
            ast.copy_location(new, body[i])
            guard(twin, tbody, ti)
            ast.fix_missing_locations(twin)
            value = what == "expects another value"
            candidates.append((0 if value else 1, rank, twin, "line %d: %s" % (body[i].lineno, what)))
    candidates.sort(key=lambda c: (c[0], c[1]))
    return [(thin_rows(t), what) for _, _, t, what in candidates[:MAX_TWINS]]


# A twin of a parametrized test keeps at most this many of its rows.
TWIN_ROWS = 3


def thin_rows(twin):
    """`twin` with each literal ``parametrize`` list cut to its first,
    middle and last rows (and a literal ``ids`` list alike): a twin fails on
    every row, and one row contradicts its test as well as all of them, at
    a fraction of the cost. A decorator whose ``ids`` is not a literal list
    of the same length keeps its rows."""
    for dec in twin.decorator_list:
        if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "parametrize"):
            continue
        if len(dec.args) < 2 or not isinstance(dec.args[1], (ast.List, ast.Tuple)):
            continue
        rows = dec.args[1].elts
        if len(rows) <= TWIN_ROWS:
            continue
        keep = sorted({0, len(rows) // 2, len(rows) - 1})
        ids = [k for k in dec.keywords if k.arg == "ids"]
        if ids:
            v = ids[0].value
            if not isinstance(v, (ast.List, ast.Tuple)) or len(v.elts) != len(rows):
                continue
            v.elts = [v.elts[i] for i in keep]
        dec.args[1].elts = [rows[i] for i in keep]
    return twin


REACHED = "_gatehouse_reached"


def uses(node, name):
    """How many times `node` reads the name `name`."""
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))


def only_expected(fn, name):
    """Whether `fn` reads `name` only as the expected side of its
    assertions (once in each), never as an input."""
    total = sum(uses(st, name) for st in fn.body)
    expected = sum(1 for body, i in assertion_sites(fn) if expected_name(body[i]) == name and uses(body[i], name) == 1)
    return total == expected


def guard(twin, tbody, ti):
    """Makes `twin` fail unless its changed assertion `tbody[ti]` ran: a
    mark just before it, checked in a ``finally`` around the whole body
    (an early return, an empty loop or a branch not taken is no
    contradiction, so the twin must not pass by skipping it)."""
    anchor = tbody[ti]
    mark = ast.parse("%s[0] = 1" % REACHED).body[0]
    tbody.insert(ti, mark)
    init = ast.parse("%s = [0]" % REACHED).body[0]
    check = ast.parse("if not %s[0]:\n    raise AssertionError('gatehouse canary: not reached')" % REACHED).body[0]
    wrapped = ast.Try(body=twin.body, handlers=[], orelse=[], finalbody=[check])
    for node in (mark, init, check, wrapped):
        ast.copy_location(node, anchor)
    twin.body = [init, wrapped]
    ast.fix_missing_locations(twin)


def tail_twin(fn):
    """A test whose assertions live in helpers it calls: its twin runs the
    same body and then fails however the body ends (a ``finally``: an
    early return is no way out), so it passes only if the failure was
    forged away or assertions were neutered."""
    twin = copy.deepcopy(fn)
    last = fn.body[-1]
    stmt = ast.parse("raise AssertionError('gatehouse canary: after the last statement')").body[0]
    wrapped = ast.Try(body=twin.body, handlers=[], orelse=[], finalbody=[stmt])
    ast.copy_location(stmt, last)
    ast.copy_location(wrapped, fn.body[0])
    twin.body = [wrapped]
    ast.fix_missing_locations(twin)
    return twin, "line %d: fails after the test's last statement" % last.end_lineno


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
