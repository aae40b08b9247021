// Gatehouse's wire for the Go judge apart (JUDGE.md, grader/src/lang/go.rs):
// the code both sides share. The judge (the hidden tests' test binary,
// built with a generated STUB of the candidate's package and
// gatehouse_go_wire_judge.go) and the host (a SERVER built from the
// candidate's real package, whose main calls Serve) both compile this
// file as the package `gatehousewire` of their build, at the same import
// path of the candidate's module (an overlay), so one run compiles it once.
//
// A message is one JSON object framed by a 4-byte big-endian length on an
// AF_UNIX stream socket, at most MaxMessage bytes. Both sides generate
// their tables (Registry) from the same go/types information, so values are
// encoded by their STATIC type and decoded into the static type the
// receiver expects; nothing on the wire names code to run beyond the
// tables' entries:
//
//	bool, numbers (floats as text, so NaN and ±Inf cross)   themselves
//	string: a JSON string, or {"b64": ...} when not UTF-8; []byte: base64
//	slices and arrays: lists; maps: lists of [key, value] pairs sorted by
//	key; nil slices, maps and pointers: null
//	structs: {"Field": value, ...}, unexported fields too
//	std values with a canonical binary form (time.Time, url.URL, ...):
//	{"bin": base64} of MarshalBinary
//	a pointer to a struct type of the candidate's package: a TWIN,
//	{"p": id, "t": "Name"}; the message's "tw" list carries the fields
//	each side has changed since the twin last crossed, so both copies
//	agree whenever it crosses (methods run on the host's copy)
//	other pointers: {"*": value} (a copy)
//	an interface value: {"t": "descriptor", "v": value} for data of a type
//	both sides know (the candidate's named types, predeclared and listed
//	std types, and slices, arrays, maps and pointers of those);
//	{"s": "io.EOF"} for a std sentinel error; an error of any other type
//	as its message and the error it wraps, {"r": id, "k": "e", "m": ...,
//	"w": ...}; a context.Context as {"r": id, "k": "c", "dl": deadline,
//	"st": state}, cancelled later by a "cancel" message; any other value
//	behind a named interface with a generated proxy as a handle, {"r": id,
//	"k": "o", "i": "Interface"}, whose method calls travel back
//	a func: a handle {"r": id, "k": "f"}, a call of it travels back
//
// Handles are numbered by their owner (the judge odd, the host even), so a
// handle coming back is the owner's own object again, and a proxy is made
// once per handle (identity holds both ways: a func or an error the host
// returned twice is the same value in the judge). Channels and
// unsafe.Pointer never cross: encoding one is an error naming the type.
//
// Operations: "call" (a package function by name, host only; a method by
// its method expression "(*T).M", host only; a handle's method or the
// handle itself when it is a func), "ret" (results, or a panic, or a
// failure), "vars" (the host's package variables), "cancel", "bye". The
// judge sends, with every call, the package variables it changed since
// they last crossed ("vars"), and the host answers with those it changed:
// an assignment in a test (`sleep = func(d time.Duration) {...}`) is an
// assignment in the host before its next call. A call's receiver and
// arguments that are twins come back in the "ret"'s "tw" with what the
// call changed.
package gatehousewire

import (
	"bytes"
	"context"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"
)

const (
	// MaxMessage bounds one message's bytes, MaxDepth a value's nesting,
	// MaxRunBytes what the judge accepts from one host in all.
	MaxMessage  = 16 << 20
	MaxDepth    = 64
	MaxRunBytes = 256 << 20
)

// Registry: one side's tables, generated from the candidate's package.
type Registry struct {
	// The candidate's named types (non-generic), by name.
	Own map[string]reflect.Type
	// Std named types the surface mentions, by "import/path.Name".
	Std map[string]reflect.Type
	// Interfaces with a proxy, by name ("Clock", "io.Reader").
	Ifaces map[string]*Iface
	// Package functions and method expressions ("(*T).M", "T.M"): the
	// host's alone (the judge's stubs call them).
	Funcs   map[string]any
	Methods map[string]any
	// Package variables that cross, by name: pointers to them.
	Vars map[string]any

	once  sync.Once
	names map[reflect.Type]string
	twin  map[reflect.Type]string
}

// Iface: a proxy for the peer's object behind interface Type, and the
// interface's methods on a local object.
type Iface struct {
	Type    reflect.Type
	New     func(r *Ref) any
	Methods map[string]func(o any) any
}

func (r *Registry) init() {
	r.once.Do(func() {
		r.names = map[reflect.Type]string{}
		r.twin = map[reflect.Type]string{}
		for n, t := range builtinTypes {
			r.names[t] = n
		}
		for n, t := range r.Std {
			r.names[t] = n
		}
		for n, t := range r.Own {
			r.names[t] = n
			if t.Kind() == reflect.Struct {
				r.twin[t] = n
			}
		}
	})
}

var builtinTypes = map[string]reflect.Type{}

func init() {
	for _, v := range []any{
		false, int(0), int8(0), int16(0), int32(0), int64(0), uint(0), uint8(0), uint16(0),
		uint32(0), uint64(0), uintptr(0), float32(0), float64(0), complex64(0), complex128(0), "",
	} {
		t := reflect.TypeOf(v)
		builtinTypes[t.String()] = t
	}
	builtinTypes["any"] = anyType
	builtinTypes["error"] = errorType
	for _, v := range []any{time.Duration(0), time.Time{}, time.Month(0), time.Weekday(0), json.Number(""), json.RawMessage(nil)} {
		t := reflect.TypeOf(v)
		builtinTypes[t.PkgPath()+"."+t.Name()] = t
	}
}

var (
	anyType   = reflect.TypeOf((*any)(nil)).Elem()
	errorType = reflect.TypeOf((*error)(nil)).Elem()
	ctxType   = reflect.TypeOf((*context.Context)(nil)).Elem()
	binMarsh  = reflect.TypeOf((*encoding.BinaryMarshaler)(nil)).Elem()
	binUnm    = reflect.TypeOf((*encoding.BinaryUnmarshaler)(nil)).Elem()
)

// Sentinel errors of the standard library, crossing by name so that
// errors.Is works on either side.
var sentinels = map[string]error{
	"io.EOF":                   io.EOF,
	"io.ErrUnexpectedEOF":      io.ErrUnexpectedEOF,
	"io.ErrClosedPipe":         io.ErrClosedPipe,
	"io.ErrShortWrite":         io.ErrShortWrite,
	"io.ErrNoProgress":         io.ErrNoProgress,
	"context.Canceled":         context.Canceled,
	"context.DeadlineExceeded": context.DeadlineExceeded,
	"fs.ErrNotExist":           fs.ErrNotExist,
	"fs.ErrExist":              fs.ErrExist,
	"fs.ErrPermission":         fs.ErrPermission,
	"fs.ErrClosed":             fs.ErrClosed,
	"fs.ErrInvalid":            fs.ErrInvalid,
	"os.ErrDeadlineExceeded":   os.ErrDeadlineExceeded,
	"net.ErrClosed":            net.ErrClosed,
	"strconv.ErrSyntax":        strconv.ErrSyntax,
	"strconv.ErrRange":         strconv.ErrRange,
}

// Failure: a call that did not come back (the peer ended, timed out, or a
// value could not cross). The judge fails the calling test with it.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

// Panic: the call panicked on the other side, with this value.
type Panic struct {
	Value any
	Text  string
	// At: where in the candidate's package it panicked (the host's
	// first frame in a file of the package folder), "file.go:17 in
	// pkg.Func".
	At string
}

