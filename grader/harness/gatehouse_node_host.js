'use strict';
// The host side of the judge apart for TypeScript on Node (JUDGE.md): runs
// under the candidate's uid.
//
// The sandbox starts this file as the run's HOST SUPERVISOR, under the
// candidate's uid, with one end of a socket pair to the judge on
// descriptor 3:
//
//     /bin/sh -c "exec node /gatehouse/gatehouse_node_host.js"
//
// The supervisor never loads a byte of the submission. It reads the
// judge's frames (gatehouse_node_wire.js: length, channel, JSON) and
//
// - on channel 0 serves the judge's requests: `start` a HOST SERVER (this
//   file with `--serve`, a child process with a pipe on its descriptor 3)
//   as the next generation N; `kill` one; `run` a program (argv, folder,
//   environment, standard streams; to its end, or started with its output
//   streamed back as `out` and `exit` notifications), `stdin` and `signal`
//   for it. When a host server ends it says `gone` with how it ended.
// - relays channel N's frames to and from host server N, checking each
//   length the server announces against the limit: a server that breaks it
//   is killed, never read past; one that ends mid-message leaves nothing
//   half-read behind. So a host that exits, hangs or writes garbage on its
//   descriptor fails the call it was serving, and the judge starts the
//   next.
//
// A HOST SERVER loads the candidate's compiled modules the judge names
// (`import`: compiled by the grader's runner into a folder of their own)
// and serves the judge's calls on them with data and handles
// (gatehouse_node_wire.js). It loads no test framework (never node:test or
// node:assert), holds no runner variable (GATEHOUSE_*, NODE_* and npm_*
// are scrubbed from its environment and from every program's that the
// supervisor did not get from the judge), and is the candidate's code
// running as a program of its own: nothing it says is trusted by the judge
// beyond being data.

const fs = require('fs');
const path = require('path');

const SERVE = process.argv[2] === '--serve';
const MAX_MESSAGE = 16 << 20;

function scrubbedEnv(env) {
  const out = {};
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith('GATEHOUSE_') || k.startsWith('NODE_') || k.startsWith('npm_')) continue;
    out[k] = v;
  }
  return out;
}

// ---------------------------------------------------------------- supervisor

