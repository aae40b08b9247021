'use strict';
// The judge's side of the judge apart for TypeScript on Node (JUDGE.md):
// runs in the test process (gatehouse_node_child.js) under the judge's uid.
//
// `install(config)` is called by the test process before node:test or any
// test file loads, in a run the grader started in judge mode (the sandbox
// gave the runner a socket to the host supervisor, which runs under the
// candidate's uid, and the runner passed it on as descriptor 4). From then
// on this process never loads, compiles or executes a byte of the
// submission:
//
// - MODULES. The runner compiled the candidate's TypeScript (with the
//   grader's compiler, as for any run) into a folder only the host loads
//   from; the judge's compiled files hold no candidate file. `require`
//   (`Module._load`) answers a packet file's import of a candidate module
//   with a proxy module whose reads, writes, calls and constructions are
//   messages to a host server that loaded the real one; `require.resolve`
//   of one gives the host's compiled file (what a program started from a
//   test loads). A `require` of any other workspace file that would run
//   code (`.js`, `.cjs`, `.mjs`, `.node`), or of the host's folder, is
//   refused. (Node 20's ESM loader hooks, `module.register`, never see a
//   CommonJS `require`, and the compiled tests are CommonJS, with
//   `import()` compiled to `require`: `Module._load` is where the
//   candidate's modules are answered. A hooks thread would cost every run
//   ~80 ms and guard only a native `import()` that packet code itself
//   would have to spell.)
// - DATA. What crosses is data (gatehouse_node_wire.js), decoded into this
//   process's own values: a host's `Number` subclass arrives as a plain
//   boxed Number, an array subclass as an array, a Date subclass as a
//   Date. Every other host object or function is a HANDLE: a Proxy whose
//   traps are messages; its identity is the judge's own (one proxy per
//   host object, `===` is identity, nothing in a comparison runs the
//   candidate's code); `x instanceof hostClass` asks the host, except for
//   errors: a host exception arrives as the judge's builtin error (a
//   `RangeError` is this process's `RangeError`) or, for the candidate's
//   own error class, as an instance of that builtin whose prototype stands
//   for the class: `err instanceof mod.BucketError`, `err.constructor ===
//   mod.BucketError`, `assert.throws(fn, mod.BucketError)` and
//   `assert.throws(fn, RangeError)` all hold, with the message, the name
//   and the error's own enumerable data (`code`, ...) copied as data.
// - CALLBACKS. Judge objects passed to the candidate's code (a fake clock,
//   a recorder, a mock function) cross by reference: the host may call
//   them and read or write their properties, only those the test's own
//   objects define (found before `Object.prototype` or
//   `Function.prototype` on their chain), never `constructor`,
//   `prototype`, `__proto__` or the like, and never a property of a
//   node:test mock (`fn.mock` would let the candidate reset the calls a
//   test counts): a mock is call-only. Answers are again data or
//   references.
// - PROMISES. A host promise arrives as a promise of this process settled
//   by a message; a judge promise passed to the host settles the host's
//   copy the same way.
// - PATCHES. Globals and builtin-module functions that packet code
//   replaces here (`t.mock.method(globalThis, "setTimeout", f)`,
//   `globalThis.Date = SpyDate`, `mock.timers`, `process.env.X = ...`)
//   are mirrored to the host before each call as callbacks into this
//   process, and put back when they are put back here, so a hidden test
//   that watches what the candidate's code does with the clock, the timers
//   or the file system still sees it.
// - PROGRAMS. `child_process` here starts every program through the host
//   supervisor, under the candidate's uid (spawn, spawnSync, exec,
//   execSync, execFile, execFileSync; output through messages); `fork`
//   is refused. `fs.mkdtemp` folders are opened to the group, so a
//   program a test writes there can be read by the candidate's uid.
// - LIMITS. Every message is bounded (gatehouse_node_wire.js); a host that
//   sends nothing for `callSecs` while a call waits is killed and the call
//   fails with a HostError; a host that exits or breaks the wire's rules
//   fails the call it was serving; the next call starts a fresh host (a
//   handle reached from a module, such as a class, is found again there).

const fs = require('fs');
const Module = require('module');
const path = require('path');
const cp = require('child_process');
const events = require('events');
const stream = require('stream');
const util = require('util');
const wire = require('./gatehouse_node_wire.js');

const { ProtocolError, Refused, encodeKey, decodeKey, BUILTIN_ERRORS, WELL_KNOWN } = wire;

const HOST_FD = 4;
const apply = Reflect.apply;
const construct = Reflect.construct;
const reflectGet = Reflect.get;
const reflectSet = Reflect.set;
const reflectHas = Reflect.has;
const getProto = Object.getPrototypeOf;
const setProto = Object.setPrototypeOf;
const getOwnDesc = Object.getOwnPropertyDescriptor;
const defineProp = Object.defineProperty;
const ownKeys = Reflect.ownKeys;
const objectKeys = Object.keys;
const isProxy = util.types.isProxy;
const isPromise = util.types.isPromise;
const isNativeError = util.types.isNativeError;
const promiseThen = Promise.prototype.then;
const PromiseCtor = Promise;
const ObjectProto = Object.prototype;
const FunctionProto = Function.prototype;
const BufferFrom = Buffer.from;
const setTimer = setTimeout;
const clearTimer = clearTimeout;
const envObject = process.env;
const now = wire.now;

/** The candidate's code could not answer: its process ended, hung past
 * the call limit, or broke the wire's rules. Fails the test that called. */
class HostError extends Error {}
HostError.prototype.name = 'HostError';

// Names the host may never read or write on a judge object.
const DENY = new Set([
  'constructor', 'prototype', '__proto__', 'caller', 'callee', 'arguments', '__defineGetter__',
  '__defineSetter__', '__lookupGetter__', '__lookupSetter__', 'mock', 'call', 'apply', 'bind',
]);

// The globals mirrored to the host when packet code replaces them here.
const GLOBAL_PATHS = [
  ['Date'], ['Date', 'now'], ['Date', 'parse'], ['setTimeout'], ['setInterval'], ['setImmediate'],
  ['clearTimeout'], ['clearInterval'], ['clearImmediate'], ['queueMicrotask'], ['fetch'],
  ['structuredClone'], ['performance', 'now'], ['Math', 'random'], ['Atomics', 'wait'],
  ['Atomics', 'waitAsync'], ['Atomics', 'notify'], ['crypto', 'randomUUID'], ['crypto', 'getRandomValues'],
  ['console', 'log'], ['console', 'info'], ['console', 'warn'], ['console', 'error'], ['console', 'debug'],
  ['console', 'trace'], ['process', 'hrtime'], ['process', 'hrtime', 'bigint'], ['process', 'exit'],
  ['process', 'kill'], ['process', 'nextTick'], ['process', 'emitWarning'], ['process', 'cwd'],
  ['process', 'uptime'], ['process', 'memoryUsage'], ['process', 'cpuUsage'],
  ['process', 'stdout', 'write'], ['process', 'stderr', 'write'],
];
// The builtin modules whose functions are mirrored once packet code
// requires them (never node:test or node:assert: the host loads neither).
const MIRRORED_MODULES = new Set([
  'fs', 'fs/promises', 'timers', 'timers/promises', 'child_process', 'http', 'https', 'net', 'dns',
  'dns/promises', 'os', 'crypto', 'perf_hooks', 'readline', 'zlib', 'events', 'worker_threads',
]);