// OnPanic: what this side does before it raises a peer's panic again
// (the judge names where the host panicked, for the crash record).
var OnPanic func(p *Panic)

func (p *Panic) Error() string { return "the call panicked: " + p.Text }

// Error stands for an error of the peer's that has no type of its own
// here: its message, the error it wraps (Unwrap), and the name of its
// type over there.
type Error struct {
	msg     string
	wrapped error
	typ     string
	ref     *Ref
}

func (e *Error) Error() string    { return e.msg }
func (e *Error) Unwrap() error    { return e.wrapped }
func (e *Error) TypeName() string { return e.typ }

// Ref: a handle on the peer's object; proxies call through it.
type Ref struct {
	p  *Peer
	id int64
}

// Call calls method (or, when empty, the func itself) of the handle's
// object with args (pointers to the arguments) into results (pointers).
func (r *Ref) Call(method string, args, results []any) {
	err := r.p.invoke(map[string]any{"ref": Num(r.id), "m": method}, args, results)
	Settle(err, method)
}

// Settle turns a call's outcome into what the caller sees: a panic is
// raised again, a failure fails the calling test (OnFailure).
func Settle(err error, what string) {
	if err == nil {
		return
	}
	var p *Panic
	if errors.As(err, &p) {
		if OnPanic != nil {
			OnPanic(p)
		}
		if p.Value != nil {
			panic(p.Value)
		}
		panic(p.Text)
	}
	OnFailure(fmt.Sprintf("calling %s: %v", what, err))
}

// OnFailure: what a failed crossing does on this side (the judge fails
// the calling test; the host panics in the calling goroutine).
var OnFailure = func(msg string) { panic(msg) }

type entry struct {
	v     reflect.Value
	iface string
}

// Peer: one side's end of one connection.
type Peer struct {
	reg  *Registry
	host bool
	conn net.Conn

	wmu sync.Mutex
	mu  sync.Mutex

	next     int64
	calls    int64
	pending  map[int64]chan map[string]any
	local    map[int64]*entry
	localBy  map[any]int64
	proxies  map[int64]reflect.Value
	proxyBy  map[any]int64
	twins    map[int64]reflect.Value
	twinBy   map[any]int64
	snaps    map[int64]map[string]string
	varSnap  map[string]string
	cancels  map[int64]func(deadline bool)
	watching map[int64]bool

	dead     error
	deadCh   chan struct{}
	received int64
	// The named types the other side has (nil: all of ours).
	peerTypes map[string]bool

	// Timeout of one call (0: none), and hooks: after every frame read
	// (the judge drains the host's output), and once the peer is gone.
	Timeout time.Duration
	OnFrame func()
	OnDead  func(error)
	// Extra fields for every call this side sends (the judge's log flags).
	CallExtra func() map[string]any
	// Applied before serving a call with the fields above.
	OnCallExtra func(map[string]any)
}

// NewPeer: a peer on conn; host says which side (its ids are even).
func NewPeer(reg *Registry, host bool, conn net.Conn) *Peer {
	reg.init()
	p := &Peer{
		reg: reg, host: host, conn: conn,
		pending: map[int64]chan map[string]any{}, local: map[int64]*entry{}, localBy: map[any]int64{},
		proxies: map[int64]reflect.Value{}, proxyBy: map[any]int64{}, twins: map[int64]reflect.Value{},
		twinBy: map[any]int64{}, snaps: map[int64]map[string]string{}, varSnap: map[string]string{},
		cancels: map[int64]func(deadline bool){}, watching: map[int64]bool{}, deadCh: make(chan struct{}),
	}
	if host {
		p.next = 2
	} else {
		p.next = 1
	}
	return p
}

func (p *Peer) own(id int64) bool { return (id%2 == 0) == p.host }

func (p *Peer) newID() int64 {
	id := p.next
	p.next += 2
	return id
}

// Dead: why the peer is gone (nil while it serves).
func (p *Peer) Dead() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

func (p *Peer) die(err error) {
	p.mu.Lock()
	if p.dead != nil {
		p.mu.Unlock()
		return
	}
	p.dead = err
	close(p.deadCh)
	for _, c := range p.cancels {
		c(false)
	}
	p.mu.Unlock()
	_ = p.conn.Close()
	if p.OnDead != nil {
		p.OnDead(err)
	}
}

// Kill ends the peer with err (a timeout, a protocol breach).
func (p *Peer) Kill(err error) { p.die(err) }

// ---------------------------------------------------------------- framing

func (p *Peer) send(msg map[string]any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if len(data) > MaxMessage {
		return fmt.Errorf("a message of %d bytes is over the %d-byte limit", len(data), MaxMessage)
	}
	frame := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(frame, uint32(len(data)))
	copy(frame[4:], data)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.conn.Write(frame); err != nil {
		return fmt.Errorf("the other side is gone (%v)", err)
	}
	return nil
}

func (p *Peer) recv() (map[string]any, error) {
	var head [4]byte
	if _, err := io.ReadFull(p.conn, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > MaxMessage {
		return nil, fmt.Errorf("a message announced %d bytes, over the %d-byte limit", n, MaxMessage)
	}
	if !p.host {
		p.received += int64(n) + 4
		if p.received > MaxRunBytes {
			return nil, fmt.Errorf("the host's messages passed %d bytes", MaxRunBytes)
		}
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(p.conn, buf); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(buf))
	d.UseNumber()
	var msg map[string]any
	if err := d.Decode(&msg); err != nil || msg == nil {
		return nil, fmt.Errorf("a message is not a JSON object")
	}
	return msg, nil
}

// Run reads messages until the connection ends: answers go to their
// callers, calls are served each in a goroutine of its own.
func (p *Peer) Run() {
	for {
		msg, err := p.recv()
		if p.OnFrame != nil {
			p.OnFrame()
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
				p.die(errors.New("the connection ended"))
			} else {
				p.die(err)
			}
			return
		}
		switch msg["op"] {
		case "ret":
			id, _ := toInt(msg["re"])
			p.mu.Lock()
			c := p.pending[id]
			delete(p.pending, id)
			p.mu.Unlock()
			if c != nil {
				c <- msg
			}
		case "call":
			go p.serve(msg)
		case "vars":
			go p.serveVars(msg)
		case "cancel":
			id, _ := toInt(msg["ctx"])
			p.mu.Lock()
			c := p.cancels[id]
			p.mu.Unlock()
			if c != nil && p.own(id) == false {
				st, _ := msg["st"].(string)
				c(st == "deadline")
			}
		case "bye":
			p.die(errors.New("the other side said goodbye"))
			return
		default:
			p.die(fmt.Errorf("an unknown operation %v", msg["op"]))
			return
		}
	}
}

// ---------------------------------------------------------------- calls

