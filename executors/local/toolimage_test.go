package local

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
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
	if err := mountImage(t.Context(), "/usr/bin/mount", img, nil, mnt, false); err != nil {
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
	if err := mountImage(t.Context(), "/usr/bin/mount", img, nil, mnt, true); err != nil {
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

// Where the image cannot be made (an mkfs.ext4 without -d), the run binds
// the mirror instead and its record says that mountinfo shows the
// mirror's path, which it does.
func TestToolImageUnusableSaysSo(t *testing.T) {
	mkfs := filepath.Join(t.TempDir(), "mkfs.ext4")
	script := "#!/bin/sh\ncase \" $* \" in *\" -d \"*) echo \"mkfs.ext4: invalid option -- 'd'\" >&2; exit 1;; esac\nexec " + DefaultMkfsPath + " \"$@\"\n"
	if err := os.WriteFile(mkfs, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	root := workRoot(t)
	e := newExec(t, Options{WorkRoot: root, MkfsPath: mkfs, Tools: fakeToolchain(t, t.TempDir())})
	t.Cleanup(func() {
		if err := os.RemoveAll(filepath.Join(root, toolsDirName)); err != nil {
			t.Error(err)
		}
	})
	res, err := e.Run(t.Context(), executors.Request{Dir: repo(t, nil), Plan: validation.Plan{
		PackageManager: validation.PNPM, Tool: validation.ToolRequest{Manager: validation.PNPM, Version: "9.1.0"},
		Steps: []validation.Step{shStep(validation.StepTest, "pnpm; cat /proc/self/mountinfo", time.Minute)},
	}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := step0(t, res)
	wantStatus(t, s, validation.StatusPassed)
	if !strings.Contains(s.Output.Head, "pnpm-9.1.0") {
		t.Errorf("pnpm did not run:\n%s", s.Output.Head)
	}
	if res.Tier != validation.TierReadOnly {
		t.Errorf("tier %s: the disk ceiling itself should still be in force", res.Tier)
	}
	noted := slices.Contains(res.Notes, ToolMirrorBoundNote(validation.PNPM))
	shown := strings.Contains(s.Output.Head, filepath.Join(root, toolsDirName))
	if !noted || !shown {
		t.Errorf("note %v, mountinfo shows the mirror %v; notes %q\n%s", noted, shown, res.Notes, s.Output.Head)
	}
	if _, err := os.Stat(filepath.Join(root, toolsDirName, "pnpm", "9.1.0"+toolImageSuffix)); err == nil {
		t.Error("an image was made")
	}
}