let JUDGE = null;
const STATS = { n: 0, t: 0, first: 0, last: 0, start: wire.now() };
if (process.env.GH_STATS) process.on('exit', () => process._rawDebug('judge stats', JSON.stringify({ ...STATS, t: Math.round(STATS.t), first: Math.round(STATS.first - STATS.start), last: Math.round(STATS.last - STATS.start) })));

// ---------------------------------------------------------------- proxies

// target -> the handle's state; proxy -> the same state.
const STATES = new WeakMap();
const PROXIES = new WeakMap();

function hostState(v) {
  return (typeof v === 'object' || typeof v === 'function') && v !== null ? PROXIES.get(v) : undefined;
}

function makeTarget(kind, name) {
  const label = `host ${String(name || (kind === 'f' ? 'function' : 'object')).slice(0, 80)}`;
  if (kind === 'f') {
    // A bound function: callable and constructible, with no `prototype`
    // of its own for the proxy's invariants to pin.
    const t = function () {}.bind(null);
    defineProp(t, 'name', { value: label, configurable: true });
    return t;
  }
  const t = Object.create(null);
  defineProp(t, Symbol.toStringTag, { value: label, configurable: true });
  return t;
}

const HANDLER = {
  get(target, key, receiver) {
    const st = STATES.get(target);
    if (typeof key === 'symbol') {
      if (key === Symbol.hasInstance && st.kind === 'f') return st.hasInstance;
      if (key === Symbol.toPrimitive) return st.toPrimitive;
      if (!WELL_KNOWN.has(key) || key === Symbol.toStringTag) return undefined;
    }
    if (key === 'prototype' && st.err) return JUDGE.standInProto(st);
    if (typeof key === 'string' && st.methods.has(key)) return JUDGE.invoker(st, key);
    return JUDGE.op(st, 'get', { k: encodeKey(key) });
  },
  set(target, key, value) {
    const st = STATES.get(target);
    const k = encodeKey(key);
    if (k === undefined) return false;
    return JUDGE.op(st, 'set', { k, v: JUDGE.codec.encode(value) }) !== false;
  },
  has(target, key) {
    const k = encodeKey(key);
    if (k === undefined) return false;
    return Boolean(JUDGE.op(STATES.get(target), 'has', { k }));
  },
  deleteProperty(target, key) {
    const k = encodeKey(key);
    if (k === undefined) return true;
    return JUDGE.op(STATES.get(target), 'del', { k }) !== false;
  },
  ownKeys(target) {
    const keys = JUDGE.op(STATES.get(target), 'keys', {});
    const out = [];
    if (Array.isArray(keys)) for (const k of keys) if (typeof k === 'string' || typeof k === 'symbol') out.push(k);
    for (const k of ownKeys(target)) {
      const d = getOwnDesc(target, k);
      if (d && !d.configurable && !out.includes(k)) out.push(k);
    }
    return out;
  },
  getOwnPropertyDescriptor(target, key) {
    const k = encodeKey(key);
    if (k === undefined) return undefined;
    const d = JUDGE.op(STATES.get(target), 'desc', { k });
    if (d === undefined || d === null || typeof d !== 'object') return undefined;
    const own = getOwnDesc(target, key);
    if (own && !own.configurable) return { ...own, value: d.value };
    return { value: d.value, writable: Boolean(d.writable), enumerable: Boolean(d.enumerable), configurable: true };
  },
  defineProperty(target, key, desc) {
    const k = encodeKey(key);
    if (k === undefined) return false;
    const d = {};
    if ('value' in desc) d.v = JUDGE.codec.encode(desc.value);
    if ('get' in desc) d.g = JUDGE.codec.encode(desc.get);
    if ('set' in desc) d.s = JUDGE.codec.encode(desc.set);
    for (const [f, t] of [['writable', 'w'], ['enumerable', 'e'], ['configurable', 'c']]) {
      if (f in desc) d[t] = Boolean(desc[f]);
    }
    JUDGE.op(STATES.get(target), 'def', { k, d: { o: Object.entries(d) } });
    return true;
  },
  getPrototypeOf(target) {
    const st = STATES.get(target);
    const p = st.err ? JUDGE.errorParent(st) : JUDGE.op(st, 'proto', {});
    return (typeof p === 'object' || typeof p === 'function') ? p : null;
  },
  setPrototypeOf() {
    return false;
  },
  apply(target, thisArg, args) {
    const st = STATES.get(target);
    return JUDGE.op(st, 'call', { t: JUDGE.codec.encode(thisArg), a: JUDGE.codec.encode(args) });
  },
  construct(target, args) {
    const st = STATES.get(target);
    return JUDGE.op(st, 'new', { a: JUDGE.codec.encode(args) });
  },
};

// ---------------------------------------------------------------- codec

class JudgeCodec extends wire.Codec {
  constructor(judge) {
    super();
    this.judge = judge;
  }

  isOther(v) {
    return PROXIES.has(v);
  }

  encodeOther(v, depth) {
    const st = PROXIES.get(v);
    if (st) return { h: this.judge.live(st).id };
    const j = this.judge;
    if (isPromise(v)) return { p: j.sendPromise(v) };
    if (isNativeError(v)) return { E: j.errorDesc(v, depth) };
    if (typeof v === 'symbol') throw new Refused('a Symbol that is neither well-known nor registered cannot cross');
    return { c: j.callbackRef(v) };
  }

  decodeOther(tag, body, depth) {
    const j = this.judge;
    switch (tag) {
      case 'h':
        return j.handle(body, depth);
      case 'c': {
        if (!Number.isInteger(body) || !j.callbacks.has(body)) throw new ProtocolError('a reference to no object of the judge');
        return j.callbacks.get(body);
      }
      case 'p':
        if (!Number.isInteger(body)) throw new ProtocolError('a promise that is not a number');
        return j.hostPromise(body);
      case 'E':
        return j.standIn(body, depth);
      case 'B':
        if (typeof body !== 'string' || !BUILTINS.has(body)) throw new ProtocolError(`an unknown builtin ${JSON.stringify(body)}`);
        return BUILTINS.get(body);
      default:
        throw new ProtocolError(`an unknown tag ${JSON.stringify(tag)}`);
    }
  }
}

