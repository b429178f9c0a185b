package archive

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// PackRoot is the single top-level directory every packed archive holds:
// the repository's root is "repo/" inside the archive.
const PackRoot = "repo"

// Pack limits. A repository that exceeds one is refused with a
// *PackLimitError before anything past the limit is written.
const (
	// DefaultPackMaxBytes bounds the summed size of the regular files
	// packed (uncompressed): 1 GiB.
	DefaultPackMaxBytes int64 = 1 << 30
	// DefaultPackMaxEntries bounds the number of entries packed (files,
	// directories and symlinks, the top directory included).
	DefaultPackMaxEntries = 100_000
)

// PackOptions tune Pack. Zero values take the defaults.
type PackOptions struct {
	// Root is the top-level directory name inside the archive (PackRoot
	// when empty). It must be one plain path element.
	Root       string
	MaxBytes   int64
	MaxEntries int
}

// PackStats says what Pack wrote and what it left out.
type PackStats struct {
	Files    int
	Dirs     int
	Symlinks int
	// Bytes is the summed size of the regular files packed.
	Bytes int64
	// Skipped lists, relative to the packed directory and in walk order,
	// the entries left out: symlinks whose target leaves the directory or
	// does not resolve inside it, and special files (devices, sockets,
	// FIFOs).
	Skipped []string
}

// PackLimitError is returned when the tree exceeds a pack limit.
type PackLimitError struct {
	Limit string // "bytes" or "entries"
	Max   int64
	// Path is the entry that would have crossed the limit, relative to
	// the packed directory.
	Path string
}

func (e *PackLimitError) Error() string {
	return fmt.Sprintf("pack: %s limit %d exceeded at %q", e.Limit, e.Max, e.Path)
}

// Pack writes dir as a gzipped tar under the single top directory
// PackRoot, with the default limits. See PackWith.
func Pack(ctx context.Context, dir string, w io.Writer) error {
	_, err := PackWith(ctx, dir, w, PackOptions{})
	return err
}

// PackWith writes dir as a gzipped tar to w.
//
// The archive holds only directories, regular files and symlinks, under
// one top directory (opts.Root). It is deterministic: entries in lexical
// walk order, mtime 0, uid/gid 0, no user or group names, modes
// normalised to 0755 (directories and executable files) or 0644.
//
// Nothing outside dir is read: the walk goes through an os.Root, so a
// symlink is never followed out of dir. A symlink is kept, as a symlink,
// only when its target is relative, stays inside dir when read lexically,
// and resolves to an existing entry inside dir; any other symlink is left
// out and listed in PackStats.Skipped. Special files are left out too.
//
// When ctx is cancelled PackWith stops and returns ctx.Err(); w then holds
// a truncated archive the caller must discard.
func PackWith(ctx context.Context, dir string, w io.Writer, opts PackOptions) (PackStats, error) {
	var stats PackStats
	opts, err := opts.withDefaults()
	if err != nil {
		return stats, err
	}
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return stats, fmt.Errorf("pack: gzip: %w", err)
	}
	tw := tar.NewWriter(gz)
	if err := walkTree(ctx, dir, opts, &stats, tarSink{tw: tw, root: opts.Root}); err != nil {
		return stats, err
	}
	if err := tw.Close(); err != nil {
		return stats, fmt.Errorf("pack: close tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return stats, fmt.Errorf("pack: close gzip: %w", err)
	}
	return stats, nil
}

// walkTree walks dir through an os.Root and hands every kept entry to
// sink, counting it against opts' limits.
func walkTree(ctx context.Context, dir string, opts PackOptions, stats *PackStats, sink packSink) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("pack: open %s: %w", dir, err)
	}
	defer root.Close()
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("pack: resolve %s: %w", dir, err)
	}
	p := packer{ctx: ctx, root: root, realDir: realDir, sink: sink, opts: opts, stats: stats}
	return fs.WalkDir(root.FS(), ".", p.visit)
}

// packSink receives the kept entries of a walk, parents before children.
// Names are slash-separated and relative to the walked directory; the
// directory itself is ".".
type packSink interface {
	dir(name string) error
	// file writes exactly size bytes read from r; mode is 0644 or 0755.
	file(name string, mode fs.FileMode, size int64, r io.Reader) error
	symlink(name, target string) error
}

type tarSink struct {
	tw   *tar.Writer
	root string
}

func (t tarSink) header(name string, typ byte) *tar.Header {
	arcName := t.root
	if name != "." {
		arcName = path.Join(t.root, name)
	}
	return &tar.Header{
		Typeflag: typ,
		Name:     arcName,
		ModTime:  time.Unix(0, 0), // fixed, so packing twice gives the same bytes
		Format:   tar.FormatPAX,
	}
}

func (t tarSink) dir(name string) error {
	hdr := t.header(name, tar.TypeDir)
	hdr.Name += "/"
	hdr.Mode = 0o755
	return t.write(hdr)
}

