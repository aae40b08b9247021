// Gatehouse's canary generator for TypeScript test files (see
// grader/src/canary and grader/src/lang_node.rs): the TypeScript
// counterpart of gatehouse_twins.py, read with the TypeScript compiler's
// own parser (the grader's pinned compiler, never the submission's).
//
//   node /gatehouse/gatehouse_ts_twins.js TYPESCRIPT OUT.json FILE...
//
// TYPESCRIPT is the compiler's module folder. For each FILE it writes a
// template: its text, with every node:test test (`test("name", fn)` or
// `it(...)`, at the top level or in `describe`/`suite` callbacks) as a slot
// holding the statement (its name replaced by "__GH_NAME__", its indent
// taken off) and up to two twins, each the same test with one assertion
// changed to contradict the original: a twin that expects another value
// changes the literal an equality assertion expects (a number, string or
// boolean, or the last element of an array literal); a negation turns
// `equal` into `notEqual` (and each equality alike), `ok(x)` and
// `assert(x)` into `ok(!(x))`, `match` into `doesNotMatch`. A test whose
// assertions live in helpers gets a twin that fails after its body
// (`finally`). Calibration keeps only the twins that fail where their test
// passes.
//
// Output (JSON), as gatehouse_twins.py's: for each FILE, its parts in
// order: {"text": ...} (kept verbatim) or {"slot": N, "indent": ...,
// "name": ..., "code": ..., "twins": [{"code": ..., "what": ...}]}; or
// {"error": ...} when the file does not parse. A test whose name is not a
// plain string, appears twice in its file, whose statement shares a line
// with other code, or one of whose lines lacks its indent (a multi-line
// template literal) stays text.
"use strict";

const fs = require("fs");

const NAME = "__GH_NAME__";
const MAX_TWINS = 2;
// The twin's mark that its changed assertion ran.
const REACHED = "ghReached_";
const NEGATE = {
  equal: "notEqual",
  notEqual: "equal",
  strictEqual: "notStrictEqual",
  notStrictEqual: "strictEqual",
  deepEqual: "notDeepEqual",
  notDeepEqual: "deepEqual",
  deepStrictEqual: "notDeepStrictEqual",
  notDeepStrictEqual: "deepStrictEqual",
  match: "doesNotMatch",
  doesNotMatch: "match",
};
const EXPECTS = new Set(["equal", "strictEqual", "deepEqual", "deepStrictEqual"]);

function main() {
  const [tsPath, out, ...files] = process.argv.slice(2);
  if (!out) {
    process.stderr.write("usage: gatehouse_ts_twins.js TYPESCRIPT OUT.json FILE...\n");
    process.exit(2);
  }
  const ts = require(tsPath);
  const result = {};
  for (const f of files) {
    try {
      result[f] = generate(ts, f, fs.readFileSync(f, "utf8"));
    } catch (e) {
      result[f] = { parts: [], error: String((e && e.message) || e) };
    }
  }
  fs.writeFileSync(out, JSON.stringify(result));
}

