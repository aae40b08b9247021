// Gatehouse's mutation-audit helper for TypeScript: the TypeScript
// counterpart of gatehouse_audit.py (see grader/src/audit), read with the
// grader's pinned TypeScript compiler (its parser and its type checker),
// never the submission's. It never runs the code it is given.
//
//   node /gatehouse/gatehouse_audit_ts.js TYPESCRIPT COMMAND REQUEST.json ANSWER.json
//
// TYPESCRIPT is the compiler's module folder (its `@types` sibling gives
// Node's types). It runs in the grading sandbox, on a copy of the request.
//
// Commands (the request and answer are JSON files):
//
// `defs`    {source, path} -> {defs: [{name, kind, line, end_line, signature}]}
// `imports` {source} -> {modules: [module specifiers, in order]}
// `rules`   {source, path, context, functions, per_function}
//           -> {mutants: [{id, name, code, fault}]}
// `apply`   {source, path, context, proposals: [{id, code}]}
//           -> {results: [{ok: true, name, source} | {ok: false, reason}]}
//
// `context` maps the workspace paths of the sample's other TypeScript
// files to their text, so the target type-checks as it would in place.
// A definition is a top-level function, class or variable statement with
// a value (interfaces and type aliases have no behaviour). A mutant
// replaces one definition (its whole lines); it is valid when it parses
// as one definition of the same kind and name, keeps its signature (a
// function's header; a class's heritage and the headers of its members
// that are not private), differs from the sample after normalisation
// (comments and layout do not count), and the mutated file type-checks
// with no error the sample's file does not have. Rule mutants edit one
// node of the parser's tree, by its span, and only valid ones are
// returned. Any error in the request itself is {"error": "..."}.
"use strict";

const fs = require("fs");
const path = require("path");

class Refusal extends Error {}

let ts;
let TYPE_ROOTS;

function main() {
  const [tsPath, command, reqPath, outPath] = process.argv.slice(2);
  if (!outPath || !COMMANDS[command]) {
    process.stderr.write(`usage: gatehouse_audit_ts.js TYPESCRIPT ${Object.keys(COMMANDS).join("|")} REQUEST.json ANSWER.json\n`);
    process.exit(2);
  }
  ts = require(tsPath);
  TYPE_ROOTS = [path.join(path.dirname(tsPath), "@types")];
  let answer;
  try {
    const req = JSON.parse(fs.readFileSync(reqPath, "utf8"));
    answer = COMMANDS[command](req);
  } catch (e) {
    answer = e instanceof Refusal
      ? { error: e.message }
      : { error: `bad request: ${(e && e.stack) || e}` };
  }
  fs.writeFileSync(outPath, JSON.stringify(answer));
}

// ---------------------------------------------------------------- parsing

function parse(text, what, fileName = "target.ts") {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const d = sf.parseDiagnostics && sf.parseDiagnostics[0];
  if (d) {
    const line = sf.getLineAndCharacterOfPosition(d.start || 0).line + 1;
    throw new Refusal(`${what} does not parse: ${ts.flattenDiagnosticMessageText(d.messageText, " ")} (line ${line})`);
  }
  return sf;
}

// A syntax kind's name (not an alias such as `FirstStatement`).
function kindName(kind) {
  for (const [name, value] of Object.entries(ts.SyntaxKind)) {
    if (value === kind && !/^(First|Last)/.test(name)) return name;
  }
  return String(ts.SyntaxKind[kind]);
}

function lineOf(sf, pos) {
  return sf.getLineAndCharacterOfPosition(pos).line + 1;
}

function modifiersOf(node) {
  return (ts.canHaveModifiers(node) && ts.getModifiers(node)) || [];
}

function hasModifier(node, kind) {
  return modifiersOf(node).some((m) => m.kind === kind);
}

// The definitions of a file: [{node, name, kind}], in order.
function topDefs(sf) {
  const out = [];
  for (const st of sf.statements) {
    if (ts.isFunctionDeclaration(st) && st.name && st.body) {
      out.push({ node: st, name: st.name.text, kind: "function" });
    } else if (ts.isClassDeclaration(st) && st.name) {
      out.push({ node: st, name: st.name.text, kind: "class" });
    } else if (ts.isVariableStatement(st)) {
      const decls = st.declarationList.declarations;
      if (decls.length > 0 && decls.every((d) => ts.isIdentifier(d.name)) && decls.some((d) => d.initializer)) {
        out.push({ node: st, name: decls[0].name.text, kind: "variable" });
      }
    }
  }
  return out;
}

