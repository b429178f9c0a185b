package toolchain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestIntegrity(t *testing.T) {
	real := readTarball(t, fakeFile)
	sum256 := sha256.Sum256(real)
	sha256SRI := "sha256-" + base64.StdEncoding.EncodeToString(sum256[:])
	wrong512 := "sha512-" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 64))
	corrupt := bytes.Clone(real)
	corrupt[len(corrupt)/2] ^= 0xff
	for _, tt := range []struct {
		name      string
		tarball   []byte
		configure func(f *fakeRegistry)
		words     string
		err       string // a plain error
		refusal   string
	}{
		{name: "sha512", words: "sha512 integrity from the registry (the registry serves no signatures)"},
		{name: "corrupted tarball", tarball: corrupt, err: "does not match its sha512 integrity"},
		{
			name:      "sha256 only",
			configure: func(f *fakeRegistry) { f.dist["integrity"] = sha256SRI },
			words:     "sha256 integrity from the registry (the registry serves no signatures)",
		},
		{
			name: "several entries, the strongest compared",
			configure: func(f *fakeRegistry) {
				f.dist["integrity"] = "sha256-AAAA " + wrong512 + "?opt " + f.dist["integrity"].(string)
			},
			words: "sha512 integrity from the registry (the registry serves no signatures)",
		},
		{
			name:      "a wrong strongest entry fails whatever a weaker one says",
			configure: func(f *fakeRegistry) { f.dist["integrity"] = sha256SRI + " " + wrong512 },
			err:       "does not match its sha512 integrity",
		},
		{
			name:      "no integrity: the shasum",
			configure: func(f *fakeRegistry) { delete(f.dist, "integrity") },
			words:     "sha1 shasum from the registry, which serves no sha256/sha384/sha512 integrity (the registry serves no signatures)",
		},
		{
			name:      "an unknown algorithm only: the shasum",
			configure: func(f *fakeRegistry) { f.dist["integrity"] = "md5-1B2M2Y8AsgTpgAmY7PhCfg==" },
			words:     "sha1 shasum from the registry, which serves no sha256/sha384/sha512 integrity (the registry serves no signatures)",
		},
		{
			name:      "a wrong shasum",
			configure: func(f *fakeRegistry) { delete(f.dist, "integrity"); f.dist["shasum"] = strings.Repeat("0", 40) },
			err:       "does not match its sha1 shasum",
		},
		{
			name:      "neither",
			configure: func(f *fakeRegistry) { delete(f.dist, "integrity"); delete(f.dist, "shasum") },
			refusal:   "yarn-berry@4.4.1 has no integrity or shasum on the registry",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.tarball, tt.configure)
			if tt.tarball != nil {
				// The packument describes the real release.
				sum := newHasher()
				sum.Write(real)
				f.dist["integrity"] = "sha512-" + base64.StdEncoding.EncodeToString(sum.sums()[algoSHA512])
			}
			c, dir := fakeCache(t, f, Options{})
			tool, err := c.Prepare(t.Context(), fakeRequest)
			switch {
			case tt.err != "":
				wantError(t, err, tt.err)
				notCached(t, dir)
			case tt.refusal != "":
				wantRefusal(t, err, tt.refusal)
				notCached(t, dir)
			case err != nil:
				t.Fatal(err)
			case tool.Integrity != tt.words:
				t.Errorf("Integrity = %q, want %q", tool.Integrity, tt.words)
			}
		})
	}
}

