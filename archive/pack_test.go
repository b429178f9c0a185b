package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// packEntry is one archive member or one copied file, as the tests compare it.
type packEntry struct {
	Name     string
	Type     string
	Mode     fs.FileMode
	Linkname string
	Content  string
}

// packBuildTree lays out a repository with every kind of entry Pack decides on
// and returns its root. outside is a directory beside it with a secret.
func packBuildTree(t *testing.T) (dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "checkout")
	outside = filepath.Join(base, "outside")
	packMkdir(t, dir, outside, filepath.Join(dir, "src", "lib"), filepath.Join(dir, "empty"))
	packWrite(t, filepath.Join(outside, "secret.txt"), "worker secret", 0o600)
	packWrite(t, filepath.Join(dir, "package.json"), `{"scripts":{"test":"node test.js"}}`, 0o600)
	packWrite(t, filepath.Join(dir, "run.sh"), "#!/bin/sh\necho hi\n", 0o700)
	packWrite(t, filepath.Join(dir, "src", "lib", "a.js"), "module.exports = 1\n", 0o644)
	packSymlink(t, "lib/a.js", filepath.Join(dir, "src", "inside-file"))
	packSymlink(t, "src/lib", filepath.Join(dir, "inside-dir"))
	packSymlink(t, ".", filepath.Join(dir, "src", "self"))
	packSymlink(t, "../outside/secret.txt", filepath.Join(dir, "escape-rel"))
	packSymlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(dir, "escape-abs"))
	packSymlink(t, "missing.txt", filepath.Join(dir, "dangling"))
	// A hop that is lexically inside but passes through a link that leads out.
	packSymlink(t, "..", filepath.Join(dir, "src", "lib", "up"))
	packSymlink(t, "../outside", filepath.Join(dir, "out"))
	packSymlink(t, "out/secret.txt", filepath.Join(dir, "via-out"))
	// Lexically "outside/secret.txt", inside; really through src/self (= src) and up twice.
	packSymlink(t, "src/self/../../outside/secret.txt", filepath.Join(dir, "sneaky"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return dir, outside
}

func packWantTree(root string) []packEntry {
	p := func(name string) string {
		if name == "" {
			return root + "/"
		}
		if root == "" {
			return name
		}
		return root + "/" + name
	}
	return []packEntry{
		{Name: p(""), Type: "dir", Mode: 0o755},
		{Name: p("empty/"), Type: "dir", Mode: 0o755},
		{Name: p("inside-dir"), Type: "symlink", Mode: 0o777, Linkname: "src/lib"},
		{Name: p("package.json"), Type: "file", Mode: 0o644, Content: `{"scripts":{"test":"node test.js"}}`},
		{Name: p("run.sh"), Type: "file", Mode: 0o755, Content: "#!/bin/sh\necho hi\n"},
		{Name: p("src/"), Type: "dir", Mode: 0o755},
		{Name: p("src/inside-file"), Type: "symlink", Mode: 0o777, Linkname: "lib/a.js"},
		{Name: p("src/lib/"), Type: "dir", Mode: 0o755},
		{Name: p("src/lib/a.js"), Type: "file", Mode: 0o644, Content: "module.exports = 1\n"},
		{Name: p("src/lib/up"), Type: "symlink", Mode: 0o777, Linkname: ".."},
		{Name: p("src/self"), Type: "symlink", Mode: 0o777, Linkname: "."},
	}
}

var packWantSkipped = []string{"dangling", "escape-abs", "escape-rel", "fifo", "out", "sneaky", "via-out"}

func TestPackTree(t *testing.T) {
	dir, _ := packBuildTree(t)
	var buf bytes.Buffer
	stats, err := PackWith(context.Background(), dir, &buf, PackOptions{})
	if err != nil {
		t.Fatalf("PackWith: %v", err)
	}
	if diff := cmp.Diff(packWantTree(PackRoot), packReadArchive(t, buf.Bytes())); diff != "" {
		t.Errorf("archive entries (-want +got):\n%s", diff)
	}
	wantStats := PackStats{Files: 3, Dirs: 4, Symlinks: 4, Bytes: int64(len(`{"scripts":{"test":"node test.js"}}`) + len("#!/bin/sh\necho hi\n") + len("module.exports = 1\n")), Skipped: packWantSkipped}
	sort.Strings(stats.Skipped)
	if diff := cmp.Diff(wantStats, stats); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if bytes.Contains(packGunzip(t, buf.Bytes()), []byte("worker secret")) {
		t.Error("archive holds a byte of the file outside the checkout")
	}
}

func TestPackDeterministic(t *testing.T) {
	dir, _ := packBuildTree(t)
	var first bytes.Buffer
	if err := Pack(context.Background(), dir, &first); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	later := time.Now().Add(-time.Hour)
	for _, name := range []string{"package.json", "src/lib/a.js", "src"} {
		if err := os.Chtimes(filepath.Join(dir, name), later, later); err != nil {
			t.Fatal(err)
		}
	}
	var second bytes.Buffer
	if err := Pack(context.Background(), dir, &second); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("packing the same tree twice gave different bytes")
	}
	tr := tar.NewReader(bytes.NewReader(packGunzip(t, first.Bytes())))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(time.Unix(0, 0)) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: mtime %v uid %d gid %d uname %q gname %q, want fixed", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
	}
}

