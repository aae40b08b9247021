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

func TestHiddenBackoffExactlyThreeAttempts(t *testing.T) {
	p, _, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	if p.attempts() != 3 {
		t.Fatalf("want exactly 3 attempts, got %d", p.attempts())
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

func TestHiddenBackoffNoSleepAfterTheLastAttempt(t *testing.T) {
	p, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	if p.attempts() != 3 || len(*waits) != 2 {
		t.Fatalf("3 attempts need exactly 2 waits: %d attempts, %v", p.attempts(), *waits)
	}
}

func TestHiddenBackoffRoughlyDoubles(t *testing.T) {
	_, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	w := *waits
	if len(w) != 2 {
		t.Fatalf("want 2 waits, got %v", w)
	}
	if r := float64(w[1]) / float64(w[0]); r < 1.5 || r > 4 {
		t.Fatalf("exponential backoff: the second wait should be about twice the first, got %v", w)
	}
}

func TestHiddenBackoffTotalWaitIsModest(t *testing.T) {
	_, waits, _ := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	var total time.Duration
	for _, d := range *waits {
		total += d
	}
	if total <= 0 || total > 10*time.Second {
		t.Fatalf("the waits should add up to something positive and under 10s, got %v", *waits)
	}
}

func TestHiddenBackoffExhaustedErrorKeepsStatus(t *testing.T) {
	_, _, err := hiddenKeepsThrottling(t, http.StatusServiceUnavailable)
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != http.StatusServiceUnavailable {
		t.Fatalf("still throttled after the last attempt: want *FetchError with status 503, got %#v", err)
	}
}
