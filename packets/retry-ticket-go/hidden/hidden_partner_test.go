package ticket

// The hidden tests' partner: a loopback server that answers from a script
// of statuses, and a recorder for the client's sleeps.

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type hiddenPartner struct {
	srv     *httptest.Server
	mu      sync.Mutex
	calls   int
	answers []int // status per attempt; the last repeats; 200 answers hiddenBody
	body    string
}

const hiddenBody = `{"ok": true, "n": 3}`

func newHiddenPartner(t *testing.T, answers ...int) *hiddenPartner {
	t.Helper()
	p := &hiddenPartner{answers: answers, body: hiddenBody}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		i := p.calls
		p.calls++
		status := p.answers[len(p.answers)-1]
		if i < len(p.answers) {
			status = p.answers[i]
		}
		body := p.body
		p.mu.Unlock()
		if status != http.StatusOK {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error": "no"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *hiddenPartner) attempts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func hiddenSleeps(t *testing.T) *[]time.Duration {
	t.Helper()
	var mu sync.Mutex
	waits := &[]time.Duration{}
	old := sleep
	sleep = func(d time.Duration) {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
	}
	t.Cleanup(func() { sleep = old })
	return waits
}
