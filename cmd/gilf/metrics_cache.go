package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gilf-review/gilf/executors/local/egress"
)

// cacheCollectors are the install proxy's registry cache metrics, read
// from the cache at each scrape: hits and misses (the hit rate is
// hits / (hits + misses)), bytes served from it, and bytes kept.
func cacheCollectors(c *egress.Cache) []prometheus.Collector {
	stat := func(f func(egress.CacheStats) int64) func() float64 {
		return func() float64 { return float64(f(c.Stats())) }
	}
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gilf_install_cache_hits_total",
			Help: "Registry requests of install steps served from the verifying cache since this process started.",
		}, stat(func(s egress.CacheStats) int64 { return s.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gilf_install_cache_misses_total",
			Help: "Registry requests of install steps the cache fetched from the registry since this process started.",
		}, stat(func(s egress.CacheStats) int64 { return s.Misses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gilf_install_cache_served_bytes_total",
			Help: "Bytes install steps received from the verifying cache since this process started.",
		}, stat(func(s egress.CacheStats) int64 { return s.BytesServed })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gilf_install_cache_bytes",
			Help: "Bytes the verifying registry cache keeps on disk now (bounded by GILF_INSTALL_CACHE_BYTES).",
		}, stat(func(s egress.CacheStats) int64 { return s.Bytes })),
	}
}

// registerCache adds the cache's metrics, when there is a cache.
func (m *serveMetrics) registerCache(c *egress.Cache) {
	if c != nil {
		m.reg.MustRegister(cacheCollectors(c)...)
	}
}
