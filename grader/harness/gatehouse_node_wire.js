'use strict';
// The wire between the judge and the host for TypeScript on Node
// (JUDGE.md), both sides: framing, the reader thread, the codec's data.
//
// A FRAME is a 4-byte big-endian length, then (on the judge's socket to the
// host supervisor only) a 4-byte channel number, then that many bytes of
// UTF-8 JSON. Channel 0 is the supervisor's; channel N > 0 is the host
// server the supervisor started as generation N, whose frames it relays.
//
// READING. A worker thread owns the reading end, in its own event loop (a
// thread blocked in a read() would hold the process at its exit): it
// splits frames, checks each length against `MAX_MESSAGE` before it keeps
// more, and posts each message to the main thread's port, then bumps a
// shared counter. The main thread takes messages either synchronously
// (`Channel.take`: `receiveMessageOnPort`, waiting on the counter with
// `Atomics.wait` until a deadline) while a call is in progress, or as port
// events while its event loop is idle (promises settling, a timer of the
// candidate's calling back). Writes are the main thread's, whole frames,
// with `fs.writeSync`. So both sides may block in a call and serve the
// other side's nested calls meanwhile, and still run their event loops
// between calls.
//
// DATA. Values inside a message are tagged so that nothing on the wire is
// executed or looked up by name beyond the fixed tables here:
//
//     null, true, false, finite numbers, strings     themselves
//     {"u":0} undefined       {"n":"NaN"|"Infinity"|"-Infinity"|"-0"}
//     {"i":"digits"} a BigInt (at most MAX_DIGITS digits)
//     {"a":[..]} an array      {"o":[[k,v],..]} a plain object
//     {"O":[[k,v],..]} an object with a null prototype
//     {"m":[[k,v],..]} a Map    {"s":[..]} a Set
//     {"d":ms|null} a Date      {"r":[source, flags]} a RegExp
//     {"x":[type, primitive]} a boxed primitive (Number, String, Boolean)
//     {"b":[kind, base64]} an ArrayBuffer, a typed array, a Buffer, a DataView
//     {"y":"iterator"|..} a well-known symbol    {"Y":key} a Symbol.for(key)
//
// Each side adds its tags for what is not data (handles, callbacks,
// promises, errors): `Codec.encodeOther` and `Codec.decodeOther`. Decoding
// is strict: an unknown tag, a tag object with more than one key, a wrong
// arity, a nesting deeper than MAX_DEPTH or a message longer than
// MAX_MESSAGE is a `ProtocolError` naming what was wrong.
//
// Everything this file uses from the language is bound when it loads, so a
// test (or the candidate's code, in the host) that replaces a global later
// changes nothing here.

const fs = require('fs');
const util = require('util');
const threads = require('worker_threads');

const MAX_MESSAGE = 16 << 20;
const MAX_DEPTH = 64;
// What the judge accepts from the hosts over a whole run.
const MAX_RUN_BYTES = 256 << 20;
const MAX_DIGITS = 4300;