// Every top-level name the file declares (its surface).
function topNames(sf) {
  const names = [];
  for (const st of sf.statements) {
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) {
        if (ts.isIdentifier(d.name)) names.push(d.name.text);
      }
    } else if (st.name && ts.isIdentifier(st.name)) {
      names.push(st.name.text);
    }
  }
  return names.sort();
}

const PRINTER = () => ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed });

function printed(node, sf) {
  return PRINTER().printNode(ts.EmitHint.Unspecified, node, sf).replace(/\s+/g, " ").trim().replace(/;$/, "");
}

function isPrivate(member) {
  return hasModifier(member, ts.SyntaxKind.PrivateKeyword) ||
    (member.name && ts.isPrivateIdentifier(member.name));
}

// A definition's public shape: what its callers see.
function signature(def, sf) {
  const f = ts.factory;
  const n = def.node;
  if (def.kind === "function") {
    return printed(f.updateFunctionDeclaration(n, n.modifiers, n.asteriskToken, n.name,
      n.typeParameters, n.parameters, n.type, undefined), sf);
  }
  if (def.kind === "variable") {
    const list = n.declarationList;
    const kind = list.flags & ts.NodeFlags.Const ? "const" : list.flags & ts.NodeFlags.Let ? "let" : "var";
    const decls = list.declarations.map((d) => {
      let s = d.name.text + (d.type ? `: ${printed(d.type, sf)}` : "");
      const init = d.initializer;
      if (init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init))) {
        const params = init.parameters.map((p) => printed(p, sf)).join(", ");
        s += ` = (${params})${init.type ? `: ${printed(init.type, sf)}` : ""}`;
      }
      return s;
    });
    const mods = modifiersOf(n).map((m) => printed(m, sf)).join(" ");
    return `${mods ? `${mods} ` : ""}${kind} ${decls.join(", ")}`;
  }
  // A class: its header, then the headers of its members that are not private.
  const header = printed(f.updateClassDeclaration(n, n.modifiers, n.name, n.typeParameters,
    n.heritageClauses, []), sf);
  const members = [];
  for (const m of n.members) {
    if (ts.isConstructorDeclaration(m)) {
      members.push(printed(f.updateConstructorDeclaration(m, m.modifiers, m.parameters, undefined), sf));
    } else if (isPrivate(m)) {
      continue;
    } else if (ts.isMethodDeclaration(m)) {
      members.push(printed(f.updateMethodDeclaration(m, m.modifiers, m.asteriskToken, m.name,
        m.questionToken, m.typeParameters, m.parameters, m.type, undefined), sf));
    } else if (ts.isPropertyDeclaration(m)) {
      members.push(printed(f.updatePropertyDeclaration(m, m.modifiers, m.name,
        m.questionToken || m.exclamationToken, m.type, undefined), sf));
    } else if (ts.isGetAccessorDeclaration(m)) {
      members.push(printed(f.updateGetAccessorDeclaration(m, m.modifiers, m.name, m.parameters,
        m.type, undefined), sf));
    } else if (ts.isSetAccessorDeclaration(m)) {
      members.push(printed(f.updateSetAccessorDeclaration(m, m.modifiers, m.name, m.parameters,
        undefined), sf));
    } else if (ts.isIndexSignatureDeclaration(m)) {
      members.push(printed(m, sf));
    }
  }
  return `${header.replace(/\{\s*\}$/, "").trim()}: ${members.join("; ")}`;
}

// The tree without positions, comments or layout: equal dumps are the
// same code.
function dump(node) {
  const parts = [];
  const walk = (n) => {
    parts.push(n.kind);
    if (ts.isIdentifier(n) || ts.isPrivateIdentifier(n)) parts.push(n.text);
    else if (ts.isLiteralExpression(n) || ts.isTemplateLiteralToken(n)) parts.push(JSON.stringify(n.text));
    if (typeof n.operator === "number") parts.push(`op${n.operator}`);
    if (ts.isVariableDeclarationList(n)) parts.push(`f${n.flags & (ts.NodeFlags.Let | ts.NodeFlags.Const)}`);
    parts.push("(");
    ts.forEachChild(n, walk);
    parts.push(")");
  };
  walk(node);
  return parts.join(" ");
}

