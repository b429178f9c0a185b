package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
)

// ent is one tar entry a test writes. typ defaults to a regular file.
type ent struct {
	name  string
	typ   byte
	body  string
	link  string
	mode  int64
	uid   int
	size  int64 // header size override (no data written) when > 0
	pax   map[string]string
	major int64
	// rawType, when set, overwrites the written header's type flag
	// (for types tar.Writer refuses to write: 'x' and 'g' with a body).
	rawType byte
}

// paxBody encodes one PAX record ("%d key=value\n", the length counting
// itself).
func paxBody(key, value string) string {
	rec := " " + key + "=" + value + "\n"
	n := len(rec)
	for {
		l := len(itoa(n + len(itoa(n)))) // digits of the total
		if total := n + l; len(itoa(total)) == l {
			return itoa(total) + rec
		}
		n++
	}
}

// setType rewrites the type flag of the header block at off and fixes
// its checksum.
func setType(raw []byte, off int, typ byte) {
	blk := raw[off : off+512]
	blk[156] = typ
	copy(blk[148:156], "        ")
	sum := 0
	for _, c := range blk {
		sum += int(c)
	}
	copy(blk[148:156], []byte(octal6(sum)+"\x00 "))
}

func octal6(n int) string {
	b := []byte("000000")
	for i := 5; i >= 0; i-- {
		b[i] = byte('0' + n%8)
		n /= 8
	}
	return string(b)
}

func reg(name, body string) ent     { return ent{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) ent           { return ent{name: name, typ: tar.TypeDir} }
func symlink(name, link string) ent { return ent{name: name, typ: tar.TypeSymlink, link: link} }
func hardlink(name, link string) ent {
	return ent{name: name, typ: tar.TypeLink, link: link}
}

// tarBytes writes entries as an uncompressed tar stream. An entry with a
// size override is written last without its data (the stream is cut).
func tarBytes(t testing.TB, ents []ent) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var patches []func([]byte)
	patched := func() []byte {
		raw := bytes.Clone(b.Bytes())
		for _, p := range patches {
			p(raw)
		}
		return raw
	}
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: mode, Uid: e.uid, Gid: e.uid, PAXRecords: e.pax, Devmajor: e.major}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if e.size > 0 {
			h.Size = e.size
		}
		if err := tw.Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
		off := b.Len()
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("write header %q: %v", e.name, err)
		}
		if e.rawType != 0 {
			patches = append(patches, func(raw []byte) { setType(raw, off, e.rawType) })
		}
		if e.size > 0 {
			return patched() // the data never follows
		}
		if typ == tar.TypeReg && e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatalf("write %q: %v", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("close tar: %v", err)
	}
	return patched()
}

// paxEnt is a raw PAX header entry of type typ ('x' or 'g') carrying body.
func paxEnt(name string, typ byte, body string) ent {
	return ent{name: name, typ: tar.TypeReg, body: body, rawType: typ}
}

func gz(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("gzip close: %v", err)
	}
	return b.Bytes()
}

func tgz(t testing.TB, ents ...ent) []byte { return gz(t, tarBytes(t, ents)) }

// tree lists everything under dir: "path kind [target|content] mode".
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" -> "+target)
		case info.IsDir():
			out = append(out, rel+"/ "+info.Mode().Perm().String()[1:])
		default:
			body, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, rel+" "+info.Mode().String()+" "+string(body))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	sort.Strings(out)
	return out
}