// Host builtins that arrive as the judge's own.
const BUILTINS = new Map();
for (const [name, C] of Object.entries(BUILTIN_ERRORS)) {
  BUILTINS.set(name, C);
  BUILTINS.set(`${name}.prototype`, C.prototype);
}
for (const [name, v] of [['Object', Object], ['Object.prototype', Object.prototype], ['Function', Function],
  ['Function.prototype', Function.prototype], ['Array', Array], ['Array.prototype', Array.prototype],
  ['Promise', Promise], ['Promise.prototype', Promise.prototype], ['Map', Map], ['Set', Set], ['Date', Date],
  ['RegExp', RegExp], ['Number', Number], ['String', String], ['Boolean', Boolean], ['Symbol', Symbol],
  ['BigInt', BigInt], ['Math', Math], ['JSON', JSON]]) {
  BUILTINS.set(name, v);
}
const BUILTIN_NAMES = new Map([...BUILTINS].map(([k, v]) => [v, k]));

// ---------------------------------------------------------------- the judge

class Judge {
  constructor(config) {
    this.config = config;
    this.callMs = Math.max(1, Number(config.callSecs) || 10) * 1000;
    this.codec = new JudgeCodec(this);
    this.channel = new wire.Channel(HOST_FD, 8, (m) => this.idle(m));
    this.supGone = null;
    this.gen = 0; // the live host's generation, 0 for none
    this.genDead = null; // why the last host ended
    this.nextId = 1;
    this.handles = new Map(); // `${gen}:${id}` -> proxy
    this.paths = new Map(); // module path key -> proxy
    this.callbacks = new Map(); // id -> judge object
    this.callbackIds = new WeakMap(); // judge object -> id
    this.promises = new Map(); // host promise id -> {resolve, reject, timer}
    this.sentPromises = new WeakMap();
    this.nextPromise = 1;
    this.received = 0;
    this.mirrored = new Map(); // path key -> {path, pristine}
    this.sent = new Map(); // path key -> value last told to the live host
    this.envPristine = { ...envObject };
    this.envSent = new Map();
    this.programs = new Map(); // supervisor program id -> ChildProcess-like
    this.depth = 0;
    for (const p of GLOBAL_PATHS) this.track(['g', ...p]);
  }

  // ------------------------------------------------------------ messages

  fail(why) {
    throw new HostError(why);
  }

  /** Fails the call because the candidate's process ended mid-call (a
   * crash, a hang, a broken message), told first to `onHostEnd` (the test
   * process's, which names it in the run's record for the receipt). */
  ended(kind, why) {
    if (typeof this.onHostEnd === 'function') {
      try {
        this.onHostEnd(kind, why);
      } catch {
        // naming it must not hide it
      }
    }
    this.fail(why);
  }

  /** A frame's JSON, counted against the run's budget. */
  parse(m) {
    this.received += m.size || 0;
    if (this.received > wire.MAX_RUN_BYTES) {
      throw new ProtocolError(`the candidate's code sent more than ${wire.MAX_RUN_BYTES} bytes over this run`);
    }
    return this.codec.parse(m.text);
  }

  /** What arrives while no call waits. */
  idle(m) {
    try {
      this.dispatch(m, null);
    } catch (e) {
      // A callback's failure is the host's answer; a broken message ends the host.
      if (e instanceof ProtocolError && m.chan === this.gen && this.gen) this.kill(`it broke the wire's rules (${e.message})`);
    }
  }

  /**
   * Handles one message: a reply to `want` ({chan, id}) is returned as
   * {reply}; requests are served, notifications applied. Returns null
   * otherwise.
   */
  dispatch(m, want) {
    if (m.end !== undefined) {
      this.supGone = this.supGone || (m.bad ? `it broke the wire's rules (${m.end})` : m.end);
      this.gen = 0;
      return null;
    }
    if (m.chan === 0) {
      const msg = this.codec.parse(m.text);
      if (msg.r !== undefined) {
        if (want && want.chan === 0 && msg.r === want.id) return { reply: msg };
        return null;
      }
      this.control(msg);
      return null;
    }
    if (m.chan !== this.gen) return null; // an ended host's last words
    const msg = this.parse(m);
    if (msg.r !== undefined) {
      if (want && want.chan === m.chan && msg.r === want.id) return { reply: msg };
      return null;
    }
    if (msg.q !== undefined) {
      this.serve(m.chan, msg);
      return null;
    }
    if (msg.n === 'settle') this.settle(msg);
    return null;
  }

  /** The supervisor's notifications. */
  control(msg) {
    if (msg.n === 'gone') {
      if (msg.gen === this.gen) {
        this.gen = 0;
        this.genDead = String(msg.how || 'ended');
        this.failPromises(`the candidate's process ended (${this.genDead})`);
      }
    } else if (msg.n === 'out' || msg.n === 'exit') {
      const p = this.programs.get(msg.p);
      if (p) p._event(msg);
    }
  }

  /** Sends `obj` on `chan` and waits for its reply, serving what comes meanwhile. */
  await(chan, obj, deadlineMs) {
    const T0 = now(); STATS.n++; if (!STATS.first) STATS.first = T0;
    try { return this.await2(chan, obj, deadlineMs); } finally { if (this.depth === 0) STATS.t += now() - T0; STATS.last = now(); if (process.env.GH_STATS && this.depth === 0 && STATS.n <= 4) process._rawDebug('call', STATS.n, obj.op, Math.round(now() - T0)); if (process.env.GH_STATS && this.depth === 0) process._rawDebug('judge stats', JSON.stringify({ n: STATS.n, t: Math.round(STATS.t), first: Math.round(STATS.first - STATS.start), last: Math.round(STATS.last - STATS.start) })); }
  }

  await2(chan, obj, deadlineMs) {
    if (this.supGone) this.fail(`the host supervisor is gone (${this.supGone}): the candidate's uid starts nothing more`);
    const id = this.nextId++;
    obj.q = id;
    try {
      this.channel.send(chan, obj);
    } catch (e) {
      if (e instanceof ProtocolError && /limit/.test(e.message)) throw new Refused(e.message);
      this.supGone = e.message;
      this.fail(`the host supervisor is gone (${e.message})`);
    }
    const want = { chan, id };
    const limit = deadlineMs;
    let deadline = limit === Infinity ? Infinity : now() + limit;
    this.depth++;
    try {
      for (;;) {
        const m = this.channel.take(deadline);
        if (m === null) {
          if (chan !== 0) {
            this.kill(`it did not answer within ${Math.round(limit / 1000)} s`);
            this.ended('hang', `the candidate's code did not answer within ${Math.round(limit / 1000)} s: its process was ended`);
          }
          this.fail('the host supervisor did not answer');
        }
        if (chan !== 0 && m.chan === chan) deadline = limit === Infinity ? Infinity : now() + limit;
        let got;
        try {
          got = this.dispatch(m, want);
        } catch (e) {
          if (e instanceof ProtocolError && chan !== 0 && m.chan === chan) {
            this.kill(`it broke the wire's rules (${e.message})`);
            this.ended('wire', `the candidate's process broke the wire's rules (${e.message}): it was ended`);
          }
          throw e;
        }
        if (got) return got.reply;
        if (this.supGone) this.fail(`the host supervisor is gone (${this.supGone})`);
        if (chan !== 0 && this.gen !== chan) {
          this.ended('exit', `the candidate's process ended during the call (${this.genDead || 'ended'})`);
        }
      }
    } finally {
      this.depth--;
    }
  }