// invoke sends a call (head names the target) with args and waits for its
// results; a panic over there comes back as *Panic, anything else that
// goes wrong as *Failure.
func (p *Peer) invoke(head map[string]any, args, results []any) error {
	if err := p.Dead(); err != nil {
		return &Failure{"the host is gone: " + err.Error()}
	}
	e := p.encoder(false)
	msg := map[string]any{"op": "call"}
	for k, v := range head {
		msg[k] = v
	}
	if recv, ok := head["recv"].(reflect.Value); ok {
		v, err := e.value(recv, recv.Type(), 0)
		if err != nil {
			return &Failure{"the receiver cannot cross: " + err.Error()}
		}
		msg["recv"] = v
	}
	a := make([]any, len(args))
	for i, x := range args {
		v := reflect.ValueOf(x).Elem()
		enc, err := e.value(v, v.Type(), 0)
		if err != nil {
			return &Failure{fmt.Sprintf("argument %d cannot cross: %v", i+1, err)}
		}
		a[i] = enc
	}
	msg["a"] = a
	if !p.host {
		vars, err := p.varsDiff(e)
		if err != nil {
			return &Failure{err.Error()}
		}
		if len(vars) > 0 {
			msg["vars"] = vars
		}
		if p.CallExtra != nil {
			for k, v := range p.CallExtra() {
				msg[k] = v
			}
		}
	}
	tw, err := e.twinList()
	if err != nil {
		return &Failure{err.Error()}
	}
	if len(tw) > 0 {
		msg["tw"] = tw
	}
	c := make(chan map[string]any, 1)
	p.mu.Lock()
	p.calls++
	id := p.calls
	p.pending[id] = c
	p.mu.Unlock()
	msg["id"] = Num(id)
	if err := p.send(msg); err != nil {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return &Failure{err.Error()}
	}
	var timer <-chan time.Time
	if p.Timeout > 0 {
		t := time.NewTimer(p.Timeout)
		defer t.Stop()
		timer = t.C
	}
	var ret map[string]any
	select {
	case ret = <-c:
	case <-p.deadCh:
		select {
		case ret = <-c:
		default:
			return &Failure{"the host ended during the call: " + p.Dead().Error()}
		}
	case <-timer:
		err := fmt.Errorf("a call did not answer within %v", p.Timeout)
		p.Kill(err)
		return &Failure{err.Error()}
	}
	return p.settleRet(ret, results)
}

func (p *Peer) settleRet(ret map[string]any, results []any) error {
	d := p.decoder()
	if err := d.twinList(ret["tw"]); err != nil {
		p.Kill(err)
		return &Failure{"the answer could not be read: " + err.Error()}
	}
	if vars, ok := ret["vars"].(map[string]any); ok && !p.host {
		if err := p.applyVars(d, vars); err != nil {
			p.Kill(err)
			return &Failure{"the answer could not be read: " + err.Error()}
		}
	}
	if f, ok := ret["fail"].(string); ok {
		return &Failure{f}
	}
	if pv, ok := ret["panic"].(map[string]any); ok {
		text, _ := pv["s"].(string)
		at, _ := pv["at"].(string)
		if len(at) > 300 {
			at = at[:300]
		}
		out := &Panic{Text: text, At: at}
		if raw, ok := pv["v"]; ok && raw != nil {
			var v any
			if err := d.into(reflect.ValueOf(&v).Elem(), raw, 0); err == nil {
				out.Value = v
			}
		}
		return out
	}
	r, _ := ret["r"].([]any)
	if len(r) != len(results) {
		return &Failure{fmt.Sprintf("the answer has %d results, want %d", len(r), len(results))}
	}
	for i, x := range results {
		if err := d.into(reflect.ValueOf(x).Elem(), r[i], 0); err != nil {
			p.Kill(err)
			return &Failure{fmt.Sprintf("result %d could not be read: %v", i+1, err)}
		}
	}
	return nil
}

// serve answers one call.
func (p *Peer) serve(msg map[string]any) {
	id := msg["id"]
	reply := func(r map[string]any) {
		r["op"] = "ret"
		r["re"] = id
		if err := p.send(r); err != nil {
			// Too big, or the peer is gone: say so in a small answer.
			_ = p.send(map[string]any{"op": "ret", "re": id, "fail": "the answer could not be sent: " + err.Error()})
		}
	}
	fail := func(format string, a ...any) { reply(map[string]any{"fail": fmt.Sprintf(format, a...)}) }
	if p.OnCallExtra != nil {
		p.OnCallExtra(msg)
	}
	d := p.decoder()
	if err := d.twinList(msg["tw"]); err != nil {
		fail("the call could not be read: %v", err)
		return
	}
	if vars, ok := msg["vars"].(map[string]any); ok && p.host {
		if err := p.applyVars(d, vars); err != nil {
			fail("the package variables could not be set: %v", err)
			return
		}
	}
	var fn reflect.Value
	var what string
	var lead []reflect.Value
	switch {
	case msg["fn"] != nil:
		name, _ := msg["fn"].(string)
		what = name
		f, ok := p.reg.Funcs[name]
		if !ok || !p.host {
			fail("no function %q here", name)
			return
		}
		fn = reflect.ValueOf(f)
	case msg["mx"] != nil:
		name, _ := msg["mx"].(string)
		what = name
		f, ok := p.reg.Methods[name]
		if !ok || !p.host {
			fail("no method %q here", name)
			return
		}
		fn = reflect.ValueOf(f)
		rv := reflect.New(fn.Type().In(0)).Elem()
		if err := d.into(rv, msg["recv"], 0); err != nil {
			fail("the receiver of %s could not be read: %v", name, err)
			return
		}
		lead = []reflect.Value{rv}
	case msg["ref"] != nil:
		rid, _ := toInt(msg["ref"])
		method, _ := msg["m"].(string)
		p.mu.Lock()
		ent := p.local[rid]
		p.mu.Unlock()
		if ent == nil || !p.own(rid) {
			fail("no object %d here", rid)
			return
		}
		if method == "" {
			fn = ent.v
			what = "a func"
		} else {
			what = method
			var m func(o any) any
			if ifc := p.reg.Ifaces[ent.iface]; ifc != nil {
				m = ifc.Methods[method]
			}
			if m == nil {
				fail("no method %q on that object", method)
				return
			}
			fn = reflect.ValueOf(m(ent.v.Interface()))
		}
	default:
		fail("a call names nothing to call")
		return
	}
	if fn.Kind() != reflect.Func || fn.IsNil() {
		fail("%s is not a func", what)
		return
	}
	ft := fn.Type()
	raw, _ := msg["a"].([]any)
	if len(lead)+len(raw) != ft.NumIn() {
		fail("%s takes %d arguments, the call has %d", what, ft.NumIn(), len(lead)+len(raw))
		return
	}
	in := append([]reflect.Value{}, lead...)
	for i, x := range raw {
		v := reflect.New(ft.In(len(lead) + i)).Elem()
		if err := d.into(v, x, 0); err != nil {
			fail("argument %d of %s could not be read: %v", i+1, what, err)
			return
		}
		in = append(in, v)
	}
	var out []reflect.Value
	finished := false
	func() {
		defer func() {
			if finished {
				return
			}
			r := recover()
			if r == nil {
				fail("%s ended its goroutine (runtime.Goexit or panic(nil)) instead of returning", what)
				return
			}
			e := p.encoder(false)
			pv := map[string]any{"s": fmt.Sprint(r)}
			if p.host {
				pv["at"] = panicFrame()
			}
			var rv any = r
			if enc, err := e.value(reflect.ValueOf(&rv).Elem(), anyType, 0); err == nil {
				pv["v"] = enc
			}
			ans := map[string]any{"panic": pv}
			if tw, err := e.twinList(); err == nil && len(tw) > 0 {
				ans["tw"] = tw
			}
			reply(ans)
		}()
		if ft.IsVariadic() {
			out = fn.CallSlice(in)
		} else {
			out = fn.Call(in)
		}
		finished = true
	}()
	if !finished {
		return
	}
	e := p.encoder(false)
	r := make([]any, len(out))
	for i, v := range out {
		enc, err := e.value(v, ft.Out(i), 0)
		if err != nil {
			fail("result %d of %s cannot cross: %v", i+1, what, err)
			return
		}
		r[i] = enc
	}
	ans := map[string]any{"r": r}
	// What the call did to the twins it was given.
	for _, tv := range d.twinsSeen {
		if id, ok := p.twinID(tv, false); ok {
			e.pending = append(e.pending, id)
		}
	}
	if p.host {
		if vars, err := p.varsDiff(e); err == nil && len(vars) > 0 {
			ans["vars"] = vars
		}
	}
	tw, err := e.twinList()
	if err != nil {
		fail("%v", err)
		return
	}
	if len(tw) > 0 {
		ans["tw"] = tw
	}
	reply(ans)
}