// TestExtractCorpus runs rows A18–A37 of the hostile-input corpus
// (research/reliability.md) plus the layout rules.
func TestExtractCorpus(t *testing.T) {
	zeroWidth := "r/package\u200b.json"
	tests := []struct {
		name    string
		archive func(t *testing.T) []byte
		wantErr error    // nil: success
		want    []string // the tree under dst on success
	}{
		{name: "A18 dot-dot traversal", wantErr: ErrInsecurePath, archive: func(t *testing.T) []byte {
			return tgz(t, dir("repo-sha/"), reg("repo-sha/../../home/worker/.bashrc", "pwn"))
		}},
		{name: "A18 dot-dot at start", wantErr: ErrInsecurePath, archive: func(t *testing.T) []byte {
			return tgz(t, reg("../x", "pwn"))
		}},
		{name: "A19 absolute path", wantErr: ErrInsecurePath, archive: func(t *testing.T) []byte {
			return tgz(t, reg("/etc/cron.d/x", "* * * * * root sh"))
		}},
		{name: "A20 absolute symlink then write through it", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), symlink("r/l", "/"), reg("r/l/etc/passwd", "x"))
		}},
		{name: "A20 write through an inside symlink", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), dir("r/d/"), symlink("r/l", "d"), reg("r/l/x", "x"))
		}},
		{name: "A21 relative escaping symlink", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), symlink("r/l", "../../../.."), reg("r/l/x", "x"))
		}},
		{name: "A21 symlink to the extraction root", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), symlink("r/l", ".."))
		}},
		{name: "A21 escape only through a symlink chain", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			// Lexically r/d/e/m -> up/../.. is r/d, but up is r, so it is r/../.. .
			return tgz(t, dir("r/"), dir("r/d/"), dir("r/d/e/"), symlink("r/d/e/up", "../.."), symlink("r/d/e/m", "up/../.."))
		}},
		{name: "A21 escape through a link created later", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), dir("r/d/"), symlink("r/d/m", "up/../.."), symlink("r/d/up", ".."))
		}},
		{name: "A21 symlink loop", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), symlink("r/a", "b/x"), symlink("r/b", "a/x"))
		}},
		{name: "A22 package.json to /proc/self/environ", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), symlink("r/package.json", "/proc/self/environ"))
		}},
		{name: "A22 package.json relative to a host file", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), symlink("r/package.json", "../../../../home/worker/.config/worker/secrets.json"))
		}},
		{name: "A22 symlink inside the tree is kept as a link",
			archive: func(t *testing.T) []byte {
				return tgz(t, dir("r/"), dir("r/sub/"), reg("r/sub/real.json", "{}"), symlink("r/package.json", "sub/real.json"), symlink("r/sub/up", "../package.json"))
			},
			want: []string{"r/ rwxr-xr-x", "r/package.json -> sub/real.json", "r/sub/ rwxr-xr-x", "r/sub/real.json -rw-r--r-- {}", "r/sub/up -> ../package.json"}},
		{name: "A23 hardlink outside", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), hardlink("r/h", "../../outside"))
		}},
		{name: "A23 hardlink absolute", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), hardlink("r/h", "/etc/shadow"))
		}},
		{name: "A23 hardlink to a file not yet extracted", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), hardlink("r/h", "r/later"), reg("r/later", "x"))
		}},
		{name: "A23 hardlink to a symlink", wantErr: ErrLink, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), reg("r/f", "x"), symlink("r/l", "f"), hardlink("r/h", "r/l"))
		}},
		{name: "A23 hardlink to an earlier file inside",
			archive: func(t *testing.T) []byte {
				return tgz(t, dir("r/"), reg("r/f", "same"), hardlink("r/h", "r/f"))
			},
			want: []string{"r/ rwxr-xr-x", "r/f -rw-r--r-- same", "r/h -rw-r--r-- same"}},
		{name: "A24 char device", wantErr: ErrSpecialFile, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), ent{name: "r/null", typ: tar.TypeChar, major: 1})
		}},
		{name: "A24 block device", wantErr: ErrSpecialFile, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), ent{name: "r/sda", typ: tar.TypeBlock, major: 8})
		}},
		{name: "A24 fifo", wantErr: ErrSpecialFile, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), ent{name: "r/fifo", typ: tar.TypeFifo})
		}},
		{name: "A25 setuid, setgid, sticky and owners are dropped",
			archive: func(t *testing.T) []byte {
				return tgz(t,
					ent{name: "r/", typ: tar.TypeDir, mode: 0o1777, uid: 0},
					ent{name: "r/suid", typ: tar.TypeReg, body: "#!/bin/sh", mode: 0o4755, uid: 0},
					ent{name: "r/sgid", typ: tar.TypeReg, body: "x", mode: 0o2600, uid: 99999},
					ent{name: "r/ro", typ: tar.TypeReg, body: "y", mode: 0o400, uid: 4294967},
				)
			},
			want: []string{"r/ rwxr-xr-x", "r/ro -rw-r--r-- y", "r/sgid -rw-r--r-- x", "r/suid -rwxr-xr-x #!/bin/sh"}},
		{name: "A28 huge logical file size", wantErr: ErrLimit, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), ent{name: "r/sparse", typ: tar.TypeReg, size: 1 << 40})
		}},
		{name: "A28 GNU sparse entry with a bogus map", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			return gz(t, tarBytes(t, []ent{dir("r/"), {name: "r/s", typ: tar.TypeGNUSparse}}))
		}},
		{name: "A29 oversized PAX header", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), paxEnt("r/PaxHeaders/f", tar.TypeXHeader, paxBody("comment", strings.Repeat("a", 2<<20))), reg("r/f", "x"))
		}},
		{name: "A30 pax_global_header is skipped",
			archive: func(t *testing.T) []byte {
				return tgz(t,
					paxEnt("pax_global_header", tar.TypeXGlobalHeader, paxBody("comment", "6dcb09b5b57875f334f61aebed695e2e4193db5e")),
					dir("octocat-Hello-World-6dcb09b/"), reg("octocat-Hello-World-6dcb09b/package.json", "{}"))
			},
			want: []string{"octocat-Hello-World-6dcb09b/ rwxr-xr-x", "octocat-Hello-World-6dcb09b/package.json -rw-r--r-- {}"}},
		{name: "A31 two top-level directories", wantErr: ErrLayout, archive: func(t *testing.T) []byte {
			return tgz(t, dir("a/"), reg("a/x", "1"), dir("b/"), reg("b/y", "2"))
		}},
		{name: "A31 a file beside the top directory", wantErr: ErrLayout, archive: func(t *testing.T) []byte {
			return tgz(t, dir("a/"), reg("a/x", "1"), reg("README", "2"))
		}},
		{name: "A31 the only top-level entry is a file", wantErr: ErrLayout, archive: func(t *testing.T) []byte {
			return tgz(t, reg("README", "2"))
		}},
		{name: "A31 empty archive", wantErr: ErrLayout, archive: func(t *testing.T) []byte {
			return tgz(t)
		}},
		{name: "A31 only a global header", wantErr: ErrLayout, archive: func(t *testing.T) []byte {
			return tgz(t, paxEnt("pax_global_header", tar.TypeXGlobalHeader, paxBody("comment", "x")))
		}},
		{name: "A31 top directory without its own entry",
			archive: func(t *testing.T) []byte { return tgz(t, reg("r/a/b.txt", "b")) },
			want:    []string{"r/ rwxr-xr-x", "r/a/ rwxr-xr-x", "r/a/b.txt -rw-r--r-- b"}},
		{name: "A32 file, then symlink, then write through it", wantErr: ErrDuplicate, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), reg("r/x", "1"), symlink("r/x", "/etc"), reg("r/x/passwd", "2"))
		}},
		{name: "A32 same file twice", wantErr: ErrDuplicate, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), reg("r/x", "1"), reg("r/x", "2"))
		}},
		{name: "A32 same file twice spelled differently", wantErr: ErrDuplicate, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), reg("r/x", "1"), reg("r/./d/../x", "2"))
		}},
		{name: "A32 same directory twice", wantErr: ErrDuplicate, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), dir("r/d/"), dir("r/d/"))
		}},
		{name: "A32 directory replaced by a file", wantErr: ErrDuplicate, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), dir("r/d/"), reg("r/d", "x"))
		}},
		{name: "A32 file under a file", wantErr: ErrDuplicate, archive: func(t *testing.T) []byte {
			return tgz(t, dir("r/"), reg("r/f", "x"), reg("r/f/g", "y"))
		}},
		{name: "A32 directory entry after its children",
			archive: func(t *testing.T) []byte { return tgz(t, reg("r/d/x", "1"), dir("r/d/"), dir("r/")) },
			want:    []string{"r/ rwxr-xr-x", "r/d/ rwxr-xr-x", "r/d/x -rw-r--r-- 1"}},
		{name: "A33 marker and ESC in file names are stored as is",
			archive: func(t *testing.T) []byte {
				return tgz(t, dir("r/"), reg("r/\n__GILF_VALIDATION_END__:test:0", "m"), reg("r/\x1b]0;title\x07", "e"))
			},
			want: []string{"r/ rwxr-xr-x", "r/\n__GILF_VALIDATION_END__:test:0 -rw-r--r-- m", "r/\x1b]0;title\x07 -rw-r--r-- e"}},
		{name: "A34 truncated gzip", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			full := tgz(t, dir("r/"), reg("r/a", strings.Repeat("abc", 1000)), reg("r/b", "b"))
			return full[:len(full)-10]
		}},
		{name: "A34 gzip cut in the middle", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			full := tgz(t, dir("r/"), reg("r/a", "a"), reg("r/b", "b"))
			return full[:len(full)/2]
		}},
		{name: "A34 trailing garbage after the gzip stream", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			return append(tgz(t, dir("r/"), reg("r/a", "a")), "garbage"...)
		}},
		{name: "A34 data after the end-of-archive marker", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			return gz(t, append(tarBytes(t, []ent{dir("r/"), reg("r/a", "a")}), "more"...))
		}},
		{name: "A34 tar cut inside a file", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			raw := tarBytes(t, []ent{dir("r/"), reg("r/a", strings.Repeat("x", 4000))})
			return gz(t, raw[:1500])
		}},
		{name: "A34 not gzip", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			return tarBytes(t, []ent{dir("r/"), reg("r/a", "a")})
		}},
		{name: "A34 gzip of something that is not tar", wantErr: ErrCorrupt, archive: func(t *testing.T) []byte {
			return gz(t, bytes.Repeat([]byte("not a tar header "), 64))
		}},
		{name: "A37 dot-dot that stays inside",
			archive: func(t *testing.T) []byte { return tgz(t, dir("r/"), dir("r/a/"), reg("r/a/../b", "b")) },
			want:    []string{"r/ rwxr-xr-x", "r/a/ rwxr-xr-x", "r/b -rw-r--r-- b"}},
		{name: "A37 look-alike names stay distinct",
			archive: func(t *testing.T) []byte {
				return tgz(t, dir("r/"), reg(zeroWidth, "zw"), reg("r/Package.json", "P"))
			},
			want: []string{"r/ rwxr-xr-x", "r/Package.json -rw-r--r-- P", zeroWidth + " -rw-r--r-- zw"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dst := filepath.Join(base, "dst")
			root, err := Extract(context.Background(), bytes.NewReader(tc.archive(t)), dst, Limits{})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Extract error = %v, want %v", err, tc.wantErr)
				}
				var ae *Error
				if !errors.As(err, &ae) {
					t.Fatalf("error %T is not *Error", err)
				}
				if strings.ContainsAny(err.Error(), "\x1b\n") {
					t.Errorf("error message carries raw control characters: %q", err.Error())
				}
				if root != "" {
					t.Errorf("root = %q on error", root)
				}
				if _, statErr := os.Lstat(dst); !errors.Is(statErr, fs.ErrNotExist) {
					t.Errorf("dst left behind after error (stat: %v): %v", statErr, tree(t, base))
				}
				if got := tree(t, base); len(got) != 0 {
					t.Errorf("files left after error: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if diff := cmp.Diff(want, tree(t, dst)); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
			top := strings.SplitN(want[0], "/", 2)[0]
			if want := filepath.Join(dst, top); root != want {
				t.Errorf("root = %q, want %q", root, want)
			}
		})
	}
}