// ---------------------------------------------------------------- type checking

const OPTIONS = () => ({
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.CommonJS,
  esModuleInterop: true,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  typeRoots: TYPE_ROOTS,
  types: ["node"],
});

// A checker over the workspace: `files` maps absolute paths to text; the
// library and Node's types come from the compiler's own folder.
class Checker {
  constructor(context) {
    this.root = "/gatehouse-audit-workspace";
    this.context = new Map();
    for (const [p, text] of Object.entries(context || {})) {
      this.context.set(path.posix.join(this.root, p), text);
    }
    this.options = OPTIONS();
    this.program = undefined;
    this.texts = new Map();
  }

  // The program with `text` as the file at `rel`, reusing the last one's
  // unchanged files.
  check(rel, text) {
    const abs = path.posix.join(this.root, rel);
    const files = new Map(this.context);
    files.set(abs, text);
    const base = ts.createCompilerHost(this.options, true);
    const cache = this.texts;
    const host = {
      ...base,
      fileExists: (f) => files.has(f) || (!f.startsWith(this.root) && base.fileExists(f)),
      readFile: (f) => (files.has(f) ? files.get(f) : f.startsWith(this.root) ? undefined : base.readFile(f)),
      getSourceFile: (f, lang) => {
        if (files.has(f)) {
          return ts.createSourceFile(f, files.get(f), lang, true, ts.ScriptKind.TS);
        }
        if (f.startsWith(this.root)) return undefined;
        if (!cache.has(f)) cache.set(f, base.getSourceFile(f, lang));
        return cache.get(f);
      },
      getCurrentDirectory: () => this.root,
      directoryExists: (d) => (d.startsWith(this.root) ? true : base.directoryExists ? base.directoryExists(d) : true),
      getDirectories: (d) => (d.startsWith(this.root) ? [] : base.getDirectories(d)),
      writeFile: () => {},
    };
    this.program = ts.createProgram([abs], this.options, host, this.program);
    const sf = this.program.getSourceFile(abs);
    return { program: this.program, sf, checker: this.program.getTypeChecker() };
  }
}

function errorsOf(program, sf) {
  const diags = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]
    .filter((d) => d.category === ts.DiagnosticCategory.Error);
  return diags.map((d) => ({
    key: `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`,
    line: d.start !== undefined ? lineOf(sf, d.start) : 0,
  }));
}

// The errors of `after` that `before` does not have (as a multiset).
function newErrors(before, after) {
  const left = new Map();
  for (const e of before) left.set(e.key, (left.get(e.key) || 0) + 1);
  const out = [];
  for (const e of after) {
    const n = left.get(e.key) || 0;
    if (n > 0) left.set(e.key, n - 1);
    else out.push(e);
  }
  return out;
}

// ---------------------------------------------------------------- commands

function cmdDefs(req) {
  const sf = parse(req.source, "the target file");
  return {
    defs: topDefs(sf).map((d) => ({
      name: d.name,
      kind: d.kind,
      line: lineOf(sf, d.node.getStart(sf)),
      end_line: lineOf(sf, d.node.getEnd()),
      signature: signature(d, sf),
    })),
  };
}

function cmdImports(req) {
  const info = ts.preProcessFile(req.source, true, true);
  const seen = [];
  for (const f of info.importedFiles) if (!seen.includes(f.fileName)) seen.push(f.fileName);
  return { modules: seen };
}

// A session over one target: the sample parsed and type-checked once.
class Session {
  constructor(req) {
    this.source = req.source;
    this.path = req.path || "target.ts";
    parse(this.source, "the target file", this.path);
    this.checker = new Checker(req.context);
    // The sample's program: its tree is the one every rule reads (the
    // checker answers for its own nodes only).
    const c = this.checker.check(this.path, this.source);
    this.before = errorsOf(c.program, c.sf);
    this.typed = c;
    this.sf = c.sf;
    this.defs = new Map(topDefs(this.sf).map((d) => [d.name, d]));
    this.lines = splitLines(this.source);
  }

