package github

import (
	"net/http"
	"strconv"
)

// rateLimitObserver reports the X-RateLimit-Remaining header of every
// answer that carries one (GitHub's API; codeload sends none), including
// rate-limited and failed answers.
type rateLimitObserver struct {
	next    http.RoundTripper
	observe func(remaining int)
}

func (o rateLimitObserver) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if n, perr := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining")); perr == nil && n >= 0 {
		o.observe(n)
	}
	return resp, nil
}
