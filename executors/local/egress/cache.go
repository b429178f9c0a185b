package egress

import (
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
)

// Defaults of CacheConfig. Each limit has a name, a default and a test at
// its boundary.
const (
	// DefaultCacheBytes bounds the cache on disk; past it the entries
	// used longest ago are removed.
	DefaultCacheBytes int64 = 10 << 30
	// DefaultMetadataTTL is how long a registry's metadata (a
	// packument) is served from the cache without asking the registry;
	// past it, it is revalidated (ETag, Last-Modified).
	DefaultMetadataTTL = 5 * time.Minute
	// MaxMetadataBytes bounds one metadata document the cache keeps and
	// parses for integrity; a larger one passes through unstored.
	MaxMetadataBytes int64 = 64 << 20
	// evictTo is the fraction of MaxBytes an eviction leaves, so that
	// every write past the bound does not sort the whole index.
	evictToPercent = 90
)

// The cache's directories under CacheConfig.Dir.
const (
	cacheBlobDir = "sha512"
	cacheMetaDir = "meta"
	cacheTmpDir  = "tmp"
	metaHeadExt  = ".json"
)

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Dir holds the cache; made 0700 when missing. Required.
	Dir string
	// MaxBytes bounds the bytes kept; zero means DefaultCacheBytes.
	MaxBytes int64
	// MetadataTTL is how long metadata is served without revalidation;
	// zero means DefaultMetadataTTL, negative revalidates every time.
	MetadataTTL time.Duration
	// Log receives evictions and failures; nil discards.
	Log *slog.Logger
}

// Cache is the worker's shared, verifying registry cache: tarballs kept
// by the sha512 of their bytes, served only when it is the integrity the
// registry publishes for that package version, and registry metadata
// kept with its validators. Only the proxy writes it, only from upstream
// responses it verified; nothing a sandbox sends is ever stored. It is
// bounded in bytes (least recently used removed first), kept across
// restarts, and safe for concurrent use by every step's proxy.
type Cache struct {
	cfg CacheConfig

	mu      sync.Mutex
	entries map[string]*cacheEntry // by path relative to Dir
	total   int64

	hits, misses, served atomic.Int64

	// parsed are the digests of the packuments last served from the
	// kept files, by file identity (see digests).
	parsedMu sync.Mutex
	parsed   map[fileID]map[string][]byte
}

// MaxParsedPackuments bounds the packuments whose digests a Cache keeps
// in memory; past it they are dropped and parsed again when asked.
const MaxParsedPackuments = 4096

// fileID names one version of a kept file: a new document is a new
// file (renamed into place), so its identity changes. (Not its
// modification time: a hit moves that.)
type fileID struct {
	dev, ino uint64
	size     int64
}

// cacheEntry is one file the cache accounts for.
type cacheEntry struct {
	size int64
	used time.Time
}

// CacheStats are a Cache's totals since it was opened.
type CacheStats struct {
	Hits, Misses, BytesServed int64
	// Bytes and Entries are what is kept now.
	Bytes   int64
	Entries int
}