func (t tarSink) file(name string, mode fs.FileMode, size int64, r io.Reader) error {
	hdr := t.header(name, tar.TypeReg)
	hdr.Mode = int64(mode)
	hdr.Size = size
	if err := t.write(hdr); err != nil {
		return err
	}
	if n, err := io.CopyN(t.tw, r, size); err != nil {
		return fmt.Errorf("pack: copy %s (%d of %d bytes): %w", name, n, size, err)
	}
	return nil
}

func (t tarSink) symlink(name, target string) error {
	hdr := t.header(name, tar.TypeSymlink)
	hdr.Linkname = target
	hdr.Mode = 0o777
	return t.write(hdr)
}

func (t tarSink) write(hdr *tar.Header) error {
	if err := t.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("pack: write header %s: %w", hdr.Name, err)
	}
	return nil
}

func (o PackOptions) withDefaults() (PackOptions, error) {
	if o.Root == "" {
		o.Root = PackRoot
	}
	if o.Root == "." || o.Root == ".." || strings.ContainsAny(o.Root, `/\`) || !fs.ValidPath(o.Root) {
		return o, fmt.Errorf("pack: root %q is not one plain path element", o.Root)
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultPackMaxBytes
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultPackMaxEntries
	}
	return o, nil
}

type packer struct {
	ctx     context.Context
	root    *os.Root
	realDir string
	sink    packSink
	opts    PackOptions
	stats   *PackStats
	entries int
}

func (p *packer) visit(name string, d fs.DirEntry, walkErr error) error {
	if walkErr != nil {
		return fmt.Errorf("pack: walk %s: %w", name, walkErr)
	}
	if err := p.ctx.Err(); err != nil {
		return err
	}
	info, err := p.root.Lstat(name)
	if err != nil {
		return fmt.Errorf("pack: lstat %s: %w", name, err)
	}
	switch mode := info.Mode(); {
	case mode.IsDir():
		if err := p.count(name); err != nil {
			return err
		}
		p.stats.Dirs++
		return p.sink.dir(name)
	case mode.IsRegular():
		if err := p.count(name); err != nil {
			return err
		}
		size := info.Size()
		if size > p.opts.MaxBytes-p.stats.Bytes {
			return &PackLimitError{Limit: "bytes", Max: p.opts.MaxBytes, Path: name}
		}
		perm := fs.FileMode(0o644)
		if mode.Perm()&0o111 != 0 {
			perm = 0o755
		}
		if err := p.copyFile(name, perm, size); err != nil {
			return err
		}
		p.stats.Files++
		p.stats.Bytes += size
		return nil
	case mode&fs.ModeSymlink != 0:
		target, ok, err := p.insideLink(name)
		if err != nil {
			return err
		}
		if !ok {
			p.stats.Skipped = append(p.stats.Skipped, name)
			return nil
		}
		if err := p.count(name); err != nil {
			return err
		}
		p.stats.Symlinks++
		return p.sink.symlink(name, target)
	default:
		p.stats.Skipped = append(p.stats.Skipped, name)
		return nil
	}
}

func (p *packer) count(name string) error {
	if p.entries >= p.opts.MaxEntries {
		return &PackLimitError{Limit: "entries", Max: int64(p.opts.MaxEntries), Path: name}
	}
	p.entries++
	return nil
}

// copyFile hands exactly size bytes of name to the sink: a file that
// changed size since it was stat'ed is an error, never a silently short
// entry.
func (p *packer) copyFile(name string, perm fs.FileMode, size int64) error {
	f, err := p.root.Open(name)
	if err != nil {
		return fmt.Errorf("pack: open %s: %w", name, err)
	}
	defer f.Close()
	if err := p.sink.file(name, perm, size, ctxReader{ctx: p.ctx, r: f}); err != nil {
		if ctxErr := p.ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return err
	}
	return nil
}

// insideLink reports whether the symlink name may be kept: its target is
// relative, lexically inside the directory, and resolves inside it.
func (p *packer) insideLink(name string) (string, bool, error) {
	target, err := p.root.Readlink(name)
	if err != nil {
		return "", false, fmt.Errorf("pack: readlink %s: %w", name, err)
	}
	if !linkInside(name, target) {
		return target, false, nil
	}
	// Resolve it for real as well: a lexically inside target can still
	// pass through another symlink that leads out.
	resolved, err := filepath.EvalSymlinks(filepath.Join(p.realDir, filepath.FromSlash(name)))
	if err != nil {
		return target, false, nil
	}
	rel, err := filepath.Rel(p.realDir, resolved)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return target, false, nil
	}
	return target, true, nil
}

// linkInside reports whether a symlink at name (slash-separated, relative
// to the packed directory) with the given target stays inside the
// directory when read lexically.
func linkInside(name, target string) bool {
	if target == "" || path.IsAbs(target) || strings.Contains(target, `\`) {
		return false
	}
	joined := path.Join(path.Dir(name), target)
	return joined == "." || (joined != ".." && !strings.HasPrefix(joined, "../"))
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
