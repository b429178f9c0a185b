package egress

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// errIntegrity is a tarball whose bytes are not what its registry
// publishes for it: nothing is stored, nothing served, and the install
// fails as the registry's fault.
var errIntegrity = errors.New("the tarball does not match its published integrity")

// fetch answers one GET or HEAD to o: from the cache when the proxy has
// one and the request may use it, else from the registry through the
// pool. authorized says the client sent credentials of its own: such a
// request neither reads nor writes the shared cache.
func (p *Proxy) fetch(ctx context.Context, out *http.Request, o origin, authorized bool) (*http.Response, error) {
	c := p.cfg.Cache
	if c == nil || out.Method != http.MethodGet || authorized || out.Header.Get("Range") != "" {
		return p.roundTrip(ctx, out, o)
	}
	if ref, ok := parseTarballPath(out.URL.Path); ok {
		// The digest is of the tarball's own bytes: no encoding.
		out.Header.Del("Accept-Encoding")
		return p.tarball(ctx, out, o, ref)
	}
	if isPackumentPath(out.URL.Path) {
		// A kept document is kept as it came, so the key names the
		// variant (abbreviated or whole) and the encoding asked for.
		enc := "identity"
		if strings.Contains(out.Header.Get("Accept-Encoding"), "gzip") {
			enc = "gzip"
			out.Header.Set("Accept-Encoding", "gzip")
		} else {
			out.Header.Del("Accept-Encoding")
		}
		key := o.base() + out.URL.RequestURI() + "|" + acceptClass(out.Header.Get("Accept")) + "|" + enc
		return p.metadata(ctx, out, o, key, true)
	}
	return p.roundTrip(ctx, out, o)
}

// roundTrip sends out to the registry through the pool, its body read
// under IdleTimeout.
func (p *Proxy) roundTrip(ctx context.Context, out *http.Request, o origin) (*http.Response, error) {
	rctx, cancel := context.WithCancel(ctx)
	resp, err := p.up.roundTrip(out.WithContext(rctx), o.host, o.port)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &idleReader{r: resp.Body, idle: p.cfg.IdleTimeout, cancel: cancel}
	return resp, nil
}

// metadata answers a registry metadata request from the cache while the
// kept document is fresh (MetadataTTL) or the registry says it has not
// changed (ETag, Last-Modified); otherwise from the registry, keeping a
// 200 answer. count says whether the client asked (the cache's own
// integrity look-ups are not counted).
func (p *Proxy) metadata(ctx context.Context, out *http.Request, o origin, key string, count bool) (*http.Response, error) {
	c := p.cfg.Cache
	h, f, size, ok := c.loadMeta(key)
	if ok && c.cfg.MetadataTTL > 0 && time.Since(h.Stored) < c.cfg.MetadataTTL {
		p.cacheHit(count, size)
		return fileResponse(h.header(), f, size), nil
	}
	up := out.Clone(ctx)
	for _, k := range []string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range"} {
		up.Header.Del(k)
	}
	if ok {
		if h.ETag != "" {
			up.Header.Set("If-None-Match", h.ETag)
		}
		if h.LastModified != "" {
			up.Header.Set("If-Modified-Since", h.LastModified)
		}
	}
	resp, err := p.roundTrip(ctx, up, o)
	if err != nil {
		if ok {
			f.Close()
		}
		return nil, err
	}
	if ok && resp.StatusCode == http.StatusNotModified {
		resp.Body.Close()
		h.Stored = time.Now()
		if err := c.writeHead(metaName(key), h); err != nil {
			p.cfg.Log.Warn("egress cache", logkey.Err, err.Error())
		}
		p.cacheHit(count, size)
		return fileResponse(h.header(), f, size), nil
	}
	if ok {
		f.Close()
	}
	p.cacheMiss(count)
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	tmp, n, _, err := c.spool(resp.Body, nil)
	if err != nil {
		return nil, err
	}
	head := metaHead{
		ContentType:     resp.Header.Get("Content-Type"),
		ContentEncoding: resp.Header.Get("Content-Encoding"),
		ETag:            resp.Header.Get("Etag"),
		LastModified:    resp.Header.Get("Last-Modified"),
		Stored:          time.Now(),
	}
	if n > MaxMetadataBytes {
		// Served once, never kept.
		os.Remove(tmp.Name())
	} else if err := c.storeMeta(key, head, tmp.Name(), n); err != nil {
		p.cfg.Log.Warn("egress cache", logkey.Err, err.Error())
	}
	return fileResponse(head.header(), tmp, n), nil
}

// tarball answers a tarball request. With the sha512 the registry
// publishes for that version (its packument, itself cached), a kept
// tarball of that digest is served; otherwise the registry's is read
// whole into a temporary file, checked against the digest and kept, then
// served; one that does not match is refused (errIntegrity) and
// dropped. A version whose packument gives no sha512 passes through
// uncached.
func (p *Proxy) tarball(ctx context.Context, out *http.Request, o origin, ref tarballRef) (*http.Response, error) {
	c := p.cfg.Cache
	want, err := p.integrity(ctx, out, o, ref)
	if err != nil {
		var denied *errDenied
		var dial *errDial
		if errors.As(err, &denied) || errors.As(err, &dial) {
			return nil, err
		}
		p.cacheMiss(true)
		return p.roundTrip(ctx, out, o)
	}
	if f, size, ok := c.open(blobName(want)); ok {
		p.cacheHit(true, size)
		return fileResponse(tarballHeader(), f, size), nil
	}
	p.cacheMiss(true)
	resp, err := p.roundTrip(ctx, out, o)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	defer resp.Body.Close()
	tmp, n, sum, err := c.spool(resp.Body, sha512.New())
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(sum, want) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, errIntegrity
	}
	if err := c.commit(tmp.Name(), blobName(want), n); err != nil {
		p.cfg.Log.Warn("egress cache", logkey.Err, err.Error())
	}
	return fileResponse(tarballHeader(), tmp, n), nil
}