// PullVars asks the host for every package variable's value (encoded).
func (p *Peer) PullVars() (map[string]any, error) {
	c := make(chan map[string]any, 1)
	p.mu.Lock()
	p.calls++
	id := p.calls
	p.pending[id] = c
	p.mu.Unlock()
	if err := p.send(map[string]any{"op": "vars", "id": Num(id), "types": p.reg.typeNames()}); err != nil {
		return nil, err
	}
	var timer <-chan time.Time
	if p.Timeout > 0 {
		t := time.NewTimer(p.Timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case ret := <-c:
		p.setPeerTypes(ret["types"])
		d := p.decoder()
		if err := d.twinList(ret["tw"]); err != nil {
			return nil, err
		}
		if f, ok := ret["fail"].(string); ok {
			return nil, errors.New(f)
		}
		vars, _ := ret["vars"].(map[string]any)
		return vars, nil
	case <-p.deadCh:
		return nil, fmt.Errorf("the host ended: %v", p.Dead())
	case <-timer:
		err := fmt.Errorf("the host did not answer within %v", p.Timeout)
		p.Kill(err)
		return nil, err
	}
}

func (p *Peer) setPeerTypes(x any) {
	names, ok := x.([]any)
	if !ok {
		return
	}
	set := map[string]bool{}
	for _, n := range names {
		if s, ok := n.(string); ok {
			set[s] = true
		}
	}
	p.mu.Lock()
	p.peerTypes = set
	p.mu.Unlock()
}

func (r *Registry) typeNames() []any {
	var out []any
	for n := range r.Own {
		out = append(out, n)
	}
	for n := range r.Std {
		out = append(out, n)
	}
	return out
}

func (p *Peer) serveVars(msg map[string]any) {
	p.setPeerTypes(msg["types"])
	e := p.encoder(false)
	vars := map[string]any{}
	for name, ptr := range p.reg.Vars {
		v := reflect.ValueOf(ptr).Elem()
		enc, err := e.value(v, v.Type(), 0)
		if err != nil {
			continue
		}
		vars[name] = enc
		p.mu.Lock()
		p.varSnap[name] = canon(enc)
		p.mu.Unlock()
	}
	ans := map[string]any{"op": "ret", "re": msg["id"], "vars": vars, "types": p.reg.typeNames()}
	if tw, err := e.twinList(); err == nil && len(tw) > 0 {
		ans["tw"] = tw
	}
	_ = p.send(ans)
}

// Decode reads an encoded value (as PullVars gives them) into dst, a
// pointer, and records it as the variable name's last crossing.
func (p *Peer) Decode(name string, raw any, dst any) error {
	d := p.decoder()
	err := d.into(reflect.ValueOf(dst).Elem(), raw, 0)
	if err == nil && name != "" {
		p.mu.Lock()
		p.varSnap[name] = canon(raw)
		p.mu.Unlock()
	}
	return err
}

// SetVarSnap records name as crossed with raw (an encoded value).
func (p *Peer) SetVarSnap(name string, raw any) {
	p.mu.Lock()
	p.varSnap[name] = canon(raw)
	p.mu.Unlock()
}

// VarChanged: whether the variable at ptr differs from what last crossed.
func (p *Peer) VarChanged(name string, ptr any) bool {
	e := p.encoder(true)
	v := reflect.ValueOf(ptr).Elem()
	enc, err := e.value(v, v.Type(), 0)
	if err != nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.varSnap[name] != canon(enc)
}

func (p *Peer) varsDiff(e *encoder) (map[string]any, error) {
	out := map[string]any{}
	names := make([]string, 0, len(p.reg.Vars))
	for n := range p.reg.Vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		v := reflect.ValueOf(p.reg.Vars[name]).Elem()
		mark := len(e.pending)
		enc, err := e.value(v, v.Type(), 0)
		if err != nil {
			if p.host {
				e.pending = e.pending[:mark]
				continue
			}
			return nil, fmt.Errorf("the package variable %s cannot cross: %v", name, err)
		}
		c := canon(enc)
		p.mu.Lock()
		same := p.varSnap[name] == c
		if !same {
			p.varSnap[name] = c
		}
		p.mu.Unlock()
		if !same {
			out[name] = enc
		}
	}
	return out, nil
}

func (p *Peer) applyVars(d *decoder, vars map[string]any) error {
	for name, raw := range vars {
		ptr, ok := p.reg.Vars[name]
		if !ok && !p.host {
			// The host mirrors every variable that can cross; the judge's
			// stub declares those the tests use.
			continue
		}
		if !ok {
			return fmt.Errorf("no package variable %q", name)
		}
		v := reflect.ValueOf(ptr).Elem()
		fresh := reflect.New(v.Type()).Elem()
		if err := d.into(fresh, raw, 0); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		v.Set(fresh)
		p.mu.Lock()
		p.varSnap[name] = canon(raw)
		p.mu.Unlock()
	}
	return nil
}

// CallFunc calls the host's package function name (the judge's stubs).
func (p *Peer) CallFunc(name string, args, results []any) error {
	return p.invoke(map[string]any{"fn": name}, args, results)
}

// CallMethod calls the host's method expression name with the receiver
// at recv (a pointer to it).
func (p *Peer) CallMethod(name string, recv any, args, results []any) error {
	return p.invoke(map[string]any{"mx": name, "recv": reflect.ValueOf(recv).Elem()}, args, results)
}

// ---------------------------------------------------------------- encoding

type encoder struct {
	p        *Peer
	snapshot bool // encoding to compare, not to send: register nothing new
	pending  []int64
	queued   map[int64]bool
}

func (p *Peer) encoder(snapshot bool) *encoder {
	return &encoder{p: p, snapshot: snapshot, queued: map[int64]bool{}}
}

func Num(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }

func canon(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	return t.String()
}

// crossable: whether values of t can cross at all (statically).
func (p *Peer) crossable(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Chan, reflect.UnsafePointer:
		return false
	case reflect.Slice, reflect.Array:
		return p.crossable(t.Elem(), seen)
	case reflect.Map:
		return p.crossable(t.Key(), seen) && p.crossable(t.Elem(), seen)
	case reflect.Pointer:
		if _, ok := p.reg.twin[t.Elem()]; ok {
			return true
		}
		return p.crossable(t.Elem(), seen)
	case reflect.Struct:
		if t.Implements(binMarsh) && reflect.PointerTo(t).Implements(binUnm) && !p.isOwn(t) {
			return true
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() && !p.isOwn(t) && t.PkgPath() != "" {
				return false
			}
			if !p.crossable(f.Type, seen) {
				return false
			}
		}
		return true
	}
	return true
}

func (p *Peer) isOwn(t reflect.Type) bool {
	_, ok := p.reg.Own[t.Name()]
	return ok && p.reg.Own[t.Name()] == t
}

// field: the i-th field of struct value v, readable and (when v is
// addressable) settable, unexported or not.
func field(v reflect.Value, i int) reflect.Value {
	f := v.Field(i)
	if f.CanAddr() {
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	return f
}

func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return v
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}

