package egress

import (
	"bytes"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// bigTarballBytes is the tarball BenchmarkCacheLargeTarball passes
// through: the 1 GiB.
const bigTarballBytes = 1 << 30

// patternReader yields n bytes of a fixed pattern.
type patternReader struct{ left int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left))
	for i := range p[:n] {
		p[i] = byte(i*7 + 13)
	}
	r.left -= int64(n)
	return n, nil
}

// BenchmarkCacheLargeTarball passes a 1 GiB tarball through the proxy
// and its verifying cache (stored, then served from the cache) and
// reports the worker's peak heap while it does: it must stay bounded,
// whatever the tarball's size (bodies go through files, never memory).
//
//	go test ./executors/local/egress -run '^$' -bench CacheLargeTarball -benchtime 1x
func BenchmarkCacheLargeTarball(b *testing.B) {
	h := sha512.New()
	io.CopyBuffer(h, &patternReader{left: bigTarballBytes}, make([]byte, 1<<16))
	integrity := "sha512-" + base64.StdEncoding.EncodeToString(h.Sum(nil))
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"versions": map[string]any{"1.0.0": map[string]any{"dist": map[string]any{"integrity": integrity}}}})
	})
	mux.HandleFunc("/big/-/big-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(bigTarballBytes))
		io.CopyBuffer(w, &patternReader{left: bigTarballBytes}, make([]byte, 1<<16))
	})
	_, port := httpUpstream(b, "127.0.0.1", mux, nil)
	target := "127.0.0.1:" + strconv.Itoa(port)
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	for range b.N {
		cache := openCache(b, b.TempDir(), 2*bigTarballBytes, 0)
		for pass := range 2 {
			_, c := run(b, target, cache)
			resp, err := c.Get("http://" + target + "/big/-/big-1.0.0.tgz")
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n != bigTarballBytes || resp.StatusCode != http.StatusOK {
				b.Fatalf("pass %d: %d bytes, %v, %d", pass, n, err, resp.StatusCode)
			}
		}
		if st := cache.Stats(); st.Hits != 1 {
			b.Fatalf("the second pass was not served from the cache: %+v", st)
		}
	}
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

// BenchmarkPackumentDigests is what the digests memo saves per tarball
// served from the cache: parsing a kept packument of 3000 versions
// (about as large as typescript's abbreviated one) against looking its
// digests up.
func BenchmarkPackumentDigests(b *testing.B) {
	vs := map[string]any{}
	for i := range 3000 {
		vs["1.0."+strconv.Itoa(i)] = map[string]any{"name": "big", "version": "1.0." + strconv.Itoa(i),
			"dependencies": map[string]string{"a": "^1", "b": "^2"},
			"dist":         map[string]any{"integrity": "sha512-" + base64.StdEncoding.EncodeToString(make([]byte, 64)), "tarball": "https://registry.example/big/-/big-1.0." + strconv.Itoa(i) + ".tgz"}}
	}
	body, err := json.Marshal(map[string]any{"name": "big", "versions": vs})
	if err != nil {
		b.Fatal(err)
	}
	c := openCache(b, b.TempDir(), 0, 0)
	tmp, n, _, err := c.spool(bytes.NewReader(body), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.storeMeta("k", metaHead{}, tmp.Name(), n); err != nil {
		b.Fatal(err)
	}
	tmp.Close()
	for _, memo := range []bool{false, true} {
		b.Run(map[bool]string{false: "parse", true: "memo"}[memo], func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for range b.N {
				_, f, size, ok := c.loadMeta("k")
				if !ok {
					b.Fatal("not kept")
				}
				resp := fileResponse(http.Header{}, f, size)
				var err error
				if memo {
					_, err = c.digests(resp)
				} else {
					_, err = publishedIntegrities(resp.Body)
				}
				resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
