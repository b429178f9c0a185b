package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds arbitrary tar streams (gzip'd here, or raw gzip when
// the input already is one) to Extract and checks that it never panics,
// never writes outside dst, leaves nothing behind on error, and on
// success leaves only directories, regular files without special bits
// and symlinks that resolve inside the returned root.
func FuzzExtract(f *testing.F) {
	seeds := [][]ent{
		{dir("r/"), reg("r/a", "a"), symlink("r/l", "a"), hardlink("r/h", "r/a")},
		{dir("r/"), symlink("r/l", "../x"), reg("r/l/y", "y")},
		{reg("r/../../x", "x")},
		{dir("r/"), dir("r/d/"), dir("r/d/e/"), symlink("r/d/e/up", "../.."), symlink("r/d/e/m", "up/../..")},
		{paxEnt("pax_global_header", tar.TypeXGlobalHeader, paxBody("comment", "abc")), dir("o-r-sha/"), reg("o-r-sha/package.json", "{}")},
		{dir("r/"), ent{name: "r/fifo", typ: tar.TypeFifo}},
		{dir("a/"), dir("b/")},
	}
	for _, s := range seeds {
		raw := tarBytes(f, s)
		f.Add(raw)
		f.Add(gz(f, raw))
	}
	lim := Limits{MaxCompressedBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxEntries: 200, MaxDepth: 16, MaxNameBytes: 256, MaxFileBytes: 256 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			data = gz(t, data)
		}
		base := t.TempDir()
		outside := filepath.Join(base, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(base, "dst")
		root, err := Extract(context.Background(), bytes.NewReader(data), dst, lim)
		entries, rdErr := os.ReadDir(base)
		if rdErr != nil {
			t.Fatal(rdErr)
		}
		for _, e := range entries {
			if e.Name() != "outside" && e.Name() != "dst" {
				t.Fatalf("wrote outside dst: %s", e.Name())
			}
		}
		if out, _ := os.ReadDir(outside); len(out) != 0 {
			t.Fatalf("wrote into a sibling directory: %v", out)
		}
		if err != nil {
			if _, statErr := os.Lstat(dst); !errors.Is(statErr, fs.ErrNotExist) {
				t.Fatalf("error %v left dst behind", err)
			}
			return
		}
		if filepath.Dir(root) != dst {
			t.Fatalf("root %q is not directly under dst", root)
		}
		var total int64
		walkErr := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Lstat(p)
			if err != nil {
				return err
			}
			mode := info.Mode()
			switch {
			case mode&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				if filepath.IsAbs(target) {
					t.Fatalf("absolute symlink %s -> %s", p, target)
				}
				// Resolve through the real filesystem: whatever it
				// reaches must be inside root.
				if real, err := filepath.EvalSymlinks(p); err == nil {
					if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
						t.Fatalf("symlink %s resolves to %s, outside %s", p, real, root)
					}
				}
			case mode.IsDir():
			case mode.IsRegular():
				if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || (mode.Perm() != 0o644 && mode.Perm() != 0o755) {
					t.Fatalf("file %s has mode %v", p, mode)
				}
				total += info.Size()
			default:
				t.Fatalf("special file %s (%v)", p, mode)
			}
			return nil
		})
		if walkErr != nil {
			t.Fatal(walkErr)
		}
		if total > lim.MaxTotalBytes {
			t.Fatalf("wrote %d bytes, over the %d cap", total, lim.MaxTotalBytes)
		}
	})
}