// funcKey: the identity of a func value (its closure), or nil.
func funcKey(v reflect.Value) any {
	if v.IsNil() {
		return nil
	}
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return *(*unsafe.Pointer)(c.UnsafePointer())
}

// key: what identifies a local object for its handle.
func objKey(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Func:
		return funcKey(v)
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.UnsafePointer:
		return [2]uintptr{uintptr(v.Pointer()), uintptr(unsafe.Pointer(typeID(v.Type())))}
	}
	if v.Type().Comparable() {
		var k any
		func() {
			defer func() { _ = recover() }()
			k = v.Interface()
			_ = map[any]bool{k: true}
		}()
		return k
	}
	return nil
}

var typeIDs sync.Map

func typeID(t reflect.Type) *byte {
	if v, ok := typeIDs.Load(t); ok {
		return v.(*byte)
	}
	b := new(byte)
	v, _ := typeIDs.LoadOrStore(t, b)
	return v.(*byte)
}

// detach: a copy of v that aliases no variable (a Value read from a
// variable or a field changes when it does).
func detach(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}

// localRef registers a local object (or finds its handle).
func (e *encoder) localRef(v reflect.Value, iface string) int64 {
	p := e.p
	v = detach(v)
	k := objKey(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if k != nil {
		if id, ok := p.localBy[k]; ok {
			return id
		}
	}
	id := p.newID()
	p.local[id] = &entry{v: v, iface: iface}
	if k != nil {
		p.localBy[k] = id
	}
	return id
}

// proxyRef: the peer's handle when v is a proxy of the peer's object.
func (p *Peer) proxyRef(v reflect.Value) (int64, bool) {
	k := objKey(v)
	if k == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.proxyBy[k]
	return id, ok
}

func (e *encoder) value(v reflect.Value, t reflect.Type, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("a value nested deeper than %d", MaxDepth)
	}
	switch t.Kind() {
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float32:
		return strconv.FormatFloat(v.Float(), 'g', -1, 32), nil
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), nil
	case reflect.Complex64, reflect.Complex128:
		bits := 64
		if t.Kind() == reflect.Complex64 {
			bits = 32
		}
		c := v.Complex()
		return []any{strconv.FormatFloat(real(c), 'g', -1, bits), strconv.FormatFloat(imag(c), 'g', -1, bits)}, nil
	case reflect.String:
		s := v.String()
		if utf8.ValidString(s) {
			return s, nil
		}
		return map[string]any{"b64": base64.StdEncoding.EncodeToString([]byte(s))}, nil
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return base64.StdEncoding.EncodeToString(v.Bytes()), nil
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			x, err := e.value(v.Index(i), t.Elem(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		type pair struct {
			k string
			v []any
		}
		pairs := make([]pair, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			k, err := e.value(it.Key(), t.Key(), depth+1)
			if err != nil {
				return nil, err
			}
			x, err := e.value(it.Value(), t.Elem(), depth+1)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, pair{canon(k), []any{k, x}})
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
		out := make([]any, len(pairs))
		for i, pr := range pairs {
			out[i] = pr.v
		}
		return out, nil
	case reflect.Struct:
		return e.structValue(v, t, depth)
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		if name, ok := e.p.reg.twin[t.Elem()]; ok {
			id, err := e.twin(v)
			if err != nil {
				return nil, err
			}
			return map[string]any{"p": Num(id), "t": name}, nil
		}
		x, err := e.value(v.Elem(), t.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		return map[string]any{"*": x}, nil
	case reflect.Interface:
		return e.iface(v, t, depth)
	case reflect.Func:
		if v.IsNil() {
			return nil, nil
		}
		if id, ok := e.p.proxyRef(v); ok {
			return map[string]any{"r": Num(id), "k": "f"}, nil
		}
		if e.snapshot {
			return map[string]any{"new": "f", "key": fmt.Sprint(funcKey(v))}, nil
		}
		return map[string]any{"r": Num(e.localRef(v, "")), "k": "f"}, nil
	}
	return nil, fmt.Errorf("a value of type %s cannot cross (%s)", typeName(t), t.Kind())
}

func (e *encoder) structValue(v reflect.Value, t reflect.Type, depth int) (any, error) {
	if !e.p.isOwn(t) && t.Implements(binMarsh) && reflect.PointerTo(t).Implements(binUnm) {
		b, err := v.Interface().(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", typeName(t), err)
		}
		return map[string]any{"bin": base64.StdEncoding.EncodeToString(b)}, nil
	}
	v = addressable(v)
	out := map[string]any{}
	own := e.p.isOwn(t) || t.PkgPath() == "" || t.Name() == ""
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		f := field(v, i)
		if (!sf.IsExported() && !own) || !e.p.crossable(sf.Type, map[reflect.Type]bool{}) {
			if f.IsZero() {
				continue
			}
			return nil, fmt.Errorf("a %s whose field %s (%s) is set cannot cross", typeName(t), sf.Name, typeName(sf.Type))
		}
		x, err := e.value(f, sf.Type, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %v", typeName(t), sf.Name, err)
		}
		out[sf.Name] = x
	}
	return out, nil
}

// twinID: the twin handle of pointer v (registering it when add).
func (p *Peer) twinID(v reflect.Value, add bool) (int64, bool) {
	v = detach(v)
	k := v.Interface()
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.twinBy[k]; ok {
		return id, true
	}
	if !add {
		return 0, false
	}
	id := p.newID()
	p.twins[id] = v
	p.twinBy[k] = id
	return id, true
}

func (e *encoder) twin(v reflect.Value) (int64, error) {
	if e.snapshot {
		id, ok := e.p.twinID(v, false)
		if !ok {
			return -1, nil
		}
		return id, nil
	}
	id, _ := e.p.twinID(v, true)
	if !e.queued[id] {
		e.queued[id] = true
		e.pending = append(e.pending, id)
	}
	return id, nil
}

// twinList: the fields of every twin this message carries that changed
// since they last crossed (all of a new one's), as [id, name, fields].
func (e *encoder) twinList() ([]any, error) {
	var out []any
	for i := 0; i < len(e.pending); i++ {
		id := e.pending[i]
		e.p.mu.Lock()
		v := e.p.twins[id]
		snap := e.p.snaps[id]
		e.p.mu.Unlock()
		if !v.IsValid() {
			continue
		}
		s := v.Elem()
		t := s.Type()
		fresh := snap == nil
		if fresh {
			snap = map[string]string{}
		}
		fields := map[string]any{}
		for j := 0; j < t.NumField(); j++ {
			sf := t.Field(j)
			if !e.p.crossable(sf.Type, map[reflect.Type]bool{}) {
				continue
			}
			mark := len(e.pending)
			x, err := e.value(field(s, j), sf.Type, 1)
			if err != nil {
				// A field that cannot cross now stays each side's own.
				for _, q := range e.pending[mark:] {
					delete(e.queued, q)
				}
				e.pending = e.pending[:mark]
				continue
			}
			c := canon(x)
			if fresh || snap[sf.Name] != c {
				fields[sf.Name] = x
				snap[sf.Name] = c
			}
		}
		e.p.mu.Lock()
		e.p.snaps[id] = snap
		e.p.mu.Unlock()
		if fresh || len(fields) > 0 {
			out = append(out, []any{Num(id), e.p.reg.twin[t], fields})
		}
	}
	return out, nil
}

func (e *encoder) iface(v reflect.Value, t reflect.Type, depth int) (any, error) {
	if v.IsNil() {
		return nil, nil
	}
	d := v.Elem()
	dt := d.Type()
	// The peer's own objects go back as its handles.
	if id, ok := e.p.proxyRef(d); ok {
		switch {
		case dt == reflect.TypeOf((*Error)(nil)):
			return map[string]any{"r": Num(id), "k": "e"}, nil
		case dt.Implements(ctxType) && t.Implements(ctxType) && t.NumMethod() > 0:
			return map[string]any{"r": Num(id), "k": "c"}, nil
		case dt.Kind() == reflect.Func:
			return map[string]any{"r": Num(id), "k": "f"}, nil
		}
		return map[string]any{"r": Num(id), "k": "o"}, nil
	}
	if t == ctxType {
		return e.ctx(d)
	}
	if dt.Implements(errorType) {
		if err, ok := d.Interface().(error); ok {
			for name, s := range sentinels {
				if s == err {
					return map[string]any{"s": name}, nil
				}
			}
		}
	}
	if name, ok := e.p.describe(dt); ok {
		mark := len(e.pending)
		x, err := e.value(d, dt, depth+1)
		if err == nil {
			return map[string]any{"t": name, "v": x}, nil
		}
		for _, q := range e.pending[mark:] {
			delete(e.queued, q)
		}
		e.pending = e.pending[:mark]
		if !dt.Implements(errorType) && e.ifaceName(t) == "" {
			return nil, err
		}
	}
	if dt.Implements(errorType) {
		return e.errValue(d, depth)
	}
	if name := e.ifaceName(t); name != "" {
		if e.snapshot {
			return map[string]any{"new": "o", "key": fmt.Sprint(objKey(d))}, nil
		}
		return map[string]any{"r": Num(e.localRef(d, name)), "k": "o", "i": name}, nil
	}
	return nil, fmt.Errorf("a value of type %s (as %s) cannot cross", typeName(dt), typeName(t))
}

func (e *encoder) ifaceName(t reflect.Type) string {
	for name, ifc := range e.p.reg.Ifaces {
		if ifc.Type == t {
			return name
		}
	}
	return ""
}

func (e *encoder) errValue(d reflect.Value, depth int) (any, error) {
	err := d.Interface().(error)
	if e.snapshot {
		return map[string]any{"new": "e", "key": fmt.Sprint(objKey(d))}, nil
	}
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprintf("(its Error method panicked: %v)", r)
			}
		}()
		msg = err.Error()
	}()
	if len(msg) > 1<<20 {
		msg = msg[:1<<20]
	}
	out := map[string]any{"r": Num(e.localRef(d, "error")), "k": "e", "m": msg, "ty": typeName(d.Type())}
	var w error
	func() {
		defer func() { _ = recover() }()
		w = errors.Unwrap(err)
	}()
	if w != nil && depth < MaxDepth {
		x, werr := e.iface(reflect.ValueOf(&w).Elem(), errorType, depth+1)
		if werr == nil {
			out["w"] = x
		}
	}
	return out, nil
}