  apply(code) {
    if (typeof code !== "string" || code.trim() === "") throw new Refusal("the replacement is empty");
    const body = code.replace(/^\n+|\n+$/g, "") + "\n";
    const repl = parse(body, "the replacement");
    const defs = topDefs(repl);
    if (repl.statements.length !== 1 || defs.length !== 1) {
      const kinds = repl.statements.map((s) => kindName(s.kind)).join(", ") || "nothing";
      throw new Refusal(`the replacement is not one function, class or variable definition (it holds ${kinds})`);
    }
    const r = defs[0];
    const old = this.defs.get(r.name);
    if (!old) {
      throw new Refusal(`the replacement defines '${r.name}', which is not a top-level definition of ${this.path} (it has ${[...this.defs.keys()].sort().join(", ") || "none"})`);
    }
    if (old.kind !== r.kind) {
      throw new Refusal(`the replacement turns '${r.name}' from a ${old.kind} into a ${r.kind}`);
    }
    const was = signature(old, this.sf);
    const now = signature(r, repl);
    if (was !== now) {
      throw new Refusal(`the replacement changes the signature of '${r.name}': \`${was}\` became \`${now}\``);
    }
    if (dump(old.node) === dump(r.node)) {
      throw new Refusal(`the replacement is identical to the sample's '${r.name}' after normalisation`);
    }
    const start = lineOf(this.sf, old.node.getStart(this.sf));
    const end = lineOf(this.sf, old.node.getEnd());
    const mutated = this.lines.slice(0, start - 1).join("") + body + this.lines.slice(end).join("");
    const after = parse(mutated, "the mutated file", this.path);
    if (topNames(after).join(",") !== topNames(this.sf).join(",")) {
      throw new Refusal(`the replacement changes the top-level names of ${this.path}: ${topNames(this.sf).join(", ")} became ${topNames(after).join(", ")}`);
    }
    const c = this.checker.check(this.path, mutated);
    const fresh = newErrors(this.before, errorsOf(c.program, c.sf));
    if (fresh.length > 0) {
      throw new Refusal(`the mutated file does not compile: line ${fresh[0].line}: ${fresh[0].key}`);
    }
    return { ok: true, name: r.name, source: mutated };
  }
}

function splitLines(text) {
  const lines = text.split(/(?<=\n)/);
  if (lines.length && !lines[lines.length - 1].endsWith("\n")) lines[lines.length - 1] += "\n";
  return lines;
}

function cmdApply(req) {
  const s = new Session(req);
  const results = (req.proposals || []).map((p) => {
    try {
      return s.apply(p.code);
    } catch (e) {
      if (e instanceof Refusal) return { ok: false, reason: e.message };
      throw e;
    }
  });
  return { results };
}

// ---------------------------------------------------------------- rule mutants

const K = () => ts.SyntaxKind;
const ARITH = () => new Map([
  [K().PlusToken, [K().MinusToken, "+", "-"]],
  [K().MinusToken, [K().PlusToken, "-", "+"]],
  [K().AsteriskToken, [K().SlashToken, "*", "/"]],
  [K().SlashToken, [K().AsteriskToken, "/", "*"]],
  [K().PercentToken, [K().SlashToken, "%", "/"]],
  [K().AsteriskAsteriskToken, [K().AsteriskToken, "**", "*"]],
  [K().PlusEqualsToken, [K().MinusEqualsToken, "+=", "-="]],
  [K().MinusEqualsToken, [K().PlusEqualsToken, "-=", "+="]],
  [K().AsteriskEqualsToken, [K().SlashEqualsToken, "*=", "/="]],
  [K().SlashEqualsToken, [K().AsteriskEqualsToken, "/=", "*="]],
]);
const BOUNDARY = () => new Map([
  [K().LessThanToken, "<="], [K().LessThanEqualsToken, "<"],
  [K().GreaterThanToken, ">="], [K().GreaterThanEqualsToken, ">"],
]);
const FLIP = () => new Map([
  [K().LessThanToken, ">"], [K().LessThanEqualsToken, ">="],
  [K().GreaterThanToken, "<"], [K().GreaterThanEqualsToken, "<="],
]);
const EQUALITY = () => new Map([
  [K().EqualsEqualsEqualsToken, "!=="], [K().ExclamationEqualsEqualsToken, "==="],
  [K().EqualsEqualsToken, "!="], [K().ExclamationEqualsToken, "=="],
]);
const LOGICAL = () => new Map([
  [K().AmpersandAmpersandToken, "||"], [K().BarBarToken, "&&"],
]);

