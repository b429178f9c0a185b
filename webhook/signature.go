package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// SignatureHeader carries the HMAC-SHA256 of the raw body. The legacy SHA-1
// header X-Hub-Signature is never consulted.
const SignatureHeader = "X-Hub-Signature-256"

const (
	signaturePrefix = "sha256="
	signatureHexLen = 2 * sha256.Size // 64
)

// VerifySignature checks the X-Hub-Signature-256 values of a request over
// the exact raw body. Exactly one value is accepted, of the form "sha256="
// followed by 64 lower-case hex digits; the MACs are compared in constant
// time. Every failure wraps ErrBadSignature.
func VerifySignature(secret, body []byte, values []string) error {
	switch len(values) {
	case 0:
		return fmt.Errorf("%w: no %s header", ErrBadSignature, SignatureHeader)
	case 1:
	default:
		return fmt.Errorf("%w: %s sent %d times", ErrBadSignature, SignatureHeader, len(values))
	}
	v := values[0]
	if len(v) != len(signaturePrefix)+signatureHexLen || v[:len(signaturePrefix)] != signaturePrefix {
		return fmt.Errorf("%w: not sha256= and %d hex digits", ErrBadSignature, signatureHexLen)
	}
	var got [sha256.Size]byte
	hexPart := v[len(signaturePrefix):]
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%w: not lower-case hex", ErrBadSignature)
		}
	}
	if _, err := hex.Decode(got[:], []byte(hexPart)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), got[:]) {
		return fmt.Errorf("%w: mismatch", ErrBadSignature)
	}
	return nil
}

// Sign returns the X-Hub-Signature-256 value GitHub sends for body.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}
