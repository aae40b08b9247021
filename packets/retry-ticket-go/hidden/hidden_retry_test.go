package ticket

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

func hiddenOnce(t *testing.T, status int) {
	t.Helper()
	p := newHiddenPartner(t, status, http.StatusOK)
	waits := hiddenSleeps(t)
	_, err := FetchJSON(context.Background(), p.srv.URL+"/x")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != status {
		t.Fatalf("status %d: want *FetchError with that status, got %#v", status, err)
	}
	if p.attempts() != 1 || len(*waits) != 0 {
		t.Fatalf("status %d must not be retried: %d attempts, sleeps %v", status, p.attempts(), *waits)
	}
}

func hiddenRecovers(t *testing.T, status int) {
	t.Helper()
	p := newHiddenPartner(t, status, http.StatusOK)
	waits := hiddenSleeps(t)
	got, err := FetchJSON(context.Background(), p.srv.URL+"/x")
	if err != nil || got["ok"] != true {
		t.Fatalf("one %d then success: want the object, got %v, %v", status, got, err)
	}
	if p.attempts() != 2 || len(*waits) != 1 || (*waits)[0] <= 0 {
		t.Fatalf("one %d: want 2 attempts and one positive sleep, got %d and %v", status, p.attempts(), *waits)
	}
}

func TestHiddenRetryThrottled429ThenOK(t *testing.T) { hiddenRecovers(t, http.StatusTooManyRequests) }
func TestHiddenRetryThrottled503ThenOK(t *testing.T) {
	hiddenRecovers(t, http.StatusServiceUnavailable)
}

func TestHiddenRetryScope400(t *testing.T) { hiddenOnce(t, http.StatusBadRequest) }
func TestHiddenRetryScope401(t *testing.T) { hiddenOnce(t, http.StatusUnauthorized) }
func TestHiddenRetryScope404(t *testing.T) { hiddenOnce(t, http.StatusNotFound) }
func TestHiddenRetryScope500(t *testing.T) { hiddenOnce(t, http.StatusInternalServerError) }
func TestHiddenRetryScope502(t *testing.T) { hiddenOnce(t, http.StatusBadGateway) }
func TestHiddenRetryScope504(t *testing.T) { hiddenOnce(t, http.StatusGatewayTimeout) }

func TestHiddenRetryScopeBadJSON(t *testing.T) {
	p := newHiddenPartner(t, http.StatusOK)
	p.body = `[1, 2]`
	waits := hiddenSleeps(t)
	_, err := FetchJSON(context.Background(), p.srv.URL+"/x")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("a body that is not a JSON object: want *FetchError, got %#v", err)
	}
	if p.attempts() != 1 || len(*waits) != 0 {
		t.Fatalf("a bad body must not be retried: %d attempts, %v", p.attempts(), *waits)
	}
}

func TestHiddenRetryScopeRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	waits := hiddenSleeps(t)
	_, err = FetchJSON(context.Background(), "http://"+addr+"/x")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("a refused connection: want *FetchError, got %#v", err)
	}
	if len(*waits) != 0 {
		t.Fatalf("a refused connection must not be retried: sleeps %v", *waits)
	}
}

// The way production calls FetchJSON: nothing replaced, the real
// time.Sleep. First the wait the client asks for when the tests record
// it, then the same call with nothing replaced: the partner must see a
// second request, a real pause after the first (a quarter of the recorded
// wait, room for jitter). A client that retries, or waits, only when the
// tests replace its sleep fails here.
func TestHiddenRetryThrottledInProduction(t *testing.T) {
	p := newHiddenPartner(t, http.StatusServiceUnavailable, http.StatusOK)
	real := sleep
	var waits []time.Duration
	sleep = func(d time.Duration) { waits = append(waits, d) }
	got, err := FetchJSON(context.Background(), p.srv.URL+"/x")
	sleep = real
	if err != nil || got["ok"] != true || p.attempts() != 2 || len(waits) != 1 || waits[0] <= 0 {
		t.Fatalf("one 503 then success, sleeps recorded: want the object after 2 attempts and one positive wait, got %v, %v, %d attempts, waits %v", got, err, p.attempts(), waits)
	}
	q := newHiddenPartner(t, http.StatusServiceUnavailable, http.StatusOK)
	got, err = FetchJSON(context.Background(), q.srv.URL+"/x")
	if err != nil || got["ok"] != true || q.attempts() != 2 {
		t.Fatalf("one 503 then success with the real sleep in place: want the object after 2 attempts, got %v, %v, %d attempt(s)", got, err, q.attempts())
	}
	if gap := q.gap(0); gap < waits[0]/4 {
		t.Fatalf("the retry came %v after the 503 with the real sleep, but the client asked for %v when it was recorded", gap, waits[0])
	}
}