  /** A request to the supervisor. */
  sup(op, fields = {}, deadlineMs = 30000) {
    const reply = this.await(0, { op, ...fields }, deadlineMs);
    if (reply.error) throw new Error(String(reply.error));
    return reply;
  }

  kill(why) {
    const gen = this.gen;
    if (!gen) return;
    this.gen = 0;
    this.genDead = why;
    this.failPromises(`the candidate's process was ended: ${why}`);
    try {
      this.channel.send(0, { op: 'kill', gen, q: 0 });
    } catch {
      // the supervisor is gone: so is the host
    }
  }

  /** The live host's generation, starting one when there is none. */
  host() {
    if (this.gen) return this.gen;
    const r = this.sup('start', {});
    if (!Number.isInteger(r.gen) || r.gen <= 0) this.fail('the host supervisor started no host');
    this.gen = r.gen;
    this.genDead = null;
    this.sent = new Map();
    this.envSent = new Map();
    return this.gen;
  }

  /** A request to the live host about `st`'s object; the decoded answer. */
  op(st, op, fields) {
    const s = this.live(st);
    return this.request(op, { o: { h: s.id }, ...fields });
  }

  request(op, fields) {
    const gen = this.host();
    const msg = { op, ...fields };
    const patches = this.patches();
    if (patches) msg.pt = patches;
    const reply = this.await(gen, msg, this.callMs);
    if ('e' in reply) {
      const thrown = this.decodeIn(gen, reply.e);
      throw thrown;
    }
    return this.decodeIn(gen, reply.v);
  }

  decodeIn(gen, t) {
    try {
      return this.codec.decode(t);
    } catch (e) {
      if (e instanceof ProtocolError) {
        if (this.gen === gen) this.kill(`it broke the wire's rules (${e.message})`);
        this.ended('wire', `the candidate's process broke the wire's rules (${e.message}): it was ended`);
      }
      throw e;
    }
  }

  // ------------------------------------------------------------ handles

  /** The proxy for a host handle `[id, kind, name, methods, err]`. */
  handle(body, depth) {
    if (!Array.isArray(body) || body.length !== 5) throw new ProtocolError('a handle that is not [id, kind, name, methods, error]');
    const [id, kind, name, methods, err] = body;
    if (!Number.isInteger(id) || id <= 0) throw new ProtocolError('a handle whose id is not a positive integer');
    if (kind !== 'f' && kind !== 'o') throw new ProtocolError('a handle of an unknown kind');
    if (typeof name !== 'string' || name.length > 200) throw new ProtocolError('a handle whose name is not a short string');
    if (!Array.isArray(methods) || methods.length > 256 || !methods.every((m) => typeof m === 'string' && m.length <= 200)) {
      throw new ProtocolError('a handle whose methods are not a short list of names');
    }
    const key = `${this.gen}:${id}`;
    const known = this.handles.get(key);
    if (known) return known;
    let errInfo = null;
    if (err !== null) {
      if (kind !== 'f' || !Array.isArray(err) || err.length !== 2 || typeof err[0] !== 'string' || !BUILTIN_ERRORS[err[0]]) {
        throw new ProtocolError('an error class that is not [builtin, parent]');
      }
      const up = this.codec.decode(err[1], depth + 1);
      if (up !== null && !(typeof up === 'function')) throw new ProtocolError('an error class whose parent is not a class');
      errInfo = { builtin: err[0], up };
    }
    return this.makeProxy({ gen: this.gen, id, kind, name, methods: new Set(methods.filter((m) => !DENY.has(m) && m !== 'then')), err: errInfo, path: null }, key);
  }

  makeProxy(st, key) {
    const target = makeTarget(st.kind, st.name);
    const proxy = new Proxy(target, HANDLER);
    st.proxy = proxy;
    st.invokers = new Map();
    st.hasInstance = (x) => this.isInstance(x, st);
    st.toPrimitive = (hint) => this.op(st, 'prim', { h: String(hint) });
    STATES.set(target, st);
    PROXIES.set(proxy, st);
    if (key) this.handles.set(key, proxy);
    return proxy;
  }

  /** `st` with a handle in the live host: found again by its path after a restart. */
  live(st) {
    if (st.gen && st.gen === this.gen) return st;
    if (!st.path) {
      this.fail(`this object of the candidate's code is gone: the process that made it ended (${this.genDead || 'ended'})`);
    }
    const gen = this.host();
    let v;
    if (st.path.key === undefined) {
      v = this.request('import', { p: st.path.file });
    } else {
      const mod = this.moduleProxy(st.path.rel);
      v = this.op(PROXIES.get(mod), 'get', { k: st.path.key });
    }
    const fresh = PROXIES.get(v);
    if (!fresh || fresh.gen !== gen) this.fail(`${st.path.key || st.path.rel} is no longer an object in the candidate's code`);
    // The old proxy stands for the new handle: identity survives the restart.
    st.gen = gen;
    st.id = fresh.id;
    st.methods = fresh.methods;
    st.kind === fresh.kind || this.fail(`${st.path.key || st.path.rel} changed kind`);
    this.handles.set(`${gen}:${fresh.id}`, st.proxy);
    return st;
  }

  invoker(st, key) {
    let f = st.invokers.get(key);
    if (f) return f;
    const judge = this;
    f = function (...args) {
      if (new.target === undefined && this === st.proxy) return judge.op(st, 'invoke', { k: key, a: judge.codec.encode(args) });
      const fn = judge.op(st, 'get', { k: key });
      return new.target === undefined ? apply(fn, this, args) : construct(fn, args);
    };
    defineProp(f, 'name', { value: key });
    st.invokers.set(key, f);
    return f;
  }

  isInstance(x, st) {
    const xs = hostState(x);
    if (st.err) {
      // Stand-ins: the prototype that stands for the class is on x's chain.
      const proto = this.standInProto(st);
      for (let p = x !== null && (typeof x === 'object' || typeof x === 'function') ? getProto(x) : null; p; p = getProto(p)) {
        if (p === proto) return true;
      }
      if (!xs) return false;
    }
    if (!xs) return false;
    return Boolean(this.op(st, 'isa', { x: { h: this.live(xs).id } }));
  }

