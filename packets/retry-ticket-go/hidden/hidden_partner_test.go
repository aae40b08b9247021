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
	at      []time.Time // when each request arrived, by the partner's clock
	answers []int       // status per attempt; the last repeats; 200 answers hiddenBody
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
		p.at = append(p.at, time.Now())
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

// gap: the time between request i and request i+1, as the partner saw
// them.
func (p *hiddenPartner) gap(i int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i+1 >= len(p.at) {
		return 0
	}
	return p.at[i+1].Sub(p.at[i])
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
