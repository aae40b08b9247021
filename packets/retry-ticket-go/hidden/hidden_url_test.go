package ticket

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
)

const hiddenSecret = "sig-7f3a9c0e-hidden-token"

// hiddenCapture runs f with stdout, stderr and the standard logger sent to
// a pipe, and returns what was written.
func hiddenCapture(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr, oldLog := os.Stdout, os.Stderr, log.Writer()
	os.Stdout, os.Stderr = w, w
	log.SetOutput(w)
	var buf strings.Builder
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(&buf, r) }()
	func() {
		defer func() { os.Stdout, os.Stderr = oldOut, oldErr; log.SetOutput(oldLog) }()
		f()
	}()
	_ = w.Close()
	wg.Wait()
	_ = r.Close()
	return buf.String()
}

func hiddenNoLeak(t *testing.T, url string) {
	t.Helper()
	out := hiddenCapture(t, func() { _, _ = FetchJSON(context.Background(), url) })
	if strings.Contains(out, hiddenSecret) || strings.Contains(out, "/signed") {
		t.Fatalf("the URL reached the output: %q", out)
	}
}

func TestHiddenURLNotPrintedOnSuccess(t *testing.T) {
	p := newHiddenPartner(t, http.StatusOK)
	hiddenSleeps(t)
	hiddenNoLeak(t, p.srv.URL+"/signed?token="+hiddenSecret)
}

func TestHiddenURLNotPrintedOnRetries(t *testing.T) {
	p := newHiddenPartner(t, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusOK)
	hiddenSleeps(t)
	hiddenNoLeak(t, p.srv.URL+"/signed?token="+hiddenSecret)
}

func TestHiddenURLNotPrintedOnGiveUp(t *testing.T) {
	// Throttled until the eleventh request: a client that never gives up
	// fails the backoff step, not this one.
	p := newHiddenPartner(t, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, http.StatusOK)
	hiddenSleeps(t)
	hiddenNoLeak(t, p.srv.URL+"/signed?token="+hiddenSecret)
}

func TestHiddenURLNotPrintedOnHardFailure(t *testing.T) {
	p := newHiddenPartner(t, http.StatusForbidden)
	hiddenSleeps(t)
	hiddenNoLeak(t, p.srv.URL+"/signed?token="+hiddenSecret)
}

func TestHiddenURLNotPrintedWhenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	hiddenSleeps(t)
	hiddenNoLeak(t, "http://"+addr+"/signed?token="+hiddenSecret)
}