function generate(ts, file, src) {
  const sf = ts.createSourceFile(file, src, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  if (sf.parseDiagnostics && sf.parseDiagnostics.length > 0) {
    const d = sf.parseDiagnostics[0];
    return { parts: [], error: ts.flattenDiagnosticMessageText(d.messageText, "\n") };
  }
  // The names node:assert is imported under.
  const asserts = new Set();
  for (const st of sf.statements) {
    if (!ts.isImportDeclaration(st) || !ts.isStringLiteral(st.moduleSpecifier)) continue;
    if (!/^(node:)?assert(\/strict)?$/.test(st.moduleSpecifier.text)) continue;
    const c = st.importClause;
    if (!c) continue;
    if (c.name) asserts.add(c.name.text);
    const b = c.namedBindings;
    if (b && ts.isNamespaceImport(b)) asserts.add(b.name.text);
    if (b && ts.isNamedImports(b)) {
      for (const e of b.elements) {
        const imported = (e.propertyName || e.name).text;
        if (imported === "strict" || imported === "default") asserts.add(e.name.text);
      }
    }
  }
  const tests = [];
  const visit = (statements) => {
    for (const st of statements) {
      if (!ts.isExpressionStatement(st) || !ts.isCallExpression(st.expression)) continue;
      const call = st.expression;
      if (!ts.isIdentifier(call.expression)) continue;
      const callee = call.expression.text;
      const fn = call.arguments.find((a) => ts.isArrowFunction(a) || ts.isFunctionExpression(a));
      if (!fn) continue;
      if (callee === "describe" || callee === "suite") {
        if (ts.isBlock(fn.body)) visit(fn.body.statements);
      } else if ((callee === "test" || callee === "it") && call.arguments.length >= 2) {
        const name = call.arguments[0];
        if (ts.isStringLiteral(name) || ts.isNoSubstitutionTemplateLiteral(name)) {
          tests.push({ st, name, fn });
        }
      }
    }
  };
  visit(sf.statements);

  const parts = [];
  let cursor = 0;
  let slot = 0;
  const lineStart = (pos) => src.lastIndexOf("\n", pos - 1) + 1;
  for (const { st, name, fn } of tests) {
    const start = st.getStart(sf);
    const end = st.getEnd();
    const ls = lineStart(start);
    const indent = src.slice(ls, start);
    const eol = src.indexOf("\n", end);
    const rest = src.slice(end, eol === -1 ? src.length : eol);
    if (!/^[ \t]*$/.test(indent) || !/^[ \t]*$/.test(rest) || ls < cursor) continue;
    if (src.split(name.text).length !== 2 || src.includes(NAME)) continue;
    // The grader puts the indent back on every line that is not empty: a
    // line that lacks it, or is blank but for it (a multi-line template
    // literal), would come back changed, so such a test stays text.
    const lines = src.slice(ls, end).split("\n").slice(1);
    if (!lines.every((l) => l === "" || (l.startsWith(indent) && l.length > indent.length))) continue;
    const edits = (more) => render(src, ls, end, indent, [
      { from: name.getStart(sf), to: name.getEnd(), text: JSON.stringify(NAME) },
      ...more,
    ]);
    const twins = twinsOf(ts, sf, src, fn, asserts).slice(0, MAX_TWINS)
      .map((t) => ({ code: edits(t.edits), what: t.what }));
    if (ls > cursor) parts.push({ text: src.slice(cursor, ls) });
    parts.push({ slot, indent, name: name.text, code: edits([]), twins });
    slot += 1;
    cursor = eol === -1 ? src.length : eol + 1;
  }
  if (cursor < src.length) parts.push({ text: src.slice(cursor) });
  return { parts };
}

// The statement [from, to) with `edits` applied and `indent` taken off
// each line that has it.
function render(src, from, to, indent, edits) {
  let text = src.slice(from, to);
  for (const e of [...edits].sort((a, b) => b.from - a.from)) {
    text = text.slice(0, e.from - from) + e.text + text.slice(e.to - from);
  }
  return text
    .split("\n")
    .map((l) => (indent && l.startsWith(indent) ? l.slice(indent.length) : l))
    .join("\n");
}

function lineOf(sf, node) {
  return sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
}

// Up to MAX_TWINS twins' edits: value twins first, then negations; within
// each, the last assertion first, then the first, then the others. With
// no assertion, the twin that fails after the body.
function twinsOf(ts, sf, src, fn, asserts) {
  const sites = [];
  const walk = (node) => {
    if (node !== fn && (ts.isArrowFunction(node) || ts.isFunctionExpression(node) ||
        ts.isFunctionDeclaration(node))) {
      return;
    }
    if (ts.isCallExpression(node)) {
      const c = node.expression;
      if (ts.isIdentifier(c) && asserts.has(c.text)) {
        sites.push({ node, method: "ok" });
      } else if (ts.isPropertyAccessExpression(c) && ts.isIdentifier(c.expression) &&
                 asserts.has(c.expression.text)) {
        sites.push({ node, method: c.name.text, prop: c.name });
      }
    }
    ts.forEachChild(node, walk);
  };
  ts.forEachChild(fn.body, walk);
  const usable = sites.filter((s) => s.node.arguments.length > 0 &&
    (s.method === "ok" || NEGATE[s.method]));
  if (usable.length === 0) {
    if (!ts.isBlock(fn.body) || fn.body.statements.length === 0) return [];
    const open = fn.body.getStart(sf) + 1;
    const close = fn.body.getEnd() - 1;
    const last = fn.body.statements[fn.body.statements.length - 1];
    return [{
      edits: [
        { from: open, to: open, text: " try {" },
        { from: close, to: close,
          text: "} finally { throw new Error(\"gatehouse canary: after the last statement\"); }\n" },
      ],
      what: `line ${lineOf(sf, last)}: fails after the test's last statement`,
    }];
  }
  const order = [usable.length - 1, 0, ...usable.map((_, i) => i).slice(1, -1)]
    .filter((v, i, a) => a.indexOf(v) === i);
  if (src.includes(REACHED)) return [];
  // A twin fails unless its changed assertion ran (an empty loop or a
  // branch not taken is no contradiction): a mark set as the assertion
  // starts, tested in a `finally` around the body. A body that is one
  // expression always runs it.
  const guard = (call) => {
    if (!ts.isBlock(fn.body)) return [];
    const open = fn.body.getStart(sf) + 1;
    const close = fn.body.getEnd() - 1;
    return [
      { from: open, to: open, text: ` let ${REACHED} = false; try {` },
      { from: close, to: close,
        text: `} finally { if (!${REACHED}) throw new Error("gatehouse canary: not reached"); }\n` },
      { from: call.getStart(sf), to: call.getStart(sf), text: `(${REACHED} = true, ` },
      { from: call.getEnd(), to: call.getEnd(), text: ")" },
    ];
  };
  const values = [];
  const negations = [];
  for (const i of order) {
    const s = usable[i];
    const line = lineOf(sf, s.node);
    if (EXPECTS.has(s.method) && s.node.arguments.length >= 2) {
      const e = anotherValue(ts, sf, s.node.arguments[1]);
      if (e) values.push({ edits: [e, ...guard(s.node)], what: `line ${line}: expects another value` });
    }
    if (s.method === "ok") {
      const a = s.node.arguments[0];
      negations.push({
        edits: [{ from: a.getStart(sf), to: a.getEnd(), text: `!(${a.getText(sf)})` }, ...guard(s.node)],
        what: `line ${line}: the assertion negated`,
      });
    } else {
      negations.push({
        edits: [{ from: s.prop.getStart(sf), to: s.prop.getEnd(), text: NEGATE[s.method] }, ...guard(s.node)],
        what: `line ${line}: the assertion negated`,
      });
    }
  }
  return [...values, ...negations];
}

// An edit that makes `expected` another value, when it is a literal (or
// an array literal ending in one).
function anotherValue(ts, sf, expected) {
  let node = expected;
  if (ts.isArrayLiteralExpression(node)) {
    if (node.elements.length === 0) return null;
    node = node.elements[node.elements.length - 1];
  }
  const at = { from: node.getStart(sf), to: node.getEnd() };
  if (ts.isNumericLiteral(node) ||
      (ts.isPrefixUnaryExpression(node) && ts.isNumericLiteral(node.operand))) {
    return { ...at, text: `(${node.getText(sf)} + 1)` };
  }
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    return { ...at, text: JSON.stringify(node.text + "~") };
  }
  if (node.kind === ts.SyntaxKind.TrueKeyword) return { ...at, text: "false" };
  if (node.kind === ts.SyntaxKind.FalseKeyword) return { ...at, text: "true" };
  return null;
}

main();