const {
  isDate, isRegExp, isMap, isSet, isBoxedPrimitive, isNumberObject, isStringObject, isBooleanObject,
  isBigIntObject, isSymbolObject, isArrayBuffer, isSharedArrayBuffer, isTypedArray, isDataView, isPromise,
  isProxy, isNativeError,
} = util.types;
const apply = Reflect.apply;
const ownKeys = Reflect.ownKeys;
const getProto = Object.getPrototypeOf;
const getOwnDesc = Object.getOwnPropertyDescriptor;
const isArray = Array.isArray;
const ObjectProto = Object.prototype;
const jsonParse = JSON.parse;
const jsonStringify = JSON.stringify;
const dateGetTime = Date.prototype.getTime;
const DateCtor = Date;
const RegExpCtor = RegExp;
const MapCtor = Map;
const SetCtor = Set;
const mapEntries = Map.prototype.entries;
const setValues = Set.prototype.values;
const mapSet = Map.prototype.set;
const setAdd = Set.prototype.add;
const regexpSource = getOwnDesc(RegExp.prototype, 'source').get;
const regexpFlags = getOwnDesc(RegExp.prototype, 'flags').get;
const numberValueOf = Number.prototype.valueOf;
const stringValueOf = String.prototype.valueOf;
const booleanValueOf = Boolean.prototype.valueOf;
const BufferFrom = Buffer.from;
const bufferToString = Buffer.prototype.toString;
const BufferCtor = Buffer;
const ObjectCtor = Object;
const NumberCtor = Number;
const StringCtor = String;
const BooleanCtor = Boolean;
const BigIntCtor = BigInt;
const isFiniteNumber = Number.isFinite;
const objectIs = Object.is;
const symbolFor = Symbol.for;
const symbolKeyFor = Symbol.keyFor;
const arrayPush = Array.prototype.push;
const ArrayBufferCtor = ArrayBuffer;
const DataViewCtor = DataView;
const arrayBufferSlice = ArrayBuffer.prototype.slice;
const typedBufferGet = getOwnDesc(getProto(Uint8Array.prototype), 'buffer').get;
const typedOffsetGet = getOwnDesc(getProto(Uint8Array.prototype), 'byteOffset').get;
const typedLengthGet = getOwnDesc(getProto(Uint8Array.prototype), 'byteLength').get;
const dataViewBufferGet = getOwnDesc(DataView.prototype, 'buffer').get;
const dataViewOffsetGet = getOwnDesc(DataView.prototype, 'byteOffset').get;
const dataViewLengthGet = getOwnDesc(DataView.prototype, 'byteLength').get;
const atomicsWait = Atomics.wait;
const atomicsLoad = Atomics.load;
const atomicsAdd = Atomics.add;
const atomicsNotify = Atomics.notify;
const receive = threads.receiveMessageOnPort;
const writeSync = fs.writeSync;
const perfNow = performance.now.bind(performance);

const TYPED = {
  Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array,
  Float64Array, BigInt64Array, BigUint64Array,
};

const WELL_KNOWN = new Map();
const WELL_KNOWN_BY_NAME = new Map();
for (const name of ['iterator', 'asyncIterator', 'hasInstance', 'toPrimitive', 'toStringTag', 'species',
  'isConcatSpreadable', 'match', 'matchAll', 'replace', 'search', 'split', 'unscopables']) {
  WELL_KNOWN.set(Symbol[name], name);
  WELL_KNOWN_BY_NAME.set(name, Symbol[name]);
}

class ProtocolError extends Error {}
ProtocolError.prototype.name = 'ProtocolError';

/** What the codec refuses to send (a value of no kind that crosses). */
class Refused extends TypeError {}
Refused.prototype.name = 'TypeError';

function now() {
  return perfNow();
}

// ---------------------------------------------------------------- the reader

function readerThread() {
  // The socket in this thread's own event loop (libuv, non-blocking): the
  // thread is never stuck in a read(), so the process can always exit.
  const net = require('net');
  const { fd, header, counter, port } = threads.workerData;
  const ctr = new Int32Array(counter);
  let done = false;
  const post = (m) => {
    if (done) return;
    if (m.end !== undefined) done = true;
    port.postMessage(m);
    atomicsAdd(ctr, 0, 1);
    atomicsNotify(ctr, 0);
  };
  const sock = new net.Socket({ fd, readable: true, writable: false });
  let chunks = [];
  let have = 0;
  sock.on('data', (chunk) => {
    if (done) return;
    chunks.push(chunk);
    have += chunk.length;
    while (have >= header) {
      let buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      chunks = [buf];
      const n = buf.readUInt32BE(0);
      const chan = header === 8 ? buf.readUInt32BE(4) : 0;
      if (n > MAX_MESSAGE) {
        post({ end: `a message announced ${n} bytes, over the ${MAX_MESSAGE}-byte limit`, chan, bad: true });
        sock.destroy();
        return;
      }
      if (have < header + n) return;
      post({ chan, text: buf.toString('utf8', header, header + n), size: n + header });
      buf = buf.subarray(header + n);
      chunks = buf.length ? [buf] : [];
      have = buf.length;
    }
  });
  sock.on('end', () => post({ end: have ? 'closed in the middle of a message' : 'closed' }));
  sock.on('error', (e) => post({ end: `read failed (${e.code || e.message})` }));
  sock.on('close', () => post({ end: 'closed' }));
}

