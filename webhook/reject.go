package webhook

import (
	"context"
	"errors"
	"net/http"
)

// Why intake refused a delivery, as gilf_webhook_rejected_total counts it:
// one reason per error class of statusOf.
const (
	RejectBadSignature = "bad_signature" // 401: missing or wrong X-Hub-Signature-256
	RejectRateLimited  = "rate_limited"  // 429: too many bad signatures from one client
	RejectTooLarge     = "too_large"     // 413: over the body cap
	RejectMalformed    = "malformed"     // 400: unreadable body, bad delivery id or event, undecodable payload
	RejectMethod       = "method"        // 405: not a POST
	RejectUnavailable  = "unavailable"   // 503: the store did not commit it in time
	RejectInternal     = "internal"      // 500: anything else
)

// RejectReasons are every reason RejectReason returns, for a metric to
// start each label at zero.
func RejectReasons() []string {
	return []string{RejectBadSignature, RejectRateLimited, RejectTooLarge, RejectMalformed, RejectMethod,
		RejectUnavailable, RejectInternal}
}

// RejectReason classifies an intake error as statusOf answers it.
func RejectReason(err error) string {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, ErrBadSignature):
		return RejectBadSignature
	case errors.Is(err, ErrTooManyBadSignatures):
		return RejectRateLimited
	case errors.Is(err, ErrBodyTooLarge), errors.As(err, &tooBig):
		return RejectTooLarge
	case errors.Is(err, ErrBodyUnreadable), errors.Is(err, ErrBadDeliveryID), errors.Is(err, ErrBadEvent), errors.Is(err, ErrBadPayload):
		return RejectMalformed
	case errors.Is(err, ErrMethodNotAllowed):
		return RejectMethod
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return RejectUnavailable
	}
	return RejectInternal
}