// integrity is the sha512 the registry publishes for ref's version,
// from its abbreviated packument (through the metadata cache). A kept
// packument is parsed once: the digests are remembered for as long as
// that same document is what the cache serves.
func (p *Proxy) integrity(ctx context.Context, tarball *http.Request, o origin, ref tarballRef) ([]byte, error) {
	u := o.base() + ref.packumentPath()
	if doc, ok := p.keptDigests(u); ok {
		return versionDigest(doc, ref.version)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", corgiAccept)
	if ua := tarball.Header.Get("User-Agent"); ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	resp, err := p.metadata(ctx, req, o, u+"|corgi|identity", false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("packument: " + resp.Status)
	}
	doc, err := p.cfg.Cache.digests(resp)
	if err != nil {
		return nil, err
	}
	return versionDigest(doc, ref.version)
}

// versionDigest is the sha512 a packument's digests give version.
func versionDigest(doc map[string][]byte, version string) ([]byte, error) {
	sum, ok := doc[version]
	if !ok {
		return nil, errNoIntegrity
	}
	return sum, nil
}

// keptPackumentVariants are the keys, after a packument's URL, under
// which fetch keeps what clients asked for (see fetch): abbreviated or
// whole, gzip or not. Each publishes the same integrities.
var keptPackumentVariants = []string{"|corgi|gzip", "|corgi|identity", "|full|gzip", "|full|identity"}

// keptDigests are the digests of a fresh kept packument at u (either
// spelling of a scope's escaped slash) in any variant a client asked
// for. Package managers ask for the packument gzip just before its
// tarballs; without this the look-up asked the registry for it again,
// uncompressed, before each package's first tarball: one registry round
// trip per package of a first run (TestCacheIntegrityFromTheClientsPackument
// counts them). On this host's registry mirror, a millisecond away, bun's
// first install of a real 212-package lockfile took the same time with
// and without it (1.02–1.23 s, BenchmarkInstallCacheRealRepo): what it
// saves is the round trip to a distant registry and its bytes. Only what
// the proxy itself kept from the registry is read, and only while it is
// fresh (MetadataTTL), as metadata answers a client.
func (p *Proxy) keptDigests(u string) (map[string][]byte, bool) {
	c := p.cfg.Cache
	if c.cfg.MetadataTTL <= 0 {
		return nil, false
	}
	urls := []string{u}
	if alt := strings.Replace(u, "%2f", "%2F", 1); alt != u {
		urls = append(urls, alt)
	}
	for _, u := range urls {
		for _, v := range keptPackumentVariants {
			h, f, _, ok := c.loadMeta(u + v)
			if !ok {
				continue
			}
			if time.Since(h.Stored) >= c.cfg.MetadataTTL {
				f.Close()
				continue
			}
			doc, err := c.fileDigests(f, h.ContentEncoding)
			f.Close()
			if err == nil {
				return doc, true
			}
		}
	}
	return nil, false
}

// tarballHeader is the header of a tarball served from the cache.
func tarballHeader() http.Header {
	return http.Header{"Content-Type": {"application/octet-stream"}}
}

// fileResponse is a 200 response whose body is an open file of size
// bytes, from its start.
func fileResponse(h http.Header, f *os.File, size int64) *http.Response {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody}
	}
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: size,
		Body:          f,
	}
}

// spool reads r whole into a new temporary file of the cache, hashing it
// when h is given, and returns the open file, its size and the digest.
func (c *Cache) spool(r io.Reader, h hash.Hash) (*os.File, int64, []byte, error) {
	f, err := c.tempFile()
	if err != nil {
		return nil, 0, nil, err
	}
	w := io.Writer(f)
	if h != nil {
		w = io.MultiWriter(f, h)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, nil, err
	}
	var sum []byte
	if h != nil {
		sum = h.Sum(nil)
	}
	return f, n, sum, nil
}

// cacheHit and cacheMiss count a client's request in the step's record
// and the cache's totals.
func (p *Proxy) cacheHit(count bool, size int64) {
	if count {
		p.countHits(1, size)
	}
}

// countHits counts n requests served from the cache, size bytes in all.
func (p *Proxy) countHits(n int, size int64) {
	p.cfg.Cache.hits.Add(int64(n))
	p.cfg.Cache.served.Add(size)
	p.stats.cacheHits(n, size)
}

// Seeded counts n tarballs, size bytes in all, that the step was given
// from the cache before it started (its package manager's own cache,
// seeded from the verified tarballs its lockfile names): hits served
// ahead of the requests they spare. Nothing without a cache.
func (p *Proxy) Seeded(n int, size int64) {
	if p.cfg.Cache == nil || n <= 0 {
		return
	}
	p.countHits(n, size)
}

func (p *Proxy) cacheMiss(count bool) {
	if !count {
		return
	}
	p.cfg.Cache.misses.Add(1)
	p.stats.cacheMiss()
}
