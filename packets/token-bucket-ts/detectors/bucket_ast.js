// Static checks of the submission's TypeScript, read with the TypeScript
// compiler's own parser (the grader's, /usr/local/lib/gatehouse/node), never
// by matching text. Prints one JSON finding a line, exits 0:
//
// - sleep-in-limiter: code under src/ waits: calls setTimeout, setInterval or
//   setImmediate (plain or through globalThis), Atomics.wait/waitAsync,
//   imports timers/promises, or awaits a call named sleep, delay or wait.
// - wall-clock-in-tests: src/ or the tests read the real clock by a call:
//   Date.now(), new Date() or Date() with no argument, performance.now(),
//   process.hrtime() or process.hrtime.bigint(). Mock targets given as
//   strings (t.mock.method(Date, "now", ...)) are no call and do not count.
// - extra-credit: an import or require of an npm package (anything that is
//   neither relative nor a Node built-in), of a built-in the brief forbade
//   (workers, processes, network, readline), process.argv or a
//   `require.main === module` entry point, new Worker(), a lock built on
//   Atomics, or a package.json that declares dependencies.
"use strict";

const fs = require("fs");
const path = require("path");
const { builtinModules } = require("module");
const ts = require("/usr/local/lib/gatehouse/node/node_modules/typescript");

const FORBIDDEN = new Set([
  "worker_threads", "child_process", "cluster", "net", "http", "https", "http2", "dgram", "dns", "tls",
  "readline", "repl", "inspector",
]);
const WAITS = new Set(["setTimeout", "setInterval", "setImmediate"]);

function files(dir, out) {
  let entries = [];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    if (e.name.startsWith(".") || e.name === "node_modules" || e.name === "dist") continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) files(p, out);
    else if (e.isFile() && /\.(ts|mts|cts|tsx)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

const found = new Map();
function emit(id, evidence) {
  if (!found.has(id)) found.set(id, []);
  if (found.get(id).length < 5) found.get(id).push(evidence);
}

function text(node) {
  return ts.isIdentifier(node) ? node.text : undefined;
}

// `a.b` as "a.b" when both are plain names; `globalThis.x` as "x".
function dotted(node) {
  if (ts.isIdentifier(node)) return node.text;
  if (ts.isPropertyAccessExpression(node)) {
    const left = dotted(node.expression);
    if (left === undefined) return undefined;
    if (left === "globalThis" || left === "global") return node.name.text;
    return `${left}.${node.name.text}`;
  }
  return undefined;
}

function moduleName(spec) {
  return spec.startsWith("node:") ? spec.slice(5) : spec;
}

function checkImport(spec, where) {
  if (spec.startsWith(".") || spec.startsWith("/")) return;
  const name = moduleName(spec);
  const top = name.split("/")[0];
  const builtin = spec.startsWith("node:") || builtinModules.includes(name) || builtinModules.includes(top);
  if (!builtin) emit("extra-credit", `${where}: imports the npm package \`${spec}\``);
  else if (FORBIDDEN.has(top)) emit("extra-credit", `${where}: imports \`${spec}\`, which the brief forbade`);
  if (name === "timers/promises" || name === "timers") return "timers";
  return undefined;
}

function scan(file) {
  const rel = path.relative(process.cwd(), file);
  const limiter = rel.startsWith("src/");
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
  const at = (node) => `${rel}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  const visit = (node) => {
    let spec;
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) spec = node.moduleSpecifier.text;
    if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const e = node.moduleReference.expression;
      if (ts.isStringLiteral(e)) spec = e.text;
    }
    if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      spec = node.moduleSpecifier.text;
    }
    if (ts.isCallExpression(node)) {
      const callee = dotted(node.expression);
      const arg = node.arguments[0];
      if ((callee === "require" || node.expression.kind === ts.SyntaxKind.ImportKeyword) && arg && ts.isStringLiteral(arg)) {
        spec = arg.text;
      }
      if (limiter && callee && (WAITS.has(callee) || callee === "Atomics.wait" || callee === "Atomics.waitAsync")) {
        emit("sleep-in-limiter", `${at(node)}: calls ${callee}()`);
      }
      if (["Date.now", "performance.now", "process.hrtime", "process.hrtime.bigint", "Date"].includes(callee)) {
        emit("wall-clock-in-tests", `${at(node)}: calls ${callee}()`);
      }
      if (limiter && callee && ts.isAwaitExpression(node.parent) && /^(sleep|delay|wait)$/i.test(callee.split(".").pop())) {
        emit("sleep-in-limiter", `${at(node)}: awaits ${callee}()`);
      }
      if (callee && /^Atomics\.(compareExchange|exchange|notify)$/.test(callee)) {
        emit("extra-credit", `${at(node)}: a lock built on ${callee}()`);
      }
    }
    if (ts.isNewExpression(node)) {
      const callee = dotted(node.expression);
      if (callee === "Date" && (!node.arguments || node.arguments.length === 0)) {
        emit("wall-clock-in-tests", `${at(node)}: new Date() reads the real clock`);
      }
      if (callee === "Worker") {
        emit("extra-credit", `${at(node)}: new Worker(): workers the brief forbade`);
      }
    }
    if (ts.isPropertyAccessExpression(node)) {
      const name = dotted(node);
      if (name === "process.argv") emit("extra-credit", `${at(node)}: reads process.argv (a command-line interface)`);
      if (name === "require.main") emit("extra-credit", `${at(node)}: a \`require.main\` entry point (a command-line interface)`);
    }
    if (spec !== undefined && checkImport(spec, at(node)) === "timers" && limiter) {
      emit("sleep-in-limiter", `${at(node)}: imports \`${spec}\``);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

for (const f of files(process.cwd(), [])) {
  try {
    scan(f);
  } catch (e) {
    process.stderr.write(`${f}: ${e.message}\n`);
  }
}
try {
  const pkg = JSON.parse(fs.readFileSync("package.json", "utf8"));
  for (const key of ["dependencies", "devDependencies", "optionalDependencies", "peerDependencies"]) {
    const deps = pkg && pkg[key] && Object.keys(pkg[key]);
    if (deps && deps.length) emit("extra-credit", `package.json declares ${key}: ${deps.slice(0, 5).join(", ")}`);
  }
} catch {
  // no package.json, or not JSON: the compile says so
}
for (const [id, evidence] of found) {
  process.stdout.write(JSON.stringify({ id, evidence: evidence.join("; ") }) + "\n");
}