  /** The module proxy for a candidate module (its workspace path). */
  moduleProxy(rel) {
    const k = `module:${rel}`;
    const known = this.paths.get(k);
    if (known) return known;
    const file = this.config.candidates[rel];
    const v = this.request('import', { p: file });
    const st = PROXIES.get(v);
    if (!st) this.fail(`the candidate's module ${rel} did not load as a module`);
    st.path = { rel, file };
    this.paths.set(k, v);
    return v;
  }

  // ------------------------------------------------------------ errors

  /** The judge's prototype standing for a host error class. */
  standInProto(st) {
    if (st.proto) return st.proto;
    const parent = st.err.up;
    let up;
    if (parent === null || parent === undefined) up = BUILTIN_ERRORS[st.err.builtin].prototype;
    else if (PROXIES.has(parent)) up = PROXIES.get(parent).err ? this.standInProto(PROXIES.get(parent)) : BUILTIN_ERRORS[st.err.builtin].prototype;
    else up = parent.prototype || BUILTIN_ERRORS[st.err.builtin].prototype;
    const proto = Object.create(up);
    defineProp(proto, 'constructor', { value: st.proxy, writable: true, configurable: true });
    st.proto = proto;
    return proto;
  }

  errorParent(st) {
    const up = st.err.up;
    if (up === null || up === undefined) return BUILTIN_ERRORS[st.err.builtin];
    return up;
  }

  /** An exception of the host as the judge's own error. */
  standIn(body, depth) {
    if (!Array.isArray(body) || body.length !== 5) throw new ProtocolError('an error that is not [builtin, class, message, name, fields]');
    const [builtin, cls, message, name, fields] = body;
    const B = typeof builtin === 'string' ? BUILTIN_ERRORS[builtin] : undefined;
    if (!B) throw new ProtocolError(`an error of an unknown builtin class ${JSON.stringify(builtin)}`);
    if (typeof message !== 'string' || typeof name !== 'string') throw new ProtocolError('an error whose message or name is not a string');
    const e = builtin === 'AggregateError' ? new B([], message) : new B(message);
    if (cls !== null) {
      const C = this.codec.decode(cls, depth + 1);
      const cs = PROXIES.get(C);
      if (!cs || !cs.err) throw new ProtocolError('an error whose class is not an error class of the host');
      setProto(e, this.standInProto(cs));
    }
    if (e.name !== name) defineProp(e, 'name', { value: name, writable: true, configurable: true });
    if (!Array.isArray(fields)) throw new ProtocolError('an error whose fields are not a list');
    for (const pair of fields) {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string') throw new ProtocolError('an error field that is not [name, value]');
      if (pair[0] === '__proto__' || pair[0] === 'stack') continue;
      defineProp(e, pair[0], { value: this.codec.decode(pair[1], depth + 1), writable: true, enumerable: true, configurable: true });
    }
    return e;
  }

  /** A judge error as the host sees it: [builtin, class, message, name, fields]. */
  errorDesc(e, depth) {
    let builtin = 'Error';
    let cls = null;
    for (let p = getProto(e); p; p = getProto(p)) {
      const n = BUILTIN_NAMES.get(p);
      if (n && n.endsWith('.prototype') && BUILTIN_ERRORS[n.slice(0, -10)]) {
        builtin = n.slice(0, -10);
        break;
      }
      const ctor = getOwnDesc(p, 'constructor');
      if (cls === null && ctor && PROXIES.has(ctor.value)) cls = { h: this.live(PROXIES.get(ctor.value)).id };
    }
    let message = '';
    let name = builtin;
    try {
      message = String(e.message);
      name = String(e.name);
    } catch {
      // an error whose message cannot be read crosses without one
    }
    const fields = [];
    for (const k of objectKeys(e)) {
      if (k === 'message' || k === 'stack' || k === 'name') continue;
      try {
        fields.push([k, this.codec.encode(e[k], depth + 1)]);
      } catch {
        // a field that cannot cross stays here
      }
    }
    return [builtin, cls, message, name, fields];
  }

  // ------------------------------------------------------------ promises

