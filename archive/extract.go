// Package archive packs and safely extracts repository tarballs.
package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Defaults for Limits. A zero field in Limits means its default.
const (
	// DefaultMaxCompressedBytes caps the gzip bytes read from the input.
	DefaultMaxCompressedBytes int64 = 100 << 20
	// DefaultMaxTotalBytes caps the sum of all regular files' sizes.
	DefaultMaxTotalBytes int64 = 1 << 30
	// DefaultMaxEntries caps the number of tar headers (every entry,
	// including skipped pax_global_header entries).
	DefaultMaxEntries = 100_000
	// DefaultMaxDepth caps the number of components of an entry's path,
	// the top-level directory included.
	DefaultMaxDepth = 64
	// DefaultMaxNameBytes caps the byte length of an entry's name and of a
	// link's target.
	DefaultMaxNameBytes = 1024
	// DefaultMaxFileBytes caps the size of one regular file (its logical
	// size: a sparse file counts in full).
	DefaultMaxFileBytes int64 = 100 << 20
)

// maxTrailerBytes bounds the decompressed bytes accepted after the tar
// end-of-archive marker. tar writers pad to a 10 KiB record with zeros;
// anything beyond this, or anything non-zero, is trailing garbage.
const maxTrailerBytes = 64 << 10

// maxLinkHops bounds symlink resolution when checking that links stay
// inside the tree (Linux allows 40).
const maxLinkHops = 40

// Limits bound what Extract reads and writes. A zero field takes its
// Default…; every limit is inclusive: exactly at the limit is accepted,
// one over is an error.
type Limits struct {
	MaxCompressedBytes int64
	MaxTotalBytes      int64
	MaxEntries         int
	MaxDepth           int
	MaxNameBytes       int
	MaxFileBytes       int64
}

// DefaultLimits returns every limit at its default.
func DefaultLimits() Limits { return Limits{}.WithDefaults() }

// WithDefaults returns l with every zero (or negative) field set to its
// default.
func (l Limits) WithDefaults() Limits {
	if l.MaxCompressedBytes <= 0 {
		l.MaxCompressedBytes = DefaultMaxCompressedBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = DefaultMaxNameBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	return l
}

// Error kinds. Every error Extract returns about the archive itself is an
// *Error whose Kind is one of these, so callers can use errors.Is.
var (
	// ErrInsecurePath: an absolute name, or one that leaves the root.
	ErrInsecurePath = errors.New("insecure path")
	// ErrLink: a symlink or hardlink that is absolute, escapes the tree,
	// loops, or a path that traverses a link.
	ErrLink = errors.New("unsafe link")
	// ErrSpecialFile: a device, FIFO or other unsupported entry type.
	ErrSpecialFile = errors.New("unsupported entry type")
	// ErrDuplicate: the same path appears twice.
	ErrDuplicate = errors.New("duplicate entry")
	// ErrLimit: a Limits bound was exceeded.
	ErrLimit = errors.New("limit exceeded")
	// ErrLayout: not exactly one top-level directory.
	ErrLayout = errors.New("bad archive layout")
	// ErrCorrupt: not a gzip'd tar, truncated, or trailing garbage.
	ErrCorrupt = errors.New("corrupt archive")
)

// Error describes why an archive was rejected. Entry is the tar name as
// found (quoted when printed, so control characters are escaped).
type Error struct {
	Entry  string
	Reason string
	Kind   error
	Err    error // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("archive")
	if e.Entry != "" {
		fmt.Fprintf(&b, " entry %q", e.Entry)
	}
	fmt.Fprintf(&b, ": %v: %s", e.Kind, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Extract reads a gzip-compressed tar from r into dst and returns the path
// of its single top-level directory (GitHub's `{owner}-{repo}-{sha}/`,
// or `git archive --prefix`'s `<name>/`).
//
// dst is created when missing. Entries are created with os.Root, never
// replacing anything (O_EXCL); links are checked against the finished
// tree; modes are masked to 0644/0755; owners are ignored. On any error
// everything Extract created is removed: a partial tree never survives.
func Extract(ctx context.Context, r io.Reader, dst string, lim Limits) (root string, err error) {
	lim = lim.WithDefaults()
	createdDst := false
	if _, statErr := os.Lstat(dst); errors.Is(statErr, fs.ErrNotExist) {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return "", fmt.Errorf("create extraction dir: %w", err)
		}
		createdDst = true
	}
	rt, err := os.OpenRoot(dst)
	if err != nil {
		return "", fmt.Errorf("open extraction dir: %w", err)
	}
	x := &extractor{
		root:         rt,
		lim:          lim,
		kinds:        make(map[string]byte),
		explicitDirs: make(map[string]bool),
		links:        make(map[string]string),
	}
	top, err := x.run(ctx, r)
	if err != nil {
		if x.createdTop {
			if rmErr := rt.RemoveAll(x.top); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("remove partial tree: %w", rmErr))
			}
		}
		if cErr := rt.Close(); cErr != nil {
			err = errors.Join(err, cErr)
		}
		if createdDst {
			if rmErr := os.RemoveAll(dst); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("remove extraction dir: %w", rmErr))
			}
		}
		return "", err
	}
	if err := rt.Close(); err != nil {
		return "", fmt.Errorf("close extraction dir: %w", err)
	}
	return filepath.Join(dst, filepath.FromSlash(top)), nil
}