if (!threads.isMainThread && threads.workerData && threads.workerData.gatehouseReader) {
  readerThread();
}

// ---------------------------------------------------------------- the channel

/**
 * A framed channel over a connected stream descriptor. `header` is 4 (a
 * host server's link) or 8 (the judge's socket: with channel numbers).
 * `onIdle(msg)` receives what arrives while no call waits (`take`).
 */
class Channel {
  constructor(fd, header, onIdle) {
    this.fd = fd;
    this.header = header;
    this.counter = new SharedArrayBuffer(4);
    this.ctr = new Int32Array(this.counter);
    const { port1, port2 } = new threads.MessageChannel();
    this.port = port1;
    this.closed = null;
    this.worker = new threads.Worker(__filename, {
      workerData: { gatehouseReader: true, fd, header, counter: this.counter, port: port2 },
      transferList: [port2],
      stdout: false,
      stderr: false,
      env: {},
      argv: [],
      execArgv: [],
    });
    this.worker.unref();
    this.worker.on('error', () => {});
    this.port.on('message', (m) => {
      if (m && m.end !== undefined) this.closed = this.closed || m.end;
      onIdle(m);
    });
    this.refs = 0;
    this.port.unref();
  }

  /** Keep the process alive while something waits for a message. */
  hold(on) {
    this.refs += on ? 1 : -1;
    if (this.refs > 0) this.port.ref();
    else this.port.unref();
  }

  /** Writes one frame. Throws ProtocolError when `obj` is over the limit. */
  send(chan, obj) {
    const text = jsonStringify(obj);
    const body = BufferFrom(text, 'utf8');
    if (body.length > MAX_MESSAGE) {
      throw new ProtocolError(`a message of ${body.length} bytes is over the ${MAX_MESSAGE}-byte limit`);
    }
    const frame = BufferCtor.allocUnsafe(this.header + body.length);
    frame.writeUInt32BE(body.length, 0);
    if (this.header === 8) frame.writeUInt32BE(chan, 4);
    body.copy(frame, this.header);
    let off = 0;
    while (off < frame.length) {
      try {
        off += writeSync(this.fd, frame, off, frame.length - off);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') {
          atomicsWait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
          continue;
        }
        throw new ProtocolError(`the other side is gone (${e.code || e.message})`);
      }
    }
  }

  /**
   * The next message, waiting until `deadline` (a `now()` value, or
   * Infinity); null at the deadline. A message is {chan, text, size} or
   * {end: why}.
   */
  take(deadline) {
    for (;;) {
      const got = receive(this.port);
      if (got) {
        if (got.message && got.message.end !== undefined) this.closed = this.closed || got.message.end;
        return got.message;
      }
      if (this.closed) return { end: this.closed };
      const seen = atomicsLoad(this.ctr, 0);
      const again = receive(this.port);
      if (again) {
        if (again.message && again.message.end !== undefined) this.closed = this.closed || again.message.end;
        return again.message;
      }
      const left = deadline === Infinity ? Infinity : deadline - now();
      if (left <= 0) return null;
      apply(atomicsWait, Atomics, [this.ctr, 0, seen, left === Infinity ? undefined : left]);
    }
  }
}

// ---------------------------------------------------------------- the codec

function b64(u8) {
  return apply(bufferToString, BufferFrom(u8.buffer, u8.byteOffset, u8.byteLength), ['base64']);
}