  hostPromise(pid) {
    let resolve;
    let reject;
    const p = new PromiseCtor((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const gen = this.gen;
    const timer = setTimer(() => {
      if (this.promises.has(`${gen}:${pid}`)) {
        this.promises.delete(`${gen}:${pid}`);
        this.channel.hold(false);
        reject(new HostError(`a promise of the candidate's code did not settle within ${Math.round(this.callMs / 1000)} s`));
      }
    }, this.callMs);
    this.promises.set(`${gen}:${pid}`, { resolve, reject, timer });
    this.channel.hold(true);
    return p;
  }

  settle(msg) {
    const key = `${this.gen}:${msg.p}`;
    const w = this.promises.get(key);
    if (!w) return;
    this.promises.delete(key);
    clearTimer(w.timer);
    this.channel.hold(false);
    let value;
    try {
      value = this.codec.decode('v' in msg ? msg.v : msg.e);
    } catch (e) {
      w.reject(e instanceof ProtocolError ? new HostError(`a promise of the candidate's code settled with what breaks the wire's rules (${e.message})`) : e);
      return;
    }
    if ('v' in msg) w.resolve(value);
    else w.reject(value);
  }

  failPromises(why) {
    for (const [key, w] of this.promises) {
      clearTimer(w.timer);
      this.channel.hold(false);
      w.reject(new HostError(why));
      this.promises.delete(key);
    }
  }

  /** A judge promise the host will wait on: settled by a message. */
  sendPromise(p) {
    const pid = this.nextPromise++;
    const gen = this.gen;
    const send = (field, value) => {
      if (this.gen !== gen || !gen) return;
      let encoded;
      try {
        encoded = this.codec.encode(value);
      } catch (e) {
        field = 'e';
        encoded = { E: ['TypeError', null, String(e.message), 'TypeError', []] };
      }
      try {
        this.channel.send(gen, { n: 'settle', p: pid, [field]: encoded });
      } catch {
        // the host is gone
      }
    };
    apply(promiseThen, p, [(v) => send('v', v), (e) => send('e', e)]);
    return pid;
  }

  // ------------------------------------------------------------ callbacks

  callbackRef(v) {
    let id = this.callbackIds.get(v);
    if (id === undefined) {
      id = this.callbacks.size + 1;
      this.callbacks.set(id, v);
      this.callbackIds.set(v, id);
    }
    const kind = typeof v === 'function' ? 'f' : 'o';
    return [id, kind, kind === 'o' && !isProxy(v) ? this.methodNames(v) : []];
  }

  /** The methods a judge object's class defines (for the host's quick calls):
   * functions on its prototypes, not its own properties. */
  methodNames(v) {
    const out = [];
    for (let p = getProto(v); p && p !== ObjectProto && p !== FunctionProto && out.length < 64; p = getProto(p)) {
      for (const k of ownKeys(p)) {
        if (typeof k !== 'string' || DENY.has(k) || out.includes(k)) continue;
        const d = getOwnDesc(p, k);
        if (d && typeof d.value === 'function') out.push(k);
      }
    }
    return out;
  }

  /** Whether the host may read or write `key` of the judge object `obj`. */
  reachable(obj, key) {
    if (typeof key === 'symbol') return key === Symbol.iterator || key === Symbol.asyncIterator;
    if (DENY.has(key) || isProxy(obj)) return false;
    for (let p = obj; p && p !== ObjectProto && p !== FunctionProto; p = getProto(p)) {
      if (getOwnDesc(p, key)) return true;
    }
    return false;
  }

  target(msg) {
    const obj = this.codec.decode(msg.o);
    if (obj === null || (typeof obj !== 'object' && typeof obj !== 'function') || PROXIES.has(obj)) {
      throw new ProtocolError('a request about something that is not an object of the judge');
    }
    return obj;
  }

  /** Serves the host's request (a callback). */
  serve(chan, msg) {
    let reply;
    try {
      reply = { r: msg.q, v: this.codec.encode(this.callbackOp(msg)) };
    } catch (e) {
      if (e instanceof ProtocolError) throw e;
      let encoded;
      try {
        encoded = this.codec.encode(e);
      } catch (e2) {
        encoded = { E: ['TypeError', null, String(e2.message), 'TypeError', []] };
      }
      reply = { r: msg.q, e: encoded };
    }
    try {
      this.channel.send(chan, reply);
    } catch (e) {
      if (e instanceof ProtocolError && /limit/.test(e.message)) {
        this.channel.send(chan, { r: msg.q, e: { E: ['RangeError', null, e.message, 'RangeError', []] } });
      }
    }
  }

  callbackOp(msg) {
    const refuse = (what) => {
      throw new TypeError(`the judge's ${what} is not reachable from the candidate's code`);
    };
    switch (msg.op) {
      case 'call': {
        const f = this.target({ o: msg.f });
        if (typeof f !== 'function') refuse('object');
        return apply(f, this.codec.decode(msg.t), this.args(msg.a));
      }
      case 'new': {
        const f = this.target({ o: msg.f });
        if (typeof f !== 'function') refuse('object');
        return construct(f, this.args(msg.a));
      }
      case 'invoke': {
        const o = this.target(msg);
        const k = decodeKey(msg.k);
        if (!this.reachable(o, k)) refuse(`property ${String(k)}`);
        const f = reflectGet(o, k);
        if (typeof f !== 'function') throw new TypeError(`${String(k)} is not a function`);
        return apply(f, o, this.args(msg.a));
      }
      case 'get': {
        const o = this.target(msg);
        const k = decodeKey(msg.k);
        if (!this.reachable(o, k)) return undefined;
        return reflectGet(o, k);
      }
      case 'set': {
        const o = this.target(msg);
        const k = decodeKey(msg.k);
        if (typeof k !== 'string' || DENY.has(k) || isProxy(o) || typeof o === 'function') refuse(`property ${String(k)}`);
        return reflectSet(o, k, this.codec.decode(msg.v));
      }
      case 'has': {
        const o = this.target(msg);
        const k = decodeKey(msg.k);
        return this.reachable(o, k) && reflectHas(o, k);
      }
      case 'keys': {
        const o = this.target(msg);
        if (isProxy(o)) return [];
        return objectKeys(o).filter((k) => !DENY.has(k));
      }
      case 'prim': {
        const o = this.target(msg);
        if (isProxy(o)) return typeof o === 'function' ? 'function () { [judge callback] }' : '[object Object]';
        const hint = msg.h;
        if (hint === 'number') return Number(o);
        return String(o);
      }
      default:
        throw new ProtocolError(`an unknown request ${JSON.stringify(msg.op)}`);
    }
  }

  args(t) {
    const a = this.codec.decode(t);
    if (!Array.isArray(a)) throw new ProtocolError('arguments that are not a list');
    return a;
  }

  // ------------------------------------------------------------ patches

  track(full) {
    const key = full.join('\u0000');
    if (this.mirrored.has(key)) return;
    this.mirrored.set(key, { path: full, pristine: this.read(full) });
  }

  /** A builtin module packet code required: its functions are mirrored from now on. */
  trackModule(name, exports) {
    const bare = name.startsWith('node:') ? name.slice(5) : name;
    if (!MIRRORED_MODULES.has(bare) || exports === null || typeof exports !== 'object') return;
    const mark = `m:${bare}`;
    if (this.mirrored.has(`${mark}\u0000`)) return;
    this.mirrored.set(`${mark}\u0000`, { path: null });
    for (const k of ownKeys(exports)) {
      if (typeof k !== 'string') continue;
      const d = getOwnDesc(exports, k);
      if (d && typeof d.value === 'function') this.track([mark, k]);
    }
  }

  read(full) {
    let v = full[0] === 'g' ? globalThis : require(full[0].slice(2));
    for (const k of full.slice(1)) {
      if (v === null || v === undefined) return undefined;
      try {
        v = v[k];
      } catch {
        return undefined;
      }
    }
    return v;
  }

  /** What changed since the live host was last told: [[path, value|null], ..]. */
  patches() {
    let out = null;
    for (const [key, m] of this.mirrored) {
      if (!m.path) continue;
      const cur = this.read(m.path);
      const last = this.sent.has(key) ? this.sent.get(key) : m.pristine;
      if (cur === last) continue;
      this.sent.set(key, cur);
      let value = null;
      if (cur !== m.pristine) {
        try {
          value = this.codec.encode(cur);
        } catch {
          value = null;
        }
      }
      (out = out || []).push([m.path, value]);
    }
    for (const k of objectKeys(envObject)) {
      const cur = envObject[k];
      const last = this.envSent.has(k) ? this.envSent.get(k) : this.envPristine[k];
      if (cur !== last) {
        this.envSent.set(k, cur);
        (out = out || []).push([['env', k], cur]);
      }
    }
    for (const k of [...objectKeys(this.envPristine), ...this.envSent.keys()]) {
      if (k in envObject) continue;
      const last = this.envSent.has(k) ? this.envSent.get(k) : this.envPristine[k];
      if (last !== undefined) {
        this.envSent.set(k, undefined);
        (out = out || []).push([['env', k], null]);
      }
    }
    return out;
  }

  // ------------------------------------------------------------ programs

  /** Runs a program to its end under the candidate's uid (spawnSync). */
  runSync(file, args, options) {
    const o = normalizeSpawn(file, args, options);
    const input = options && options.input !== undefined ? toBuffer(options.input, options.encoding) : null;
    const limit = o.timeout > 0 ? o.timeout + 5000 : Infinity;
    const r = this.sup('run', { ...o.msg, sync: true, input: input ? input.toString('base64') : null }, limit);
    const enc = options && options.encoding && options.encoding !== 'buffer' ? options.encoding : null;
    const out = (b) => (b === null || b === undefined ? null : enc ? BufferFrom(b, 'base64').toString(enc) : BufferFrom(b, 'base64'));
    const result = {
      pid: r.pid || 0,
      output: [null, out(r.stdout), out(r.stderr)],
      stdout: out(r.stdout),
      stderr: out(r.stderr),
      status: r.status === undefined ? null : r.status,
      signal: r.signal || null,
    };
    if (r.spawnError) {
      const err = new Error(`spawnSync ${o.msg.argv[0]} ${r.spawnError}`);
      err.code = r.spawnError;
      err.errno = -2;
      err.syscall = `spawnSync ${o.msg.argv[0]}`;
      err.path = o.msg.argv[0];
      err.spawnargs = o.msg.argv.slice(1);
      result.error = err;
    } else if (r.timedOut) {
      const err = new Error(`spawnSync ${o.msg.argv[0]} ETIMEDOUT`);
      err.code = 'ETIMEDOUT';
      result.error = err;
    }
    return result;
  }

  spawn(file, args, options) {
    const o = normalizeSpawn(file, args, options);
    const r = this.sup('run', { ...o.msg, sync: false });
    const child = new HostChild(this, r, o);
    if (r.spawnError === undefined) {
      this.programs.set(r.p, child);
      this.channel.hold(true);
    }
    return child;
  }
}

// ---------------------------------------------------------------- programs

function toBuffer(v, enc) {
  if (Buffer.isBuffer(v)) return v;
  if (ArrayBuffer.isView(v)) return BufferFrom(v.buffer, v.byteOffset, v.byteLength);
  return BufferFrom(String(v), typeof enc === 'string' && enc !== 'buffer' ? enc : 'utf8');
}

function normalizeSpawn(file, args, options) {
  if (!Array.isArray(args)) {
    options = args;
    args = [];
  }
  options = options || {};
  let argv = [String(file), ...args.map(String)];
  if (options.shell) {
    const sh = typeof options.shell === 'string' ? options.shell : '/bin/sh';
    argv = [sh, '-c', argv.join(' ')];
  }
  if (options.uid !== undefined || options.gid !== undefined) {
    throw new Error('uid and gid options are not available in a run judged apart: every program runs as the candidate');
  }
  const env = options.env ? Object.entries(options.env).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)]) : Object.entries(envObject).map(([k, v]) => [k, String(v)]);
  let stdio = options.stdio;
  if (typeof stdio === 'string') stdio = [stdio, stdio, stdio];
  if (!Array.isArray(stdio)) stdio = ['pipe', 'pipe', 'pipe'];
  const norm = [0, 1, 2].map((i) => {
    const s = stdio[i];
    if (s === 'ignore' || s === null) return 'ignore';
    if (s === 'inherit' || s === i || (s && typeof s === 'object' && typeof s.fd === 'number' && s.fd === i)) return 'inherit';
    if (s === undefined) return 'pipe';
    return 'pipe';
  });
  const timeout = Number(options.timeout) > 0 ? Number(options.timeout) : 0;
  return {
    msg: {
      argv,
      cwd: options.cwd ? String(options.cwd instanceof URL ? options.cwd.pathname : options.cwd) : process.cwd(),
      env,
      stdio: norm,
      timeout,
      killSignal: options.killSignal || 'SIGTERM',
      maxBuffer: Number(options.maxBuffer) > 0 ? Number(options.maxBuffer) : 1024 * 1024,
      argv0: options.argv0 ? String(options.argv0) : null,
      detached: Boolean(options.detached),
    },
    timeout,
    options,
  };
}