// TestPackExtractsWithTar checks the archive with the real tar a
// self-host command would use.
func TestPackExtractsWithTar(t *testing.T) {
	dir, _ := packBuildTree(t)
	archivePath := filepath.Join(t.TempDir(), "repo.tar.gz")
	f, err := os.Create(archivePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := Pack(context.Background(), dir, f); err != nil {
		t.Fatalf("Pack: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("tar", "xzf", archivePath, "-C", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar xzf: %v\n%s", err, b)
	}
	got, err := os.ReadFile(filepath.Join(out, PackRoot, "inside-dir", "a.js"))
	if err != nil {
		t.Fatalf("read through kept symlink: %v", err)
	}
	if string(got) != "module.exports = 1\n" {
		t.Errorf("a.js = %q", got)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != PackRoot {
		t.Errorf("top level holds %v, want only %s/", entries, PackRoot)
	}
}

func TestPackLimits(t *testing.T) {
	dir := t.TempDir()
	packWrite(t, filepath.Join(dir, "a"), "12345", 0o644)
	packWrite(t, filepath.Join(dir, "b"), "678", 0o644)
	packMkdir(t, filepath.Join(dir, "d"))
	// Entries: ".", "a", "b", "d" = 4; bytes: 8.
	tests := []struct {
		name      string
		opts      PackOptions
		wantLimit string
	}{
		{"bytes at the limit", PackOptions{MaxBytes: 8}, ""},
		{"bytes one over", PackOptions{MaxBytes: 7}, "bytes"},
		{"entries at the limit", PackOptions{MaxEntries: 4}, ""},
		{"entries one over", PackOptions{MaxEntries: 3}, "entries"},
		{"defaults", PackOptions{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stats, err := PackWith(context.Background(), dir, io.Discard, tt.opts)
			packCheckLimit(t, err, tt.wantLimit)
			if tt.wantLimit == "" && stats.Bytes != 8 {
				t.Errorf("Bytes = %d, want 8", stats.Bytes)
			}
			_, err = CopyTree(context.Background(), dir, filepath.Join(t.TempDir(), "copy"), tt.opts)
			packCheckLimit(t, err, tt.wantLimit)
		})
	}
}

func packCheckLimit(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return
	}
	var le *PackLimitError
	if !errors.As(err, &le) || le.Limit != want {
		t.Fatalf("err = %v, want a %s PackLimitError", err, want)
	}
}

func TestPackBadInput(t *testing.T) {
	dir := t.TempDir()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		dir  string
		opts PackOptions
		want string
	}{
		{"missing dir", context.Background(), filepath.Join(dir, "nope"), PackOptions{}, "no such file"},
		{"root with a slash", context.Background(), dir, PackOptions{Root: "a/b"}, "one plain path element"},
		{"root dot-dot", context.Background(), dir, PackOptions{Root: ".."}, "one plain path element"},
		{"cancelled", cancelled, dir, PackOptions{}, context.Canceled.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PackWith(tt.ctx, tt.dir, io.Discard, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestPackCustomRootAndSymlinkedDir(t *testing.T) {
	real := t.TempDir()
	packWrite(t, filepath.Join(real, "x.txt"), "x", 0o644)
	link := filepath.Join(t.TempDir(), "link")
	packSymlink(t, real, link)
	var buf bytes.Buffer
	if _, err := PackWith(context.Background(), link, &buf, PackOptions{Root: "owner-repo-sha"}); err != nil {
		t.Fatalf("PackWith: %v", err)
	}
	want := []packEntry{
		{Name: "owner-repo-sha/", Type: "dir", Mode: 0o755},
		{Name: "owner-repo-sha/x.txt", Type: "file", Mode: 0o644, Content: "x"},
	}
	if diff := cmp.Diff(want, packReadArchive(t, buf.Bytes())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCopyTree(t *testing.T) {
	dir, _ := packBuildTree(t)
	dst := filepath.Join(t.TempDir(), "copy")
	stats, err := CopyTree(context.Background(), dir, dst, PackOptions{})
	if err != nil {
		t.Fatalf("CopyTree: %v", err)
	}
	sort.Strings(stats.Skipped)
	if diff := cmp.Diff(packWantSkipped, stats.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(packWantTree(""), packReadDir(t, dst)); diff != "" {
		t.Errorf("copied tree (-want +got):\n%s", diff)
	}
	if _, err := CopyTree(context.Background(), dir, dst, PackOptions{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("copy onto an existing dst: err = %v, want fs.ErrExist", err)
	}
}

func packReadArchive(t *testing.T, gz []byte) []packEntry {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(packGunzip(t, gz)))
	var got []packEntry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		e := packEntry{Name: hdr.Name, Mode: fs.FileMode(hdr.Mode), Linkname: hdr.Linkname}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = "dir"
		case tar.TypeReg:
			e.Type = "file"
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			e.Content = string(b)
		case tar.TypeSymlink:
			e.Type = "symlink"
		default:
			e.Type = string(hdr.Typeflag)
		}
		got = append(got, e)
	}
}

// packReadDir lists a copied tree in the archive's naming (directories end
// in "/", the root is "/").
func packReadDir(t *testing.T, root string) []packEntry {
	t.Helper()
	var got []packEntry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := packEntry{Name: filepath.ToSlash(rel), Mode: info.Mode().Perm()}
		switch {
		case info.IsDir():
			e.Type = "dir"
			e.Name += "/"
			if rel == "." {
				e.Name = "/"
				e.Mode = 0o755 // the copy's own root is 0700 by design
			}
		case info.Mode().IsRegular():
			e.Type = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Content = string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			e.Type = "symlink"
			e.Mode = 0o777
			if e.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		}
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func packGunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	return out
}

func packMkdir(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func packWrite(t *testing.T, name, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func packSymlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// packBenchTree lays out files files of size bytes in 10 directories.
func packBenchTree(b *testing.B, files, size int) string {
	b.Helper()
	dir := b.TempDir()
	body := bytes.Repeat([]byte("x"), size)
	for i := range files {
		sub := filepath.Join(dir, "d"+strconv.Itoa(i%10))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "f"+strconv.Itoa(i)+".js"), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func BenchmarkPack(b *testing.B) {
	dir := packBenchTree(b, 1000, 4096)
	b.SetBytes(1000 * 4096)
	for b.Loop() {
		if err := Pack(context.Background(), dir, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCopyTree(b *testing.B) {
	dir := packBenchTree(b, 1000, 4096)
	dst := b.TempDir()
	b.SetBytes(1000 * 4096)
	i := 0
	for b.Loop() {
		i++
		if _, err := CopyTree(context.Background(), dir, filepath.Join(dst, strconv.Itoa(i)), PackOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
