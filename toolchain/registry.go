package toolchain

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// acceptPackument asks for npm's abbreviated packument, the full one as a
// fallback, as npm does.
const acceptPackument = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8"

// keysPath is where an npm registry serves the public keys it signs with.
const keysPath = "-/npm/v1/keys"

// keyScheme is the one signing scheme npm uses and gilf verifies.
const keyScheme = "ecdsa-sha2-nistp256"

// release is one version of a package as the registry describes it.
type release struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Dist    struct {
		Tarball    string      `json:"tarball"`
		Integrity  string      `json:"integrity"`
		Shasum     string      `json:"shasum"`
		Signatures []signature `json:"signatures"`
	} `json:"dist"`
}

type signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// packument is the part of a packument gilf reads; versions stay raw
// until one is chosen.
type packument struct {
	DistTags map[string]string          `json:"dist-tags"`
	Versions map[string]json.RawMessage `json:"versions"`
}

// spec is name@version, as messages show a package.
func spec(pm validation.PackageManager, version string) string { return string(pm) + "@" + version }

// resolve reads the packument of t and returns the release w names. A
// package or version the registry does not have is a refusal.
func (c *Cache) resolve(ctx context.Context, t tool, w wanted) (release, error) {
	shown := spec(t.manager, w.String())
	u := c.registry + pathName(t.pkg)
	body, status, err := c.getJSON(ctx, u, acceptPackument)
	if err != nil {
		return release{}, fmt.Errorf("packument of %s: %w", t.pkg, err)
	}
	if status == http.StatusNotFound {
		return release{}, validation.Refuse(validation.CodePackageManagerUnavailable,
			"%s is not on the registry %s (it has no package %s)", shown, c.registry, t.pkg)
	}
	var p packument
	if err := json.Unmarshal(body, &p); err != nil {
		return release{}, fmt.Errorf("packument of %s: %w", t.pkg, err)
	}
	version := w.exact
	switch {
	case w.major != "":
		version = highestStable(slices.Collect(maps.Keys(p.Versions)), w.major)
		if version == "" {
			return release{}, validation.Refuse(validation.CodePackageManagerUnavailable,
				"%s is not on the registry %s (it has no stable %s.x release of %s)", shown, c.registry, w.major, t.pkg)
		}
	case w.exact == "":
		version = p.DistTags["latest"]
		if !isExact(version) {
			return release{}, fmt.Errorf("packument of %s: dist-tags.latest %q is not an exact version", t.pkg, truncate(version, 80))
		}
	}
	raw, ok := p.Versions[version]
	if !ok {
		return release{}, validation.Refuse(validation.CodePackageManagerUnavailable,
			"%s is not on the registry %s", spec(t.manager, version), c.registry)
	}
	var r release
	if err := json.Unmarshal(raw, &r); err != nil {
		return release{}, fmt.Errorf("packument of %s, version %s: %w", t.pkg, version, err)
	}
	if r.Name != t.pkg || r.Version != version {
		return release{}, fmt.Errorf("packument of %s: version %s describes %s@%s", t.pkg, version, truncate(r.Name, 80), truncate(r.Version, 80))
	}
	return r, nil
}

// getJSON GETs u and reads at most MaxPackumentBytes of its body. A
// 404 is returned as a status; any other status but 200 is an error.
func (c *Cache) getJSON(ctx context.Context, u, accept string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Accept", accept)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, resp.StatusCode, nil
	default:
		return nil, resp.StatusCode, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if resp.ContentLength > c.maxPackument {
		return nil, 0, fmt.Errorf("GET %s: the body is %d bytes, more than the limit of %d", u, resp.ContentLength, c.maxPackument)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxPackument+1))
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: read: %w", u, err)
	}
	if int64(len(body)) > c.maxPackument {
		return nil, 0, fmt.Errorf("GET %s: the body is more than the limit of %d bytes", u, c.maxPackument)
	}
	return body, resp.StatusCode, nil
}