function plainProto(p) {
  return p === ObjectProto || p === null;
}

/**
 * Encodes and decodes data; `encodeOther(v, depth)` and `decodeOther(tag,
 * body, depth)` are the side's own kinds.
 */
class Codec {
  encode(v, depth = 0) {
    if (depth > MAX_DEPTH) throw new Refused(`a value nested deeper than ${MAX_DEPTH} levels cannot cross`);
    switch (typeof v) {
      case 'undefined':
        return { u: 0 };
      case 'boolean':
      case 'string':
        return v;
      case 'number':
        if (isFiniteNumber(v) && !objectIs(v, -0)) return v;
        return { n: objectIs(v, -0) ? '-0' : StringCtor(v) };
      case 'bigint': {
        const s = StringCtor(v);
        if (s.length > MAX_DIGITS + 1) throw new Refused(`a BigInt of ${s.length} digits is over the ${MAX_DIGITS}-digit limit`);
        return { i: s };
      }
      case 'symbol': {
        if (WELL_KNOWN.has(v)) return { y: WELL_KNOWN.get(v) };
        const key = symbolKeyFor(v);
        if (key !== undefined) return { Y: key };
        throw new Refused('a Symbol that is neither well-known nor registered (Symbol.for) cannot cross');
      }
      case 'function':
        return this.encodeOther(v, depth);
      default:
        break;
    }
    if (v === null) return null;
    if (this.isOther(v)) return this.encodeOther(v, depth);
    if (isArray(v)) {
      const n = v.length;
      const out = new Array(n);
      for (let i = 0; i < n; i++) out[i] = this.encode(v[i], depth + 1);
      return { a: out };
    }
    if (isPromise(v) || isNativeError(v)) return this.encodeOther(v, depth);
    if (isDate(v)) {
      const t = apply(dateGetTime, v, []);
      return { d: isFiniteNumber(t) ? t : null };
    }
    if (isRegExp(v)) return { r: [apply(regexpSource, v, []), apply(regexpFlags, v, [])] };
    if (isMap(v)) {
      const out = [];
      for (const [k, val] of apply(mapEntries, v, [])) {
        arrayPush.call(out, [this.encode(k, depth + 1), this.encode(val, depth + 1)]);
      }
      return { m: out };
    }
    if (isSet(v)) {
      const out = [];
      for (const val of apply(setValues, v, [])) arrayPush.call(out, this.encode(val, depth + 1));
      return { s: out };
    }
    if (isBoxedPrimitive(v)) {
      if (isNumberObject(v)) return { x: ['Number', this.encode(apply(numberValueOf, v, []), depth + 1)] };
      if (isStringObject(v)) return { x: ['String', apply(stringValueOf, v, [])] };
      if (isBooleanObject(v)) return { x: ['Boolean', apply(booleanValueOf, v, [])] };
      if (isBigIntObject(v) || isSymbolObject(v)) return this.encodeOther(v, depth);
    }
    if (isArrayBuffer(v) || isSharedArrayBuffer(v)) {
      return { b: ['ArrayBuffer', b64(new Uint8Array(v))] };
    }
    if (isTypedArray(v)) {
      const kind = BufferCtor.isBuffer(v) ? 'Buffer' : v[Symbol.toStringTag];
      if (kind !== 'Buffer' && !TYPED[kind]) return this.encodeOther(v, depth);
      const buf = apply(typedBufferGet, v, []);
      const u8 = new Uint8Array(buf, apply(typedOffsetGet, v, []), apply(typedLengthGet, v, []));
      return { b: [kind, b64(u8)] };
    }
    if (isDataView(v)) {
      const u8 = new Uint8Array(apply(dataViewBufferGet, v, []), apply(dataViewOffsetGet, v, []),
        apply(dataViewLengthGet, v, []));
      return { b: ['DataView', b64(u8)] };
    }
    const proto = getProto(v);
    if (plainProto(proto) && !isProxy(v) && this.plainData(v)) {
      const out = [];
      for (const k of ownKeys(v)) {
        const d = getOwnDesc(v, k);
        if (!d.enumerable) continue;
        arrayPush.call(out, [k, this.encode(d.value, depth + 1)]);
      }
      return proto === null ? { O: out } : { o: out };
    }
    return this.encodeOther(v, depth);
  }