// kinds of created paths
const (
	kindDir     = 'd'
	kindFile    = 'f'
	kindSymlink = 'l'
)

type extractor struct {
	root       *os.Root
	lim        Limits
	top        string
	createdTop bool
	entries    int
	total      int64
	// kinds records every path created (cleaned, slash-separated);
	// explicitDirs the directories that had their own entry (the others
	// were created as parents); links the symlink targets for the final
	// escape check.
	kinds        map[string]byte
	explicitDirs map[string]bool
	links        map[string]string
}

func (x *extractor) run(ctx context.Context, r io.Reader) (string, error) {
	cr := &capReader{ctx: ctx, r: r, max: x.lim.MaxCompressedBytes}
	gz, err := gzip.NewReader(cr)
	if err != nil {
		return "", x.streamErr(cr, err, "not a gzip stream")
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", x.streamErr(cr, err, "reading tar header")
		}
		if err := x.entry(tr, hdr); err != nil {
			return "", x.streamErr(cr, err, "reading entry")
		}
	}
	if err := drainTrailer(gz); err != nil {
		return "", x.streamErr(cr, err, "after end of archive")
	}
	if x.top == "" {
		return "", &Error{Kind: ErrLayout, Reason: "archive has no entries"}
	}
	if x.kinds[x.top] != kindDir {
		return "", &Error{Entry: x.top, Kind: ErrLayout, Reason: "the single top-level entry is not a directory"}
	}
	for name := range x.links {
		if reason := x.escapes(name); reason != "" {
			return "", &Error{Entry: name, Kind: ErrLink, Reason: reason}
		}
	}
	return x.top, nil
}

// streamErr turns a read error into an *Error, preferring the cap and
// context errors the capReader saw.
func (x *extractor) streamErr(cr *capReader, err error, what string) error {
	if cr.err != nil {
		err = cr.err
	}
	var ae *Error
	var we *writeError
	if errors.As(err, &ae) || errors.As(err, &we) {
		return err
	}
	if ctxErr := cr.ctx.Err(); ctxErr != nil {
		return fmt.Errorf("extract: %w", ctxErr)
	}
	return &Error{Kind: ErrCorrupt, Reason: what, Err: err}
}

