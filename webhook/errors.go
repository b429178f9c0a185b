package webhook

import (
	"context"
	"errors"
	"net/http"
)

// The errors intake answers with. Each maps to one status in statusOf.
var (
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrBodyTooLarge     = errors.New("body too large")
	ErrBodyUnreadable   = errors.New("body unreadable")
	ErrBadSignature     = errors.New("bad signature")
	ErrBadDeliveryID    = errors.New("bad delivery id")
	ErrBadEvent         = errors.New("bad event")
	ErrBadPayload       = errors.New("bad payload")
	// ErrTooManyBadSignatures: the client failed the signature check too
	// often in this window (W4); answered without another HMAC.
	ErrTooManyBadSignatures = errors.New("too many bad signatures")
	// ErrUnavailable means the store could not commit the delivery (locked
	// past its busy timeout, disk full, closed): GitHub must see a failure
	// so the delivery is redelivered, never a 2xx.
	ErrUnavailable = errors.New("store unavailable")
)

// statusOf is the one table from intake errors to HTTP statuses. The
// message is public (it goes in the response body); the wrapped cause goes
// only to the log.
func statusOf(err error) (int, string) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, ErrMethodNotAllowed):
		return http.StatusMethodNotAllowed, "only POST is accepted"
	case errors.Is(err, ErrBodyTooLarge), errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "body larger than 25 MiB"
	case errors.Is(err, ErrBodyUnreadable):
		return http.StatusBadRequest, "body could not be read"
	case errors.Is(err, ErrBadSignature):
		return http.StatusUnauthorized, "invalid signature"
	case errors.Is(err, ErrTooManyBadSignatures):
		return http.StatusTooManyRequests, "too many invalid signatures; try again later"
	case errors.Is(err, ErrBadDeliveryID):
		return http.StatusBadRequest, "invalid X-GitHub-Delivery"
	case errors.Is(err, ErrBadEvent):
		return http.StatusBadRequest, "invalid X-GitHub-Event"
	case errors.Is(err, ErrBadPayload):
		return http.StatusBadRequest, "payload could not be decoded"
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "delivery not stored; retry later"
	default:
		return http.StatusInternalServerError, "internal error"
	}
}
