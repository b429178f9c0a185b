package toolchain

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// nobody is the uid the prepared commands run as in the test, as the
// sandbox runs them: not the uid that prepared them.
const nobody = 65534

// The package managers of tools.txt, as the worker asks for them.
var registryTools = []struct {
	spec    string // as Registry.Tools lists it
	manager validation.PackageManager
	version string
	command string
	file    string // the tarball in the cache dir
}{
	{"pnpm@9.15.9", validation.PNPM, "9.15.9", "pnpm", "pnpm-9.15.9.tgz"},
	{"pnpm@10.14.0", validation.PNPM, "10.14.0", "pnpm", "pnpm-10.14.0.tgz"},
	{"yarn@1.22.22", validation.Yarn, "1.22.22", "yarn", "yarn-1.22.22.tgz"},
	{"@yarnpkg/cli-dist@4.4.1", validation.YarnBerry, "4.4.1", "yarn", "yarnpkg-cli-dist-4.4.1.tgz"},
	{"@oven/bun-linux-x64@1.2.20", validation.Bun, "1.2.20", "bun", "oven-bun-linux-x64-1.2.20.tgz"},
}

// openDir is a directory every uid can enter, removed with the test
// (t.TempDir's parents are 0700).
func openDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gilf-tools-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// registryCache is a Cache of the test registry in dir, its requests
// counted.
func registryCache(t testing.TB, dir string) (*Cache, *countingTransport) {
	t.Helper()
	client, ct := countingClient(t)
	c, err := New(Options{Dir: dir, Registry: testRegistry.URL, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return c, ct
}

// Every package manager of the registry, prepared like a worker does and
// run on the host by another uid, says its exact version; majors, latest,
// missing versions, corepack hashes and the cache behave on the real
// registry.
func TestRegistry(t *testing.T) {
	var specs []string
	for _, tt := range registryTools {
		specs = append(specs, tt.spec)
	}
	if diff := cmp.Diff(specs, testRegistry.Tools()); diff != "" {
		t.Fatalf("the registry's tools differ from the test's (-test +registry):\n%s", diff)
	}
	if got := bunPackage(runtime.GOOS, runtime.GOARCH, cpuinfo()); got != bunX64Package {
		t.Fatalf("this host takes bun's %s build; the registry publishes %s only", got, bunX64Package)
	}
	dir := openDir(t)
	c, _ := registryCache(t, dir)
	ctx := t.Context()

	t.Run("exact", func(t *testing.T) {
		for _, tt := range registryTools {
			t.Run(tt.spec, func(t *testing.T) {
				tool, err := c.Prepare(ctx, validation.ToolRequest{Manager: tt.manager, Version: tt.version})
				if err != nil {
					t.Fatal(err)
				}
				want := validation.Tool{
					Manager: tt.manager, Version: tt.version,
					Dir:       filepath.Join(dir, string(tt.manager), tt.version),
					Integrity: "sha512 integrity from the registry (the registry serves no signatures)",
				}
				if diff := cmp.Diff(want, tool); diff != "" {
					t.Errorf("Prepare (-want +got):\n%s", diff)
				}
				checkShareable(t, tool.Dir)
				if got := runVersion(t, filepath.Join(tool.Dir, "bin", tt.command)); got != tt.version {
					t.Errorf("%s --version = %q, want %q", tt.command, got, tt.version)
				}
			})
		}
	})

	t.Run("resolve", func(t *testing.T) {
		for _, tt := range []struct {
			manager   validation.PackageManager
			requested string
			want      string
		}{
			{validation.PNPM, "9", "9.15.9"},
			{validation.PNPM, "10", "10.14.0"},
			{validation.PNPM, "", "10.14.0"},
			{validation.Yarn, "1", "1.22.22"},
			{validation.Yarn, "", "1.22.22"},
			{validation.YarnBerry, "4", "4.4.1"},
			{validation.YarnBerry, "", "4.4.1"},
			{validation.Bun, "", "1.2.20"},
		} {
			tool, err := c.Prepare(ctx, validation.ToolRequest{Manager: tt.manager, Version: tt.requested})
			if err != nil {
				t.Errorf("%s@%q: %v", tt.manager, tt.requested, err)
				continue
			}
			if tool.Version != tt.want {
				t.Errorf("%s@%q resolved to %s, want %s", tt.manager, tt.requested, tool.Version, tt.want)
			}
		}
	})

	t.Run("missing", func(t *testing.T) {
		for _, tt := range []struct {
			manager   validation.PackageManager
			requested string
			msg       string
		}{
			{validation.PNPM, "9.99.0", "pnpm@9.99.0 is not on the registry " + testRegistry.URL},
			{validation.PNPM, "11", "pnpm@11 is not on the registry " + testRegistry.URL},
			{validation.Yarn, "1.22.23-rc.1", "yarn@1.22.23-rc.1 is not on the registry " + testRegistry.URL},
		} {
			_, err := c.Prepare(ctx, validation.ToolRequest{Manager: tt.manager, Version: tt.requested})
			r, ok := errors.AsType[*validation.Refusal](err)
			if !ok || r.Code != validation.CodePackageManagerUnavailable || !strings.HasPrefix(r.Msg, tt.msg) {
				t.Errorf("%s@%s: got %v, want a refusal %q…", tt.manager, tt.requested, err, tt.msg)
			}
		}
		if _, err := os.Lstat(filepath.Join(dir, "pnpm", "9.99.0.lock")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a version the registry lacks left a lock file: %v", err)
		}
	})

	t.Run("corepack hash", func(t *testing.T) {
		tarball := sha512.Sum512(readTarball(t, "pnpm-10.14.0.tgz"))
		yarnJS := sha256.Sum224(fileInTarball(t, readTarball(t, "yarnpkg-cli-dist-4.4.1.tgz"), "package/bin/yarn.js"))
		pnpmHash := "sha512." + hex.EncodeToString(tarball[:])
		yarnHash := "sha224." + hex.EncodeToString(yarnJS[:])
		for _, req := range []validation.ToolRequest{
			{Manager: validation.PNPM, Version: "10.14.0", Hash: pnpmHash},
			{Manager: validation.PNPM, Version: "10.14.0", Hash: pnpmHash[:7] + strings.ToUpper(pnpmHash[7:])},
			{Manager: validation.YarnBerry, Version: "4.4.1", Hash: yarnHash},
		} {
			tool, err := c.Prepare(ctx, req)
			if err != nil {
				t.Errorf("%s@%s+%s: %v", req.Manager, req.Version, req.Hash, err)
				continue
			}
			if !strings.Contains(tool.Integrity, "; packageManager hash "+strings.ToLower(req.Hash)+" matches its ") {
				t.Errorf("Integrity %q does not mention the hash", tool.Integrity)
			}
		}
		wrong := []byte(pnpmHash)
		wrong[len(wrong)-1] = '0'
		if string(wrong) == pnpmHash {
			wrong[len(wrong)-1] = '1'
		}
		for _, req := range []validation.ToolRequest{
			{Manager: validation.PNPM, Version: "10.14.0", Hash: string(wrong)},
			{Manager: validation.PNPM, Version: "9.15.9", Hash: pnpmHash},
			// The tarball's hash is not yarn.js's: berry's hash covers yarn.js.
			{Manager: validation.YarnBerry, Version: "4.4.1", Hash: "sha512." + hex.EncodeToString(tarball[:])},
		} {
			_, err := c.Prepare(ctx, req)
			r, ok := errors.AsType[*validation.Refusal](err)
			if !ok || r.Code != validation.CodePackageManagerUnavailable || !strings.Contains(r.Msg, req.Hash) {
				t.Errorf("%s@%s+%s…: got %v, want a refusal naming the hash", req.Manager, req.Version, req.Hash[:20], err)
			}
		}
	})

	t.Run("cached", func(t *testing.T) {
		// A new Cache over the same directory, as after a restart.
		c2, ct := registryCache(t, dir)
		conns := testRegistry.Connections()
		for _, tt := range registryTools {
			if _, err := c2.Prepare(ctx, validation.ToolRequest{Manager: tt.manager, Version: tt.version}); err != nil {
				t.Fatal(err)
			}
		}
		if n := ct.n.Load(); n != 0 {
			t.Errorf("preparing cached versions made %d requests, want 0", n)
		}
		if n := testRegistry.Connections() - conns; n != 0 {
			t.Errorf("preparing cached versions opened %d connections, want 0", n)
		}
	})
}

// runVersion runs `bin --version` as nobody in an empty directory and
// returns what it printed.
func runVersion(t *testing.T, bin string) string {
	t.Helper()
	home := openDir(t)
	if err := os.Chown(home, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "CI=true"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// checkShareable checks that the entry is readable by every uid and
// writable by its owner only, and that bin/ holds relative links into pkg/.
func checkShareable(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			if mode.Perm() != 0o755 {
				t.Errorf("%s: mode %v, want 0755", rel, mode.Perm())
			}
		case mode.IsRegular():
			if mode.Perm() != 0o644 && mode.Perm() != 0o755 {
				t.Errorf("%s: mode %v, want 0644 or 0755", rel, mode.Perm())
			}
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.Dir(rel) == "bin" {
				if !strings.HasPrefix(target, "../pkg/") {
					t.Errorf("%s → %s, want a link into ../pkg/", rel, target)
				}
				fi, err := os.Stat(p)
				if err != nil {
					return err
				}
				if fi.Mode().Perm() != 0o755 {
					t.Errorf("%s: its target's mode is %v, want 0755", rel, fi.Mode().Perm())
				}
			}
		default:
			t.Errorf("%s: unexpected file type %v", rel, mode.Type())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		t.Errorf("no marker: %v", err)
	}
}

// fileInTarball returns the contents of one file of a .tgz.
func fileInTarball(t testing.TB, tgz []byte, name string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s in the tarball: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
