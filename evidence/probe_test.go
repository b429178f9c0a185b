package evidence

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFSStoreProbe(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFSStore(dir, FSOptions{Prefix: "gilf"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Probe(t.Context()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	left, err := filepath.Glob(filepath.Join(dir, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the probe left %v", left)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if os.Geteuid() == 0 {
		// root writes a read-only directory anyway; a removed one fails.
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Probe(t.Context()); err == nil {
		t.Error("Probe of a directory that takes no write succeeded")
	}
}

func TestS3StoreProbe(t *testing.T) {
	srv := startS3(t, "evidence")
	if err := srv.store(t, "evidence", nil).Probe(t.Context()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if err := srv.store(t, "no-such-bucket", nil).Probe(t.Context()); err == nil {
		t.Error("Probe of a missing bucket succeeded")
	}
}
