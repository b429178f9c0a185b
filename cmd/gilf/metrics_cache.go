package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// cacheCollectors are the install proxy's registry cache metrics, read
// from the cache at each scrape: hits and misses (the hit rate is
// hits / (hits + misses)), bytes served from it, and bytes kept.
func cacheCollectors(c *egress.Cache) []prometheus.Collector {
	var out []prometheus.Collector
	for _, m := range []struct {
		name, help string
		counter    bool
		value      func(egress.CacheStats) int64
	}{
		{"gilf_install_cache_hits_total", "Registry requests of install steps served from the verifying cache since this process started.", true,
			func(s egress.CacheStats) int64 { return s.Hits }},
		{"gilf_install_cache_misses_total", "Registry requests of install steps the cache fetched from the registry since this process started.", true,
			func(s egress.CacheStats) int64 { return s.Misses }},
		{"gilf_install_cache_served_bytes_total", "Bytes install steps received from the verifying cache since this process started.", true,
			func(s egress.CacheStats) int64 { return s.BytesServed }},
		{"gilf_install_cache_bytes", "Bytes the verifying registry cache keeps on disk now (bounded by GILF_INSTALL_CACHE_BYTES).", false,
			func(s egress.CacheStats) int64 { return s.Bytes }},
	} {
		read := func() float64 { return float64(m.value(c.Stats())) }
		if m.counter {
			out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, read))
		} else {
			out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help}, read))
		}
	}
	return out
}

// registerCache adds the cache's metrics, when there is a cache.
func (m *serveMetrics) registerCache(c *egress.Cache) {
	if c != nil {
		m.reg.MustRegister(cacheCollectors(c)...)
	}
}
