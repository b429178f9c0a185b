package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/validation"
)

// Pack says what PackArchive packs, where, and how its errors name the
// executor.
type Pack struct {
	Dir      string // the checkout
	TempRoot string // where the temp file goes ("" for os.TempDir())
	// Pattern is the temp file's name pattern (os.CreateTemp).
	Pattern string
	// MaxBytes bounds the compressed archive.
	MaxBytes int64
	// Prefix starts error messages ("e2b"); Executor names the executor
	// in a refusal ("managed-e2b").
	Prefix   string
	Executor string
}

// errArchiveTooLarge stops packing once the archive passes its ceiling.
var errArchiveTooLarge = errors.New("archive too large")

type ceilingWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *ceilingWriter) Write(b []byte) (int, error) {
	if c.n+int64(len(b)) > c.limit {
		return 0, errArchiveTooLarge
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// PackArchive packs p.Dir into a temp file and returns it rewound with
// its size; the caller closes and removes it. A repository over a pack
// limit, or whose archive is over p.MaxBytes, is refused
// (archive_too_large): nothing was started.
func PackArchive(ctx context.Context, p Pack) (_ *os.File, _ int64, err error) {
	f, err := os.CreateTemp(p.TempRoot, p.Pattern)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: archive: %w", p.Prefix, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close(), os.Remove(f.Name()))
		}
	}()
	cw := &ceilingWriter{w: f, limit: p.MaxBytes}
	if err := archive.Pack(ctx, p.Dir, cw); err != nil {
		var ple *archive.PackLimitError
		switch {
		case errors.As(err, &ple):
			return nil, 0, validation.Refuse(validation.CodeArchiveTooLarge, "the repository exceeds the %s limit of %d for packing (at %q)", ple.Limit, ple.Max, ple.Path)
		case errors.Is(err, errArchiveTooLarge):
			return nil, 0, validation.Refuse(validation.CodeArchiveTooLarge, "the repository's archive exceeds the %d-byte upload limit of %s", p.MaxBytes, p.Executor)
		}
		return nil, 0, fmt.Errorf("%s: pack %s: %w", p.Prefix, p.Dir, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("%s: archive: %w", p.Prefix, err)
	}
	return f, cw.n, nil
}

// ParsePlatform reads the key=value lines (os, arch, kernel, node) a
// setup script printed; values are cleaned (CleanMessage), the machine
// named as Go names it.
func ParsePlatform(s string) validation.Platform {
	var p validation.Platform
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v = CleanMessage(v)
		switch k {
		case "os":
			p.OS = strings.ToLower(v)
		case "arch":
			p.Arch = goArch(v)
		case "kernel":
			p.Kernel = v
		case "node":
			p.Node = v
		}
	}
	return p
}

// goArch names a machine (uname -m) as Go does, as the local executor
// reports it.
func goArch(m string) string {
	switch m {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i686":
		return "386"
	}
	return m
}

// DiscardArchive closes and removes an archive PackArchive made; prefix
// starts its errors.
func DiscardArchive(f *os.File, prefix string) error {
	var errs []error
	if err := f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("%s: close archive: %w", prefix, err))
	}
	if err := os.Remove(f.Name()); err != nil {
		errs = append(errs, fmt.Errorf("%s: remove archive: %w", prefix, err))
	}
	return errors.Join(errs...)
}
