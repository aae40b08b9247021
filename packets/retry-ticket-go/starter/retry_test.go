package ticket

// Red until FetchJSON retries throttling answers. Make it pass; do not
// weaken it.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// recordSleeps replaces the client's sleep for one test.
func recordSleeps(t *testing.T) *[]time.Duration {
	t.Helper()
	waits := &[]time.Duration{}
	old := sleep
	sleep = func(d time.Duration) { *waits = append(*waits, d) }
	t.Cleanup(func() { sleep = old })
	return waits
}

func TestTwo503sThenSuccess(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&calls, 1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"ok": 1}`))
	}))
	defer srv.Close()
	waits := recordSleeps(t)
	got, err := FetchJSON(context.Background(), srv.URL+"/a")
	if err != nil {
		t.Fatalf("FetchJSON: %v", err)
	}
	if got["ok"] != float64(1) {
		t.Fatalf("got %v", got)
	}
	if n := atomic.LoadInt32(&calls); n != 3 {
		t.Fatalf("attempts: want 3, got %d", n)
	}
	if len(*waits) != 2 {
		t.Fatalf("sleeps: want 2, got %v", *waits)
	}
	if (*waits)[0] <= 0 || (*waits)[0] >= (*waits)[1] {
		t.Fatalf("waits must be positive and grow: %v", *waits)
	}
}

func Test404IsNotRetried(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&calls, 1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	waits := recordSleeps(t)
	_, err := FetchJSON(context.Background(), srv.URL+"/gone")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != http.StatusNotFound {
		t.Fatalf("want a *FetchError with status 404, got %v", err)
	}
	if n := atomic.LoadInt32(&calls); n != 1 {
		t.Fatalf("attempts: want 1, got %d", n)
	}
	if len(*waits) != 0 {
		t.Fatalf("no sleep for a 404, got %v", *waits)
	}
}