func TestRegistryAnswers(t *testing.T) {
	for _, tt := range []struct {
		name      string
		configure func(f *fakeRegistry)
		req       validation.ToolRequest
		err       string
		refusal   string
	}{
		{name: "404", configure: func(f *fakeRegistry) { f.status = http.StatusNotFound },
			refusal: "yarn-berry@4.4.1 is not on the registry http://127.0.0.1:"},
		{name: "404 of a major", configure: func(f *fakeRegistry) { f.status = http.StatusNotFound },
			req: validation.ToolRequest{Manager: validation.YarnBerry, Version: "4"}, refusal: "yarn-berry@4 is not on the registry"},
		{name: "version absent", req: validation.ToolRequest{Manager: validation.YarnBerry, Version: "4.4.2"},
			refusal: "yarn-berry@4.4.2 is not on the registry"},
		{name: "no stable release of the major", req: validation.ToolRequest{Manager: validation.YarnBerry, Version: "3"},
			refusal: "it has no stable 3.x release of @yarnpkg/cli-dist"},
		{name: "500", configure: func(f *fakeRegistry) { f.status = http.StatusInternalServerError }, err: "500 Internal Server Error"},
		{name: "503", configure: func(f *fakeRegistry) { f.status = http.StatusServiceUnavailable }, err: "503 Service Unavailable"},
		{name: "bad JSON", configure: func(f *fakeRegistry) { f.body = []byte(`{"versions":`) }, err: "unexpected end of JSON"},
		{name: "latest not a version", configure: func(f *fakeRegistry) {
			f.body = []byte(`{"dist-tags":{"latest":"../../x"},"versions":{}}`)
		}, req: validation.ToolRequest{Manager: validation.YarnBerry}, err: `dist-tags.latest "../../x" is not an exact version`},
		{name: "a version describing another", configure: func(f *fakeRegistry) { f.manifest["version"] = "4.4.2" },
			err: "version 4.4.1 describes @yarnpkg/cli-dist@4.4.2"},
		{name: "tarball off the registry", configure: func(f *fakeRegistry) { f.dist["tarball"] = "http://127.0.0.2:1/x.tgz" },
			err: `the tarball URL "http://127.0.0.2:1/x.tgz" is not on the registry`},
		{name: "tarball not http", configure: func(f *fakeRegistry) { f.dist["tarball"] = "file:///etc/passwd" },
			err: "is not on the registry"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, nil, tt.configure)
			c, dir := fakeCache(t, f, Options{})
			req := tt.req
			if req.Manager == "" {
				req = fakeRequest
			}
			_, err := c.Prepare(t.Context(), req)
			if tt.refusal != "" {
				wantRefusal(t, err, tt.refusal)
			} else {
				wantError(t, err, tt.err)
			}
			notCached(t, dir)
		})
	}
}

// The tarball's own package.json must be the release's.
func TestTarballManifest(t *testing.T) {
	entries := readEntries(t, readTarball(t, fakeFile))
	f := newFake(t, withManifest(t, entries, map[string]any{"name": "evil", "version": fakeVersion, "bin": map[string]string{"yarn": "bin/yarn.js"}}), nil)
	c, dir := fakeCache(t, f, Options{})
	_, err := c.Prepare(t.Context(), fakeRequest)
	wantError(t, err, "the tarball's package.json is evil@4.4.1")
	notCached(t, dir)
}

// Bin names and targets come from the tarball; none may leave pkg/.
func TestBins(t *testing.T) {
	entries := readEntries(t, readTarball(t, fakeFile))
	for _, tt := range []struct {
		name string
		bin  any
		err  string
	}{
		{"target escapes", map[string]string{"yarn": "../../../../etc/passwd"}, "leaves the package"},
		{"target escapes after a dir", map[string]string{"yarn": "bin/../../x"}, "leaves the package"},
		{"absolute target", map[string]string{"yarn": "/etc/passwd"}, "leaves the package"},
		{"the package itself", map[string]string{"yarn": "."}, "leaves the package"},
		{"name with a slash", map[string]string{"yarn": "bin/yarn.js", "../x": "bin/yarn.js"}, "not a plain file name"},
		{"name ..", map[string]string{"yarn": "bin/yarn.js", "..": "bin/yarn.js"}, "not a plain file name"},
		{"name with a newline", map[string]string{"yarn": "bin/yarn.js", "a\nb": "bin/yarn.js"}, "not a plain file name"},
		{"target missing", map[string]string{"yarn": "bin/missing.js"}, "no such file"},
		{"target a directory", map[string]string{"yarn": "bin"}, "is not a regular file"},
		{"no yarn command", map[string]string{"yarnpkg": "bin/yarn.js"}, "no yarn command"},
		{"a string names the package's base name", "bin/yarn.js", "no yarn command"},
		{"not a string or object", []int{1}, "neither a string nor an object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, withManifest(t, entries, map[string]any{"name": fakePkg, "version": fakeVersion, "bin": tt.bin}), nil)
			c, dir := fakeCache(t, f, Options{})
			_, err := c.Prepare(t.Context(), fakeRequest)
			wantError(t, err, tt.err)
			notCached(t, dir)
		})
	}
}

