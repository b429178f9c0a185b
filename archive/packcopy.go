package archive

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// CopyTree copies src into dst with exactly the rules of PackWith: the
// same entries kept and skipped, the same limits, the same normalised
// modes, nothing read outside src and nothing written outside dst. dst
// must not exist; its parent must. It is created with mode 0700, and the
// directories inside it 0755. opts.Root is ignored.
//
// On error dst may hold a partial copy; the caller removes it.
func CopyTree(ctx context.Context, src, dst string, opts PackOptions) (PackStats, error) {
	var stats PackStats
	opts.Root = ""
	opts, err := opts.withDefaults()
	if err != nil {
		return stats, err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return stats, fmt.Errorf("copy tree: %w", err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return stats, fmt.Errorf("copy tree: open %s: %w", dst, err)
	}
	defer root.Close()
	if err := walkTree(ctx, src, opts, &stats, dirSink{root: root}); err != nil {
		return stats, err
	}
	return stats, nil
}

// dirSink writes the walked entries below an os.Root.
type dirSink struct {
	root *os.Root
}

func (d dirSink) dir(name string) error {
	if name == "." {
		return nil
	}
	if err := d.root.Mkdir(name, 0o755); err != nil {
		return fmt.Errorf("copy tree: %w", err)
	}
	return nil
}

func (d dirSink) file(name string, mode fs.FileMode, size int64, r io.Reader) error {
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("copy tree: %w", err)
	}
	n, err := io.CopyN(f, r, size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy tree: copy %s (%d of %d bytes): %w", name, n, size, err)
	}
	return nil
}

func (d dirSink) symlink(name, target string) error {
	if err := d.root.Symlink(target, name); err != nil {
		return fmt.Errorf("copy tree: %w", err)
	}
	return nil
}
