package ticket

// The frozen contract: leave this file byte-for-byte as it is.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The signature callers compile against.
var _ func(context.Context, string) (map[string]any, error) = FetchJSON

func TestReturnsTheDecodedObject(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id": 7, "name": "widget"}`))
	}))
	defer srv.Close()
	got, err := FetchJSON(context.Background(), srv.URL+"/items/7")
	if err != nil {
		t.Fatalf("FetchJSON: %v", err)
	}
	if got["id"] != float64(7) || got["name"] != "widget" {
		t.Fatalf("got %v", got)
	}
}

func TestNotFoundIsAFetchErrorWithItsStatus(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := FetchJSON(context.Background(), srv.URL+"/gone")
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("want a *FetchError, got %v", err)
	}
	if fe.Status != http.StatusNotFound {
		t.Fatalf("status: want 404, got %d", fe.Status)
	}
}
