// Package ticket is the small JSON-over-HTTP helper the partner sync jobs
// use. Callers hand over a URL (which may carry a signed query string) and
// get back the decoded JSON object, or a *FetchError.
package ticket

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
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

// waits between the three attempts a throttled call gets.
var waits = [...]time.Duration{1000 * time.Millisecond, 1200 * time.Millisecond}

// FetchJSON GETs url and decodes the JSON object it answers with. A 429 or
// 503 is tried again after a growing wait, three attempts in all.
func FetchJSON(ctx context.Context, url string) (map[string]any, error) {
	var (
		data map[string]any
		err  error
	)
	for i := 0; i <= len(waits); i++ {
		if i > 0 {
			sleep(waits[i-1])
		}
		data, err = get(ctx, url)
		fe, ok := err.(*FetchError)
		if !ok || (fe.Status != 429 && fe.Status != 503) {
			break
		}
	}
	return data, err
}

func get(ctx context.Context, url string) (map[string]any, error) {
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