// download GETs the tarball of r into the file dst, hashing it as it
// goes, and returns its size and digests. A tarball bigger than
// MaxTarballBytes is an error.
func (c *Cache) download(ctx context.Context, r release, dst string) (int64, map[string][]byte, error) {
	u, err := c.tarballURL(r.Dist.Tarball)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("tarball request: %w", err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("tarball: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if resp.ContentLength > c.maxTarball {
		return 0, nil, fmt.Errorf("GET %s: the tarball is %d bytes, more than the limit of %d", u, resp.ContentLength, c.maxTarball)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, nil, fmt.Errorf("tarball file: %w", err)
	}
	h := newHasher()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, c.maxTarball+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if n > c.maxTarball {
		return 0, nil, fmt.Errorf("GET %s: the tarball is more than the limit of %d bytes", u, c.maxTarball)
	}
	return n, h.sums(), nil
}

// tarballURL checks that a packument's tarball URL is on the registry's
// own origin: the worker fetches nothing else a packument names.
func (c *Cache) tarballURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil ||
		!strings.EqualFold(u.Scheme, c.registryURL.Scheme) || !strings.EqualFold(u.Host, c.registryURL.Host) {
		return "", fmt.Errorf("the tarball URL %q is not on the registry %s", truncate(raw, 200), c.registry)
	}
	return u.String(), nil
}

// registryKey is one of the registry's signing keys.
type registryKey struct {
	pub     *ecdsa.PublicKey
	expires *time.Time
}

// checkSignatures verifies every registry signature of r over
// "<name>@<version>:<integrity>" and returns the words of what was
// checked. A signature that does not verify, or by a key the registry
// does not list, is an error.
func (c *Cache) checkSignatures(ctx context.Context, r release) (string, error) {
	if len(r.Dist.Signatures) == 0 {
		return " (the registry serves no signatures)", nil
	}
	keys, err := c.signingKeys(ctx)
	if err != nil {
		return "", err
	}
	msg := sha256.Sum256([]byte(r.Name + "@" + r.Version + ":" + r.Dist.Integrity))
	var ids []string
	for _, s := range r.Dist.Signatures {
		k, ok := keys[s.KeyID]
		if !ok {
			return "", fmt.Errorf("%s@%s: signed by key %q, which the registry does not list", r.Name, r.Version, truncate(s.KeyID, 100))
		}
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil || !ecdsa.VerifyASN1(k.pub, msg[:], sig) {
			return "", fmt.Errorf("%s@%s: the registry signature by %s does not verify", r.Name, r.Version, s.KeyID)
		}
		id := s.KeyID
		if k.expires != nil {
			// npm rotates keys, and a release signed before its key
			// expired stays valid; the abbreviated packument carries no
			// publish time to compare with, so the expiry is recorded.
			id += ", key expiry " + k.expires.UTC().Format(time.DateOnly)
		}
		ids = append(ids, id)
	}
	return "; registry signature verified (" + strings.Join(ids, "; ") + ")", nil
}

// signingKeys returns the registry's keys, fetched once per Cache.
func (c *Cache) signingKeys(ctx context.Context) (map[string]registryKey, error) {
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	if c.keys != nil {
		return c.keys, nil
	}
	body, status, err := c.getJSON(ctx, c.registry+keysPath, "application/json")
	if err != nil {
		return nil, fmt.Errorf("registry keys: %w", err)
	}
	if status == http.StatusNotFound {
		return nil, errors.New("registry keys: the registry signs releases but serves no keys at " + c.registry + keysPath)
	}
	keys, err := parseKeys(body)
	if err != nil {
		return nil, fmt.Errorf("registry keys: %w", err)
	}
	c.keys = keys
	return keys, nil
}

// parseKeys reads the body of /-/npm/v1/keys. Keys of another scheme are
// skipped: a signature by one is "a key the registry does not list".
func parseKeys(body []byte) (map[string]registryKey, error) {
	var doc struct {
		Keys []struct {
			Expires *time.Time `json:"expires"`
			KeyID   string     `json:"keyid"`
			KeyType string     `json:"keytype"`
			Scheme  string     `json:"scheme"`
			Key     string     `json:"key"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	keys := make(map[string]registryKey, len(doc.Keys))
	for _, k := range doc.Keys {
		if k.KeyType != keyScheme || k.Scheme != keyScheme {
			continue
		}
		der, err := base64.StdEncoding.DecodeString(k.Key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", truncate(k.KeyID, 100), err)
		}
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", truncate(k.KeyID, 100), err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("key %q is not an ECDSA P-256 key", truncate(k.KeyID, 100))
		}
		keys[k.KeyID] = registryKey{pub: ec, expires: k.Expires}
	}
	return keys, nil
}