  /**
   * Whether a plain object is data: string keys only, data properties only
   * (no getter runs to find out), none of them a function. An object that
   * carries behaviour crosses by reference, so its methods see one object.
   */
  plainData(v) {
    for (const k of ownKeys(v)) {
      if (typeof k !== 'string') return false;
      const d = getOwnDesc(v, k);
      if (!d || !('value' in d)) return false;
      if (typeof d.value === 'function') return false;
    }
    return true;
  }

  /** Overridden by a side whose own objects must never cross as data. */
  isOther() {
    return false;
  }

  encodeOther(v) {
    throw new Refused(`a value of type ${typeof v} cannot cross`);
  }

  decode(t, depth = 0) {
    if (depth > MAX_DEPTH) throw new ProtocolError(`a value nested deeper than ${MAX_DEPTH} levels`);
    if (t === null || typeof t === 'boolean' || typeof t === 'string') return t;
    if (typeof t === 'number') {
      if (!isFiniteNumber(t)) throw new ProtocolError('a number that is not finite, untagged');
      return t;
    }
    if (typeof t !== 'object' || isArray(t)) throw new ProtocolError(`an untagged ${isArray(t) ? 'array' : typeof t}`);
    const keys = ObjectCtor.keys(t);
    if (keys.length !== 1) throw new ProtocolError(`a tag object with ${keys.length} keys`);
    const tag = keys[0];
    const body = t[tag];
    const list = (what) => {
      if (!isArray(body)) throw new ProtocolError(`${what}: not a list`);
      return body;
    };
    const pairs = (what) => {
      const b = list(what);
      for (const p of b) if (!isArray(p) || p.length !== 2) throw new ProtocolError(`${what}: an entry that is not a pair`);
      return b;
    };
    switch (tag) {
      case 'u':
        if (body !== 0) throw new ProtocolError('undefined: a body other than 0');
        return undefined;
      case 'n':
        switch (body) {
          case 'NaN': return NaN;
          case 'Infinity': return Infinity;
          case '-Infinity': return -Infinity;
          case '-0': return -0;
          default: throw new ProtocolError(`an unknown special number ${jsonStringify(body)}`);
        }
      case 'i':
        if (typeof body !== 'string' || !/^-?[0-9]{1,4300}$/.test(body)) throw new ProtocolError('a BigInt that is not digits within the limit');
        return BigIntCtor(body);
      case 'a':
        return list('an array').map((x) => this.decode(x, depth + 1));
      case 'o':
      case 'O': {
        const out = tag === 'O' ? ObjectCtor.create(null) : {};
        for (const [k, v] of pairs('an object')) {
          if (typeof k !== 'string') throw new ProtocolError('an object key that is not a string');
          ObjectCtor.defineProperty(out, k, { value: this.decode(v, depth + 1), writable: true, enumerable: true, configurable: true });
        }
        return out;
      }
      case 'm': {
        const out = new MapCtor();
        for (const [k, v] of pairs('a Map')) apply(mapSet, out, [this.decode(k, depth + 1), this.decode(v, depth + 1)]);
        return out;
      }
      case 's': {
        const out = new SetCtor();
        for (const v of list('a Set')) apply(setAdd, out, [this.decode(v, depth + 1)]);
        return out;
      }
      case 'd':
        if (body !== null && !isFiniteNumber(body)) throw new ProtocolError('a Date that is not a time value');
        return new DateCtor(body === null ? NaN : body);
      case 'r': {
        const [source, flags] = list('a RegExp');
        if (typeof source !== 'string' || typeof flags !== 'string' || body.length !== 2) throw new ProtocolError('a RegExp that is not [source, flags]');
        try {
          return new RegExpCtor(source, flags);
        } catch (e) {
          throw new ProtocolError(`a RegExp that does not compile: ${e.message}`);
        }
      }
      case 'x': {
        const [kind, value] = list('a boxed primitive');
        if (body.length !== 2) throw new ProtocolError('a boxed primitive that is not [type, value]');
        const prim = this.decode(value, depth + 1);
        if (kind === 'Number' && typeof prim === 'number') return new NumberCtor(prim);
        if (kind === 'String' && typeof prim === 'string') return new StringCtor(prim);
        if (kind === 'Boolean' && typeof prim === 'boolean') return new BooleanCtor(prim);
        throw new ProtocolError(`a boxed ${jsonStringify(kind)} of the wrong kind`);
      }
      case 'b': {
        const [kind, data] = list('bytes');
        if (body.length !== 2 || typeof data !== 'string') throw new ProtocolError('bytes that are not [kind, base64]');
        const bytes = BufferFrom(data, 'base64');
        if (kind === 'Buffer') return bytes;
        const ab = apply(arrayBufferSlice, bytes.buffer, [bytes.byteOffset, bytes.byteOffset + bytes.length]);
        if (kind === 'ArrayBuffer') return ab;
        if (kind === 'DataView') return new DataViewCtor(ab);
        const C = TYPED[kind];
        if (!C || !(typeof kind === 'string')) throw new ProtocolError(`bytes of an unknown kind ${jsonStringify(kind)}`);
        if (ab.byteLength % C.BYTES_PER_ELEMENT !== 0) throw new ProtocolError(`a ${kind} of ${ab.byteLength} bytes`);
        return new C(ab);
      }
      case 'y':
        if (!WELL_KNOWN_BY_NAME.has(body)) throw new ProtocolError(`an unknown well-known symbol ${jsonStringify(body)}`);
        return WELL_KNOWN_BY_NAME.get(body);
      case 'Y':
        if (typeof body !== 'string') throw new ProtocolError('a registered symbol whose key is not a string');
        return symbolFor(body);
      default:
        return this.decodeOther(tag, body, depth);
    }
  }