/** A program the supervisor started: what `spawn` returns here. */
class HostChild extends events.EventEmitter {
  constructor(judge, r, o) {
    super();
    this._judge = judge;
    this._p = r.p;
    this.pid = r.pid;
    this.spawnfile = o.msg.argv[0];
    this.spawnargs = o.msg.argv;
    this.exitCode = null;
    this.signalCode = null;
    this.killed = false;
    this.connected = false;
    const pipes = o.msg.stdio;
    this.stdin = pipes[0] === 'pipe' ? new stream.Writable({
      write: (chunk, enc, done) => {
        try {
          judge.sup('stdin', { p: this._p, data: toBuffer(chunk, enc).toString('base64') });
          done();
        } catch (e) {
          done(e);
        }
      },
      final: (done) => {
        try {
          judge.sup('stdin', { p: this._p, end: true });
        } catch {
          // the program is gone
        }
        done();
      },
    }) : null;
    this.stdout = pipes[1] === 'pipe' ? new stream.PassThrough() : null;
    this.stderr = pipes[2] === 'pipe' ? new stream.PassThrough() : null;
    this.stdio = [this.stdin, this.stdout, this.stderr];
    process.nextTick(() => {
      if (r.spawnError !== undefined) {
        const err = new Error(`spawn ${this.spawnfile} ${r.spawnError}`);
        err.code = r.spawnError;
        err.path = this.spawnfile;
        err.spawnargs = this.spawnargs.slice(1);
        this.emit('error', err);
        this.emit('close', -2, null);
      } else {
        this.emit('spawn');
      }
    });
  }

  _event(msg) {
    if (msg.n === 'out') {
      const s = msg.fd === 2 ? this.stderr : this.stdout;
      if (s) s.write(BufferFrom(String(msg.data), 'base64'));
      return;
    }
    this.exitCode = msg.code === undefined ? null : msg.code;
    this.signalCode = msg.signal || null;
    this._judge.programs.delete(this._p);
    this._judge.channel.hold(false);
    this.emit('exit', this.exitCode, this.signalCode);
    if (this.stdout) this.stdout.end();
    if (this.stderr) this.stderr.end();
    const done = () => this.emit('close', this.exitCode, this.signalCode);
    let left = [this.stdout, this.stderr].filter(Boolean).length;
    if (left === 0) process.nextTick(done);
    for (const s of [this.stdout, this.stderr].filter(Boolean)) {
      s.on('end', () => {
        if (--left === 0) done();
      });
      s.resume && s.listenerCount('data') === 0 && s.readableFlowing === null && s.on('data', () => {});
    }
  }

  kill(signal = 'SIGTERM') {
    try {
      this._judge.sup('signal', { p: this._p, sig: String(signal) });
      this.killed = true;
      return true;
    } catch {
      return false;
    }
  }

  ref() {}

  unref() {}

  disconnect() {}
}

