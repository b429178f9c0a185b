package evidence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// Object is one artifact body to store under a key gilf generated.
type Object struct {
	Key         string
	Kind        Kind
	ContentType string
	Body        []byte
}

// Store persists evidence bodies. Put is conditional: it never overwrites
// an existing key. When the key already holds the same bytes (same size
// and SHA-256) — a retried job uploading again — Put succeeds and returns
// the reference; when it holds different bytes, Put fails with an error
// matching ErrKeyConflict. Put returns a reference only once the store has
// accepted the body.
type Store interface {
	Put(ctx context.Context, obj Object) (validation.EvidenceRef, error)
}

// ErrKeyConflict is returned (wrapped) by Put when the key already holds
// different content. It is not retried.
var ErrKeyConflict = errors.New("evidence key already holds different content")

// bodySHA256 is the hex SHA-256 stores compare existing objects with.
func bodySHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// objectURL joins a public base URL and a key, escaping each segment. A
// key's "%" is a literal byte of the object name, so it is escaped too.
func objectURL(base, key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimRight(base, "/") + "/" + strings.Join(segs, "/")
}

func checkObject(obj Object) error {
	if err := checkKind(obj.Kind); err != nil {
		return err
	}
	return ValidKey(obj.Key)
}
