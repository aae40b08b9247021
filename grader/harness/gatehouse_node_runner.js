'use strict';
// Gatehouse's trusted runner for TypeScript packets (`node --test`).
//
// The grader runs a packet command of the plain form `node --test PATH...`
// or `npm test` as
//
//     node /gatehouse/gatehouse_node_runner.js PATH...
//
// from a read-only mount the command cannot write. This process never
// loads a file of the workspace: it
//
// 1. takes the run's nonce from `.gatehouse/nonce` (a file the grader
//    wrote into the run's copy of the workspace) and removes it, so the
//    nonce is in no process's environment and no file once the candidate's
//    code runs;
// 2. compiles the test files (and what they import) with the grader's own
//    TypeScript compiler (/usr/local/lib/gatehouse/node, transpiling file
//    by file: types are the candidate's `npm test`'s business, a syntax
//    error is a compile error) and its own options, into the run's /tmp:
//    the submission's
//    tsconfig.json, package.json, .npmrc and node_modules/ are never read
//    (`paths`, `baseUrl`, reporters, `--import`, NODE_OPTIONS, a shadowing
//    package: none reaches a run), and only the submitted TypeScript
//    source runs, never a submitted .js;
// 3. runs the compiled tests in a child process (gatehouse_node_child.js)
//    whose environment holds no NODE_* variable and whose descriptor 3 is
//    an IPC channel to this process, not the grader's pipe;
// 4. streams one JSON record per result to descriptor 3 (the grader's
//    pipe), tagged with the nonce, in the Python runner's record format
//    (start, case, collect-error, integrity, end), and cross-checks what
//    the child said against how it ended: a child that exits 0 before its
//    tests finished, reports a test twice, or exits otherwise than it
//    reported is an integrity record; a child that crashed (a status that
//    is not 0, or a signal, before its end) is a `crash` record naming how,
//    with the error and the first frame in the candidate's code from its
//    stderr, which passes through this process. Its own exit status is the
//    one in its `end` record, computed from the cases, never the child's.
//
// The candidate's code shares the child with the tests, so the child's
// reports are cross-checked by the grader too (canary tests planted beside
// the real ones, the test ids recorded at self-test).

const fs = require('fs');
const path = require('path');
const cp = require('child_process');

const WORKSPACE = process.cwd();
const TOOLS = __dirname;
const CHILD = path.join(TOOLS, 'gatehouse_node_child.js');
const TS_HOME = '/usr/local/lib/gatehouse/node';
const BUILD = '/tmp/gatehouse-node';
const OUT = path.join(BUILD, 'out');
const CHANNEL_FD = 3;

function takeNonce() {
  const p = path.join(WORKSPACE, '.gatehouse', 'nonce');
  try {
    const value = fs.readFileSync(p, 'utf8').trim();
    fs.unlinkSync(p);
    return value;
  } catch {
    return '';
  }
}

function config() {
  const text = process.env.GATEHOUSE_RUN || '';
  delete process.env.GATEHOUSE_RUN;
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {};
  }
}

class Channel {
  constructor(nonce) {
    this.nonce = nonce;
    this.ino = null;
    try {
      const st = fs.fstatSync(CHANNEL_FD);
      this.ino = `${st.dev}:${st.ino}`;
    } catch {
      this.ino = null;
    }
  }

  send(record) {
    if (this.ino === null) return;
    const data = Buffer.from(JSON.stringify({ ...record, nonce: this.nonce }) + '\n');
    let off = 0;
    while (off < data.length) {
      try {
        off += fs.writeSync(CHANNEL_FD, data, off);
      } catch {
        this.ino = null;
        return;
      }
    }
  }
}

// What `node --test` would find: test files under the workspace (never in
// node_modules or a dot folder).
function isTestFile(rel) {
  if (!rel.endsWith('.ts') || rel.endsWith('.d.ts')) return false;
  const base = path.basename(rel, '.ts');
  const parts = rel.split('/');
  return (
    base.endsWith('.test') ||
    base.endsWith('-test') ||
    base.endsWith('_test') ||
    base.startsWith('test-') ||
    base === 'test' ||
    parts.slice(0, -1).includes('test')
  );
}

