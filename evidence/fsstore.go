package evidence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/gilf-review/gilf/validation"
)

// FSOptions configure an FSStore.
type FSOptions struct {
	// Prefix is prepended to every key (see CleanPrefix).
	Prefix string
	// PublicBaseURL, when set, is where the directory is served; the
	// reference's URL is base + key. Otherwise references carry only the
	// key.
	PublicBaseURL string
}

// FSStore keeps evidence in a directory: the embedded default, under the
// data dir's evidence/. Every access goes through an os.Root, so no key
// can reach outside the directory; writes are atomic (a temporary file
// linked into place) and never replace an existing key.
type FSStore struct {
	root   *os.Root
	prefix string
	base   string
}

var _ Store = (*FSStore)(nil)

// NewFSStore opens (creating it if needed) the directory dir.
func NewFSStore(dir string, opts FSOptions) (*FSStore, error) {
	prefix, err := CleanPrefix(opts.Prefix)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("evidence dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("evidence dir: %w", err)
	}
	return &FSStore{root: root, prefix: prefix, base: opts.PublicBaseURL}, nil
}

// Close releases the directory.
func (s *FSStore) Close() error { return s.root.Close() }

// Put writes obj.Body under prefix+obj.Key unless the key exists. An
// existing key holding the same bytes counts as already stored.
func (s *FSStore) Put(ctx context.Context, obj Object) (validation.EvidenceRef, error) {
	if err := ctx.Err(); err != nil {
		return validation.EvidenceRef{}, err
	}
	if err := checkObject(obj); err != nil {
		return validation.EvidenceRef{}, fmt.Errorf("fs evidence put: %w", err)
	}
	key := s.prefix + obj.Key
	if err := ValidKey(key); err != nil {
		return validation.EvidenceRef{}, fmt.Errorf("fs evidence put: %w", err)
	}
	if err := s.put(key, obj.Body); err != nil {
		return validation.EvidenceRef{}, fmt.Errorf("fs evidence put %s: %w", key, err)
	}
	ref := validation.EvidenceRef{Kind: string(obj.Kind), Key: key}
	if s.base != "" {
		ref.URL = objectURL(s.base, key)
	}
	return ref, nil
}

func (s *FSStore) put(key string, body []byte) error {
	dir := path.Dir(key)
	if err := s.root.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := path.Join(dir, ".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, werr := f.Write(body)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		// link(2) fails when the name exists: the no-overwrite condition
		// and the atomic publish in one call.
		werr = s.root.Link(tmp, key)
	}
	if rerr := s.root.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && werr == nil {
		werr = rerr
	}
	if errors.Is(werr, fs.ErrExist) {
		return s.compareExisting(key, body)
	}
	return werr
}

func (s *FSStore) compareExisting(key string, body []byte) error {
	old, err := s.root.ReadFile(key)
	if err != nil {
		return fmt.Errorf("read existing: %w", err)
	}
	if !bytes.Equal(old, body) {
		return fmt.Errorf("%w (%d bytes, sha256 %s)", ErrKeyConflict, len(old), bodySHA256(old))
	}
	return nil
}
