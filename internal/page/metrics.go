package page

import "github.com/prometheus/client_golang/prometheus"

// CounterCollector exports the view counter's figures and the public page cache's size
// (deploy/runbooks/metrics.md), read from CounterStats and PublicCacheStats at each scrape.
type CounterCollector struct {
	s                                               *Service
	pages, views, flushes, cacheEntries, cacheBytes *prometheus.Desc
}

// NewCounterCollector builds the collector of s's view counter; register it on the process's
// registry.
func NewCounterCollector(s *Service) *CounterCollector {
	return &CounterCollector{
		s: s,
		pages: prometheus.NewDesc("cohort_page_views_pending_pages",
			"Pages with public reads counted in memory and not known to be written (current and held batch).", nil, nil),
		views: prometheus.NewDesc("cohort_page_views_pending",
			"Public page reads counted in memory and not known to be written.", nil, nil),
		cacheEntries: prometheus.NewDesc("cohort_public_page_cache_entries",
			"Public page reads held in this process's public page cache (found and not found).", nil, nil),
		cacheBytes: prometheus.NewDesc("cohort_public_page_cache_bytes",
			"Estimated bytes the public page cache holds: the pages' JSON and their hosted HTML renderings.", nil, nil),
		flushes: prometheus.NewDesc("cohort_page_view_flushes_total",
			"View count flushes by outcome: written, failed (batch held and retried), replayed (a retried batch was already written).", []string{"outcome"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *CounterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pages
	ch <- c.views
	ch <- c.flushes
	ch <- c.cacheEntries
	ch <- c.cacheBytes
}

// Collect implements prometheus.Collector.
func (c *CounterCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.s.PublicCacheStats()
	ch <- prometheus.MustNewConstMetric(c.cacheEntries, prometheus.GaugeValue, float64(cs.Entries))
	ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(cs.Bytes))
	st := c.s.CounterStats()
	ch <- prometheus.MustNewConstMetric(c.pages, prometheus.GaugeValue, float64(st.PendingPages))
	ch <- prometheus.MustNewConstMetric(c.views, prometheus.GaugeValue, float64(st.PendingViews))
	for _, o := range []struct {
		name string
		n    int64
	}{{"written", st.Written}, {"failed", st.Failed}, {"replayed", st.Replayed}} {
		ch <- prometheus.MustNewConstMetric(c.flushes, prometheus.CounterValue, float64(o.n), o.name)
	}
}