function walk(rel, out) {
  const abs = path.join(WORKSPACE, rel);
  let st;
  try {
    st = fs.lstatSync(abs);
  } catch {
    return;
  }
  if (st.isDirectory()) {
    for (const name of fs.readdirSync(abs).sort()) {
      if (name === 'node_modules' || name.startsWith('.')) continue;
      walk(rel ? `${rel}/${name}` : name, out);
    }
  } else if (st.isFile() && isTestFile(rel)) {
    out.push(rel);
  }
}

function testFiles(args, extra) {
  const out = [];
  const named = args.filter((a) => a !== '--test');
  if (named.length === 0) {
    walk('', out);
  } else {
    for (const a of named) {
      const rel = path.normalize(a).replace(/^\.\/+/, '').replace(/\/+$/, '');
      const abs = path.join(WORKSPACE, rel);
      let st = null;
      try {
        st = fs.lstatSync(abs);
      } catch {
        st = null;
      }
      if (st && st.isDirectory()) walk(rel === '.' ? '' : rel, out);
      else out.push(rel);
    }
  }
  const files = [];
  for (const f of [...extra, ...out]) if (!files.includes(f)) files.push(f);
  return files;
}

// The child's environment: the sandbox's, without anything that configures
// Node from outside (NODE_OPTIONS and friends) or belongs to the grader.
function childEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('NODE_') || k.startsWith('GATEHOUSE_RUN') || k === 'GATEHOUSE_NONCE') continue;
    if (k.startsWith('npm_')) continue;
    env[k] = v;
  }
  return env;
}

// Resolves a relative import of `from` to a TypeScript file of the
// workspace, as the compiler would (`./x`, `./x.js`, `./x/index`).
function resolveImport(from, spec) {
  if (!spec.startsWith('.')) return null;
  const base = path.resolve(path.dirname(from), spec);
  const stem = base.replace(/\.(c|m)?js$/, '');
  for (const c of [base, `${stem}.ts`, path.join(base, 'index.ts')]) {
    if (c.endsWith('.ts') && !c.endsWith('.d.ts') && fs.existsSync(c) && fs.lstatSync(c).isFile()) return c;
  }
  return null;
}