// Every limit: exactly at it passes, one byte over fails.
func TestLimits(t *testing.T) {
	real := readTarball(t, fakeFile)
	entries := readEntries(t, real)
	packumentLen := int64(len(newFake(t, nil, nil).packument()))
	unpacked := unpackedBytes(t, real)

	// A package.json of exactly n bytes.
	manifestOf := func(n int) []byte {
		m := map[string]any{"name": fakePkg, "version": fakeVersion, "bin": map[string]string{"yarn": "bin/yarn.js"}, "pad": ""}
		b, _ := json.Marshal(m)
		m["pad"] = strings.Repeat("x", n-len(b))
		b, _ = json.Marshal(m)
		if len(b) != n {
			t.Fatalf("package.json of %d bytes, want %d", len(b), n)
		}
		return b
	}
	for _, tt := range []struct {
		name    string
		tarball []byte
		opts    Options
		err     string // "" passes
	}{
		{name: "tarball at the limit", opts: Options{MaxTarballBytes: int64(len(real))}},
		{name: "tarball over the limit", opts: Options{MaxTarballBytes: int64(len(real)) - 1}, err: "more than the limit"},
		{name: "packument at the limit", opts: Options{MaxPackumentBytes: packumentLen}},
		{name: "packument over the limit", opts: Options{MaxPackumentBytes: packumentLen - 1}, err: "more than the limit"},
		{name: "unpacked at the limit", opts: Options{MaxUnpackedBytes: unpacked}},
		{name: "unpacked over the limit", opts: Options{MaxUnpackedBytes: unpacked - 1}, err: "limit exceeded"},
		{name: "package.json at the limit", tarball: pack(t, entries, manifestOf(MaxManifestBytes))},
		{name: "package.json over the limit", tarball: pack(t, entries, manifestOf(MaxManifestBytes+1)), err: "package.json is more than 1048576 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.tarball, nil)
			c, dir := fakeCache(t, f, tt.opts)
			tool, err := c.Prepare(t.Context(), fakeRequest)
			if tt.err != "" {
				wantError(t, err, tt.err)
				notCached(t, dir)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tool.Version != fakeVersion {
				t.Errorf("Version = %q", tool.Version)
			}
		})
	}
	t.Run("version length", func(t *testing.T) {
		f := newFake(t, nil, nil)
		c, _ := fakeCache(t, f, Options{})
		at := "4.4.1-" + strings.Repeat("a", MaxVersionBytes-len("4.4.1-"))
		_, err := c.Prepare(t.Context(), validation.ToolRequest{Manager: validation.YarnBerry, Version: at})
		wantRefusal(t, err, "yarn-berry@"+at+" is not on the registry") // valid, so looked up
		_, err = c.Prepare(t.Context(), validation.ToolRequest{Manager: validation.YarnBerry, Version: at + "a"})
		wantRefusal(t, err, "is not an exact version")
		if n := f.packuments.Load(); n != 1 {
			t.Errorf("%d packument requests, want 1: an invalid version is never sent", n)
		}
	})
}

