package ticket

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// A partner that keeps throttling until its eleventh request: an uncapped
// client shows up as more than three attempts instead of a hang.
func hiddenKeepsThrottling(t *testing.T, status int) (*hiddenPartner, *[]time.Duration, error) {
	t.Helper()
	answers := make([]int, 10)
	for i := range answers {
		answers[i] = status
	}
	p := newHiddenPartner(t, append(answers, http.StatusOK)...)
	waits := hiddenSleeps(t)
	_, err := FetchJSON(context.Background(), p.srv.URL+"/busy")
	return p, waits, err
}

func TestHiddenBackoffCapAtMostThree503(t *testing.T) {
	p, _, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	if p.attempts() > 3 {
		t.Fatalf("at most 3 attempts, got %d", p.attempts())
	}
}

func TestHiddenBackoffCapAtMostThree429(t *testing.T) {
	p, _, _ := hiddenKeepsThrottling(t, http.StatusTooManyRequests)
	if p.attempts() > 3 {
		t.Fatalf("at most 3 attempts, got %d", p.attempts())
	}
}

// brief: "with a hard cap of **3 attempts in total**"
// A cap is a ceiling: a client that gives up after 2 attempts keeps it too.
// What the brief fixes is that a throttled call is retried (at least 2
// attempts) and never past 3.
func TestHiddenBackoffRetriesWithinTheCap(t *testing.T) {
	p, _, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	if n := p.attempts(); n < 2 || n > 3 {
		t.Fatalf("a call that stays throttled is retried, at most 3 attempts in all: got %d", n)
	}
}

func TestHiddenBackoffGrowingDelays(t *testing.T) {
	_, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	w := *waits
	for i := range w {
		if w[i] <= 0 || (i > 0 && w[i] <= w[i-1]) {
			t.Fatalf("waits must be positive and grow: %v", w)
		}
	}
}

// brief: "Back off exponentially between attempts (each wait longer than the one before)"
// A wait comes between two attempts: none after the last one.
func TestHiddenBackoffNoSleepAfterTheLastAttempt(t *testing.T) {
	p, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	if n := p.attempts(); n < 2 || len(*waits) != n-1 {
		t.Fatalf("%d attempts need exactly %d waits (one between two attempts): %v", n, n-1, *waits)
	}
}

// brief: "Back off exponentially between attempts (each wait longer than the one before)"
// The brief asks for growing waits, not for a factor: 1s then 1.2s passes.
func TestHiddenBackoffEachWaitLonger(t *testing.T) {
	p, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	w := *waits
	if p.attempts() < 2 || len(w) < 1 {
		t.Fatalf("a call that stays throttled is retried after a wait: %d attempts, waits %v", p.attempts(), w)
	}
	for i := 1; i < len(w); i++ {
		if w[i] <= w[i-1] {
			t.Fatalf("each wait longer than the one before: %v", w)
		}
	}
}

func TestHiddenBackoffTotalWaitIsModest(t *testing.T) {
	_, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	var total time.Duration
	for _, d := range *waits {
		total += d
	}
	if total <= 0 || total > 30*time.Second {
		t.Fatalf("the waits should add up to something positive and seconds, not minutes (at most 30s), got %v", *waits)
	}
}

func TestHiddenBackoffExhaustedErrorKeepsStatus(t *testing.T) {
	_, _, err := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != http.StatusServiceUnavailable {
		t.Fatalf("still throttled after the last attempt: want *FetchError with status 503, got %#v", err)
	}
}
