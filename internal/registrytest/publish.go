package registrytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
)

// publishWorkers is how many packages publish at once; the versions of one
// package publish one after another, lowest first, so "latest" is the
// highest.
const publishWorkers = 4

// maxManifest bounds a package.json read from a tarball.
const maxManifest = 4 << 20

// publishAll publishes every spec's tarball with npm's publish request.
func publishAll(ctx context.Context, client *http.Client, base string, specs []spec, tarballs map[spec]string) error {
	var names []string
	byName := map[string][]spec{}
	for _, s := range specs {
		if _, ok := byName[s.name]; !ok {
			names = append(names, s.name)
		}
		byName[s.name] = append(byName[s.name], s)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(publishWorkers)
	for _, name := range names {
		versions := byName[name]
		slices.SortFunc(versions, func(a, b spec) int { return compareVersions(a.version, b.version) })
		g.Go(func() error {
			for _, s := range versions {
				if err := publish(ctx, client, base, s, tarballs[s]); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// publish sends what `npm publish` sends: PUT /<name> with the version's
// manifest, its dist and the tarball as a base64 attachment.
func publish(ctx context.Context, client *http.Client, base string, s spec, tarball string) error {
	data, err := os.ReadFile(tarball)
	if err != nil {
		return fmt.Errorf("read tarball: %w", err)
	}
	body, err := publishDoc(base, s, data)
	if err != nil {
		return fmt.Errorf("%s: %w", tarball, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+s.pathName(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("publish request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read publish answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("put: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// publishDoc builds the body of npm's publish request for one version.
func publishDoc(base string, s spec, tarball []byte) ([]byte, error) {
	manifest, err := readManifest(tarball)
	if err != nil {
		return nil, err
	}
	if manifest["name"] != s.name || manifest["version"] != s.version {
		return nil, fmt.Errorf("its package.json is %v@%v, not %s", manifest["name"], manifest["version"], s)
	}
	sum1 := sha1.Sum(tarball)
	sum512 := sha512.Sum512(tarball)
	manifest["_id"] = s.String()
	manifest["dist"] = map[string]any{
		"shasum":    hex.EncodeToString(sum1[:]),
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
		"tarball":   base + s.name + "/-/" + s.tarballFile(),
	}
	doc := map[string]any{
		"_id":       s.name,
		"name":      s.name,
		"dist-tags": map[string]string{"latest": s.version},
		"versions":  map[string]any{s.version: manifest},
		"_attachments": map[string]any{
			s.name + "-" + s.version + ".tgz": map[string]any{
				"content_type": "application/octet-stream",
				"data":         base64.StdEncoding.EncodeToString(tarball),
				"length":       len(tarball),
			},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode publish document: %w", err)
	}
	return b, nil
}

// readManifest returns the package.json at the top of a package tarball,
// in its one top directory (package/ as npm packs, though old tarballs
// name it otherwise).
func readManifest(tarball []byte) (map[string]any, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tarball))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no package.json in the tarball")
		}
		if err != nil {
			return nil, fmt.Errorf("untar: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag != tar.TypeReg || path.Base(name) != "package.json" || strings.Count(name, "/") != 1 {
			continue
		}
		dec := json.NewDecoder(io.LimitReader(tr, maxManifest))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("parse %s: %w", h.Name, err)
		}
		return m, nil
	}
}

// checkTarballURL checks that the served packument of s points its tarball
// at base, where clients reach the registry.
func checkTarballURL(ctx context.Context, client *http.Client, base string, s spec) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+s.pathName(), nil)
	if err != nil {
		return fmt.Errorf("packument request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get packument of %s: %w", s.name, err)
	}
	var doc struct {
		Versions map[string]struct {
			Dist struct{ Tarball string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read packument of %s (%s): %w", s.name, resp.Status, err)
	}
	got := doc.Versions[s.version].Dist.Tarball
	if want := base + s.name + "/-/" + s.tarballFile(); got != want {
		return fmt.Errorf("verdaccio serves %s's tarball at %q, want %q", s, got, want)
	}
	return nil
}
