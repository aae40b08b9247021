// Package ticket is the small JSON-over-HTTP helper the partner sync jobs
// use. Callers hand over a URL (which may carry a signed query string) and
// get back the decoded JSON object, or a *FetchError.
package ticket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	attempts  = 3
	baseDelay = 100 * time.Millisecond
)

var retryable = map[int]bool{http.StatusTooManyRequests: true, http.StatusServiceUnavailable: true}

// FetchError is returned for any failed fetch; Status is the HTTP code when
// there was one (0 otherwise).
type FetchError struct {
	Message string
	Status  int
}

func (e *FetchError) Error() string { return e.Message }

// sleep is how the client waits; the tests replace it.
var sleep = time.Sleep

// FetchJSON GETs url and decodes the JSON object it answers with.
func FetchJSON(ctx context.Context, url string) (map[string]any, error) {
	n := 0
	for {
		n++
		data, err := fetch(ctx, url)
		var fe *FetchError
		if err == nil || n == attempts || !errors.As(err, &fe) || !retryable[fe.Status] {
			return data, err
		}
		sleep(baseDelay * time.Duration(1<<(n-1)))
	}
}

func fetch(ctx context.Context, url string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, &FetchError{Message: "bad request"}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, &FetchError{Message: "request failed"}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &FetchError{Message: "reading the body failed"}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &FetchError{Message: fmt.Sprintf("server answered %d", resp.StatusCode), Status: resp.StatusCode}
	}
	var data map[string]any
	if err := json.Unmarshal(body, &data); err != nil || data == nil {
		return nil, &FetchError{Message: "body is not a JSON object"}
	}
	return data, nil
}
