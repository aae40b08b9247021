package ticket

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestA429IsRetriedOnce(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&calls, 1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{"ok": 1}`))
	}))
	defer srv.Close()
	waits := recordSleeps(t)
	if _, err := FetchJSON(context.Background(), srv.URL); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(*waits) != 1 {
		t.Fatalf("want 2 calls and 1 wait, got %d and %v", calls, *waits)
	}
}
