package cfsandbox

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

// packArchive packs dir into a temp file and returns it rewound with its
// size. A repository over a pack limit, or whose archive is over maxBytes,
// is refused (archive_too_large): nothing was started.
func packArchive(ctx context.Context, dir, tempRoot string, maxBytes int64) (_ *os.File, _ int64, err error) {
	f, err := os.CreateTemp(tempRoot, "gilf-cfsandbox-*.tar.gz")
	if err != nil {
		return nil, 0, fmt.Errorf("cf-sandbox: archive: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close(), os.Remove(f.Name()))
		}
	}()
	cw := &ceilingWriter{w: f, limit: maxBytes}
	if err := archive.Pack(ctx, dir, cw); err != nil {
		var ple *archive.PackLimitError
		switch {
		case errors.As(err, &ple):
			return nil, 0, validation.Refuse(validation.CodeArchiveTooLarge, "the repository exceeds the %s limit of %d for packing (at %q)", ple.Limit, ple.Max, ple.Path)
		case errors.Is(err, errArchiveTooLarge):
			return nil, 0, validation.Refuse(validation.CodeArchiveTooLarge, "the repository's archive exceeds the %d-byte upload limit of managed-cf-sandbox", maxBytes)
		}
		return nil, 0, fmt.Errorf("cf-sandbox: pack %s: %w", dir, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("cf-sandbox: archive: %w", err)
	}
	return f, cw.n, nil
}

// parsePlatform reads the setup script's key=value lines.
func parsePlatform(s string) validation.Platform {
	var p validation.Platform
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v = cleanMessage(v)
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