// Concurrent Prepares of one version download it once, in one process
// (singleflight) and across Caches sharing a directory (the flock).
func TestConcurrentPrepare(t *testing.T) {
	for _, tt := range []struct {
		name    string
		caches  int
		version string
	}{
		{"one cache", 1, ""},
		{"two caches sharing a dir", 2, fakeVersion},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Both packuments are answered only once both were asked
			// for, so the two Prepares overlap.
			var arrived sync.WaitGroup
			arrived.Add(2)
			f := newFake(t, nil, func(f *fakeRegistry) {
				f.onPackument = func(r *http.Request) {
					arrived.Done()
					done := make(chan struct{})
					go func() { arrived.Wait(); close(done) }()
					select {
					case <-done:
					case <-r.Context().Done():
					}
				}
			})
			dir := t.TempDir()
			var caches []*Cache
			for i := range 2 {
				if i < tt.caches {
					c, _ := fakeCache(t, f, Options{Dir: dir})
					caches = append(caches, c)
				} else {
					caches = append(caches, caches[0])
				}
			}
			var wg sync.WaitGroup
			tools := make([]validation.Tool, 2)
			errs := make([]error, 2)
			for i, c := range caches {
				wg.Go(func() {
					tools[i], errs[i] = c.Prepare(t.Context(), validation.ToolRequest{Manager: validation.YarnBerry, Version: tt.version})
				})
			}
			wg.Wait()
			for i := range errs {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
			}
			if diff := cmp.Diff(tools[0], tools[1]); diff != "" {
				t.Errorf("the two Prepares differ:\n%s", diff)
			}
			if n := f.tarballs.Load(); n != 1 {
				t.Errorf("%d tarball downloads, want 1", n)
			}
		})
	}
}

// A prepared version is reused without the network, its hash still
// checked; a broken marker means a rebuild; each download logs one line.
func TestCacheReuse(t *testing.T) {
	f := newFake(t, nil, nil)
	var logs bytes.Buffer
	c, dir := fakeCache(t, f, Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx := t.Context()
	first, err := c.Prepare(ctx, fakeRequest)
	if err != nil {
		t.Fatal(err)
	}
	checkShareable(t, first.Dir)
	links := map[string]string{}
	for _, name := range []string{"yarn", "yarnpkg"} {
		target, err := os.Readlink(filepath.Join(first.Dir, "bin", name))
		if err != nil {
			t.Fatal(err)
		}
		links[name] = target
	}
	if diff := cmp.Diff(map[string]string{"yarn": "../pkg/bin/yarn.js", "yarnpkg": "../pkg/bin/yarn.js"}, links); diff != "" {
		t.Errorf("bin links (-want +got):\n%s", diff)
	}

	requests := f.requests.Load()
	again, err := c.Prepare(ctx, fakeRequest)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the cached Tool differs:\n%s", diff)
	}
	_, err = c.Prepare(ctx, validation.ToolRequest{Manager: validation.YarnBerry, Version: fakeVersion, Hash: "sha1." + strings.Repeat("0", 40)})
	wantRefusal(t, err, "its bin/yarn.js does not match the packageManager hash sha1.0000")
	if n := f.requests.Load() - requests; n != 0 {
		t.Errorf("preparing a cached version made %d requests, want 0", n)
	}

	if err := os.WriteFile(filepath.Join(first.Dir, markerFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(ctx, fakeRequest); err != nil {
		t.Fatal(err)
	}
	if n := f.tarballs.Load(); n != 2 {
		t.Errorf("%d tarball downloads, want 2: a broken marker is rebuilt", n)
	}

	var lines []map[string]any
	for line := range bytes.Lines(logs.Bytes()) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "time")
		delete(m, "duration_ms")
		lines = append(lines, m)
	}
	want := map[string]any{"level": "INFO", "msg": "package manager downloaded", "manager": "yarn-berry",
		"version": fakeVersion, "bytes": float64(len(f.tarball))}
	if diff := cmp.Diff([]map[string]any{want, want}, lines); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "yarn-berry", fakeVersion)); err != nil {
		t.Error(err)
	}
}