func (e *encoder) ctx(d reflect.Value) (any, error) {
	ctx := d.Interface().(context.Context)
	if e.snapshot {
		return map[string]any{"new": "c", "key": fmt.Sprint(objKey(d))}, nil
	}
	id := e.localRef(d, "context")
	out := map[string]any{"r": Num(id), "k": "c"}
	if dl, ok := ctx.Deadline(); ok {
		out["dl"] = Num(dl.UnixNano())
	}
	switch ctx.Err() {
	case nil:
	case context.DeadlineExceeded:
		out["st"] = "deadline"
	default:
		out["st"] = "canceled"
	}
	if ctx.Done() != nil && ctx.Err() == nil {
		p := e.p
		p.mu.Lock()
		watch := !p.watching[id]
		p.watching[id] = true
		p.mu.Unlock()
		if watch {
			go func() {
				select {
				case <-ctx.Done():
					st := "canceled"
					if ctx.Err() == context.DeadlineExceeded {
						st = "deadline"
					}
					_ = p.send(map[string]any{"op": "cancel", "ctx": Num(id), "st": st})
				case <-p.deadCh:
				}
			}()
		}
	}
	return out, nil
}

// describe: the descriptor of a type both sides know, for data in an
// interface.
func (p *Peer) describe(t reflect.Type) (string, bool) {
	if n, ok := p.reg.names[t]; ok {
		if _, builtin := builtinTypes[n]; builtin {
			return n, true
		}
		p.mu.Lock()
		known := p.peerTypes == nil || p.peerTypes[n]
		p.mu.Unlock()
		return n, known
	}
	if t.Name() != "" {
		return "", false
	}
	switch t.Kind() {
	case reflect.Slice:
		if s, ok := p.describe(t.Elem()); ok {
			return "[]" + s, true
		}
	case reflect.Array:
		if s, ok := p.describe(t.Elem()); ok {
			return "[" + strconv.Itoa(t.Len()) + "]" + s, true
		}
	case reflect.Pointer:
		if s, ok := p.describe(t.Elem()); ok {
			return "*" + s, true
		}
	case reflect.Map:
		k, ok1 := p.describe(t.Key())
		v, ok2 := p.describe(t.Elem())
		if ok1 && ok2 {
			return "map[" + k + "]" + v, true
		}
	}
	return "", false
}

