package local

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCopyTree(t *testing.T) {
	src := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("package.json", `{"name":"x"}`, 0o644)
	write("bin/run.sh", "#!/bin/sh\n", 0o755)
	write("setuid", "x", 0o4755)
	write("readonly.txt", "ro", 0o400)
	write("linked", "shared", 0o644)
	if err := os.Link(filepath.Join(src, "linked"), filepath.Join(src, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(src, "shadow-link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "private"), 0o500); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "ws")
	skipped, err := copyTree(src, dst, DefaultSandboxUID, DefaultSandboxGID)
	if err != nil {
		t.Fatalf("copyTree: %v", err)
	}
	slices.Sort(skipped)
	if diff := cmp.Diff([]string{"fifo", "hardlink", "linked"}, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		mode os.FileMode // permission and type bits wanted
	}{
		// Private to the sandbox uid: nothing for group or others.
		{".", os.ModeDir | 0o700},
		{"package.json", 0o600},
		{"bin", os.ModeDir | 0o700},
		{"bin/run.sh", 0o700},
		{"setuid", 0o700}, // set-id dropped
		{"readonly.txt", 0o600},
		{"shadow-link", os.ModeSymlink | 0o777},
		{"private", os.ModeDir | 0o700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := os.Lstat(filepath.Join(dst, tt.name))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode() != tt.mode {
				t.Errorf("mode %v, want %v", st.Mode(), tt.mode)
			}
			sys := st.Sys().(*syscall.Stat_t)
			if sys.Uid != DefaultSandboxUID || sys.Gid != DefaultSandboxGID {
				t.Errorf("owner %d:%d, want the sandbox uid", sys.Uid, sys.Gid)
			}
		})
	}
	if link, err := os.Readlink(filepath.Join(dst, "shadow-link")); err != nil || link != "/etc/shadow" {
		t.Errorf("symlink copied as %q, %v; want the link itself", link, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "package.json")); err != nil || string(b) != `{"name":"x"}` {
		t.Errorf("content %q, %v", b, err)
	}
	// The source is untouched.
	if st, err := os.Stat(filepath.Join(src, "package.json")); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("source changed owner: %v", err)
	}
}

func TestCopyTreeRejectsNonDirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := copyTree(f, filepath.Join(t.TempDir(), "ws"), DefaultSandboxUID, DefaultSandboxGID); err == nil {
		t.Error("copyTree of a file: want an error")
	}
	if _, err := copyTree(filepath.Join(t.TempDir(), "missing"), filepath.Join(t.TempDir(), "ws"), DefaultSandboxUID, DefaultSandboxGID); err == nil {
		t.Error("copyTree of a missing dir: want an error")
	}
}

// The default work root is the worker's own, not listable by others; one
// another user made first is refused.
func TestOwnWorkRoot(t *testing.T) {
	dir := DefaultWorkRoot()
	if err := ownWorkRoot(dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o711 || !st.IsDir() {
		t.Errorf("default work root %v", st.Mode())
	}
	link := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := ownWorkRoot(link); err == nil {
		t.Error("a symlink was taken as the work root")
	}
}