// TestExtractLimits checks every limit at its boundary: exactly at it is
// accepted, one over is ErrLimit.
func TestExtractLimits(t *testing.T) {
	files := []ent{dir("r/"), reg("r/a", "12345"), reg("r/b", "123")} // 3 entries, 8 bytes
	deep := "r/" + strings.Repeat("d/", 6) + "f"                      // 8 components
	long := "r/" + strings.Repeat("n", 30)                            // 32 bytes
	compressed := tgz(t, files...)
	tests := []struct {
		name  string
		ents  []ent
		raw   []byte
		at    Limits
		over  Limits
		field string
	}{
		{name: "compressed bytes", raw: compressed, field: "MaxCompressedBytes",
			at: Limits{MaxCompressedBytes: int64(len(compressed))}, over: Limits{MaxCompressedBytes: int64(len(compressed)) - 1}},
		{name: "total bytes", ents: files, field: "MaxTotalBytes",
			at: Limits{MaxTotalBytes: 8}, over: Limits{MaxTotalBytes: 7}},
		{name: "entries", ents: files, field: "MaxEntries",
			at: Limits{MaxEntries: 3}, over: Limits{MaxEntries: 2}},
		{name: "depth", ents: []ent{reg(deep, "x")}, field: "MaxDepth",
			at: Limits{MaxDepth: 8}, over: Limits{MaxDepth: 7}},
		{name: "name bytes", ents: []ent{reg(long, "x")}, field: "MaxNameBytes",
			at: Limits{MaxNameBytes: 32}, over: Limits{MaxNameBytes: 31}},
		{name: "symlink target bytes", ents: []ent{dir("r/"), symlink("r/l", strings.Repeat("x", 20))}, field: "MaxNameBytes",
			at: Limits{MaxNameBytes: 20}, over: Limits{MaxNameBytes: 19}},
		{name: "file bytes", ents: files, field: "MaxFileBytes",
			at: Limits{MaxFileBytes: 5}, over: Limits{MaxFileBytes: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.raw
			if data == nil {
				data = tgz(t, tc.ents...)
			}
			if _, err := Extract(context.Background(), bytes.NewReader(data), filepath.Join(t.TempDir(), "at"), tc.at); err != nil {
				t.Fatalf("%s exactly at the limit: %v", tc.field, err)
			}
			dst := filepath.Join(t.TempDir(), "over")
			_, err := Extract(context.Background(), bytes.NewReader(data), dst, tc.over)
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("%s one over: error = %v, want ErrLimit", tc.field, err)
			}
			if _, statErr := os.Lstat(dst); !errors.Is(statErr, fs.ErrNotExist) {
				t.Errorf("dst left behind: %v", statErr)
			}
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	want := Limits{
		MaxCompressedBytes: 100 << 20,
		MaxTotalBytes:      1 << 30,
		MaxEntries:         100_000,
		MaxDepth:           64,
		MaxNameBytes:       1024,
		MaxFileBytes:       100 << 20,
	}
	if diff := cmp.Diff(want, DefaultLimits()); diff != "" {
		t.Errorf("DefaultLimits (-want +got):\n%s", diff)
	}
	partial := Limits{MaxEntries: 7}.WithDefaults()
	if partial.MaxEntries != 7 || partial.MaxDepth != DefaultMaxDepth {
		t.Errorf("WithDefaults overrode a set field or missed a zero one: %+v", partial)
	}
}

// TestExtractGzipBomb: highly compressible input stops at the total cap
// without writing past it.
func TestExtractGzipBomb(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	const size = 24 << 20
	if err := tw.WriteHeader(&tar.Header{Name: "r/zeros", Typeflag: tar.TypeReg, Size: size, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := 0; i < size/len(chunk); i++ {
		if _, err := tw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed; expected well under 1 MiB", b.Len())
	}
	dst := filepath.Join(t.TempDir(), "dst")
	_, err := Extract(context.Background(), &b, dst, Limits{MaxTotalBytes: 4 << 20})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("error = %v, want ErrLimit", err)
	}
}

// TestExtractManyFiles: a many-file bomb stops at the entry cap.
func TestExtractManyFiles(t *testing.T) {
	ents := []ent{dir("r/")}
	for i := 0; i < 2000; i++ {
		ents = append(ents, reg("r/f"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+"-"+itoa(i), ""))
	}
	dst := filepath.Join(t.TempDir(), "dst")
	_, err := Extract(context.Background(), bytes.NewReader(tgz(t, ents...)), dst, Limits{MaxEntries: 1000})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("error = %v, want ErrLimit", err)
	}
	if _, statErr := os.Lstat(dst); !errors.Is(statErr, fs.ErrNotExist) {
		t.Errorf("partial tree left: %v", statErr)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestExtractDeepPath: paths 4 096 deep are refused by the default depth.
func TestExtractDeepPath(t *testing.T) {
	name := "r/" + strings.Repeat("d/", 4096) + "f"
	_, err := Extract(context.Background(), bytes.NewReader(tgz(t, reg(name, "x"))), filepath.Join(t.TempDir(), "dst"), Limits{MaxNameBytes: 1 << 16})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("error = %v, want ErrLimit", err)
	}
}

// TestExtractExistingDst: an existing dst is kept (empty) after an error
// and its other content is never touched.
func TestExtractExistingDst(t *testing.T) {
	dst := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, "keep"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Extract(context.Background(), bytes.NewReader(tgz(t, dir("r/"), reg("r/a", "a"), ent{name: "r/f", typ: tar.TypeFifo})), dst, Limits{})
	if !errors.Is(err, ErrSpecialFile) {
		t.Fatalf("error = %v", err)
	}
	if diff := cmp.Diff([]string{"keep -rw------- mine"}, tree(t, dst)); diff != "" {
		t.Errorf("dst after error (-want +got):\n%s", diff)
	}
	// A top directory that already exists is never merged into.
	if err := os.Mkdir(filepath.Join(dst, "r"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Extract(context.Background(), bytes.NewReader(tgz(t, dir("r/"), reg("r/a", "a"))), dst, Limits{})
	if !errors.Is(err, ErrDuplicate) {
		t.Fatalf("existing top dir: error = %v, want ErrDuplicate", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "r")); err != nil {
		t.Errorf("the pre-existing directory was removed: %v", err)
	}
}

func TestExtractCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := filepath.Join(t.TempDir(), "dst")
	_, err := Extract(ctx, bytes.NewReader(tgz(t, dir("r/"), reg("r/a", "a"))), dst, Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

// TestExtractRealArchives extracts GitHub's recorded codeload tarball and
// the git-archive tarballs of real repositories.
func TestExtractRealArchives(t *testing.T) {
	tests := []struct {
		file     string
		wantRoot string
		wantFile string
	}{
		{file: "github-api/octokit-fixtures/get-archive.codeload-legacy.tar.gz", wantRoot: "octokit-fixture-org-get-archive-0000000", wantFile: "README.md"},
		{file: "repos/steno.tar.gz", wantRoot: "steno", wantFile: "package.json"},
		{file: "repos/kleur.tar.gz", wantRoot: "kleur", wantFile: "package.json"},
		{file: "repos/util-deprecate.tar.gz", wantRoot: "util-deprecate", wantFile: "package.json"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			f, err := os.Open(shared.Data(t, filepath.FromSlash(tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			dst := t.TempDir()
			root, err := Extract(context.Background(), f, dst, Limits{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if want := filepath.Join(dst, tc.wantRoot); root != want {
				t.Errorf("root = %q, want %q", root, want)
			}
			info, err := os.Lstat(filepath.Join(root, tc.wantFile))
			if err != nil {
				t.Fatalf("expected file: %v", err)
			}
			if !info.Mode().IsRegular() || info.Size() == 0 {
				t.Errorf("%s: mode %v size %d", tc.wantFile, info.Mode(), info.Size())
			}
			if _, err := os.Lstat(filepath.Join(dst, "pax_global_header")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("pax_global_header extracted as a file: %v", err)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Entry: "r/\x1bx", Kind: ErrLink, Reason: "symlink to the absolute path \"/\""}
	want := `archive entry "r/\x1bx": unsafe link: symlink to the absolute path "/"`
	if e.Error() != want {
		t.Errorf("Error() = %s, want %s", e.Error(), want)
	}
}

// BenchmarkExtract extracts the real steno repository tarball.
func BenchmarkExtract(b *testing.B) {
	data, err := os.ReadFile(shared.Data(b, "repos", "steno.tar.gz"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	base := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		dst := filepath.Join(base, itoa(i))
		if _, err := Extract(context.Background(), bytes.NewReader(data), dst, Limits{}); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
	}
}