// OpenCache opens the cache in cfg.Dir, making it when missing, and
// accounts for what an earlier process kept there (by each file's
// modification time, which a hit moves). Left-over temporary files are
// removed.
func OpenCache(cfg CacheConfig) (*Cache, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("egress cache: Dir %q is not an absolute path", cfg.Dir)
	}
	if cfg.MaxBytes < 0 {
		return nil, errors.New("egress cache: MaxBytes must not be negative")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultCacheBytes
	}
	if cfg.MetadataTTL == 0 {
		cfg.MetadataTTL = DefaultMetadataTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.RemoveAll(filepath.Join(cfg.Dir, cacheTmpDir)); err != nil {
		return nil, fmt.Errorf("egress cache: %w", err)
	}
	for _, d := range []string{cacheBlobDir, cacheMetaDir, cacheTmpDir} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("egress cache: %w", err)
		}
	}
	c := &Cache{cfg: cfg, entries: map[string]*cacheEntry{}}
	for _, d := range []string{cacheBlobDir, cacheMetaDir} {
		des, err := os.ReadDir(filepath.Join(cfg.Dir, d))
		if err != nil {
			return nil, fmt.Errorf("egress cache: %w", err)
		}
		for _, de := range des {
			if !de.Type().IsRegular() {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue // removed meanwhile
			}
			c.entries[d+"/"+de.Name()] = &cacheEntry{size: fi.Size(), used: fi.ModTime()}
			c.total += fi.Size()
		}
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

// digests returns the sha512 digests a packument response publishes,
// by version. One served from a kept file is parsed once per version of
// that file: BenchmarkPackumentDigests measured 22 ms to parse a 780 KB
// packument of 3000 versions for each tarball against 15 µs to look it
// up (on a loaded 2-core host), and an install asks once per package.
func (c *Cache) digests(resp *http.Response) (map[string][]byte, error) {
	f, ok := resp.Body.(*os.File)
	if !ok {
		return publishedIntegrities(resp.Body)
	}
	return c.fileDigests(f, "")
}

// fileDigests are the digests of a kept packument file whose body is in
// encoding ("" or "identity", or "gzip"), parsed once per version of
// the file (see digests).
func (c *Cache) fileDigests(f *os.File, encoding string) (map[string][]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return parseKept(f, encoding)
	}
	id := fileID{dev: st.Dev, ino: st.Ino, size: fi.Size()}
	c.parsedMu.Lock()
	doc, ok := c.parsed[id]
	c.parsedMu.Unlock()
	if ok {
		return doc, nil
	}
	doc, err = parseKept(f, encoding)
	if err != nil {
		return nil, err
	}
	c.parsedMu.Lock()
	if c.parsed == nil || len(c.parsed) >= MaxParsedPackuments {
		c.parsed = map[fileID]map[string][]byte{}
	}
	c.parsed[id] = doc
	c.parsedMu.Unlock()
	return doc, nil
}

// parseKept reads the integrities of a kept packument in its encoding;
// publishedIntegrities bounds what it decompresses by MaxMetadataBytes.
func parseKept(r io.Reader, encoding string) (map[string][]byte, error) {
	switch encoding {
	case "", "identity":
		return publishedIntegrities(r)
	case "gzip":
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer gz.Close()
		return publishedIntegrities(gz)
	}
	return nil, fmt.Errorf("packument in encoding %q", encoding)
}

// Stats returns the cache's totals.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), BytesServed: c.served.Load(), Bytes: c.total, Entries: len(c.entries)}
}

// tempFile is a new file for an upstream response on its way in.
func (c *Cache) tempFile() (*os.File, error) {
	return os.CreateTemp(filepath.Join(c.cfg.Dir, cacheTmpDir), "in-*")
}

// blobName is the path of a tarball by its sha512.
func blobName(sum []byte) string { return cacheBlobDir + "/" + hex.EncodeToString(sum) }

// metaName is the path of a metadata document by its key.
func metaName(key string) string {
	s := sha256.Sum256([]byte(key))
	return cacheMetaDir + "/" + hex.EncodeToString(s[:])
}

// open opens a kept file and marks it used; ok is false when there is
// none.
func (c *Cache) open(name string) (*os.File, int64, bool) {
	f, err := os.Open(filepath.Join(c.cfg.Dir, name))
	if err != nil {
		return nil, 0, false
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, false
	}
	now := time.Now()
	c.mu.Lock()
	if e, ok := c.entries[name]; ok {
		e.used = now
	} else {
		c.entries[name] = &cacheEntry{size: fi.Size(), used: now}
		c.total += fi.Size()
	}
	c.mu.Unlock()
	// The order of use survives a restart; a failure only ages it.
	if err := os.Chtimes(f.Name(), now, now); err != nil {
		c.cfg.Log.Debug("egress cache touch", logkey.Err, err.Error())
	}
	return f, fi.Size(), true
}

