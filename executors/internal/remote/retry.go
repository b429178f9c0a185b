package remote

import (
	"context"
	"time"
)

// RetryBackoff is the wait before retry n (n × RetryBackoff).
const RetryBackoff = 200 * time.Millisecond

// Retry calls call up to attempts times while its error is temporary,
// waiting n × RetryBackoff before retry n. Each call gets a fresh context
// bounded by timeout that ctx's cancellation does not end: cleanup (a
// sandbox's deletion) must run after a run was cancelled. It returns nil
// or the last error.
func Retry(ctx context.Context, attempts int, timeout time.Duration, temporary func(error) bool, call func(context.Context) error) error {
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		err := call(cctx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if !temporary(err) || attempt == attempts {
			break
		}
		time.Sleep(time.Duration(attempt) * RetryBackoff)
	}
	return last
}
