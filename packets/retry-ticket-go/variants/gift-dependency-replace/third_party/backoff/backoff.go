// Package backoff computes exponential delays.
package backoff

import "time"

// Delay is the wait before attempt n+1 (n counts from 1).
func Delay(base time.Duration, n int) time.Duration { return base << (n - 1) }
