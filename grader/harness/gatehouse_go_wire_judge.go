// The judge's side of the Go wire (see gatehouse_go_wire.go), the package
// `gatehousejudge` below it (the runner writes the wire's import path for
// "gatehouse.invalid/wire"): compiled into the hidden tests' test binary
// beside the generated stub of the candidate's package, never into the
// host.
//
// The test binary asks the trusted runner for a host over the unix socket
// named by GATEHOUSE_GO_APART (a folder only the judge's uid reaches): the
// runner starts the server built from the candidate's package under the
// candidate's uid and passes back the call socket and the read ends of the
// host's stdout, stderr and standard logger. One host serves the whole
// binary; a host that ended (it exited, crashed, or a call timed out and
// it was killed) fails the calls it was serving and is started again for
// the next call.
//
// A call that cannot complete fails the test that made it: the hidden
// tests' functions register their *testing.T for their goroutine first
// thing (Track, inserted by the stub generator on the line of the opening
// brace), and the failure is t.Fatalf on that goroutine; on a goroutine no
// test registered it is a panic. What the host printed arrives after each
// message and goes where the test's own output would: the current
// os.Stdout, os.Stderr and log.Writer(), byte for byte when a test
// redirected them, and with each line marked as the host's when they are
// still the test binary's own (so nothing the host prints reads as the test
// framework's result lines).
package gatehousejudge

import (
	. "gatehouse.invalid/wire"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	origStdout = os.Stdout
	origStderr = os.Stderr
)

var session struct {
	sync.Mutex
	peer     *Peer
	ctl      *net.UnixConn
	ctlMu    sync.Mutex
	initVals map[string]any
	fatal    error
	pid      int
}

var tracked struct {
	sync.Mutex
	m map[int64]*testing.T
}

func goid() int64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	s := bytes.TrimPrefix(buf[:n], []byte("goroutine "))
	if i := bytes.IndexByte(s, ' '); i > 0 {
		id, _ := strconv.ParseInt(string(s[:i]), 10, 64)
		return id
	}
	return 0
}

// Track registers t as the test of the calling goroutine (the first one
// that does, until t ends).
func Track(t *testing.T) {
	id := goid()
	tracked.Lock()
	defer tracked.Unlock()
	if tracked.m == nil {
		tracked.m = map[int64]*testing.T{}
	}
	if _, ok := tracked.m[id]; ok {
		return
	}
	tracked.m[id] = t
	t.Cleanup(func() {
		tracked.Lock()
		if tracked.m[id] == t {
			delete(tracked.m, id)
		}
		tracked.Unlock()
	})
}

func init() {
	// Before a host's panic is raised again here: where it happened, for
	// the runner's crash record (the judge's own output; the host's lines
	// reach this stream marked as the host's).
	OnPanic = func(p *Panic) {
		if p.At != "" {
			fmt.Fprintf(origStderr, "\ngatehouse judge: the host panicked at %s\n", strings.ReplaceAll(p.At, "\n", " "))
		}
	}
	OnFailure = func(msg string) {
		if strings.Contains(msg, "the host ended") {
			if line := hostCrashLine(); line != "" {
				msg += " (the host's last words: " + line + ")"
			}
		}
		id := goid()
		tracked.Lock()
		t := tracked.m[id]
		tracked.Unlock()
		if t != nil {
			t.Fatalf("gatehouse judge: %s", msg)
		}
		panic("gatehouse judge: " + msg)
	}
}

func callTimeout() time.Duration {
	secs, err := strconv.ParseFloat(os.Getenv("GATEHOUSE_GO_CALL_SECS"), 64)
	if err != nil || secs <= 0 {
		secs = 30
	}
	return time.Duration(secs * float64(time.Second))
}

// ctlRequest sends one request to the runner and reads its answer and the
// descriptors that came with it.
func ctlRequest(req map[string]any) (map[string]any, []int, error) {
	session.ctlMu.Lock()
	defer session.ctlMu.Unlock()
	if session.ctl == nil {
		path := os.Getenv("GATEHOUSE_GO_APART")
		if path == "" {
			return nil, nil, errors.New("no runner to ask for a host (GATEHOUSE_GO_APART is not set)")
		}
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			return nil, nil, fmt.Errorf("the runner cannot be reached: %v", err)
		}
		session.ctl = c
	}
	data, _ := json.Marshal(req)
	if _, err := session.ctl.Write(append(data, '\n')); err != nil {
		return nil, nil, fmt.Errorf("the runner is gone: %v", err)
	}
	buf := make([]byte, 1<<16)
	oob := make([]byte, syscall.CmsgSpace(8*4))
	n, oobn, _, _, err := session.ctl.ReadMsgUnix(buf, oob)
	if err != nil || n == 0 {
		return nil, nil, fmt.Errorf("the runner did not answer: %v", err)
	}
	var fds []int
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				if got, err := syscall.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	var ans map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf[:n]), &ans); err != nil {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, nil, fmt.Errorf("the runner's answer is not JSON")
	}
	return ans, fds, nil
}

// The host's output streams, drained after every message and every few
// milliseconds, in order.
type stream struct {
	fd    int
	which int
	start bool
}

var outMu sync.Mutex

func (s *stream) drain() {
	var buf [32 << 10]byte
	for s.fd >= 0 {
		n, err := syscall.Read(s.fd, buf[:])
		if n > 0 {
			s.emit(buf[:n])
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err == nil || err != syscall.EAGAIN {
			syscall.Close(s.fd)
			s.fd = -1
		}
		return
	}
}

// hostErr: the tail of what the hosts wrote on stderr, for naming why a
// host ended (its runtime's `panic:` or `fatal error:` line).
var hostErr struct {
	sync.Mutex
	tail []byte
}

// hostCrashLine: the last line of the hosts' stderr that starts a Go
// runtime crash report, or "".
func hostCrashLine() string {
	hostErr.Lock()
	defer hostErr.Unlock()
	lines := strings.Split(string(hostErr.tail), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			if len(l) > 200 {
				l = l[:200]
			}
			return l
		}
	}
	return ""
}