function supervisor() {
  const net = require('net');
  const cp = require('child_process');
  process.umask(0o002);
  const link = new net.Socket({ fd: 3, readable: true, writable: true });
  const hosts = new Map(); // gen -> {child, pipe, buf}
  const programs = new Map(); // id -> {child}
  let nextGen = 1;
  let nextProgram = 1;

  const frame = (chan, obj) => {
    const body = Buffer.from(typeof obj === 'string' ? obj : JSON.stringify(obj), 'utf8');
    const head = Buffer.alloc(8);
    head.writeUInt32BE(body.length, 0);
    head.writeUInt32BE(chan, 4);
    link.write(Buffer.concat([head, body]));
  };
  const relay = (chan, body) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(body.length, 0);
    head.writeUInt32BE(chan, 4);
    link.write(Buffer.concat([head, body]));
  };
  const reply = (q, fields) => {
    if (q) frame(0, { r: q, ...fields });
  };

  const start = () => {
    const gen = nextGen++;
    const child = cp.spawn(process.execPath, [__filename, '--serve'], {
      cwd: process.cwd(),
      env: scrubbedEnv(process.env),
      stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
    });
    const h = { child, pipe: child.stdio[3], chunks: [], have: 0, dead: false };
    hosts.set(gen, h);
    const kill = (why) => {
      if (h.dead) return;
      h.dead = why;
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    };
    h.kill = kill;
    h.pipe.on('data', (chunk) => {
      if (h.dead) return;
      h.chunks.push(chunk);
      h.have += chunk.length;
      for (;;) {
        if (h.have < 4) return;
        let buf = h.chunks.length === 1 ? h.chunks[0] : Buffer.concat(h.chunks);
        h.chunks = [buf];
        const n = buf.readUInt32BE(0);
        if (n > MAX_MESSAGE) {
          kill(`it announced a message of ${n} bytes, over the ${MAX_MESSAGE}-byte limit`);
          return;
        }
        if (h.have < 4 + n) return;
        relay(gen, buf.subarray(4, 4 + n));
        buf = buf.subarray(4 + n);
        h.chunks = buf.length ? [buf] : [];
        h.have = buf.length;
      }
    });
    h.pipe.on('error', () => {});
    child.on('error', () => {});
    child.on('close', (code, signal) => {
      hosts.delete(gen);
      const how = h.dead || (signal ? `killed by ${signal}` : `exit status ${code}`);
      frame(0, { n: 'gone', gen, how });
    });
    return gen;
  };

  const run = (q, msg) => {
    const id = nextProgram++;
    const stdio = (Array.isArray(msg.stdio) ? msg.stdio : ['pipe', 'pipe', 'pipe']).map((s) =>
      s === 'inherit' || s === 'ignore' ? s : 'pipe');
    const env = {};
    for (const [k, v] of Array.isArray(msg.env) ? msg.env : []) env[String(k)] = String(v);
    const argv = (Array.isArray(msg.argv) ? msg.argv : []).map(String);
    let child;
    try {
      child = cp.spawn(argv[0], argv.slice(1), {
        cwd: typeof msg.cwd === 'string' ? msg.cwd : process.cwd(),
        env,
        stdio,
        argv0: typeof msg.argv0 === 'string' ? msg.argv0 : undefined,
        detached: Boolean(msg.detached),
      });
    } catch (e) {
      reply(q, { spawnError: e.code || e.message });
      return;
    }
    const p = { child, out: [[], [], []], size: 0, timedOut: false };
    programs.set(id, p);
    let answered = false;
    child.on('error', (e) => {
      if (!answered) {
        answered = true;
        programs.delete(id);
        reply(q, { spawnError: e.code || e.message });
      }
    });
    child.on('spawn', () => {
      if (!msg.sync && !answered) {
        answered = true;
        reply(q, { p: id, pid: child.pid });
      }
    });
    const max = Number(msg.maxBuffer) > 0 ? Number(msg.maxBuffer) : 1 << 20;
    for (const fd of [1, 2]) {
      const s = child.stdio[fd];
      if (!s) continue;
      s.on('data', (chunk) => {
        if (msg.sync) {
          if (p.out[fd].reduce((a, c) => a + c.length, 0) + chunk.length <= max) p.out[fd].push(chunk);
          else {
            p.out[fd].push(chunk.subarray(0, Math.max(0, max - p.out[fd].reduce((a, c) => a + c.length, 0))));
            child.kill(msg.killSignal || 'SIGTERM');
          }
        } else {
          frame(0, { n: 'out', p: id, fd, data: chunk.toString('base64') });
        }
      });
    }
    if (child.stdin) {
      child.stdin.on('error', () => {});
      if (msg.sync) {
        if (typeof msg.input === 'string') child.stdin.end(Buffer.from(msg.input, 'base64'));
        else child.stdin.end();
      }
    }
    let timer = null;
    if (Number(msg.timeout) > 0) {
      timer = setTimeout(() => {
        p.timedOut = true;
        try {
          child.kill(msg.killSignal || 'SIGTERM');
        } catch {
          // gone
        }
      }, Number(msg.timeout));
    }
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      programs.delete(id);
      if (answered && msg.sync) return;
      if (msg.sync) {
        answered = true;
        reply(q, {
          pid: child.pid,
          status: code,
          signal,
          timedOut: p.timedOut,
          stdout: stdio[1] === 'pipe' ? Buffer.concat(p.out[1]).toString('base64') : null,
          stderr: stdio[2] === 'pipe' ? Buffer.concat(p.out[2]).toString('base64') : null,
        });
      } else {
        frame(0, { n: 'exit', p: id, code, signal });
      }
    });
  };

  const control = (msg) => {
    const q = msg.q;
    try {
      switch (msg.op) {
        case 'start':
          reply(q, { gen: start() });
          break;
        case 'kill': {
          const h = hosts.get(msg.gen);
          if (h) h.kill('the judge ended it');
          reply(q, {});
          break;
        }
        case 'run':
          run(q, msg);
          break;
        case 'stdin': {
          const p = programs.get(msg.p);
          if (p && p.child.stdin) {
            if (msg.end) p.child.stdin.end();
            else p.child.stdin.write(Buffer.from(String(msg.data), 'base64'));
          }
          reply(q, {});
          break;
        }
        case 'signal': {
          const p = programs.get(msg.p);
          if (p) p.child.kill(String(msg.sig || 'SIGTERM'));
          reply(q, {});
          break;
        }
        default:
          reply(q, { error: `unknown operation ${JSON.stringify(msg.op)}` });
      }
    } catch (e) {
      reply(q, { error: `${e.name}: ${e.message}` });
    }
  };

  let chunks = [];
  let have = 0;
  link.on('data', (chunk) => {
    chunks.push(chunk);
    have += chunk.length;
    for (;;) {
      if (have < 8) return;
      let buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      chunks = [buf];
      const n = buf.readUInt32BE(0);
      const chan = buf.readUInt32BE(4);
      if (n > MAX_MESSAGE) {
        process.exit(1);
      }
      if (have < 8 + n) return;
      const body = buf.subarray(8, 8 + n);
      buf = buf.subarray(8 + n);
      chunks = buf.length ? [buf] : [];
      have = buf.length;
      if (chan === 0) {
        let msg;
        try {
          msg = JSON.parse(body.toString('utf8'));
        } catch {
          continue;
        }
        if (msg && typeof msg === 'object') control(msg);
      } else {
        const h = hosts.get(chan);
        if (h && !h.dead) {
          const head = Buffer.alloc(4);
          head.writeUInt32BE(body.length, 0);
          h.pipe.write(Buffer.concat([head, body]));
        }
      }
    }
  });
  const bye = () => {
    for (const h of hosts.values()) h.kill('the judge ended');
    for (const p of programs.values()) {
      try {
        p.child.kill('SIGKILL');
      } catch {
        // gone
      }
    }
    process.exit(0);
  };
  link.on('end', bye);
  link.on('error', bye);
}

