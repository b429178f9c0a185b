package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func newFS(t *testing.T, opts FSOptions) (*FSStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "evidence")
	s, err := NewFSStore(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, dir
}

func testKey(t *testing.T, scope Scope, kind Kind, name string) string {
	t.Helper()
	k, err := Key(scope, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestFSStorePut(t *testing.T) {
	s, dir := newFS(t, FSOptions{Prefix: "/prod/", PublicBaseURL: "https://ev.example/"})
	key := testKey(t, Scope{Repo: "octo/../hello", SHA: "abc", Review: "job 1"}, KindTestOutput, "../test.log")
	ref, err := s.Put(t.Context(), Object{Key: key, Kind: KindTestOutput, ContentType: ContentTypeText, Body: []byte("1 failing\n")})
	if err != nil {
		t.Fatal(err)
	}
	want := validation.EvidenceRef{
		Kind: "test-output",
		Key:  "prod/" + key,
		URL:  "https://ev.example/prod/review-artifacts/octo%252F..%252Fhello/abc/evidence/job%25201/test-output/%252E.%252Ftest.log",
	}
	if d := cmp.Diff(want, ref); d != "" {
		t.Fatalf("ref (-want +got):\n%s", d)
	}
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref.Key)))
	if err != nil || string(got) != "1 failing\n" {
		t.Fatalf("stored file = %q, %v", got, err)
	}
	// No temporary file is left beside it.
	entries, err := os.ReadDir(filepath.Dir(filepath.Join(dir, filepath.FromSlash(ref.Key))))
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v, %v; want only the artifact", entries, err)
	}
}

func TestFSStoreConditional(t *testing.T) {
	s, dir := newFS(t, FSOptions{})
	key := testKey(t, Scope{Repo: "o/r", SHA: "s", Review: "r"}, KindLog, "install.log")
	obj := Object{Key: key, Kind: KindLog, ContentType: ContentTypeText, Body: []byte("first")}
	if _, err := s.Put(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	t.Run("same bytes again is already stored", func(t *testing.T) {
		ref, err := s.Put(t.Context(), obj)
		if err != nil || ref.Key != key {
			t.Fatalf("re-put = %+v, %v", ref, err)
		}
	})
	t.Run("different bytes never overwrite", func(t *testing.T) {
		other := obj
		other.Body = []byte("second")
		ref, err := s.Put(t.Context(), other)
		if !errors.Is(err, ErrKeyConflict) || ref != (validation.EvidenceRef{}) {
			t.Fatalf("conflicting put = %+v, %v; want ErrKeyConflict", ref, err)
		}
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
		if err != nil || string(got) != "first" {
			t.Fatalf("file now %q, %v", got, err)
		}
	})
	t.Run("racing writers: one wins, the file is whole", func(t *testing.T) {
		k := testKey(t, Scope{Repo: "o/r", SHA: "s", Review: "race"}, KindLog, "x")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				body := []byte(strings.Repeat(string(rune('a'+i)), 1<<16))
				_, errs[i] = s.Put(t.Context(), Object{Key: k, Kind: KindLog, Body: body})
			})
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, ErrKeyConflict):
				t.Fatalf("unexpected error: %v", err)
			}
		}
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(k)))
		if wins != 1 || err != nil || len(got) != 1<<16 || strings.Count(string(got), string(got[0])) != len(got) {
			t.Fatalf("wins = %d, file %d bytes, %v", wins, len(got), err)
		}
	})
}

func TestFSStoreStaysInsideRoot(t *testing.T) {
	s, dir := newFS(t, FSOptions{})
	outside := t.TempDir()
	// A symlink planted inside the store pointing out of it.
	if err := os.MkdirAll(filepath.Join(dir, "review-artifacts"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "review-artifacts", "o%2Fr")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		obj  Object
	}{
		{"through a symlink", Object{Key: testKey(t, Scope{Repo: "o/r", SHA: "s", Review: "r"}, KindLog, "x"), Kind: KindLog, Body: []byte("x")}},
		{"dot-dot key", Object{Key: "review-artifacts/../../x", Kind: KindLog, Body: []byte("x")}},
		{"absolute key", Object{Key: "/tmp/x", Kind: KindLog, Body: []byte("x")}},
		{"empty segment", Object{Key: "a//x", Kind: KindLog, Body: []byte("x")}},
		{"unknown kind", Object{Key: "a/x", Kind: "../x", Body: []byte("x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ref, err := s.Put(t.Context(), tt.obj); err == nil {
				t.Fatalf("Put(%q) = %+v, want an error", tt.obj.Key, ref)
			}
			entries, err := os.ReadDir(outside)
			if err != nil || len(entries) != 0 {
				t.Fatalf("outside dir holds %v, %v", entries, err)
			}
		})
	}
}

func TestFSStoreBadPrefix(t *testing.T) {
	if _, err := NewFSStore(t.TempDir(), FSOptions{Prefix: "a/../b"}); err == nil {
		t.Fatal("prefix with .. accepted")
	}
}