function isNumeric(checker, node) {
  const t = checker.getTypeAtLocation(node);
  return (t.flags & (ts.TypeFlags.NumberLike | ts.TypeFlags.BigIntLike)) !== 0 &&
    (t.flags & ts.TypeFlags.StringLike) === 0;
}

// A value of `type` that is "nothing": 0, false, "", or null when the
// type has none of those.
function zeroOf(checker, type) {
  if (!type) return null;
  const f = type.flags;
  if (f & ts.TypeFlags.BooleanLike) return "false";
  if (f & (ts.TypeFlags.NumberLike)) return "0";
  if (f & ts.TypeFlags.StringLike) return '""';
  if (type.isUnion && type.isUnion()) {
    for (const t of type.types) {
      const z = zeroOf(checker, t);
      if (z) return z;
    }
  }
  return null;
}

function isVoid(type) {
  return !!type && (type.flags & (ts.TypeFlags.Void | ts.TypeFlags.Undefined)) !== 0;
}

const CONDITIONS = () => [ts.isIfStatement, ts.isWhileStatement, ts.isDoStatement, ts.isConditionalExpression, ts.isForStatement];

function conditionOf(node) {
  if (ts.isIfStatement(node) || ts.isWhileStatement(node) || ts.isDoStatement(node)) return node.expression;
  if (ts.isConditionalExpression(node)) return node.condition;
  if (ts.isForStatement(node)) return node.condition;
  return undefined;
}

function negation(sf, expr) {
  if (ts.isPrefixUnaryExpression(expr) && expr.operator === ts.SyntaxKind.ExclamationToken) {
    return expr.operand.getText(sf);
  }
  const text = expr.getText(sf);
  const plain = ts.isIdentifier(expr) || ts.isCallExpression(expr) || ts.isPropertyAccessExpression(expr) ||
    ts.isParenthesizedExpression(expr) || ts.isElementAccessExpression(expr);
  return plain ? `!${text}` : `!(${text})`;
}

const short = (text) => {
  const first = text.split("\n")[0].trim();
  const one = first.length > 60 ? `${first.slice(0, 57)}...` : first;
  return text.includes("\n") && one === first ? `${one} ...` : one;
};