// ---------------------------------------------------------------- host server

function server() {
  // Bound before any candidate code runs.
  const wire = require(path.join(__dirname, 'gatehouse_node_wire.js'));
  const util = require('util');
  const { ProtocolError, Refused, encodeKey, decodeKey, BUILTIN_ERRORS, WELL_KNOWN } = wire;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const reflectGet = Reflect.get;
  const reflectSet = Reflect.set;
  const reflectHas = Reflect.has;
  const reflectDelete = Reflect.deleteProperty;
  const ownKeys = Reflect.ownKeys;
  const getProto = Object.getPrototypeOf;
  const setProto = Object.setPrototypeOf;
  const getOwnDesc = Object.getOwnPropertyDescriptor;
  const defineProp = Object.defineProperty;
  const isPromise = util.types.isPromise;
  const isNativeError = util.types.isNativeError;
  const isProxy = util.types.isProxy;
  const promiseThen = Promise.prototype.then;
  const PromiseCtor = Promise;
  const ObjectProto = Object.prototype;
  const FunctionProto = Function.prototype;
  const exit = process.reallyExit.bind(process);
  const req = require;
  const env = process.env;
  for (const k of Object.keys(env)) {
    if (k.startsWith('GATEHOUSE_') || k.startsWith('NODE_') || k.startsWith('npm_')) delete env[k];
  }

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
  const ERROR_PROTOS = new Map(Object.entries(BUILTIN_ERRORS).map(([k, C]) => [C.prototype, k]));

  const objects = new Map(); // id -> object
  const ids = new Map(); // object -> id
  const stubs = new Map(); // judge callback id -> stub
  const STUBS = new WeakMap(); // stub (and its target) -> {id, kind, methods}
  const waiting = new Map(); // judge promise id -> {resolve, reject}
  let nextPromise = 1;
  let nextQ = 1;
  const pristine = new Map(); // patched path key -> [holder, key, original]

  const builtinError = (v) => {
    for (let p = getProto(v); p; p = getProto(p)) {
      const n = ERROR_PROTOS.get(p);
      if (n) return n;
    }
    return null;
  };

  class HostCodec extends wire.Codec {
    isOther(v) {
      return STUBS.has(v);
    }

    encodeOther(v, depth) {
      const s = STUBS.get(v);
      if (s) return { c: s.id };
      if (BUILTIN_NAMES.has(v)) return { B: BUILTIN_NAMES.get(v) };
      if (isPromise(v)) {
        const pid = nextPromise++;
        const send = (field, value) => {
          let encoded;
          try {
            encoded = codec.encode(value);
          } catch (e) {
            field = 'e';
            encoded = { E: ['TypeError', null, String(e && e.message), 'TypeError', []] };
          }
          try {
            channel.send(0, { n: 'settle', p: pid, [field]: encoded });
          } catch {
            exit(0);
          }
        };
        apply(promiseThen, v, [(x) => send('v', x), (e) => send('e', e)]);
        return { p: pid };
      }
      if (isNativeError(v)) return { E: errorDesc(v, depth) };
      return { h: handleDesc(v, depth) };
    }

    decodeOther(tag, body, depth) {
      switch (tag) {
        case 'h':
          if (!objects.has(body)) throw new ProtocolError('a handle on no object of this host');
          return objects.get(body);
        case 'c':
          return stub(body);
        case 'p':
          return judgePromise(body);
        case 'E':
          return errorFrom(body, depth);
        case 'B':
          if (!BUILTINS.has(body)) throw new ProtocolError('an unknown builtin');
          return BUILTINS.get(body);
        default:
          throw new ProtocolError(`an unknown tag ${JSON.stringify(tag)}`);
      }
    }
  }
  const codec = new HostCodec();

  function idOf(v) {
    let id = ids.get(v);
    if (id === undefined) {
      id = objects.size + 1;
      objects.set(id, v);
      ids.set(v, id);
    }
    return id;
  }

  function methodNames(v) {
    const out = [];
    try {
      for (let p = getProto(v); p && p !== ObjectProto && p !== FunctionProto && out.length < 64; p = getProto(p)) {
        for (const k of ownKeys(p)) {
          if (typeof k !== 'string' || k === 'constructor' || out.includes(k)) continue;
          const d = getOwnDesc(p, k);
          if (d && typeof d.value === 'function') out.push(k);
        }
      }
    } catch {
      return [];
    }
    return out;
  }

  function handleDesc(v, depth) {
    const kind = typeof v === 'function' ? 'f' : 'o';
    let name = '';
    let err = null;
    try {
      if (kind === 'f') {
        name = String(v.name || '');
        const proto = v.prototype;
        if (proto && typeof proto === 'object' && builtinError(proto) !== null && !BUILTIN_NAMES.has(v)) {
          const up = getProto(v);
          err = [builtinError(proto), up && up !== FunctionProto ? codec.encode(up, depth + 1) : null];
        }
      } else {
        const p = getProto(v);
        const c = p && getOwnDesc(p, 'constructor');
        name = c && typeof c.value === 'function' ? String(c.value.name || '') : '';
      }
    } catch {
      name = '';
    }
    return [idOf(v), kind, name.slice(0, 200), kind === 'o' && !isProxy(v) ? methodNames(v) : [], err];
  }

  function errorDesc(e, depth) {
    const builtin = builtinError(e) || 'Error';
    let cls = null;
    try {
      const p = getProto(e);
      const c = p && getOwnDesc(p, 'constructor');
      if (c && typeof c.value === 'function' && !BUILTIN_NAMES.has(c.value)) cls = codec.encode(c.value, depth + 1);
      if (cls && !(cls.h && cls.h[4])) cls = null;
    } catch {
      cls = null;
    }
    let message = '';
    let name = builtin;
    try {
      message = String(e.message);
    } catch {
      message = '';
    }
    try {
      name = String(e.name);
    } catch {
      name = builtin;
    }
    const fields = [];
    try {
      for (const k of Object.keys(e)) {
        if (k === 'message' || k === 'stack' || k === 'name' || fields.length >= 32) continue;
        try {
          fields.push([k, codec.encode(e[k], depth + 1)]);
        } catch {
          // a field that cannot cross stays here
        }
      }
    } catch {
      // no fields
    }
    return [builtin, cls, message.slice(0, 10000), name.slice(0, 200), fields];
  }

  function errorFrom(body, depth) {
    if (!Array.isArray(body) || body.length !== 5) throw new ProtocolError('an error that is not [builtin, class, message, name, fields]');
    const [builtin, cls, message, name, fields] = body;
    const B = BUILTIN_ERRORS[builtin] || Error;
    const e = builtin === 'AggregateError' ? new B([], String(message)) : new B(String(message));
    if (cls !== null) {
      const C = codec.decode(cls, depth + 1);
      if (typeof C === 'function' && C.prototype) setProto(e, C.prototype);
    }
    if (e.name !== name) defineProp(e, 'name', { value: String(name), writable: true, configurable: true });
    for (const [k, v] of Array.isArray(fields) ? fields : []) {
      if (typeof k !== 'string' || k === '__proto__') continue;
      defineProp(e, k, { value: codec.decode(v, depth + 1), writable: true, enumerable: true, configurable: true });
    }
    return e;
  }

  function judgePromise(pid) {
    let resolve;
    let reject;
    const p = new PromiseCtor((res, rej) => {
      resolve = res;
      reject = rej;
    });
    waiting.set(pid, { resolve, reject });
    return p;
  }

  // A judge object, as the candidate's code sees it: every use a message.
  const STUB_HANDLER = {
    get(target, key) {
      const s = STUBS.get(target);
      if (key === 'call') return FunctionProto.call;
      if (key === 'apply') return FunctionProto.apply;
      if (key === 'bind') return FunctionProto.bind;
      if (key === Symbol.toPrimitive) return (hint) => callJudge('prim', { o: { c: s.id }, h: String(hint) });
      if (key === 'toString' && s.kind === 'f') return () => 'function () { [judge callback] }';
      const k = encodeKey(key);
      if (k === undefined) return undefined;
      if (typeof key === 'string' && s.methods.has(key)) {
        let f = s.invokers.get(key);
        if (!f) {
          const proxy = s.proxy;
          f = function (...args) {
            if (new.target === undefined && this === proxy) return callJudge('invoke', { o: { c: s.id }, k: key, a: codec.encode(args) });
            const fn = callJudge('get', { o: { c: s.id }, k: key });
            return new.target === undefined ? apply(fn, this, args) : construct(fn, args);
          };
          s.invokers.set(key, f);
        }
        return f;
      }
      return callJudge('get', { o: { c: s.id }, k });
    },
    set(target, key, value) {
      const k = encodeKey(key);
      if (k === undefined) return false;
      callJudge('set', { o: { c: STUBS.get(target).id }, k, v: codec.encode(value) });
      return true;
    },
    has(target, key) {
      const k = encodeKey(key);
      if (k === undefined) return false;
      return Boolean(callJudge('has', { o: { c: STUBS.get(target).id }, k }));
    },
    ownKeys(target) {
      const keys = callJudge('keys', { o: { c: STUBS.get(target).id } });
      const out = Array.isArray(keys) ? keys.filter((k) => typeof k === 'string') : [];
      for (const k of ownKeys(target)) {
        const d = getOwnDesc(target, k);
        if (d && !d.configurable && !out.includes(k)) out.push(k);
      }
      return out;
    },
    getOwnPropertyDescriptor(target, key) {
      const k = encodeKey(key);
      if (typeof k !== 'string') return undefined;
      const s = STUBS.get(target);
      if (!callJudge('has', { o: { c: s.id }, k })) return undefined;
      const own = getOwnDesc(target, key);
      const value = callJudge('get', { o: { c: s.id }, k });
      if (own && !own.configurable) return { ...own, value };
      return { value, writable: true, enumerable: true, configurable: true };
    },
    defineProperty() {
      return false;
    },
    deleteProperty() {
      return false;
    },
    getPrototypeOf(target) {
      return STUBS.get(target).kind === 'f' ? FunctionProto : ObjectProto;
    },
    setPrototypeOf() {
      return false;
    },
    apply(target, thisArg, args) {
      return callJudge('call', { f: { c: STUBS.get(target).id }, t: codec.encode(thisArg), a: codec.encode(args) });
    },
    construct(target, args) {
      return callJudge('new', { f: { c: STUBS.get(target).id }, a: codec.encode(args) });
    },
  };

  function stub(body) {
    if (!Array.isArray(body) || body.length !== 3) throw new ProtocolError('a callback that is not [id, kind, methods]');
    const [id, kind, methods] = body;
    if (!Number.isInteger(id)) throw new ProtocolError('a callback whose id is not a number');
    const known = stubs.get(id);
    if (known) return known;
    const target = kind === 'f' ? function () {}.bind(null) : {};
    const s = { id, kind, methods: new Set(Array.isArray(methods) ? methods.filter((m) => typeof m === 'string') : []), invokers: new Map() };
    const proxy = new Proxy(target, STUB_HANDLER);
    s.proxy = proxy;
    STUBS.set(target, s);
    STUBS.set(proxy, s);
    stubs.set(id, proxy);
    return proxy;
  }

  // ------------------------------------------------------------ the wire

  const channel = new wire.Channel(3, 4, (m) => {
    if (m.end !== undefined) exit(0);
    let msg;
    try {
      msg = codec.parse(m.text);
    } catch {
      exit(3);
    }
    handle(msg);
  });
  channel.hold(true);

  function handle(msg) {
    if (msg.q !== undefined) serve(msg);
    else if (msg.n === 'settle') {
      const w = waiting.get(msg.p);
      if (!w) return;
      waiting.delete(msg.p);
      let v;
      try {
        v = codec.decode('v' in msg ? msg.v : msg.e);
      } catch (e) {
        w.reject(e);
        return;
      }
      if ('v' in msg) w.resolve(v);
      else w.reject(v);
    }
  }

  function send(obj) {
    try {
      channel.send(0, obj);
    } catch (e) {
      if (e instanceof ProtocolError && /limit/.test(e.message)) throw new Refused(e.message);
      exit(0);
    }
  }

  /** A request to the judge (a callback), serving what comes meanwhile. */
  function callJudge(op, fields) {
    const q = nextQ++;
    send({ q, op, ...fields });
    for (;;) {
      const m = channel.take(Infinity);
      if (m.end !== undefined) exit(0);
      const msg = codec.parse(m.text);
      if (msg.r === q) {
        if ('e' in msg) throw codec.decode(msg.e);
        return codec.decode(msg.v);
      }
      handle(msg);
    }
  }

  function applyPatches(list) {
    if (!Array.isArray(list)) return;
    for (const item of list) {
      if (!Array.isArray(item) || item.length !== 2 || !Array.isArray(item[0])) continue;
      const [where, value] = item;
      if (where[0] === 'env') {
        if (value === null) delete env[String(where[1])];
        else env[String(where[1])] = String(value);
        continue;
      }
      let holder = where[0] === 'g' ? globalThis : typeof where[0] === 'string' && where[0].startsWith('m:') ? req(where[0].slice(2)) : null;
      for (const k of where.slice(1, -1)) holder = holder === null || holder === undefined ? null : holder[k];
      const key = String(where[where.length - 1]);
      if (holder === null || holder === undefined) continue;
      const pkey = where.join('\u0000');
      if (!pristine.has(pkey)) pristine.set(pkey, holder[key]);
      try {
        const v = value === null ? pristine.get(pkey) : codec.decode(value);
        defineProp(holder, key, { value: v, writable: true, configurable: true, enumerable: getOwnDesc(holder, key) ? getOwnDesc(holder, key).enumerable : true });
      } catch {
        // a global that cannot be replaced stays
      }
    }
  }

  function target(t) {
    const o = codec.decode(t);
    if (o === null || (typeof o !== 'object' && typeof o !== 'function')) throw new ProtocolError('a request about something that is not an object');
    return o;
  }

  function args(t) {
    const a = codec.decode(t);
    if (!Array.isArray(a)) throw new ProtocolError('arguments that are not a list');
    return a;
  }

  function toPrimitive(o, hint) {
    const ex = o[Symbol.toPrimitive];
    if (ex !== undefined && ex !== null) {
      const r = apply(ex, o, [hint]);
      if (r !== null && (typeof r === 'object' || typeof r === 'function')) throw new TypeError('Cannot convert object to primitive value');
      return r;
    }
    for (const m of hint === 'string' ? ['toString', 'valueOf'] : ['valueOf', 'toString']) {
      const f = o[m];
      if (typeof f === 'function') {
        const r = apply(f, o, []);
        if (r === null || (typeof r !== 'object' && typeof r !== 'function')) return r;
      }
    }
    throw new TypeError('Cannot convert object to primitive value');
  }

  const OPS = {
    import(msg) {
      const file = String(msg.p);
      const exports = req(file);
      return { handle: exports };
    },
    get: (msg) => reflectGet(target(msg.o), decodeKey(msg.k)),
    set: (msg) => reflectSet(target(msg.o), decodeKey(msg.k), codec.decode(msg.v)),
    has: (msg) => reflectHas(target(msg.o), decodeKey(msg.k)),
    del: (msg) => reflectDelete(target(msg.o), decodeKey(msg.k)),
    keys(msg) {
      return ownKeys(target(msg.o)).map(encodeKey).filter((k) => k !== undefined).map((k) => (typeof k === 'string' ? k : decodeKey(k)));
    },
    desc(msg) {
      const o = target(msg.o);
      const k = decodeKey(msg.k);
      const d = getOwnDesc(o, k);
      if (!d) return undefined;
      return { value: 'value' in d ? d.value : reflectGet(o, k), writable: Boolean(d.writable || d.set), enumerable: Boolean(d.enumerable) };
    },
    def(msg) {
      const o = target(msg.o);
      const k = decodeKey(msg.k);
      const d = {};
      const body = msg.d && Array.isArray(msg.d.o) ? msg.d.o : [];
      for (const [f, v] of body) {
        if (f === 'v') d.value = codec.decode(v);
        else if (f === 'g') d.get = codec.decode(v);
        else if (f === 's') d.set = codec.decode(v);
        else if (f === 'w') d.writable = Boolean(v);
        else if (f === 'e') d.enumerable = Boolean(v);
        else if (f === 'c') d.configurable = Boolean(v);
      }
      defineProp(o, k, d);
      return true;
    },
    proto: (msg) => getProto(target(msg.o)),
    call: (msg) => apply(target(msg.o), codec.decode(msg.t), args(msg.a)),
    new: (msg) => construct(target(msg.o), args(msg.a)),
    invoke(msg) {
      const o = target(msg.o);
      const k = decodeKey(msg.k);
      const f = o[k];
      if (typeof f !== 'function') throw new TypeError(`${String(k)} is not a function`);
      return apply(f, o, args(msg.a));
    },
    prim: (msg) => toPrimitive(target(msg.o), String(msg.h)),
    isa: (msg) => target(msg.o) instanceof target(msg.x),
  };

  function serve(msg) {
    let out;
    try {
      applyPatches(msg.pt);
      const op = Object.prototype.hasOwnProperty.call(OPS, msg.op) ? OPS[msg.op] : null;
      if (!op) throw new ProtocolError(`an unknown request ${JSON.stringify(msg.op)}`);
      let v = op(msg);
      if (msg.op === 'import') v = { h: handleDesc(v.handle, 0) };
      else v = codec.encode(v);
      out = { r: msg.q, v };
      if (msg.op === 'prim' && v !== null && typeof v === 'object' && !('u' in v) && !('n' in v) && !('i' in v) && !('Y' in v) && !('y' in v)) {
        throw new TypeError('Cannot convert object to primitive value');
      }
    } catch (e) {
      let encoded;
      try {
        encoded = codec.encode(e);
      } catch (e2) {
        encoded = { E: ['TypeError', null, String(e2 && e2.message), 'TypeError', []] };
      }
      out = { r: msg.q, e: encoded };
    }
    try {
      send(out);
    } catch (e) {
      send({ r: msg.q, e: { E: ['RangeError', null, String(e.message), 'RangeError', []] } });
    }
  }
}

if (SERVE) server();
else supervisor();