  decodeOther(tag) {
    throw new ProtocolError(`an unknown tag ${jsonStringify(tag)}`);
  }

  /** Parses a message's text (a JSON object) strictly. */
  parse(text) {
    let v;
    try {
      v = jsonParse(text);
    } catch (e) {
      throw new ProtocolError(`a message that is not JSON (${e.message})`);
    }
    if (v === null || typeof v !== 'object' || isArray(v)) throw new ProtocolError('a message that is not an object');
    return v;
  }
}

/** The property keys that may cross: strings, and well-known symbols by name. */
function encodeKey(k) {
  if (typeof k === 'string') return k;
  if (typeof k === 'symbol' && WELL_KNOWN.has(k)) return { y: WELL_KNOWN.get(k) };
  return undefined;
}

function decodeKey(t) {
  if (typeof t === 'string') return t;
  if (t && typeof t === 'object' && !isArray(t) && typeof t.y === 'string' && WELL_KNOWN_BY_NAME.has(t.y) && ObjectCtor.keys(t).length === 1) {
    return WELL_KNOWN_BY_NAME.get(t.y);
  }
  throw new ProtocolError('a property key that is neither a string nor a well-known symbol');
}

// The builtin error classes, which cross as themselves by name.
const BUILTIN_ERRORS = {
  Error, RangeError, TypeError, SyntaxError, ReferenceError, EvalError, URIError, AggregateError,
};

module.exports = {
  MAX_MESSAGE, MAX_DEPTH, MAX_RUN_BYTES, MAX_DIGITS, Channel, Codec, ProtocolError, Refused, now,
  encodeKey, decodeKey, BUILTIN_ERRORS, WELL_KNOWN,
};
