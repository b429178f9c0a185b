package evidence

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFSStoreOpen(t *testing.T) {
	s, err := NewFSStore(t.TempDir(), FSOptions{Prefix: "gilf"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref, err := s.Put(t.Context(), Object{Key: "review-artifacts/a%2Fb/sha/evidence/1/log/out.txt", Kind: KindLog, Body: []byte("FAIL src/x.test.ts\n")})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(ref.Key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "FAIL src/x.test.ts\n" {
		t.Errorf("read %q, %v", b, err)
	}
	for _, key := range []string{"gilf/review-artifacts/a%2Fb/sha/evidence/1/log/none.txt", "gilf/review-artifacts"} {
		if _, err := s.Open(key); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open %q: %v, want fs.ErrNotExist", key, err)
		}
	}
	for _, key := range []string{"../etc/passwd", "gilf/../../x", "", "/abs"} {
		if _, err := s.Open(key); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("open %q: %v, want fs.ErrInvalid", key, err)
		}
	}
}

// A presigned link fetches the stored bytes from a real S3 server, and
// another key's link does not.
func TestS3StorePresignGet(t *testing.T) {
	const bucket = "gilf-evidence"
	srv := startS3(t, bucket)
	s := srv.store(t, bucket, nil)
	ref, err := s.Put(t.Context(), Object{Key: "review-artifacts/a%2Fb/sha/evidence/1/log/out.txt", Kind: KindLog, Body: []byte("stored body")})
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	u, err := s.PresignGet(t.Context(), ref.Key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(u); code != http.StatusOK || body != "stored body" {
		t.Errorf("GET presigned: %d %q", code, body)
	}
	// The signature covers the key: the link cannot be bent to another.
	other := strings.Replace(u, "out.txt", "secret.txt", 1)
	if code, _ := get(other); code != http.StatusForbidden {
		t.Errorf("GET with another key: %d, want 403", code)
	}
	for _, ttl := range []time.Duration{0, MaxPresignGet + time.Second} {
		if _, err := s.PresignGet(t.Context(), ref.Key, ttl); err == nil {
			t.Errorf("lifetime %s accepted", ttl)
		}
	}
	if _, err := s.PresignGet(t.Context(), ref.Key, MaxPresignGet); err != nil {
		t.Errorf("lifetime %s refused: %v", MaxPresignGet, err)
	}
}