// parseType: the type a descriptor names.
func (p *Peer) parseType(s string, depth int) (reflect.Type, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("a type nested deeper than %d", MaxDepth)
	}
	if t, ok := builtinTypes[s]; ok {
		return t, nil
	}
	if t, ok := p.reg.Own[s]; ok {
		return t, nil
	}
	if t, ok := p.reg.Std[s]; ok {
		return t, nil
	}
	switch {
	case strings.HasPrefix(s, "[]"):
		e, err := p.parseType(s[2:], depth+1)
		if err != nil {
			return nil, err
		}
		return reflect.SliceOf(e), nil
	case strings.HasPrefix(s, "*"):
		e, err := p.parseType(s[1:], depth+1)
		if err != nil {
			return nil, err
		}
		return reflect.PointerTo(e), nil
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		n, err := strconv.Atoi(s[1:max(end, 1)])
		if end < 0 || err != nil || n < 0 || n > 1<<20 {
			return nil, fmt.Errorf("a type %q", s)
		}
		e, err := p.parseType(s[end+1:], depth+1)
		if err != nil {
			return nil, err
		}
		return reflect.ArrayOf(n, e), nil
	case strings.HasPrefix(s, "map["):
		// The key ends where its brackets balance.
		level := 0
		for i := 3; i < len(s); i++ {
			switch s[i] {
			case '[':
				level++
			case ']':
				level--
				if level == 0 {
					k, err := p.parseType(s[4:i], depth+1)
					if err != nil {
						return nil, err
					}
					v, err := p.parseType(s[i+1:], depth+1)
					if err != nil {
						return nil, err
					}
					if !k.Comparable() {
						return nil, fmt.Errorf("a map key type %s", k)
					}
					return reflect.MapOf(k, v), nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no type %q on this side", s)
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// ---------------------------------------------------------------- decoding

type decoder struct {
	p         *Peer
	twinsSeen []reflect.Value
}

func (p *Peer) decoder() *decoder { return &decoder{p: p} }

func toInt(x any) (int64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	return v, err == nil
}

func bad(x any, t reflect.Type) error {
	s := canon(x)
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return fmt.Errorf("%s is not a %s", s, typeName(t))
}

// twinList reads a message's twins: every new one made first (empty),
// then every one's fields set, so fields may refer to each other.
func (d *decoder) twinList(x any) error {
	if x == nil {
		return nil
	}
	list, ok := x.([]any)
	if !ok {
		return fmt.Errorf("a twin list that is not a list")
	}
	type upd struct {
		v      reflect.Value
		id     int64
		fields map[string]any
	}
	var ups []upd
	p := d.p
	for _, it := range list {
		tr, ok := it.([]any)
		if !ok || len(tr) != 3 {
			return fmt.Errorf("a twin that is not [id, type, fields]")
		}
		id, ok1 := toInt(tr[0])
		name, ok2 := tr[1].(string)
		fields, ok3 := tr[2].(map[string]any)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("a twin that is not [id, type, fields]")
		}
		t, ok := p.reg.Own[name]
		if !ok || t.Kind() != reflect.Struct {
			return fmt.Errorf("no struct type %q here", name)
		}
		p.mu.Lock()
		v, known := p.twins[id]
		if !known {
			if p.own(id) {
				p.mu.Unlock()
				return fmt.Errorf("no twin %d here", id)
			}
			v = reflect.New(t)
			p.twins[id] = v
			p.twinBy[v.Interface()] = id
		}
		p.mu.Unlock()
		if v.Type().Elem() != t {
			return fmt.Errorf("twin %d is not a %s", id, name)
		}
		ups = append(ups, upd{v, id, fields})
	}
	for _, u := range ups {
		s := u.v.Elem()
		t := s.Type()
		p.mu.Lock()
		snap := p.snaps[u.id]
		if snap == nil {
			snap = map[string]string{}
			p.snaps[u.id] = snap
		}
		p.mu.Unlock()
		for name, raw := range u.fields {
			sf, ok := t.FieldByName(name)
			if !ok || len(sf.Index) != 1 {
				return fmt.Errorf("%s has no field %s", t.Name(), name)
			}
			if !p.crossable(sf.Type, map[reflect.Type]bool{}) {
				continue
			}
			fresh := reflect.New(sf.Type).Elem()
			if err := d.into(fresh, raw, 1); err != nil {
				return fmt.Errorf("%s.%s: %v", t.Name(), name, err)
			}
			field(s, sf.Index[0]).Set(fresh)
			p.mu.Lock()
			snap[name] = canon(raw)
			p.mu.Unlock()
		}
	}
	return nil
}

func (d *decoder) into(dst reflect.Value, x any, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("a value nested deeper than %d", MaxDepth)
	}
	t := dst.Type()
	switch t.Kind() {
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return bad(x, t)
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := x.(json.Number)
		if !ok {
			return bad(x, t)
		}
		v, err := strconv.ParseInt(string(n), 10, t.Bits())
		if err != nil {
			return bad(x, t)
		}
		dst.SetInt(v)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := x.(json.Number)
		if !ok {
			return bad(x, t)
		}
		v, err := strconv.ParseUint(string(n), 10, t.Bits())
		if err != nil {
			return bad(x, t)
		}
		dst.SetUint(v)
	case reflect.Float32, reflect.Float64:
		s, ok := x.(string)
		if !ok {
			return bad(x, t)
		}
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return bad(x, t)
		}
		dst.SetFloat(f)
	case reflect.Complex64, reflect.Complex128:
		l, ok := x.([]any)
		if !ok || len(l) != 2 {
			return bad(x, t)
		}
		var parts [2]float64
		for i := range parts {
			s, ok := l[i].(string)
			f, err := strconv.ParseFloat(s, t.Bits()/2)
			if !ok || err != nil {
				return bad(x, t)
			}
			parts[i] = f
		}
		dst.SetComplex(complex(parts[0], parts[1]))
	case reflect.String:
		switch s := x.(type) {
		case string:
			dst.SetString(s)
		case map[string]any:
			b64, ok := s["b64"].(string)
			b, err := base64.StdEncoding.DecodeString(b64)
			if !ok || err != nil || len(s) != 1 {
				return bad(x, t)
			}
			dst.SetString(string(b))
		default:
			return bad(x, t)
		}
	case reflect.Slice:
		if x == nil {
			dst.Set(reflect.Zero(t))
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := x.(string)
			b, err := base64.StdEncoding.DecodeString(s)
			if !ok || err != nil {
				return bad(x, t)
			}
			v := reflect.MakeSlice(t, len(b), len(b))
			reflect.Copy(v, reflect.ValueOf(b))
			dst.Set(v)
			return nil
		}
		l, ok := x.([]any)
		if !ok {
			return bad(x, t)
		}
		v := reflect.MakeSlice(t, len(l), len(l))
		for i, it := range l {
			if err := d.into(v.Index(i), it, depth+1); err != nil {
				return err
			}
		}
		dst.Set(v)
	case reflect.Array:
		l, ok := x.([]any)
		if !ok || len(l) != t.Len() {
			return bad(x, t)
		}
		for i, it := range l {
			if err := d.into(dst.Index(i), it, depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if x == nil {
			dst.Set(reflect.Zero(t))
			return nil
		}
		l, ok := x.([]any)
		if !ok {
			return bad(x, t)
		}
		m := reflect.MakeMapWithSize(t, len(l))
		for _, it := range l {
			kv, ok := it.([]any)
			if !ok || len(kv) != 2 {
				return bad(x, t)
			}
			k := reflect.New(t.Key()).Elem()
			if err := d.into(k, kv[0], depth+1); err != nil {
				return err
			}
			v := reflect.New(t.Elem()).Elem()
			if err := d.into(v, kv[1], depth+1); err != nil {
				return err
			}
			m.SetMapIndex(k, v)
		}
		dst.Set(m)
	case reflect.Struct:
		obj, ok := x.(map[string]any)
		if !ok {
			return bad(x, t)
		}
		if b64, ok := obj["bin"].(string); ok && len(obj) == 1 && !d.p.isOwn(t) && reflect.PointerTo(t).Implements(binUnm) {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return bad(x, t)
			}
			v := reflect.New(t)
			if err := v.Interface().(encoding.BinaryUnmarshaler).UnmarshalBinary(b); err != nil {
				return fmt.Errorf("%s: %v", typeName(t), err)
			}
			dst.Set(v.Elem())
			return nil
		}
		fresh := reflect.New(t).Elem()
		for name, raw := range obj {
			sf, ok := t.FieldByName(name)
			if !ok || len(sf.Index) != 1 {
				return fmt.Errorf("%s has no field %s", typeName(t), name)
			}
			if err := d.into(field(fresh, sf.Index[0]), raw, depth+1); err != nil {
				return fmt.Errorf("%s.%s: %v", typeName(t), name, err)
			}
		}
		dst.Set(fresh)
	case reflect.Pointer:
		if x == nil {
			dst.Set(reflect.Zero(t))
			return nil
		}
		obj, ok := x.(map[string]any)
		if !ok {
			return bad(x, t)
		}
		if _, ok := d.p.reg.twin[t.Elem()]; ok {
			id, ok := toInt(obj["p"])
			if !ok {
				return bad(x, t)
			}
			d.p.mu.Lock()
			v, known := d.p.twins[id]
			d.p.mu.Unlock()
			if !known || v.Type() != t {
				return fmt.Errorf("no %s twin %d here", typeName(t.Elem()), id)
			}
			d.twinsSeen = append(d.twinsSeen, v)
			dst.Set(v)
			return nil
		}
		raw, ok := obj["*"]
		if !ok || len(obj) != 1 {
			return bad(x, t)
		}
		v := reflect.New(t.Elem())
		if err := d.into(v.Elem(), raw, depth+1); err != nil {
			return err
		}
		dst.Set(v)
	case reflect.Interface:
		return d.iface(dst, x, depth)
	case reflect.Func:
		if x == nil {
			dst.Set(reflect.Zero(t))
			return nil
		}
		v, err := d.ref(x, t, depth)
		if err != nil {
			return err
		}
		dst.Set(v)
	default:
		return fmt.Errorf("a value of type %s cannot cross (%s)", typeName(t), t.Kind())
	}
	return nil
}

func (d *decoder) iface(dst reflect.Value, x any, depth int) error {
	t := dst.Type()
	if x == nil {
		dst.Set(reflect.Zero(t))
		return nil
	}
	obj, ok := x.(map[string]any)
	if !ok {
		return bad(x, t)
	}
	var v reflect.Value
	switch {
	case obj["s"] != nil:
		name, _ := obj["s"].(string)
		err, ok := sentinels[name]
		if !ok {
			return fmt.Errorf("no sentinel error %q", name)
		}
		v = reflect.ValueOf(err)
	case obj["t"] != nil:
		name, _ := obj["t"].(string)
		dt, err := d.p.parseType(name, depth)
		if err != nil {
			return err
		}
		nv := reflect.New(dt).Elem()
		if err := d.into(nv, obj["v"], depth+1); err != nil {
			return err
		}
		v = nv
	case obj["r"] != nil:
		var err error
		v, err = d.ref(obj, t, depth)
		if err != nil {
			return err
		}
	default:
		return bad(x, t)
	}
	if !v.Type().AssignableTo(t) {
		return fmt.Errorf("a %s is not a %s", typeName(v.Type()), typeName(t))
	}
	dst.Set(v)
	return nil
}

// ref: the value a handle stands for here: the local object for one of
// ours, a proxy (made once) for one of the peer's.
func (d *decoder) ref(x any, t reflect.Type, depth int) (reflect.Value, error) {
	p := d.p
	obj, ok := x.(map[string]any)
	if !ok {
		return reflect.Value{}, bad(x, t)
	}
	id, ok := toInt(obj["r"])
	kind, _ := obj["k"].(string)
	if !ok {
		return reflect.Value{}, bad(x, t)
	}
	if p.own(id) {
		p.mu.Lock()
		ent := p.local[id]
		p.mu.Unlock()
		if ent == nil {
			return reflect.Value{}, fmt.Errorf("no object %d here", id)
		}
		return ent.v, nil
	}
	p.mu.Lock()
	v, known := p.proxies[id]
	p.mu.Unlock()
	if known {
		return v, nil
	}
	ref := &Ref{p: p, id: id}
	switch kind {
	case "f":
		if t.Kind() != reflect.Func {
			return reflect.Value{}, fmt.Errorf("a func is not a %s", typeName(t))
		}
		ft := t
		v = reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
			args := make([]any, len(in))
			for i, a := range in {
				c := reflect.New(a.Type())
				c.Elem().Set(a)
				args[i] = c.Interface()
			}
			outs := make([]any, ft.NumOut())
			for i := range outs {
				outs[i] = reflect.New(ft.Out(i)).Interface()
			}
			ref.Call("", args, outs)
			res := make([]reflect.Value, len(outs))
			for i, o := range outs {
				res[i] = reflect.ValueOf(o).Elem()
			}
			return res
		})
	case "e":
		msg, _ := obj["m"].(string)
		ty, _ := obj["ty"].(string)
		e := &Error{msg: msg, typ: ty, ref: ref}
		if w, ok := obj["w"]; ok && w != nil {
			var we error
			if err := d.iface(reflect.ValueOf(&we).Elem(), w, depth+1); err == nil {
				e.wrapped = we
			}
		}
		v = reflect.ValueOf(e)
	case "c":
		pc := &peerCtx{}
		if dl, ok := toInt(obj["dl"]); ok {
			pc.Context, pc.cancel = context.WithDeadline(context.Background(), time.Unix(0, dl))
		} else {
			pc.Context, pc.cancel = context.WithCancel(context.Background())
		}
		switch st, _ := obj["st"].(string); st {
		case "deadline":
			pc.end(true)
		case "canceled":
			pc.end(false)
		}
		p.mu.Lock()
		p.cancels[id] = pc.end
		p.mu.Unlock()
		var ctx context.Context = pc
		v = reflect.ValueOf(&ctx).Elem().Elem()
	case "o":
		name, _ := obj["i"].(string)
		ifc := p.reg.Ifaces[name]
		if ifc == nil {
			return reflect.Value{}, fmt.Errorf("no proxy for interface %q here", name)
		}
		v = reflect.ValueOf(ifc.New(ref))
	default:
		return reflect.Value{}, fmt.Errorf("a handle of kind %q", kind)
	}
	p.mu.Lock()
	if old, ok := p.proxies[id]; ok {
		p.mu.Unlock()
		return old, nil
	}
	p.proxies[id] = v
	if k := objKey(v); k != nil {
		p.proxyBy[k] = id
	}
	p.mu.Unlock()
	return v, nil
}