// commit moves a verified temporary file into place as name and
// accounts for it. A file larger than the whole bound is not kept.
func (c *Cache) commit(tmp, name string, size int64) error {
	if size > c.cfg.MaxBytes {
		return os.Remove(tmp)
	}
	if err := os.Rename(tmp, filepath.Join(c.cfg.Dir, name)); err != nil {
		return fmt.Errorf("egress cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[name]; ok {
		c.total -= e.size
	}
	c.entries[name] = &cacheEntry{size: size, used: time.Now()}
	c.total += size
	c.evictLocked()
	return nil
}

// evictLocked removes the entries used longest ago until the cache holds
// at most evictToPercent of MaxBytes, when it holds more than MaxBytes.
func (c *Cache) evictLocked() {
	if c.total <= c.cfg.MaxBytes {
		return
	}
	type named struct {
		name string
		*cacheEntry
	}
	all := make([]named, 0, len(c.entries))
	for n, e := range c.entries {
		all = append(all, named{n, e})
	}
	slices.SortFunc(all, func(a, b named) int { return cmp.Or(a.used.Compare(b.used), strings.Compare(a.name, b.name)) })
	target := c.cfg.MaxBytes / 100 * evictToPercent
	for _, e := range all {
		if c.total <= target {
			break
		}
		if strings.HasSuffix(e.name, metaHeadExt) {
			continue // removed with its body
		}
		err := os.Remove(filepath.Join(c.cfg.Dir, e.name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.cfg.Log.Warn("egress cache evict", logkey.Err, err.Error())
			continue
		}
		if strings.HasPrefix(e.name, cacheMetaDir+"/") && !strings.HasSuffix(e.name, metaHeadExt) {
			// A document's head goes with its body.
			head := e.name + metaHeadExt
			os.Remove(filepath.Join(c.cfg.Dir, head))
			if h, ok := c.entries[head]; ok {
				c.total -= h.size
				delete(c.entries, head)
			}
		}
		c.total -= e.size
		delete(c.entries, e.name)
	}
}

// metaHead is what the cache keeps of a metadata response besides its
// body: the fields a client needs and the validators.
type metaHead struct {
	ContentType     string    `json:"contentType,omitempty"`
	ContentEncoding string    `json:"contentEncoding,omitempty"`
	ETag            string    `json:"etag,omitempty"`
	LastModified    string    `json:"lastModified,omitempty"`
	Stored          time.Time `json:"stored"`
}

// header is the response header of a kept document.
func (h metaHead) header() http.Header {
	out := http.Header{}
	for k, v := range map[string]string{"Content-Type": h.ContentType, "Content-Encoding": h.ContentEncoding, "Etag": h.ETag, "Last-Modified": h.LastModified} {
		if v != "" {
			out.Set(k, v)
		}
	}
	return out
}

// loadMeta opens a kept metadata document and its head.
func (c *Cache) loadMeta(key string) (metaHead, *os.File, int64, bool) {
	name := metaName(key)
	b, err := os.ReadFile(filepath.Join(c.cfg.Dir, name+metaHeadExt))
	if err != nil {
		return metaHead{}, nil, 0, false
	}
	var h metaHead
	if err := json.Unmarshal(b, &h); err != nil {
		return metaHead{}, nil, 0, false
	}
	f, size, ok := c.open(name)
	if !ok {
		return metaHead{}, nil, 0, false
	}
	return h, f, size, true
}

// storeMeta keeps a metadata document (its body in the temporary file
// tmp) under key.
func (c *Cache) storeMeta(key string, h metaHead, tmp string, size int64) error {
	name := metaName(key)
	if err := c.writeHead(name, h); err != nil {
		os.Remove(tmp)
		return err
	}
	return c.commit(tmp, name, size)
}

// writeHead writes a document's head beside its body.
func (c *Cache) writeHead(name string, h metaHead) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	head := name + metaHeadExt
	if err := writeFileAtomic(filepath.Join(c.cfg.Dir, head), b, 0o600); err != nil {
		return fmt.Errorf("egress cache: %w", err)
	}
	c.mu.Lock()
	if e, ok := c.entries[head]; ok {
		c.total -= e.size
	}
	c.entries[head] = &cacheEntry{size: int64(len(b)), used: time.Now()}
	c.total += int64(len(b))
	c.mu.Unlock()
	return nil
}

// OpenTarball opens the kept tarball whose bytes have the sha512 sum and
// marks it used; ok is false when there is none. What is kept there was
// checked, when it came in, against the integrity its registry
// publishes for the version it was fetched as. The caller only reads it.
func (c *Cache) OpenTarball(sum []byte) (f *os.File, size int64, ok bool) {
	if len(sum) != sha512.Size {
		return nil, 0, false
	}
	return c.open(blobName(sum))
}
