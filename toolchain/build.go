package toolchain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gilf-review/gilf/archive"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// build downloads, checks and unpacks r into a temporary directory and
// renames it into place. The caller holds the version's lock.
func (c *Cache) build(ctx context.Context, t tool, r release) (m marker, err error) {
	name := spec(t.manager, r.Version)
	sigWords, err := c.checkSignatures(ctx, r)
	if err != nil {
		return marker{}, err
	}
	tmp, err := os.MkdirTemp(c.managerDir(t), tmpPrefix+r.Version+"-*")
	if err != nil {
		return marker{}, fmt.Errorf("temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(tmp); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove temp dir: %w", rerr))
			}
		}
	}()

	start := time.Now()
	tarball := filepath.Join(tmp, "tarball.tgz")
	n, sums, err := c.download(ctx, r, tarball)
	if err != nil {
		return marker{}, fmt.Errorf("%s: %w", name, err)
	}
	words, err := checkIntegrity(name, r.Dist.Integrity, r.Dist.Shasum, sums)
	if err != nil {
		return marker{}, err
	}
	if err := c.unpack(ctx, tarball, tmp); err != nil {
		return marker{}, fmt.Errorf("%s: %w", name, err)
	}
	m = marker{
		Format:       markerFormat,
		Manager:      t.manager,
		Package:      t.pkg,
		Version:      r.Version,
		Integrity:    words + sigWords,
		TarballBytes: n,
		Tarball:      toHex(sums),
	}
	if err := c.install(t, r, tmp, &m); err != nil {
		return marker{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := shareable(tmp); err != nil {
		return marker{}, fmt.Errorf("%s: permissions: %w", name, err)
	}
	if err := writeMarker(tmp, m); err != nil {
		return marker{}, err
	}
	dst := c.entryDir(t, r.Version)
	// An incomplete or outdated entry is replaced; the lock keeps every
	// other builder out.
	if err := os.RemoveAll(dst); err != nil {
		return marker{}, fmt.Errorf("remove the old entry: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return marker{}, fmt.Errorf("%s: move into place: %w", name, err)
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "package manager downloaded",
		slog.String(logkey.Manager, string(t.manager)), slog.String(logkey.Version, r.Version),
		slog.Int64("bytes", n), slog.Int64(logkey.DurationMS, time.Since(start).Milliseconds()))
	return m, nil
}

// unpack extracts the checked tarball into tmp/pkg and removes it.
func (c *Cache) unpack(ctx context.Context, tarball, tmp string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return fmt.Errorf("open tarball: %w", err)
	}
	unpacked := filepath.Join(tmp, "unpack")
	root, err := archive.Extract(ctx, f, unpacked, archive.Limits{
		MaxCompressedBytes: c.maxTarball,
		MaxTotalBytes:      c.maxUnpacked,
		MaxFileBytes:       c.maxUnpacked,
	})
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close tarball: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if err := os.Rename(root, filepath.Join(tmp, pkgDir)); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if err := errors.Join(os.Remove(unpacked), os.Remove(tarball)); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	return nil
}

// install checks the unpacked package.json against r, links its commands
// into tmp/bin and records them and the main file's digests in m.
func (c *Cache) install(t tool, r release, tmp string, m *marker) error {
	root, err := os.OpenRoot(filepath.Join(tmp, pkgDir))
	if err != nil {
		return fmt.Errorf("open package: %w", err)
	}
	defer root.Close()
	man, err := readManifest(root)
	if err != nil {
		return err
	}
	if man.Name != t.pkg || man.Version != r.Version {
		return fmt.Errorf("the tarball's package.json is %s@%s", truncate(man.Name, 100), truncate(man.Version, 100))
	}
	bins := map[string]string{"bun": "bin/bun", "bunx": "bin/bun"}
	if t.manager != validation.Bun {
		// bun's package carries a native binary and no usable bin field.
		if bins, err = parseBins(t.pkg, man.Bin); err != nil {
			return err
		}
	}
	main, ok := bins[t.command]
	if !ok {
		return fmt.Errorf("the package has no %s command in its bin field", t.command)
	}
	if err := linkBins(root, tmp, bins); err != nil {
		return err
	}
	if m.MainDigests, err = hashFile(root, main); err != nil {
		return fmt.Errorf("hash %s: %w", main, err)
	}
	m.Main, m.Bins = main, bins
	return nil
}