func (s *stream) emit(b []byte) {
	if s.which == 2 {
		hostErr.Lock()
		hostErr.tail = append(hostErr.tail, b...)
		if n := len(hostErr.tail); n > 8<<10 {
			hostErr.tail = append([]byte(nil), hostErr.tail[n-(8<<10):]...)
		}
		hostErr.Unlock()
	}
	var w io.Writer
	own := false
	switch s.which {
	case 1:
		w, own = os.Stdout, os.Stdout == origStdout
	case 2:
		w, own = os.Stderr, os.Stderr == origStderr
	default:
		w = log.Writer()
		own = w == io.Writer(origStderr) || w == io.Writer(origStdout)
	}
	if w == nil {
		return
	}
	if !own {
		_, _ = w.Write(b)
		return
	}
	var out bytes.Buffer
	for len(b) > 0 {
		if s.start {
			out.WriteString("[host] ")
			s.start = false
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out.Write(b)
			break
		}
		out.Write(b[:i+1])
		s.start = true
		b = b[i+1:]
	}
	_, _ = w.Write(out.Bytes())
}

// newHost asks the runner for a host and connects to it.
func newHost(reg *Registry) (*Peer, error) {
	ans, fds, err := ctlRequest(map[string]any{"op": "host"})
	if err != nil {
		return nil, err
	}
	if msg, ok := ans["error"].(string); ok {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		if fatal, _ := ans["fatal"].(bool); fatal {
			return nil, &Failure{Msg: msg}
		}
		return nil, errors.New(msg)
	}
	if len(fds) != 4 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, fmt.Errorf("the runner passed %d descriptors, want 4", len(fds))
	}
	pid := 0
	if n, ok := ans["pid"].(float64); ok {
		pid = int(n)
	}
	f := os.NewFile(uintptr(fds[0]), "host")
	conn, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		for _, fd := range fds[1:] {
			syscall.Close(fd)
		}
		return nil, err
	}
	streams := []*stream{{fd: fds[1], which: 1, start: true}, {fd: fds[2], which: 2, start: true}, {fd: fds[3], which: 3, start: true}}
	for _, s := range streams {
		_ = syscall.SetNonblock(s.fd, true)
	}
	drain := func() {
		outMu.Lock()
		defer outMu.Unlock()
		for _, s := range streams {
			s.drain()
		}
	}
	p := NewPeer(reg, false, conn)
	p.Timeout = callTimeout()
	p.OnFrame = drain
	p.CallExtra = func() map[string]any {
		return map[string]any{"lg": []any{Num(int64(log.Flags())), log.Prefix()}}
	}
	p.OnDead = func(error) {
		drain()
		_, fds, _ := ctlRequest(map[string]any{"op": "kill", "pid": pid})
		for _, fd := range fds {
			syscall.Close(fd)
		}
		time.Sleep(20 * time.Millisecond)
		drain()
	}
	go func() {
		for p.Dead() == nil {
			time.Sleep(15 * time.Millisecond)
			drain()
		}
	}()
	go p.Run()
	return p, nil
}

// peerFor: the host serving this test binary, started (again) when there
// is none.
func peerFor(reg *Registry) (*Peer, error) {
	session.Lock()
	defer session.Unlock()
	if session.peer != nil && session.peer.Dead() == nil {
		return session.peer, nil
	}
	if session.fatal != nil {
		return nil, session.fatal
	}
	old := session.peer
	p, err := newHost(reg)
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			session.fatal = err
		}
		return nil, err
	}
	vals, err := p.PullVars()
	if err != nil {
		p.Kill(err)
		return nil, fmt.Errorf("the host did not start: %v", err)
	}
	if old == nil {
		session.initVals = vals
	} else {
		// A variable no test changed since the last host takes the new
		// host's value; one a test set is sent with the next call.
		for name, ptr := range reg.Vars {
			if raw, ok := vals[name]; ok && !old.VarChanged(name, ptr) {
				_ = p.Decode(name, raw, ptr)
			}
		}
	}
	session.peer = p
	return p, nil
}

// Call calls the host's package function name.
func Call(reg *Registry, name string, args, results []any) {
	p, err := peerFor(reg)
	if err != nil {
		OnFailure(fmt.Sprintf("calling %s: %v", name, err))
		return
	}
	Settle(p.CallFunc(name, args, results), name)
}

// Method calls the host's method expression name ("(*T).M", "T.M") on the
// receiver at recv.
func Method(reg *Registry, name string, recv any, args, results []any) {
	p, err := peerFor(reg)
	if err != nil {
		OnFailure(fmt.Sprintf("calling %s: %v", name, err))
		return
	}
	Settle(p.CallMethod(name, recv, args, results), name)
}

// InitVar: the host's initial value of package variable name (a stub's
// variable initializer).
func InitVar[T any](reg *Registry, name string) T {
	var v T
	p, err := peerFor(reg)
	if err != nil {
		return v
	}
	session.Lock()
	raw, ok := session.initVals[name]
	session.Unlock()
	if !ok {
		return v
	}
	if err := p.Decode(name, raw, &v); err != nil {
		fmt.Fprintf(origStderr, "gatehouse judge: the package variable %s could not be read: %v\n", name, err)
	}
	return v
}
