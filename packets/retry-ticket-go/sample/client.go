// Package ticket is the small JSON-over-HTTP helper the partner sync jobs
// use. Callers hand over a URL (which may carry a signed query string) and
// get back the decoded JSON object, or a *FetchError.
//
// Throttling answers (429, 503) are retried with exponential backoff, at
// most three attempts in all; every other failure is returned on the first
// attempt.
package ticket

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	maxAttempts = 3
	firstDelay  = 200 * time.Millisecond // doubles after every throttled attempt
)

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
	delay := firstDelay
	for attempt := 1; ; attempt++ {
		data, err := fetchOnce(ctx, url)
		if err == nil || !throttled(err) || attempt == maxAttempts {
			return data, err
		}
		sleep(delay)
		delay *= 2
	}
}

func throttled(err error) bool {
	fe, ok := err.(*FetchError)
	return ok && (fe.Status == http.StatusTooManyRequests || fe.Status == http.StatusServiceUnavailable)
}

func fetchOnce(ctx context.Context, url string) (map[string]any, error) {
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
