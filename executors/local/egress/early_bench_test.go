package egress

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkCacheFirstFetch is a first install's fetches through the
// proxy and an empty verifying cache, the tarballs named by a lockfile
// (no packument asked for by the client), from a registry that answers
// each request after a round trip's latency: 128 packages, 16 at a time
// as pnpm fetches. Each iteration fetches them with the tarball asked for
// after its packument look-up, then beside it (earlyTarballs), and
// reports both (ms/op medians) and their ratio.
//
//	go test ./executors/local/egress -run '^$' -bench CacheFirstFetch -benchtime 5x
func BenchmarkCacheFirstFetch(b *testing.B) {
	const (
		packages    = 128
		concurrency = 16
	)
	for _, tc := range []struct {
		latency time.Duration
		tls     bool
	}{{time.Millisecond, false}, {time.Millisecond, true}, {20 * time.Millisecond, true}} {
		latency := tc.latency
		b.Run(fmt.Sprintf("latency=%v/tls=%v", latency, tc.tls), func(b *testing.B) {
			reg := &standin{tarballs: map[string]map[string][]byte{}}
			var paths []string
			for i := range packages {
				name := "pkg" + strconv.Itoa(i)
				reg.tarballs[name] = map[string][]byte{"1.0.0": []byte(strings.Repeat(name+";", 8000))}
				paths = append(paths, "/"+name+"/-/"+name+"-1.0.0.tgz")
			}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(latency) // the registry's distance
				reg.ServeHTTP(w, r)
			})
			// Over TLS, the pool speaks HTTP/2 to the registry, as
			// to npm's.
			scheme, target, roots := "http", "", (*x509.CertPool)(nil)
			if tc.tls {
				srv := httptest.NewUnstartedServer(h)
				srv.EnableHTTP2 = true
				srv.StartTLS()
				b.Cleanup(srv.Close)
				roots = x509.NewCertPool()
				roots.AddCert(srv.Certificate())
				scheme, target = "https", srv.Listener.Addr().String()
			} else {
				_, port := httpUpstream(b, "127.0.0.1", h, nil)
				target = "127.0.0.1:" + strconv.Itoa(port)
			}
			fetchAll := func(early bool) time.Duration {
				earlyTarballs = early
				defer func() { earlyTarballs = true }()
				ca := testCA(b)
				tp := terminating(b, target, ca, roots, openCache(b, b.TempDir(), 0, 0), nil)
				defer tp.stop(b)
				c := proxyClient(b, tp, ca.Pool())
				work := make(chan string)
				var wg sync.WaitGroup
				start := time.Now()
				for range concurrency {
					wg.Go(func() {
						for p := range work {
							resp, err := c.Get(scheme + "://" + target + p)
							if err != nil {
								b.Error(err)
								continue
							}
							var body bytes.Buffer
							body.ReadFrom(resp.Body)
							resp.Body.Close()
							if resp.StatusCode != http.StatusOK || body.Len() == 0 {
								b.Errorf("%s: %d", p, resp.StatusCode)
							}
						}
					})
				}
				for _, p := range paths {
					work <- p
				}
				close(work)
				wg.Wait()
				return time.Since(start)
			}
			var after, beside []time.Duration
			for range b.N {
				after = append(after, fetchAll(false))
				beside = append(beside, fetchAll(true))
			}
			ratios := make([]float64, len(after))
			for i := range after {
				ratios[i] = float64(beside[i]) / float64(after[i])
			}
			slices.Sort(ratios)
			slices.Sort(after)
			slices.Sort(beside)
			b.ReportMetric(float64(after[len(after)/2].Microseconds())/1000, "after-ms/op")
			b.ReportMetric(float64(beside[len(beside)/2].Microseconds())/1000, "beside-ms/op")
			b.ReportMetric(ratios[len(ratios)/2], "beside/after")
		})
	}
}