// drainTrailer reads what is left of the gzip stream after the tar
// end-of-archive marker: only zero padding, bounded, then a clean EOF
// (which also verifies the gzip checksum and size).
func drainTrailer(gz io.Reader) error {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := gz.Read(buf)
		n += int64(k)
		if n > maxTrailerBytes {
			return &Error{Kind: ErrCorrupt, Reason: fmt.Sprintf("more than %d bytes after the end-of-archive marker", maxTrailerBytes)}
		}
		if bytes.IndexFunc(buf[:k], func(r rune) bool { return r != 0 }) >= 0 {
			return &Error{Kind: ErrCorrupt, Reason: "non-zero data after the end-of-archive marker"}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	x.entries++
	if x.entries > x.lim.MaxEntries {
		return &Error{Entry: hdr.Name, Kind: ErrLimit, Reason: fmt.Sprintf("more than %d entries", x.lim.MaxEntries)}
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // pax_global_header: metadata (GitHub puts the commit here), not a file
	}
	if len(hdr.Name) > x.lim.MaxNameBytes {
		return &Error{Entry: hdr.Name, Kind: ErrLimit, Reason: fmt.Sprintf("name longer than %d bytes", x.lim.MaxNameBytes)}
	}
	if len(hdr.Linkname) > x.lim.MaxNameBytes {
		return &Error{Entry: hdr.Name, Kind: ErrLimit, Reason: fmt.Sprintf("link target longer than %d bytes", x.lim.MaxNameBytes)}
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return &Error{Entry: hdr.Name, Kind: ErrInsecurePath, Reason: err.Error()}
	}
	parts := strings.Split(name, "/")
	if len(parts) > x.lim.MaxDepth {
		return &Error{Entry: hdr.Name, Kind: ErrLimit, Reason: fmt.Sprintf("path deeper than %d components", x.lim.MaxDepth)}
	}
	switch {
	case x.top == "":
		x.top = parts[0]
	case parts[0] != x.top:
		return &Error{Entry: hdr.Name, Kind: ErrLayout, Reason: fmt.Sprintf("entries under more than one top-level name (%q and %q)", x.top, parts[0])}
	}
	if k, dup := x.kinds[name]; dup && (hdr.Typeflag != tar.TypeDir || k != kindDir || x.explicitDirs[name]) {
		return &Error{Entry: hdr.Name, Kind: ErrDuplicate, Reason: "path already extracted"}
	}
	if err := x.parents(hdr.Name, parts); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(hdr.Name, name)
	case tar.TypeReg:
		return x.file(tr, hdr, name)
	case tar.TypeSymlink:
		return x.symlink(hdr, name)
	case tar.TypeLink:
		return x.hardlink(hdr, name)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return &Error{Entry: hdr.Name, Kind: ErrSpecialFile, Reason: "device and FIFO entries are not extracted"}
	default:
		return &Error{Entry: hdr.Name, Kind: ErrSpecialFile, Reason: fmt.Sprintf("entry type %q is not supported", hdr.Typeflag)}
	}
}

// created records a path this extraction made.
func (x *extractor) created(name string, kind byte) {
	x.kinds[name] = kind
	if name == x.top {
		x.createdTop = true
	}
}

// cleanName validates a tar name and returns it cleaned, slash-separated,
// without a trailing slash. `a/../b` is fine; anything that is absolute or
// leaves the root is not.
func cleanName(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute path")
	}
	if strings.ContainsRune(name, 0) {
		return "", errors.New("NUL in name")
	}
	c := path.Clean(name)
	if c == "." {
		return "", errors.New("names the extraction root itself")
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("path leaves the extraction root")
	}
	return c, nil
}

// parents creates the missing parent directories of an entry and refuses
// a path whose parent is anything but a directory this extraction made
// (so nothing is ever written through a link).
func (x *extractor) parents(entry string, parts []string) error {
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		switch k, ok := x.kinds[p]; {
		case !ok:
			if err := x.root.Mkdir(p, 0o755); err != nil {
				return &Error{Entry: entry, Kind: ErrDuplicate, Reason: "cannot create parent directory", Err: err}
			}
			x.created(p, kindDir)
		case k == kindSymlink:
			return &Error{Entry: entry, Kind: ErrLink, Reason: fmt.Sprintf("path traverses the symlink %q", p)}
		case k != kindDir:
			return &Error{Entry: entry, Kind: ErrDuplicate, Reason: fmt.Sprintf("parent %q is not a directory", p)}
		}
	}
	return nil
}

func (x *extractor) dir(entry, name string) error {
	if _, ok := x.kinds[name]; !ok {
		if err := x.root.Mkdir(name, 0o755); err != nil {
			return &Error{Entry: entry, Kind: ErrDuplicate, Reason: "cannot create directory", Err: err}
		}
		x.created(name, kindDir)
	}
	x.explicitDirs[name] = true
	return nil
}

func (x *extractor) file(tr *tar.Reader, hdr *tar.Header, name string) error {
	if hdr.Size > x.lim.MaxFileBytes {
		return &Error{Entry: hdr.Name, Kind: ErrLimit, Reason: fmt.Sprintf("file larger than %d bytes", x.lim.MaxFileBytes)}
	}
	if x.total+hdr.Size > x.lim.MaxTotalBytes {
		return &Error{Entry: hdr.Name, Kind: ErrLimit, Reason: fmt.Sprintf("total uncompressed size over %d bytes", x.lim.MaxTotalBytes)}
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return &Error{Entry: hdr.Name, Kind: ErrDuplicate, Reason: "cannot create file", Err: err}
	}
	x.created(name, kindFile)
	n, err := io.Copy(writerOnly{f}, tr)
	x.total += n
	if err == nil && n != hdr.Size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		// The exact mode whatever the umask; never setuid/setgid/sticky.
		if cErr := f.Chmod(mode); cErr != nil {
			err = &writeError{err: cErr}
		}
	}
	if cErr := f.Close(); err == nil && cErr != nil {
		err = &writeError{err: cErr}
	}
	return err
}