// Where `rules` applies in `def`: [{edits: [{from, to, text}], family, fault}]
// in source order. Parameters, type annotations and decorators are the
// signature and are left alone.
function sites(def, sf, checker) {
  const out = [];
  const src = sf.text;
  const where = (node) => `line ${lineOf(sf, node.getStart(sf))}`;
  const add = (node, edits, family, what) => out.push({ at: node.getStart(sf), edits, family, fault: `${where(node)}: ${what} in ${def.name}` });
  const replace = (node, text) => ({ from: node.getStart(sf), to: node.getEnd(), text });
  const arith = ARITH();
  const boundary = BOUNDARY();
  const flip = FLIP();
  const equality = EQUALITY();
  const logical = LOGICAL();
  const functions = [];

  const visit = (node) => {
    if (ts.isParameter(node) || ts.isTypeNode(node) || ts.isDecorator(node) || ts.isHeritageClause(node) ||
        ts.isTypeParameterDeclaration(node) || ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) {
      return;
    }
    if (ts.isFunctionLike(node) && node.body && ts.isBlock(node.body) && node !== def.node) functions.push(node);
    if (ts.isBinaryExpression(node)) {
      const op = node.operatorToken;
      const k = op.kind;
      const tok = (text) => [{ from: op.getStart(sf), to: op.getEnd(), text }];
      if (arith.has(k)) {
        const [, a, b] = arith.get(k);
        const needsNumber = k === K().PlusToken || k === K().PlusEqualsToken;
        if (!needsNumber || (isNumeric(checker, node.left) && isNumeric(checker, node.right))) {
          add(node, tok(b), "arithmetic", `\`${a}\` became \`${b}\``);
        }
      }
      if (boundary.has(k)) add(node, tok(boundary.get(k)), "boundary", `\`${op.getText(sf)}\` became \`${boundary.get(k)}\``);
      if (flip.has(k)) add(node, tok(flip.get(k)), "comparison", `\`${op.getText(sf)}\` flipped to \`${flip.get(k)}\``);
      if (equality.has(k)) add(node, tok(equality.get(k)), "comparison", `\`${op.getText(sf)}\` became \`${equality.get(k)}\``);
      if (logical.has(k)) add(node, tok(logical.get(k)), "condition", `\`${op.getText(sf)}\` became \`${logical.get(k)}\``);
    }
    if ((ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
        (node.operator === K().PlusPlusToken || node.operator === K().MinusMinusToken)) {
      const inc = node.operator === K().PlusPlusToken;
      const at = ts.isPrefixUnaryExpression(node) ? node.getStart(sf) : node.getEnd() - 2;
      add(node, [{ from: at, to: at + 2, text: inc ? "--" : "++" }], "arithmetic", `\`${inc ? "++" : "--"}\` became \`${inc ? "--" : "++"}\``);
    }
    if (ts.isPrefixUnaryExpression(node) && node.operator === K().ExclamationToken) {
      add(node, [{ from: node.getStart(sf), to: node.operand.getStart(sf), text: "" }], "negated", "the `!` of `" + short(node.getText(sf)) + "` is dropped");
    }
    if (ts.isNumericLiteral(node)) {
      const v = Number(node.text);
      if (Number.isFinite(v)) {
        const nv = Number.isInteger(v) ? v + 1 : v * 2;
        add(node, [replace(node, String(nv))], "constant", `constant \`${node.getText(sf)}\` nudged to \`${nv}\``);
      }
    }
    if (node.kind === K().TrueKeyword || node.kind === K().FalseKeyword) {
      const was = node.kind === K().TrueKeyword ? "true" : "false";
      const to = was === "true" ? "false" : "true";
      add(node, [replace(node, to)], "constant", `constant \`${was}\` became \`${to}\``);
    }
    if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && meaningfulString(node)) {
      const to = node.text === "" ? '"gatehouse"' : '""';
      add(node, [replace(node, to)], "constant", `string \`${short(node.getText(sf))}\` became \`${to}\``);
    }
    const cond = conditionOf(node);
    if (cond) {
      const what = ts.isConditionalExpression(node) ? "conditional expression" : kindName(node.kind).replace("Statement", "").toLowerCase();
      add(cond, [replace(cond, negation(sf, cond))], "negated", `the ${what} condition is negated`);
      if (ts.isIfStatement(node) || ts.isConditionalExpression(node)) {
        for (const b of ["true", "false"]) {
          if (cond.getText(sf) !== b) add(cond, [replace(cond, b)], "condition", `the ${what} condition \`${short(cond.getText(sf))}\` became \`${b}\``);
        }
      }
    }
    if ((ts.isBlock(node) || ts.isCaseClause(node) || ts.isDefaultClause(node)) && node !== def.node) {
      for (const st of node.statements) {
        if (ts.isExpressionStatement(st) || ts.isThrowStatement(st) || (ts.isIfStatement(st) && !st.elseStatement)) {
          add(st, [removal(src, sf, st)], "statement", `the statement \`${short(st.getText(sf))}\` is removed`);
        }
      }
    }
    if (ts.isReturnStatement(node) && node.expression) {
      const fn = ts.getContainingFunction(node);
      const sig = fn && checker.getSignatureFromDeclaration(fn);
      const zero = sig ? zeroOf(checker, checker.getReturnTypeOfSignature(sig)) : null;
      if (zero && node.expression.getText(sf) !== zero) {
        add(node, [replace(node.expression, zero)], "return", `returns \`${zero}\` instead of \`${short(node.expression.getText(sf))}\``);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(def.node);

  // Return early: the definition's own functions (its body, its
  // methods, its constructor, a function it is assigned) return at once.
  const own = [];
  if (def.kind === "function") own.push(def.node);
  if (def.kind === "class") {
    for (const m of def.node.members) if (m.body && ts.isBlock(m.body)) own.push(m);
  }
  if (def.kind === "variable") {
    for (const d of def.node.declarationList.declarations) {
      const init = d.initializer;
      if (init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) && ts.isBlock(init.body)) own.push(init);
    }
  }
  for (const fn of own) {
    const body = fn.body;
    if (body.statements.length === 0) continue;
    let ret = "return;";
    if (!ts.isConstructorDeclaration(fn) && !ts.isSetAccessorDeclaration(fn)) {
      const sig = checker.getSignatureFromDeclaration(fn);
      const rt = sig && checker.getReturnTypeOfSignature(sig);
      if (!isVoid(rt)) {
        const zero = zeroOf(checker, rt);
        if (!zero) continue;
        ret = `return ${zero};`;
      }
    }
    const first = body.statements[0];
    if (ts.isReturnStatement(first)) continue; // it returns at once already
    const at = first.getStart(sf);
    const sameLine = lineOf(sf, at) === lineOf(sf, body.getStart(sf));
    const lineStart = src.lastIndexOf("\n", at - 1) + 1;
    const indent = src.slice(lineStart, at);
    const text = sameLine ? `${ret} ` : `${ret}\n${indent}`;
    const name = fn.name && !ts.isComputedPropertyName(fn.name) ? fn.name.getText(sf) : ts.isConstructorDeclaration(fn) ? "constructor" : def.name;
    out.push({ at, edits: [{ from: at, to: at, text }], family: "return", fault: `line ${lineOf(sf, at)}: \`${name}\` returns early (\`${ret}\`) in ${def.name}` });
  }
  return out.sort((a, b) => a.at - b.at);
}

// A string literal whose value decides something: compared, a `case`, or
// returned (messages are not behaviour the brief asks for).
function meaningfulString(node) {
  const p = node.parent;
  if (!p) return false;
  if (ts.isBinaryExpression(p)) {
    return [K().EqualsEqualsEqualsToken, K().ExclamationEqualsEqualsToken, K().EqualsEqualsToken,
      K().ExclamationEqualsToken, K().LessThanToken, K().GreaterThanToken].includes(p.operatorToken.kind);
  }
  return ts.isCaseClause(p) || ts.isReturnStatement(p);
}

// The edit that removes statement `st`: its whole lines when it has them
// to itself (a trailing `//` comment goes with it), else its span.
function removal(src, sf, st) {
  const start = st.getStart(sf);
  const end = st.getEnd();
  const lineStart = src.lastIndexOf("\n", start - 1) + 1;
  let eol = src.indexOf("\n", end);
  if (eol === -1) eol = src.length;
  const before = src.slice(lineStart, start);
  const after = src.slice(end, eol);
  if (/^[ \t]*$/.test(before) && /^[ \t]*(\/\/.*)?$/.test(after)) {
    return { from: lineStart, to: Math.min(eol + 1, src.length), text: "" };
  }
  return { from: start, to: end, text: "" };
}

function spread(items, n) {
  if (n <= 0 || items.length <= n) return items;
  const step = items.length / n;
  const out = [];
  for (let k = 0; k < n; k++) out.push(items[Math.floor(k * step)]);
  return out;
}

function cmdRules(req) {
  const s = new Session(req);
  const wanted = req.functions || [];
  const per = Number(req.per_function || 0);
  const names = [...s.defs.keys()];
  const unknown = wanted.filter((w) => !s.defs.has(w));
  if (unknown.length) {
    throw new Refusal(`no top-level definition named ${unknown.join(", ")} (the file defines ${names.join(", ") || "none"})`);
  }
  const src = s.source;
  const out = [];
  const chosen = [...s.defs.values()].filter((d) => !wanted.length || wanted.includes(d.name));
  // Every site is found on the sample's program before any mutant is checked.
  const found = new Map(chosen.map((d) => [d, sites(d, s.typed.sf, s.typed.checker)]));
  for (const def of chosen) {
    const start = lineOf(s.sf, def.node.getStart(s.sf));
    const end = lineOf(s.sf, def.node.getEnd());
    const from = s.lines.slice(0, start - 1).join("").length;
    const to = from + s.lines.slice(start - 1, end).join("").length;
    const text = src.slice(from, to);
    const made = [];
    const seen = new Set();
    for (const site of found.get(def)) {
      let code = text;
      for (const e of [...site.edits].sort((a, b) => b.from - a.from)) {
        code = code.slice(0, e.from - from) + e.text + code.slice(e.to - from);
      }
      let applied;
      try {
        applied = s.apply(code);
      } catch (e) {
        if (e instanceof Refusal) continue; // not valid: no rule mutant
        throw e;
      }
      const key = dump(parse(applied.source, "the mutated file"));
      if (seen.has(key)) continue;
      seen.add(key);
      made.push({ family: site.family, fault: site.fault, code });
    }
    spread(made, per).forEach((m, i) => {
      out.push({ id: `rule-${def.name}-${i + 1}-${m.family}`, name: def.name, code: m.code, fault: m.fault });
    });
  }
  return { mutants: out };
}

const COMMANDS = { defs: cmdDefs, imports: cmdImports, rules: cmdRules, apply: cmdApply };

main();
