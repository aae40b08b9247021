'use strict';
// The test process of Gatehouse's Node runner (see gatehouse_node_runner.js).
//
// Run as `node --test-reporter=THIS_FILE THIS_FILE SPEC.json`: as the main
// script it records the test framework (node:test, node:assert and the
// process's exit functions), reads every compiled test file into memory
// (so nothing the candidate's code does while one loads can change
// another), then loads them; node:test runs them in this process and,
// because this file is also the reporter, hands each result to the
// generator below, which sends it to the runner over the IPC channel
// (descriptor 3 of this process: the grader's pipe is not here). After
// each result and at the end the framework is compared with the record;
// a replaced or added callable is reported and put back. When the tests
// are done it sends `end` and leaves with the exit function it bound at
// start, so `process.on('exit')` handlers never run after the results.
//
// The candidate's code runs in this process, unless the run is judged
// apart (`spec.judge`: gatehouse_node_judge.js serves its modules from a
// host process under its own uid); nothing here is trusted on its own.
// The runner and the grader cross-check it.

const fs = require('fs');
const Module = require('module');
const path = require('path');

const send = process.send ? process.send.bind(process) : () => {};
const reallyExit = process.reallyExit.bind(process);
const channel = process.channel;

const state = { files: new Map(), failed: 0, loadErrors: 0, reporting: false };

function snapshot() {
  const assert = require('node:assert');
  const test = require('node:test');
  const out = new Map();
  const add = (prefix, obj) => {
    if (!obj) return;
    for (const key of Object.getOwnPropertyNames(obj)) {
      const d = Object.getOwnPropertyDescriptor(obj, key);
      if (d && typeof d.value === 'function') out.set(`${prefix}.${key}`, [obj, key, d.value]);
    }
  };
  add('node:assert', assert);
  add('node:assert/strict', assert.strict);
  add('node:assert.AssertionError.prototype', assert.AssertionError && assert.AssertionError.prototype);
  add('node:test', test);
  out.set('process.exit', [process, 'exit', process.exit]);
  out.set('process.reallyExit', [process, 'reallyExit', process.reallyExit]);
  return out;
}

let record = null;

function integrity(where) {
  if (!record) return;
  const now = snapshot();
  for (const [what, [obj, key, fn]] of record) {
    const cur = Object.getOwnPropertyDescriptor(obj, key);
    if (!cur || cur.value !== fn) {
      send({ t: 'integrity', what, change: cur ? 'replaced' : 'removed', test: where });
      try {
        Object.defineProperty(obj, key, { value: fn, writable: true, configurable: true, enumerable: cur ? cur.enumerable : true });
      } catch {
        // frozen by someone: reported, cannot be put back
      }
    }
  }
  for (const [what, [obj, key]] of now) {
    if (!record.has(what)) {
      send({ t: 'integrity', what, change: 'added', test: where });
      try {
        delete obj[key];
      } catch {
        // reported
      }
    }
  }
}

// The reporter: node:test's events for the tests this process runs.
async function* reporter(source) {
  state.reporting = true;
  const stack = [];
  const hasChildren = [];
  for await (const ev of source) {
    const d = ev.data || {};
    if (ev.type === 'test:start') {
      stack[d.nesting] = d.name;
      stack.length = d.nesting + 1;
      hasChildren[d.nesting] = false;
      if (d.nesting > 0) hasChildren[d.nesting - 1] = true;
      continue;
    }
    if (ev.type !== 'test:pass' && ev.type !== 'test:fail') continue;
    const names = stack.slice(0, d.nesting).concat([d.name]);
    const file = state.files.get(d.file) || d.file || '?';
    const id = `${file}::${names.join('::')}`;
    const err = d.details && d.details.error;
    let status;
    if (ev.type === 'test:pass') status = d.skip !== undefined || d.todo !== undefined ? 'skipped' : 'passed';
    else status = err && err.failureType === 'testCodeFailure' ? 'failed' : 'error';
    if (ev.type === 'test:fail' && d.todo !== undefined) status = 'skipped';
    hasChildren.length = d.nesting + 1;
    if (hasChildren[d.nesting]) {
      // A suite or a test with subtests: its children are the cases. It
      // counts itself only when it failed on its own (a hook, its body).
      const own = err && err.failureType !== 'subtestsFailed';
      hasChildren[d.nesting] = false;
      if (!own) {
        integrity(id);
        continue;
      }
      status = 'error';
    }
    if (status === 'failed' || status === 'error') state.failed += 1;
    const cause = err && (err.cause || err);
    const message = cause ? String(cause.message || cause) : '';
    send({ t: 'case', file, path: names, status, message: message.slice(0, 300) });
    integrity(id);
  }
  integrity('(end)');
  const code = state.failed > 0 || state.loadErrors > 0 ? 1 : 0;
  send({ t: 'end', exit: code }, () => reallyExit(code));
}

module.exports = reporter;

function load(file, text) {
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  Module._cache[file] = m;
  m._compile(text, file);
  m.loaded = true;
}

function main() {
  if (channel && typeof channel.unref === 'function') channel.unref();
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  // Judged apart: the judge answers imports of the candidate's modules
  // before anything else loads (gatehouse_node_judge.js).
  if (spec.judge) {
    const judge = require('./gatehouse_node_judge.js').install(spec.judge);
    // A candidate's process that ends mid-call is named in the run's record.
    judge.onHostEnd = (kind, message) => send({ t: 'host-ended', kind, message: String(message).slice(0, 300) });
  }
  // node:test itself registers listeners and patches nothing; the record
  // is taken before any test file (and so any candidate file) loads.
  require('node:test');
  record = snapshot();
  const texts = spec.tests.map(({ rel, js }) => {
    state.files.set(js, rel);
    try {
      return [rel, js, fs.readFileSync(js, 'utf8'), null];
    } catch (e) {
      return [rel, js, null, e];
    }
  });
  for (const [rel, js, text, error] of texts) {
    if (error) {
      send({ t: 'load-error', file: rel, message: `not compiled: ${error.message}` });
      state.loadErrors += 1;
      continue;
    }
    try {
      load(js, text);
    } catch (e) {
      const msg = e && e.stack ? String(e.stack).split('\n').slice(0, 2).join(' ') : String(e);
      send({ t: 'load-error', file: rel, message: msg.slice(0, 300) });
      state.loadErrors += 1;
    }
  }
  integrity('(collection)');
  // No test registered (every file failed to load, or none defines a
  // test): node:test never starts the reporter; end here.
  process.once('beforeExit', () => {
    if (state.reporting) return;
    const code = state.loadErrors > 0 ? 1 : 0;
    send({ t: 'end', exit: code }, () => reallyExit(code));
  });
}

if (require.main === module) main();