// The child_process functions packet code calls here.
function routeChildProcess(judge) {
  const spawnSync = (file, args, options) => judge.runSync(file, args, options);
  const fail = (r, cmd) => {
    if (r.error) throw r.error;
    if (r.status !== 0) {
      const err = new Error(`Command failed: ${cmd}${r.stderr && r.stderr.length ? `\n${r.stderr}` : ''}`);
      err.status = r.status;
      err.signal = r.signal;
      err.output = r.output;
      err.stdout = r.stdout;
      err.stderr = r.stderr;
      err.pid = r.pid;
      throw err;
    }
    return r.stdout;
  };
  const execFileSync = (file, args, options) => {
    if (!Array.isArray(args)) {
      options = args;
      args = [];
    }
    const r = spawnSync(file, args, options);
    return fail(r, [file, ...args].join(' '));
  };
  const execSync = (command, options) => {
    const r = spawnSync('/bin/sh', ['-c', String(command)], options);
    return fail(r, String(command));
  };
  const spawn = (file, args, options) => judge.spawn(file, args, options);
  const execFile = (file, args, options, callback) => {
    if (typeof args === 'function') {
      callback = args;
      args = [];
      options = {};
    } else if (!Array.isArray(args)) {
      callback = options;
      options = args;
      args = [];
    }
    if (typeof options === 'function') {
      callback = options;
      options = {};
    }
    options = options || {};
    const child = spawn(file, args, options);
    const out = [];
    const err = [];
    if (child.stdout) child.stdout.on('data', (c) => out.push(c));
    if (child.stderr) child.stderr.on('data', (c) => err.push(c));
    const enc = options.encoding === 'buffer' ? null : options.encoding || 'utf8';
    child.on('close', (code, signal) => {
      const so = Buffer.concat(out);
      const se = Buffer.concat(err);
      const stdout = enc ? so.toString(enc) : so;
      const stderr = enc ? se.toString(enc) : se;
      if (!callback) return;
      if (code === 0 && !signal) callback(null, stdout, stderr);
      else {
        const e = new Error(`Command failed: ${[file, ...args].join(' ')}\n${se}`);
        e.code = code;
        e.signal = signal;
        e.killed = child.killed;
        e.cmd = [file, ...args].join(' ');
        callback(e, stdout, stderr);
      }
    });
    child.on('error', (e) => callback && callback(e, '', ''));
    return child;
  };
  const exec = (command, options, callback) => {
    if (typeof options === 'function') {
      callback = options;
      options = {};
    }
    return execFile('/bin/sh', ['-c', String(command)], options, callback);
  };
  const fork = () => {
    throw new Error('child_process.fork is not available in a run judged apart (its IPC channel would join the two uids)');
  };
  const routed = { spawnSync, execFileSync, execSync, spawn, execFile, exec, fork };
  for (const [k, f] of Object.entries(routed)) {
    defineProp(cp, k, { value: f, writable: true, configurable: true, enumerable: true });
  }
  // exec and execFile's promisified forms.
  exec[util.promisify.custom] = (command, options) => new Promise((res, rej) => {
    exec(command, options, (e, stdout, stderr) => (e ? rej(Object.assign(e, { stdout, stderr })) : res({ stdout, stderr })));
  });
  execFile[util.promisify.custom] = (file, args, options) => new Promise((res, rej) => {
    execFile(file, args, options, (e, stdout, stderr) => (e ? rej(Object.assign(e, { stdout, stderr })) : res({ stdout, stderr })));
  });
}

// fs.mkdtemp folders opened to the group, so the candidate's uid can read
// what a test writes there for a program.
function openTempFolders() {
  const sync = fs.mkdtempSync;
  const async = fs.mkdtemp;
  const promised = fs.promises.mkdtemp;
  const open = (dir) => {
    try {
      fs.chmodSync(dir, 0o770);
    } catch {
      // left as it was made
    }
    return dir;
  };
  fs.mkdtempSync = function mkdtempSync(...args) {
    return open(apply(sync, fs, args));
  };
  fs.mkdtemp = function mkdtemp(prefix, options, cb) {
    if (typeof options === 'function') {
      cb = options;
      options = undefined;
    }
    return apply(async, fs, [prefix, options, (e, dir) => cb(e, e ? dir : open(dir))]);
  };
  fs.promises.mkdtemp = async function mkdtemp(...args) {
    return open(await apply(promised, fs.promises, args));
  };
}

// ---------------------------------------------------------------- modules

function under(file, dir) {
  return file === dir || file.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** The candidate module a request names, as {rel, file}, or null. */
function candidateFor(config, request, parent) {
  if (typeof request !== 'string') return null;
  let abs;
  if (request.startsWith('./') || request.startsWith('../') || request === '.' || request === '..') {
    const from = parent && parent.filename ? path.dirname(parent.filename) : process.cwd();
    abs = path.resolve(from, request);
  } else if (path.isAbsolute(request)) {
    abs = path.resolve(request);
  } else {
    return null;
  }
  let rel = null;
  for (const root of [config.out, config.hostOut, config.workspace]) {
    if (under(abs, root)) {
      rel = path.relative(root, abs);
      break;
    }
  }
  if (rel === null) return null;
  const stem = rel.replace(/\.(c|m)?(j|t)s$/, '');
  for (const c of [rel, `${stem}.ts`, path.join(rel, 'index.ts')]) {
    if (Object.prototype.hasOwnProperty.call(config.candidates, c)) return { rel: c, file: config.candidates[c] };
  }
  if (under(abs, config.hostOut) || (under(abs, config.workspace) && /\.(c|m)?js$|\.node$/.test(abs) && !config.laid.has(rel))) {
    return { refused: abs };
  }
  return null;
}

function installModules(judge, config) {
  const load = Module._load;
  const resolve = Module._resolveFilename;
  const builtins = new Set(Module.builtinModules);
  Module._resolveFilename = function (request, parent, ...rest) {
    const hit = candidateFor(config, request, parent);
    if (hit && hit.file) return hit.file;
    return apply(resolve, this, [request, parent, ...rest]);
  };
  Module._load = function (request, parent, ...rest) {
    const hit = candidateFor(config, request, parent);
    if (hit && hit.file) return judge.moduleProxy(hit.rel);
    if (hit && hit.refused) {
      throw new Error(`the judge never loads the candidate's files: ${hit.refused} (JUDGE.md)`);
    }
    const out = apply(load, this, [request, parent, ...rest]);
    if (typeof request === 'string' && (request.startsWith('node:') || builtins.has(request))) {
      judge.trackModule(request, out);
    }
    return out;
  };
}

/**
 * Installs the judge: `config` is {hostOut, out, workspace, candidates:
 * {rel: compiled file}, laid: [rel], callSecs}.
 */
function install(config) {
  if (JUDGE) return JUDGE;
  const cfg = { ...config, laid: new Set(config.laid || []) };
  routeChildProcess({ runSync: (...a) => JUDGE.runSync(...a), spawn: (...a) => JUDGE.spawn(...a) });
  openTempFolders();
  JUDGE = new Judge(cfg);
  installModules(JUDGE, cfg);
  return JUDGE;
}

module.exports = { install, HostError };
