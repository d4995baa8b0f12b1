package search

import "github.com/prometheus/client_golang/prometheus"

// IndexCollector exports what an Embedded index holds and its loads (deploy/runbooks/metrics.md),
// read from Stats at each scrape. No tenant label: the figures are the process's.
type IndexCollector struct {
	ix                                                *Embedded
	vectors, bytes, fileBytes, budget, sets, inFlight *prometheus.Desc
	loads, loadSeconds, refused                       *prometheus.Desc
}

// NewIndexCollector builds the collector of ix; register it on the process's registry.
func NewIndexCollector(ix *Embedded) *IndexCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &IndexCollector{
		ix:          ix,
		vectors:     d("cohort_search_index_vectors", "Product vectors the process's search index holds."),
		bytes:       d("cohort_search_index_bytes", "Heap the search index's vectors take (int8 codes, ids, bounds), counted against the budget."),
		fileBytes:   d("cohort_search_index_file_bytes", "Float32 vectors in the index's memory-mapped files (page cache, not heap)."),
		budget:      d("cohort_search_index_budget_bytes", "The search index's memory budget (COHORT_SEARCH_MEMORY; 0: none)."),
		sets:        d("cohort_search_index_sets", "Loaded (tenant, model, size) sets."),
		inFlight:    d("cohort_search_index_loads_in_progress", "Full loads of a tenant's vectors running now."),
		loads:       d("cohort_search_index_loads_total", "Full loads of a tenant's vectors finished (successful or not)."),
		loadSeconds: d("cohort_search_index_load_seconds_total", "Time the finished full loads took, together."),
		refused:     d("cohort_search_index_refused_total", "Loads refused because the tenant's vectors exceed the budget (503 search_index_too_large)."),
	}
}

// Describe implements prometheus.Collector.
func (c *IndexCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.vectors, c.bytes, c.fileBytes, c.budget, c.sets, c.inFlight, c.loads, c.loadSeconds, c.refused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *IndexCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.ix.Stats()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	n := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(c.vectors, float64(st.Vectors))
	g(c.bytes, float64(st.Bytes))
	g(c.fileBytes, float64(st.FileBytes))
	g(c.budget, float64(st.Budget))
	g(c.sets, float64(st.Sets))
	g(c.inFlight, float64(st.LoadsInProgress))
	n(c.loads, float64(st.LoadsDone))
	n(c.loadSeconds, st.LoadSeconds)
	n(c.refused, float64(st.Refused))
}