// New removes the temp dirs of builds no process is running, and keeps
// those of a build under way (its lock held).
func TestNewRemovesStaleTemp(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "pnpm")
	stale := filepath.Join(mdir, ".tmp-10.14.0-123")
	busy := filepath.Join(mdir, ".tmp-9.15.9-456")
	odd := filepath.Join(mdir, ".tmp-garbage")
	kept := filepath.Join(mdir, "10.14.0")
	for _, d := range []string{stale, busy, odd, kept} {
		if err := os.MkdirAll(filepath.Join(d, "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := tryLock(filepath.Join(mdir, "9.15.9"+lockSuffix))
	if err != nil || l == nil {
		t.Fatalf("lock: %v, %v", l, err)
	}
	defer l.unlock()
	if _, err := New(Options{Dir: dir, Registry: "http://127.0.0.1:1/"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir    string
		exists bool
	}{{stale, false}, {odd, false}, {busy, true}, {kept, true}} {
		_, err := os.Stat(tt.dir)
		if exists := err == nil; exists != tt.exists {
			t.Errorf("%s: exists %v, want %v (%v)", filepath.Base(tt.dir), exists, tt.exists, err)
		}
	}
}

func TestNewOptions(t *testing.T) {
	_, err := New(Options{Dir: "relative", Registry: "ftp://host/", MaxTarballBytes: -1, MaxPackumentBytes: -1, MaxUnpackedBytes: -1})
	if err == nil {
		t.Fatal("New accepted bad options")
	}
	for _, want := range []string{"must be an absolute path", "must be an http or https URL", "MaxTarballBytes -1", "MaxPackumentBytes -1", "MaxUnpackedBytes -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to say %q", err, want)
		}
	}
	for _, reg := range []string{"", "https://user:pw@host/", "https://host/?q=1", "http://", "://x"} {
		if _, err := New(Options{Dir: t.TempDir(), Registry: reg}); err == nil {
			t.Errorf("New accepted the registry %q", reg)
		}
	}
	dir := filepath.Join(t.TempDir(), "a", "toolchains")
	c, err := New(Options{Dir: dir, Registry: "https://registry.npmjs.org"})
	if err != nil {
		t.Fatal(err)
	}
	if c.registry != "https://registry.npmjs.org/" {
		t.Errorf("registry %q", c.registry)
	}
	if c.maxTarball != DefaultMaxTarballBytes || c.maxPackument != DefaultMaxPackumentBytes || c.maxUnpacked != DefaultMaxUnpackedBytes {
		t.Errorf("limits %d %d %d, want the defaults", c.maxTarball, c.maxPackument, c.maxUnpacked)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("Dir: %v %v, want created 0755", fi, err)
	}
	if _, err := c.Prepare(t.Context(), validation.ToolRequest{Manager: validation.NPM}); err == nil || !strings.Contains(err.Error(), "the worker's own node's npm") {
		t.Errorf("Prepare(npm): %v", err)
	}
	_, err = c.Prepare(t.Context(), validation.ToolRequest{Manager: validation.PNPM, Version: "10.14.0", Hash: "md5.00"})
	wantRefusal(t, err, `the packageManager hash "md5.00" is not`)
}

// A Prepare waiting for another process's build ends with its ctx.
func TestPrepareWaitsForTheLock(t *testing.T) {
	asked := make(chan struct{}, 1)
	f := newFake(t, nil, func(f *fakeRegistry) {
		f.onPackument = func(*http.Request) { asked <- struct{}{} }
	})
	c, dir := fakeCache(t, f, Options{})
	mdir := filepath.Join(dir, string(validation.YarnBerry))
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := tryLock(filepath.Join(mdir, fakeVersion+lockSuffix))
	if err != nil || l == nil {
		t.Fatalf("lock: %v, %v", l, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.Prepare(ctx, fakeRequest)
		done <- err
	}()
	<-asked // resolved; next it takes the lock
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Prepare: %v, want context.Canceled", err)
	}
	if err := l.unlock(); err != nil {
		t.Fatal(err)
	}
	if n := f.tarballs.Load(); n != 0 {
		t.Errorf("%d tarball downloads while another held the lock", n)
	}
	if _, err := c.Prepare(t.Context(), fakeRequest); err != nil {
		t.Fatal(err)
	}
}