// Compiles the test files and every workspace file they import, one file
// at a time, with the grader's compiler and options: the submission's
// tsconfig.json is never read. Types are not checked (the candidate's own
// `npm test` does that; a type error never changes what the code does):
// a syntax error is a compile error. Returns the errors, by file.
function compile(files) {
  const ts = require(path.join(TS_HOME, 'node_modules', 'typescript'));
  fs.mkdirSync(OUT, { recursive: true });
  // Compiled files load as CommonJS whatever the submission's package.json says.
  fs.writeFileSync(path.join(OUT, 'package.json'), '{"type": "commonjs"}\n');
  const options = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    esModuleInterop: true,
    strict: true,
    sourceMap: false,
  };
  const errors = new Map();
  const queue = files.map((f) => path.join(WORKSPACE, f));
  const done = new Set();
  while (queue.length > 0) {
    const abs = queue.shift();
    if (done.has(abs)) continue;
    done.add(abs);
    const rel = path.relative(WORKSPACE, abs);
    if (rel.startsWith('..')) continue;
    let text;
    try {
      text = fs.readFileSync(abs, 'utf8');
    } catch (e) {
      errors.set(rel, `cannot read it: ${e.code || e.message}`);
      continue;
    }
    const out = ts.transpileModule(text, { compilerOptions: options, fileName: abs, reportDiagnostics: true });
    const diags = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (diags.length > 0) {
      const d = diags[0];
      const pos = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
      const where = pos ? `${rel}(${pos.line + 1},${pos.character + 1})` : rel;
      errors.set(rel, `${where}: error TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
      continue;
    }
    const target = path.join(OUT, rel.replace(/\.ts$/, '.js'));
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, out.outputText);
    for (const imp of ts.preProcessFile(text, true, true).importedFiles) {
      const next = resolveImport(abs, imp.fileName);
      if (next) queue.push(next);
    }
  }
  return errors;
}

const STDERR_TAIL = 16384;
// A frame of a compiled workspace file in a V8 stack trace (`at f (FILE:L:C)`,
// `at FILE:L:C`, or `N: f (FILE:L:C)` in a fatal error's trace).
const FRAME = /(?:\bat |^\s*\d+: )(?:(\S[^(]*?) \()?\/tmp\/gatehouse-node\/out\/([^:()]+)\.js:\d+:\d+\)?\s*$/;

// How the test process crashed, from how it ended and its stderr: the
// kind, the error the runtime printed, the first frame in the candidate's
// code (a workspace file that is not a test; the compiled line is not the
// source's, so the function names the place), and the test file it was in.
function crashOf(code, signal, stderr) {
  const lines = stderr.split('\n');
  const fatal = lines.map((l) => l.match(/^(?:#\s*)?FATAL ERROR: (.*)$/)).find(Boolean);
  const error = lines.map((l) => l.match(/^((?:Uncaught )?(?:[A-Za-z_$][\w$]*)?(?:Error|Exception|Rejection)\b.*)$/)).find(Boolean);
  let frame = '';
  let test = '';
  for (const l of lines) {
    const m = l.match(FRAME);
    if (!m) continue;
    const rel = `${m[2]}.ts`;
    if (isTestFile(rel) || rel.startsWith('.gatehouse/')) {
      if (!test) test = rel;
    } else if (!frame) {
      frame = m[1] ? `${rel} in ${m[1].replace(/^(Object|Module)\.<anonymous>$/, 'its top level')}` : rel;
    }
  }
  const how = signal ? `killed by ${signal}` : `exit status ${code}`;
  let kind = signal ? 'signal' : 'exit';
  let message = how;
  if (fatal) {
    kind = 'fatal';
    message = `${fatal[1].trim()} (${how})`;
  } else if (error && !signal) {
    kind = 'uncaught';
    message = `${error[1].trim()} (${how})`;
  }
  return { kind, test, message: message.slice(0, 200), frame: frame.slice(0, 200) };
}

function moduleOf(rel) {
  return rel.replace(/\//g, '.');
}

function main() {
  const nonce = takeNonce();
  const cfg = config();
  const channel = new Channel(nonce);
  const args = process.argv.slice(2);
  channel.send({ t: 'start', runner: 'node-test' });
  const files = testFiles(args, Array.isArray(cfg.extra_tests) ? cfg.extra_tests : []);
  const finish = (code) => {
    channel.send({ t: 'end', exit: code });
    process.exitCode = code;
  };
  const missing = files.filter((f) => !fs.existsSync(path.join(WORKSPACE, f)));
  const real = files.filter((f) => !(cfg.extra_tests || []).includes(f));
  if (real.length === 0 || missing.length > 0) {
    const why = missing.length
      ? `no such test file: ${missing.join(', ')}`
      : 'no test files found (node --test looks for *.test.ts, test/**/*.ts and the like)';
    process.stdout.write(`gatehouse: ${why}\n`);
    channel.send({ t: 'collect-error', id: missing[0] || '(no test files)', message: why });
    finish(1);
    return;
  }
  const t0 = Date.now();
  const errors = compile(files);
  const compileMs = Date.now() - t0;
  if (errors.size > 0) {
    process.stdout.write(`gatehouse: the TypeScript compiler refused ${errors.size} file(s):\n`);
    for (const [file, message] of errors) {
      process.stdout.write(`${message}\n`);
      channel.send({ t: 'collect-error', id: file, message: `does not compile: ${message}`.slice(0, 200) });
    }
    finish(2);
    return;
  }
  process.stdout.write(`gatehouse: compiled ${files.length} test file(s) and their imports with TypeScript in ${compileMs} ms\n`);
  const spec = files.map((rel) => ({ rel, js: path.join(OUT, rel.replace(/\.ts$/, '.js')) }));
  const specPath = path.join(BUILD, 'spec.json');
  fs.writeFileSync(specPath, JSON.stringify(spec));

  const seen = new Map();
  let failed = 0;
  let cases = 0;
  let loadErrors = 0;
  let childEnd = null;
  const child = cp.spawn(process.execPath, [`--test-reporter=${CHILD}`, CHILD, specPath], {
    cwd: WORKSPACE,
    env: childEnv(),
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  // The child's stderr goes on to ours; its tail names a crash.
  let stderrTail = '';
  let stderrDone = false;
  const stderrWaiters = [];
  child.stderr.on('data', (chunk) => {
    process.stderr.write(chunk);
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL);
  });
  child.stderr.on('close', () => {
    stderrDone = true;
    for (const w of stderrWaiters.splice(0)) w();
  });
  // Its stderr fully read, or a moment after it exited (a process it left
  // behind may hold the pipe open).
  const afterStderr = (fn) => {
    let done = false;
    const once = () => {
      if (!done) {
        done = true;
        fn();
      }
    };
    if (stderrDone) return setImmediate(once);
    stderrWaiters.push(once);
    setTimeout(once, 1000).unref();
  };
  child.on('message', (msg) => {
    if (!msg || typeof msg !== 'object' || childEnd !== null) {
      channel.send({ t: 'integrity', what: 'the test process', change: 'sent a message after its end record, or one that is not a record', test: '(runner)' });
      return;
    }
    if (msg.t === 'case') {
      const names = Array.isArray(msg.path) ? msg.path.map(String) : [String(msg.path)];
      const rel = String(msg.file || '?');
      const id = `${rel}::${names.join('::')}`;
      const suites = names.slice(0, -1);
      const classname = [moduleOf(rel), ...suites].join('.');
      const name = names[names.length - 1];
      const status = ['passed', 'failed', 'error', 'skipped'].includes(msg.status) ? msg.status : 'error';
      const message = String(msg.message || '').split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 3).join(' ');
      if (seen.has(id)) {
        channel.send({ t: 'integrity', what: `test ${id}`, change: 'was reported more than once (a forged result)', test: '(runner)' });
      }
      seen.set(id, status);
      cases += 1;
      if (status === 'failed' || status === 'error') failed += 1;
      const mark = { passed: 'ok', skipped: 'skip', failed: 'FAIL', error: 'ERROR' }[status];
      process.stdout.write(`${mark} ${id}${message ? ` - ${message.slice(0, 200)}` : ''}\n`);
      channel.send({ t: 'case', id, classname, name, status, message: message.slice(0, 200) });
    } else if (msg.t === 'load-error') {
      loadErrors += 1;
      process.stdout.write(`ERROR loading ${msg.file}: ${msg.message}\n`);
      channel.send({ t: 'collect-error', id: String(msg.file), message: String(msg.message || '').slice(0, 200) });
    } else if (msg.t === 'integrity') {
      channel.send({ t: 'integrity', what: String(msg.what).slice(0, 300), change: String(msg.change).slice(0, 300), test: String(msg.test || '') });
    } else if (msg.t === 'note') {
      process.stdout.write(`gatehouse: ${String(msg.text).slice(0, 300)}\n`);
    } else if (msg.t === 'end') {
      childEnd = msg;
    }
  });
  child.on('exit', (code, signal) => {
    // Let the last IPC messages and the stderr arrive before judging.
    afterStderr(() => {
      let exit = failed > 0 || loadErrors > 0 || cases === 0 ? 1 : 0;
      if (childEnd === null) {
        if (code === 0) {
          channel.send({
            t: 'integrity',
            what: 'the test process',
            change: 'exited with status 0 before its tests finished (an early process.exit)',
            test: '(runner)',
          });
        } else {
          // A crash: the tests it did not report failed (never a sign).
          const crash = crashOf(code, signal, stderrTail);
          channel.send({ t: 'crash', id: '(test process)', ...crash });
          process.stdout.write(`gatehouse: the test process crashed before its tests finished: ${crash.message}\n`);
        }
        exit = 1;
      } else if (code !== (childEnd.exit | 0)) {
        channel.send({
          t: 'integrity',
          what: 'the test process',
          change: `exited with ${signal || code} after reporting ${childEnd.exit}`,
          test: '(runner)',
        });
        exit = 1;
      }
      if (cases === 0 && exit === 1 && childEnd !== null && loadErrors === 0) {
        process.stdout.write('gatehouse: no test ran\n');
      }
      process.stdout.write(`gatehouse: ${cases} test(s), ${failed} failed\n`);
      // What ran, and the planted tests the grader's canary files define
      // (so a canary that never reported is known to have been collected).
      const collected = [...seen.keys()];
      for (const rel of cfg.extra_tests || []) {
        let text = '';
        try {
          text = fs.readFileSync(path.join(WORKSPACE, rel), 'utf8');
        } catch {
          text = '';
        }
        for (const m of text.matchAll(/\btest\("(test_[a-z]+)"/g)) {
          const id = `${rel}::${m[1]}`;
          if (!collected.includes(id)) collected.push(id);
        }
      }
      channel.send({ t: 'collected', ids: collected });
      finish(exit);
    });
  });
}

main();
