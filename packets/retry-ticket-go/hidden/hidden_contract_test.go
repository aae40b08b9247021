package ticket

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

func TestHiddenContractSurfaceSignature(t *testing.T) {
	var f func(context.Context, string) (map[string]any, error) = FetchJSON
	if reflect.TypeOf(FetchJSON).NumIn() != 2 || f == nil {
		t.Fatalf("FetchJSON must stay func(context.Context, string) (map[string]any, error)")
	}
}

func TestHiddenContractSurfaceFetchError(t *testing.T) {
	typ := reflect.TypeOf(FetchError{})
	if typ.NumField() != 2 {
		t.Fatalf("FetchError must keep exactly Message and Status, has %d fields", typ.NumField())
	}
	for i, want := range []struct {
		name string
		kind reflect.Kind
	}{{"Message", reflect.String}, {"Status", reflect.Int}} {
		f := typ.Field(i)
		if f.Name != want.name || f.Type.Kind() != want.kind {
			t.Fatalf("field %d: want %s %s, got %s %s", i, want.name, want.kind, f.Name, f.Type)
		}
	}
	var err error = &FetchError{Message: "m", Status: 503}
	if err.Error() != "m" {
		t.Fatalf("Error() must be the message, got %q", err.Error())
	}
}

func TestHiddenContractHappyPath(t *testing.T) {
	p := newHiddenPartner(t, http.StatusOK)
	waits := hiddenSleeps(t)
	got, err := FetchJSON(context.Background(), p.srv.URL+"/items")
	if err != nil {
		t.Fatalf("FetchJSON: %v", err)
	}
	if got["ok"] != true || got["n"] != float64(3) {
		t.Fatalf("got %v", got)
	}
	if p.attempts() != 1 || len(*waits) != 0 {
		t.Fatalf("a success takes one attempt and no sleep: %d attempts, %v", p.attempts(), *waits)
	}
}

func TestHiddenContract404KeepsItsStatus(t *testing.T) {
	p := newHiddenPartner(t, http.StatusNotFound)
	hiddenSleeps(t)
	_, err := FetchJSON(context.Background(), p.srv.URL+"/gone")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != http.StatusNotFound {
		t.Fatalf("want *FetchError with status 404, got %#v", err)
	}
}

func TestHiddenContractContextIsHonoured(t *testing.T) {
	p := newHiddenPartner(t, http.StatusOK)
	hiddenSleeps(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err := FetchJSON(ctx, p.srv.URL+"/items")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("a cancelled context must give a *FetchError, got %#v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("a cancelled context must fail fast")
	}
}

// brief: "an error that is a `*FetchError`"
func TestHiddenContractMalformedURLIsAFetchError(t *testing.T) {
	waits := hiddenSleeps(t)
	_, err := FetchJSON(context.Background(), "http://127.0.0.1/\x7f")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("a URL that does not parse: want *FetchError, got %#v", err)
	}
	if len(*waits) != 0 {
		t.Fatalf("a URL that does not parse must not be retried: sleeps %v", *waits)
	}
}

// brief: "that is not a JSON object"
func TestHiddenContractNullBodyIsAFetchError(t *testing.T) {
	p := newHiddenPartner(t, http.StatusOK)
	p.body = `null`
	waits := hiddenSleeps(t)
	got, err := FetchJSON(context.Background(), p.srv.URL+"/x")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("a JSON null is not a JSON object: want *FetchError, got %v, %#v", got, err)
	}
	if p.attempts() != 1 || len(*waits) != 0 {
		t.Fatalf("a null body must not be retried: %d attempts, sleeps %v", p.attempts(), *waits)
	}
}

// brief: "an error that is a `*FetchError`"
func TestHiddenContractCutBodyIsAFetchError(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&calls, 1)
		// A body cut off before the length the answer declared.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "64")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"ok": tr`))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	waits := hiddenSleeps(t)
	got, err := FetchJSON(context.Background(), srv.URL+"/x")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("a body cut short: want *FetchError, got %v, %#v", got, err)
	}
	if atomic.LoadInt32(&calls) != 1 || len(*waits) != 0 {
		t.Fatalf("a body cut short must not be retried: %d attempts, sleeps %v", atomic.LoadInt32(&calls), *waits)
	}
}
