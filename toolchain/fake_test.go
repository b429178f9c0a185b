package toolchain

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// The fake registry serves yarn berry's real release, the smallest of
// the cached tarballs.
const (
	fakePkg     = "@yarnpkg/cli-dist"
	fakeVersion = "4.4.1"
	fakeFile    = "yarnpkg-cli-dist-4.4.1.tgz"
	fakeKeyID   = "SHA256:test-key"
)

// fakeRegistry speaks the npm registry's wire format for one version of
// one package: its abbreviated packument, its tarball and the registry's
// signing keys. It is configured before it starts and never changes.
type fakeRegistry struct {
	URL string

	tarball  []byte         // the bytes served
	dist     map[string]any // the version's dist; the server sets its tarball URL
	manifest map[string]any // the version's other fields
	keys     []byte         // /-/npm/v1/keys; nil answers 404
	status   int            // the packument's status; 0 is 200 with the packument
	body     []byte         // the packument served instead of the built one
	// onPackument runs before each packument is answered.
	onPackument func(*http.Request)

	packuments, tarballs, requests atomic.Int64
}

// newFake serves tarball (the real release unless nil), with a sha512
// integrity and a shasum of it, after configure has had its say.
func newFake(t *testing.T, tarball []byte, configure func(*fakeRegistry)) *fakeRegistry {
	t.Helper()
	if tarball == nil {
		tarball = readTarball(t, fakeFile)
	}
	sum512, sum1 := sha512.Sum512(tarball), sha1.Sum(tarball)
	f := &fakeRegistry{
		tarball: tarball,
		dist: map[string]any{
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
			"shasum":    hex.EncodeToString(sum1[:]),
		},
		manifest: map[string]any{"name": fakePkg, "version": fakeVersion},
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.URL = "http://" + srv.Listener.Addr().String() + "/"
	if _, ok := f.dist["tarball"]; !ok {
		f.dist["tarball"] = f.URL + fakePkg + "/-/cli-dist-" + fakeVersion + ".tgz"
	}
	if configure != nil {
		configure(f)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return f
}

// packument is the abbreviated packument the fake serves.
func (f *fakeRegistry) packument() []byte {
	if f.body != nil {
		return f.body
	}
	v := map[string]any{"dist": f.dist}
	for k, x := range f.manifest {
		v[k] = x
	}
	b, err := json.Marshal(map[string]any{
		"name":      fakePkg,
		"modified":  "2024-08-01T00:00:00.000Z",
		"dist-tags": map[string]string{"latest": fakeVersion},
		"versions":  map[string]any{fakeVersion: v},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if r.Method != http.MethodGet {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.EscapedPath() {
	case "/" + strings.Replace(fakePkg, "/", "%2f", 1):
		if r.Header.Get("Accept") != acceptPackument {
			http.Error(w, "not npm's Accept", http.StatusNotAcceptable)
			return
		}
		f.packuments.Add(1)
		if f.onPackument != nil {
			f.onPackument(r)
		}
		if f.status != 0 {
			http.Error(w, http.StatusText(f.status), f.status)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
		w.Write(f.packument())
	case "/" + fakePkg + "/-/cli-dist-" + fakeVersion + ".tgz":
		f.tarballs.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(f.tarball)
	case "/-/npm/v1/keys":
		if f.keys == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(f.keys)
	default:
		http.NotFound(w, r)
	}
}

// fakeCache is a Cache of f in a fresh directory.
func fakeCache(t *testing.T, f *fakeRegistry, opts Options) (*Cache, string) {
	t.Helper()
	client, _ := countingClient(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Registry, opts.Client = f.URL, client
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, opts.Dir
}

var fakeRequest = validation.ToolRequest{Manager: validation.YarnBerry, Version: fakeVersion}

// notCached checks that a failed Prepare left no entry and no temp dir.
func notCached(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, string(validation.YarnBerry)))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != fakeVersion+lockSuffix {
			t.Errorf("a failed Prepare left %s", e.Name())
		}
	}
}

// wantError checks that err is an error and not a refusal.
func wantError(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Prepare succeeded, want an error %q", substr)
	}
	if r, ok := errors.AsType[*validation.Refusal](err); ok {
		t.Fatalf("got the refusal %v, want an error %q", r, substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("got %v, want an error %q", err, substr)
	}
}

// wantRefusal checks that err is a refusal with the code.
func wantRefusal(t *testing.T, err error, substr string) {
	t.Helper()
	r, ok := errors.AsType[*validation.Refusal](err)
	if !ok || r.Code != validation.CodePackageManagerUnavailable || !strings.Contains(r.Msg, substr) {
		t.Fatalf("got %v, want a refusal (%s) %q", err, validation.CodePackageManagerUnavailable, substr)
	}
}

// signer is a registry signing key made for the test.
type signer struct {
	key *ecdsa.PrivateKey
	id  string
}

func newSigner(t *testing.T, id string) signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{key: k, id: id}
}

// sign signs msg as npm does: ECDSA P-256 over its SHA-256, ASN.1 DER.
func (s signer) sign(t *testing.T, msg string) map[string]any {
	t.Helper()
	sum := sha256.Sum256([]byte(msg))
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"keyid": s.id, "sig": base64.StdEncoding.EncodeToString(sig)}
}

// keysBody is /-/npm/v1/keys listing the signers; expires is null or an
// RFC 3339 time.
func keysBody(t *testing.T, expires any, signers ...signer) []byte {
	t.Helper()
	var keys []map[string]any
	for _, s := range signers {
		der, err := x509.MarshalPKIXPublicKey(&s.key.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, map[string]any{
			"expires": expires, "keyid": s.id, "keytype": keyScheme, "scheme": keyScheme,
			"key": base64.StdEncoding.EncodeToString(der),
		})
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tarEntry is one entry of a tarball, read into memory.
type tarEntry struct {
	h    *tar.Header
	data []byte
}

// readEntries reads every entry of a .tgz.
func readEntries(t testing.TB, tgz []byte) []tarEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	var entries []tarEntry
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, tarEntry{h: h, data: data})
	}
}

// pack writes entries as a .tgz with pkgJSON as package/package.json,
// uncompressed inside the gzip stream: cheap to write, as valid to read.
func pack(t testing.TB, entries []tarEntry, pkgJSON []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h, data := *e.h, e.data
		if h.Name == "package/package.json" {
			data = pkgJSON
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// withManifest is the release of entries with its package.json
// replaced by m.
func withManifest(t testing.TB, entries []tarEntry, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return pack(t, entries, b)
}

// unpackedBytes is the sum of a tarball's regular files' sizes.
func unpackedBytes(t testing.TB, tgz []byte) int64 {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			n += h.Size
		}
	}
}