// ---------------------------------------------------------------- the host

// Serve answers the judge until it hangs up, then exits: the host
// server's main. The runner's host supervisor starts the server under the
// candidate's uid with the judge's socket on descriptor 3: stdin is
// /dev/null, stdout and stderr are pipes the judge drains, descriptor 4 a
// pipe for the standard logger. No test framework is linked and no runner
// variable is in its environment.
func Serve(reg *Registry) {
	f := os.NewFile(3, "judge")
	conn, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		os.Stderr.WriteString("gatehouse host: no connection to the judge: " + err.Error() + "\n")
		os.Exit(3)
	}
	if lf := os.NewFile(4, "log"); lf != nil {
		log.SetOutput(lf)
	}
	p := NewPeer(reg, true, conn)
	p.OnCallExtra = func(msg map[string]any) {
		lg, ok := msg["lg"].([]any)
		if !ok || len(lg) != 2 {
			return
		}
		if n, ok := lg[0].(json.Number); ok {
			if flags, err := strconv.Atoi(string(n)); err == nil && flags != log.Flags() {
				log.SetFlags(flags)
			}
		}
		if prefix, ok := lg[1].(string); ok && prefix != log.Prefix() {
			log.SetPrefix(prefix)
		}
	}
	p.Run()
	os.Exit(0)
}

// peerCtx: the peer's context.Context, ended when the peer's ends, with
// the peer's reason: a deadline the peer saw pass is DeadlineExceeded
// here too, whichever side's timer fired first.
type peerCtx struct {
	context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error
}

func (c *peerCtx) end(deadline bool) {
	c.mu.Lock()
	if c.err == nil {
		c.err = context.Canceled
		if deadline {
			c.err = context.DeadlineExceeded
		}
	}
	c.mu.Unlock()
	c.cancel()
}

func (c *peerCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if own := c.Context.Err(); own != nil {
		// Our own timer fired first: that is the peer's deadline.
		c.mu.Lock()
		if c.err == nil {
			c.err = own
		}
		err = c.err
		c.mu.Unlock()
	}
	return err
}

// panicFrame: called in a deferred function while a panic unwinds, the
// first frame of the panicking stack in a file of the package folder (the
// working directory) that is not the judge apart's own, as "file.go:17 in
// pkg.Func"; "" when there is none.
func panicFrame() string {
	pcs := make([]uintptr, 100)
	n := runtime.Callers(3, pcs)
	wd, _ := os.Getwd()
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if rel := strings.TrimPrefix(f.File, wd+"/"); rel != f.File && !strings.Contains(rel, "gatehouse") {
			return fmt.Sprintf("%s:%d in %s", rel, f.Line, f.Function)
		}
		if !more {
			return ""
		}
	}
}
