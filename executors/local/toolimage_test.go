package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A package manager's image is used only as checked against the verified
// toolchain: one changed behind gilf's back is made again, one made by
// another process is checked before its first use and then kept, and a
// run leaves no mount behind.
func TestToolImageChecked(t *testing.T) {
	root := workRoot(t)
	opts := Options{WorkRoot: root, Tools: fakeToolchain(t, t.TempDir())}
	e := newExec(t, opts)
	// Another process's executor.
	other := newExec(t, opts)
	t.Cleanup(func() {
		if err := os.RemoveAll(filepath.Join(root, toolsDirName)); err != nil {
			t.Error(err)
		}
	})
	if got := runTool(t, e, "9.1.0"); got != "pnpm-9.1.0" {
		t.Fatalf("pnpm printed %q", got)
	}
	img := filepath.Join(root, toolsDirName, "pnpm", "9.1.0"+toolImageSuffix)
	good := imageFile(t, img, "bin/pnpm")

	// Changed behind gilf's back, same size: the next run makes it again.
	mnt := t.TempDir()
	if err := mountImage(t.Context(), "/usr/bin/mount", img, mnt, false); err != nil {
		t.Fatal(err)
	}
	evil := []byte("#!/bin/sh\necho pnpm-6.6.6\n")
	if err := os.WriteFile(filepath.Join(mnt, "bin", "pnpm"), evil, 0o755); err != nil {
		t.Error(err)
	}
	if err := unmountDir(mnt); err != nil {
		t.Fatal(err)
	}
	if got := runTool(t, e, "9.1.0"); got != "pnpm-9.1.0" {
		t.Errorf("after the image changed, pnpm printed %q", got)
	}
	if got := imageFile(t, img, "bin/pnpm"); got != good {
		t.Errorf("the changed image was not made again: %q", got)
	}
	second := fileKey(t, img)

	// Another process's executor finds a good image: it checks it and
	// uses it as it is.
	if got := runTool(t, other, "9.1.0"); got != "pnpm-9.1.0" {
		t.Errorf("the other executor's pnpm printed %q", got)
	}
	if fileKey(t, img) != second {
		t.Error("a good image was made again")
	}
	// No run left a mount behind.
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), root+"/") {
		t.Errorf("a mount under the work root is left:\n%s", b)
	}
}

// fileKey identifies the file p as toolImage does.
func fileKey(t *testing.T, p string) imageKey {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return keyOf(&st)
}

// imageFile reads the file name of the image img, mounted read-only.
func imageFile(t *testing.T, img, name string) string {
	t.Helper()
	mnt := t.TempDir()
	if err := mountImage(t.Context(), "/usr/bin/mount", img, mnt, true); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unmountDir(mnt); err != nil {
			t.Fatal(err)
		}
	}()
	b, err := os.ReadFile(filepath.Join(mnt, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