// writerOnly hides os.File's ReadFrom so io.Copy reads the tar stream
// through the bounded tar reader and tags write failures.
type writerOnly struct{ f *os.File }

func (w writerOnly) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		return n, &writeError{err: err}
	}
	return n, nil
}

// writeError is a failure of the destination (disk full, permissions):
// an infrastructure error, not a property of the archive.
type writeError struct{ err error }

func (e *writeError) Error() string { return "write extracted file: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (x *extractor) symlink(hdr *tar.Header, name string) error {
	target := hdr.Linkname
	switch {
	case target == "":
		return &Error{Entry: hdr.Name, Kind: ErrLink, Reason: "symlink with an empty target"}
	case strings.HasPrefix(target, "/"):
		return &Error{Entry: hdr.Name, Kind: ErrLink, Reason: fmt.Sprintf("symlink to the absolute path %q", target)}
	case strings.ContainsRune(target, 0):
		return &Error{Entry: hdr.Name, Kind: ErrLink, Reason: "NUL in symlink target"}
	}
	resolved := path.Join(path.Dir(name), target)
	if resolved != x.top && !strings.HasPrefix(resolved, x.top+"/") {
		return &Error{Entry: hdr.Name, Kind: ErrLink, Reason: fmt.Sprintf("symlink target %q leaves the tree", target)}
	}
	if err := x.root.Symlink(target, name); err != nil {
		return &Error{Entry: hdr.Name, Kind: ErrDuplicate, Reason: "cannot create symlink", Err: err}
	}
	x.created(name, kindSymlink)
	x.links[name] = target
	return nil
}

func (x *extractor) hardlink(hdr *tar.Header, name string) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return &Error{Entry: hdr.Name, Kind: ErrLink, Reason: "hardlink target: " + err.Error()}
	}
	if x.kinds[target] != kindFile {
		return &Error{Entry: hdr.Name, Kind: ErrLink, Reason: fmt.Sprintf("hardlink target %q is not a regular file extracted earlier", hdr.Linkname)}
	}
	if err := x.root.Link(target, name); err != nil {
		return &Error{Entry: hdr.Name, Kind: ErrDuplicate, Reason: "cannot create hardlink", Err: err}
	}
	x.created(name, kindFile)
	return nil
}

// escapes resolves the symlink `name` over the finished tree, following
// other symlinks, and says why it leaves the top directory ("" if it
// does not). A component that does not exist ends the walk: what follows
// is resolved lexically (a dangling link cannot be written through later,
// nothing is extracted after this check).
func (x *extractor) escapes(name string) string {
	stack := strings.Split(path.Dir(name), "/")
	rest := strings.Split(x.links[name], "/")
	hops := 1
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) <= 1 {
				return "symlink resolves outside the tree"
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, c)
		target, isLink := x.links[strings.Join(stack, "/")]
		if !isLink {
			continue
		}
		hops++
		if hops > maxLinkHops {
			return "symlink loop or chain too long"
		}
		if strings.HasPrefix(target, "/") {
			return "symlink chain reaches an absolute target"
		}
		stack = stack[:len(stack)-1]
		rest = append(strings.Split(target, "/"), rest...)
	}
	return ""
}

// capReader counts compressed bytes, fails past max and stops when ctx
// is done.
type capReader struct {
	ctx  context.Context
	r    io.Reader
	max  int64
	n    int64
	err  error
	over [1]byte
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if err := c.ctx.Err(); err != nil {
		c.err = fmt.Errorf("extract: %w", err)
		return 0, c.err
	}
	if left := c.max - c.n; int64(len(p)) > left {
		if left == 0 {
			// At the cap: one more byte means over it; EOF means exactly at.
			k, err := io.ReadFull(c.r, c.over[:])
			if k > 0 {
				c.err = &Error{Kind: ErrLimit, Reason: fmt.Sprintf("compressed input larger than %d bytes", c.max)}
				return 0, c.err
			}
			return 0, err
		}
		p = p[:left]
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
