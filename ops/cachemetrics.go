package ops

import "github.com/prometheus/client_golang/prometheus"

// Descriptions of the result cache's metrics, read from the proxy at
// scrape time.
var (
	cacheLookupsDesc = prometheus.NewDesc("mcp_aggregator_result_cache_lookups_total",
		"resources/read requests the result cache was asked for, by outcome: hit (served from the cache, no upstream call) or miss (sent upstream).", []string{"outcome"}, nil)
	cacheStoresDesc = prometheus.NewDesc("mcp_aggregator_result_cache_stores_total",
		"Upstream results kept in the result cache: those whose ttlMs was positive.", nil, nil)
	cacheEvictionsDesc = prometheus.NewDesc("mcp_aggregator_result_cache_evictions_total",
		"Fresh results dropped from the result cache to stay within its bounds (cache.max_bytes, its entries), least recently used first.", nil, nil)
	cacheEntriesDesc = prometheus.NewDesc("mcp_aggregator_result_cache_entries",
		"Results held in the result cache now, fresh or not yet found stale.", nil, nil)
	cacheBytesDesc = prometheus.NewDesc("mcp_aggregator_result_cache_bytes",
		"Bytes the result cache counts against cache.max_bytes now.", nil, nil)
)

// cacheCollector reads the result cache's counters when scraped.
type cacheCollector struct{ o *Ops }

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheLookupsDesc, cacheStoresDesc, cacheEvictionsDesc, cacheEntriesDesc, cacheBytesDesc} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.o.proxy.CacheStats()
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(st.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(st.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(cacheStoresDesc, prometheus.CounterValue, float64(st.Stores))
	ch <- prometheus.MustNewConstMetric(cacheEvictionsDesc, prometheus.CounterValue, float64(st.Evictions))
	ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(st.Bytes))
}
