// Package metrics defines Cohort's Prometheus families for its pipelines (ingestion, the loader,
// segment computes, activation syncs, searches, public page reads, exports and feed syncs, the
// embedding backlog, page builds and generations) and a
// small recording API over them. One *Metrics is made per process on the registry the role
// creates (NewRegistry) and handed to every pipeline that records; a nil *Metrics records nothing,
// so code under test needs none.
//
// Labels are bounded: outcomes, platforms, buses, formats and reasons from fixed code-defined
// sets (anything else is folded into "other"). Never a tenant, user, segment or connector id.
// deploy/runbooks/metrics.md documents every name and label.
package metrics

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcome label values.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
	// OutcomeRejected is a request refused for its input (a 4xx), not a failure of the service.
	OutcomeRejected = "rejected"
)

// Page read outcomes (PageRead).
const (
	ReadOK       = "ok"
	ReadNotFound = "not_found"
	ReadError    = "error"
)

// Dead-letter reasons (DeadLettered).
const (
	DeadLetterUndecodable = "undecodable"  // not a message the loader can read
	DeadLetterStoreFailed = "store_failed" // storing it failed MaxAttempts times
)

// Platforms are the activation platforms' label values; any other kind is "other".
var Platforms = []string{"klaviyo", "braze", "talon_one"}

// ExportFormats are the page export formats' label values; any other is "other".
var ExportFormats = []string{"json", "html", "tsx", "zip"}

// Buses are the event bus label values.
var Buses = []string{"pubsub", "nats"}

// BuildOutcomes are the page build outcomes (pagebuild's); any other is "other".
var BuildOutcomes = []string{"applied", "no_changes", "failed", "cancelled"}

// SearchUnavailableReasons are the 503 codes of a search known up front (they start at zero);
// any other short code is counted under its own name.
var SearchUnavailableReasons = []string{"embedding_unavailable", "unavailable"}

// Buckets.
var (
	fastSeconds = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	slowSeconds = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	sizes       = []float64{0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000}
)

// Metrics holds every pipeline family.
type Metrics struct {
	eventsAccepted  prometheus.Counter
	eventsSkipped   *prometheus.CounterVec
	publishDuration *prometheus.HistogramVec

	loaderBatches      *prometheus.CounterVec
	loaderBatchEvents  prometheus.Histogram
	loaderEventsStored prometheus.Counter
	loaderLag          prometheus.Gauge
	loaderRedeliveries prometheus.Counter
	loaderDeadLetters  *prometheus.CounterVec

	segmentComputes        *prometheus.CounterVec
	segmentComputeDuration *prometheus.HistogramVec
	segmentMembers         prometheus.Histogram

	syncs        *prometheus.CounterVec
	syncDuration *prometheus.HistogramVec
	usersPushed  *prometheus.CounterVec

	searches       *prometheus.CounterVec
	searchDuration *prometheus.HistogramVec
	pageReads      *prometheus.CounterVec

	exports        *prometheus.CounterVec
	exportDuration *prometheus.HistogramVec
	feedSyncs      *prometheus.CounterVec
	feedDuration   *prometheus.HistogramVec
	feedItems      prometheus.Counter

	searchUnavailable   *prometheus.CounterVec
	embeddingBacklog    prometheus.Gauge
	embeddingBacklogAge prometheus.Gauge
	builds              *prometheus.CounterVec
	generations         *prometheus.CounterVec
	segmentExports      *prometheus.CounterVec
}

// NewRegistry is a process's registry: Go runtime and process collectors included.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// New registers the pipeline families on reg.
func New(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histVec := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	m := &Metrics{
		eventsAccepted: counter("cohort_ingest_events_accepted_total",
			"Events accepted by the API and stored by the bus (answered 202)."),
		eventsSkipped: counterVec("cohort_ingest_events_skipped_total",
			"Events refused or skipped at ingestion, by the error code the caller was given.", "reason"),
		publishDuration: histVec("cohort_bus_publish_duration_seconds",
			"Time from publish to the bus's acknowledgement, by bus and outcome.", fastSeconds, "bus", "outcome"),

		loaderBatches: counterVec("cohort_loader_batches_total",
			"Batches (flushes) the loader wrote to the warehouse, by outcome.", "outcome"),
		loaderBatchEvents: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cohort_loader_batch_events",
			Help: "Events per loader batch.", Buckets: sizes}),
		loaderEventsStored: counter("cohort_loader_events_stored_total",
			"Events the loader stored (new ones: redelivered duplicates are not counted again)."),
		loaderLag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cohort_loader_lag_seconds",
			Help: "Now minus the publish time of the oldest message the loader holds unacked (0 when it holds none)."}),
		loaderRedeliveries: counter("cohort_loader_redeliveries_total",
			"Messages the loader received again after an earlier delivery was not acked."),
		loaderDeadLetters: counterVec("cohort_loader_dead_letters_total",
			"Messages the loader moved to ingestion_dead_letters, by reason.", "reason"),

		segmentComputes: counterVec("cohort_segment_computes_total",
			"Segment computes (query and membership load), by outcome.", "outcome"),
		segmentComputeDuration: histVec("cohort_segment_compute_duration_seconds",
			"Duration of a segment compute's query and membership load, by outcome.", slowSeconds, "outcome"),
		segmentMembers: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cohort_segment_compute_members",
			Help: "Members of a segment after a successful compute.", Buckets: sizes}),

		syncs: counterVec("cohort_activation_syncs_total",
			"Activation sync pushes (one per attempt), by platform and outcome.", "platform", "outcome"),
		syncDuration: histVec("cohort_activation_sync_duration_seconds",
			"Duration of an activation sync push attempt, by platform and outcome.", slowSeconds, "platform", "outcome"),
		usersPushed: counterVec("cohort_activation_users_pushed_total",
			"Users added to or removed from a platform's audience, by platform and operation.", "platform", "operation"),

		searches: counterVec("cohort_search_requests_total",
			"Semantic product searches, by outcome.", "outcome"),
		searchDuration: histVec("cohort_search_duration_seconds",
			"Duration of a semantic product search (embedding and scan), by outcome.", fastSeconds, "outcome"),
		pageReads: counterVec("cohort_page_public_reads_total",
			"Public (published) page reads, by outcome.", "outcome"),

		exports: counterVec("cohort_page_exports_total",
			"Page exports finished, by format and outcome.", "format", "outcome"),
		exportDuration: histVec("cohort_page_export_duration_seconds",
			"Duration of a page export, by format and outcome.", slowSeconds, "format", "outcome"),
		feedSyncs: counterVec("cohort_feed_syncs_total",
			"Product feed syncs finished, by outcome.", "outcome"),
		feedDuration: histVec("cohort_feed_sync_duration_seconds",
			"Duration of a product feed sync, by outcome.", slowSeconds, "outcome"),
		feedItems: counter("cohort_feed_sync_items_total",
			"Products a feed sync read from its feed."),

		searchUnavailable: counterVec("cohort_search_unavailable_total",
			"Semantic searches answered 503, by the error code the caller was given (embedding_unavailable, ...).", "reason"),
		embeddingBacklog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cohort_embedding_backlog_products",
			Help: "Products of every tenant queued for an embedding and still tried (parked ones are not), at the last sweep."}),
		embeddingBacklogAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cohort_embedding_backlog_age_seconds",
			Help: "How long the oldest product counted in cohort_embedding_backlog_products has waited (0 when none), at the last sweep."}),
		builds: counterVec("cohort_page_builds_total",
			"Page builds (the builder agent) finished, by outcome: applied, no_changes, failed, cancelled.", "outcome"),
		generations: counterVec("cohort_page_generations_total",
			"Page generations (one page, alone or in a bulk job) finished, by outcome.", "outcome"),
		segmentExports: counterVec("cohort_segment_exports_total",
			"Segment member exports finished, by outcome.", "outcome"),
	}
	reg.MustRegister(m.eventsAccepted, m.eventsSkipped, m.publishDuration,
		m.loaderBatches, m.loaderBatchEvents, m.loaderEventsStored, m.loaderLag, m.loaderRedeliveries, m.loaderDeadLetters,
		m.segmentComputes, m.segmentComputeDuration, m.segmentMembers,
		m.syncs, m.syncDuration, m.usersPushed,
		m.searches, m.searchDuration, m.pageReads,
		m.exports, m.exportDuration, m.feedSyncs, m.feedDuration, m.feedItems,
		m.searchUnavailable, m.embeddingBacklog, m.embeddingBacklogAge, m.builds, m.generations, m.segmentExports)
	// Outcomes and reasons known up front start at zero, so that rates and alerts see a series
	// before the first event of that kind.
	for _, o := range []string{OutcomeOK, OutcomeError} {
		m.loaderBatches.WithLabelValues(o)
		m.segmentComputes.WithLabelValues(o)
		m.feedSyncs.WithLabelValues(o)
		m.generations.WithLabelValues(o)
		m.segmentExports.WithLabelValues(o)
		for _, f := range ExportFormats {
			m.exports.WithLabelValues(f, o)
		}
		for _, p := range Platforms {
			m.syncs.WithLabelValues(p, o)
		}
	}
	for _, o := range []string{OutcomeOK, OutcomeRejected, OutcomeError} {
		m.searches.WithLabelValues(o)
	}
	for _, o := range BuildOutcomes {
		m.builds.WithLabelValues(o)
	}
	for _, r := range SearchUnavailableReasons {
		m.searchUnavailable.WithLabelValues(r)
	}
	for _, r := range []string{DeadLetterUndecodable, DeadLetterStoreFailed} {
		m.loaderDeadLetters.WithLabelValues(r)
	}
	for _, r := range []string{ReadOK, ReadNotFound, ReadError} {
		m.pageReads.WithLabelValues(r)
	}
	return m
}

// Handler serves the registry in the Prometheus text (or OpenMetrics) format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// Mux is the metrics listener's handler: /metrics, and /healthz (200 while the process serves)
// for the probes of a role without an HTTP API (the worker).
func Mux(g prometheus.Gatherer, version string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	health, _ := json.Marshal(map[string]string{"status": "ok", "version": version})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(health)
	})
	return mux
}

func outcome(err error) string {
	if err != nil {
		return OutcomeError
	}
	return OutcomeOK
}

var codeRE = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

// labelValue is v when it is a short lowercase code, else other: a code path cannot turn a
// label into free text (or ids).
func labelValue(v, other string) string {
	if codeRE.MatchString(v) {
		return v
	}
	return other
}

func oneOf(v string, known []string) string {
	if slices.Contains(known, v) {
		return v
	}
	return "other"
}

// EventsAccepted counts n events the bus stored.
func (m *Metrics) EventsAccepted(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.eventsAccepted.Add(float64(n))
}

// EventSkipped counts one event refused at ingestion with the error code reason.
func (m *Metrics) EventSkipped(reason string) {
	if m == nil {
		return
	}
	m.eventsSkipped.WithLabelValues(labelValue(reason, "other")).Inc()
}

// Published records one publish to bus (pubsub, nats) that took d.
func (m *Metrics) Published(bus string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.publishDuration.WithLabelValues(oneOf(bus, Buses), outcome(err)).Observe(d.Seconds())
}

// LoaderBatch records one loader flush of events events, of which stored were new.
func (m *Metrics) LoaderBatch(events, stored int, err error) {
	if m == nil {
		return
	}
	m.loaderBatches.WithLabelValues(outcome(err)).Inc()
	if err == nil {
		m.loaderBatchEvents.Observe(float64(events))
		m.loaderEventsStored.Add(float64(stored))
	}
}

// LoaderLag sets the loader lag (0: nothing held).
func (m *Metrics) LoaderLag(d time.Duration) {
	if m == nil {
		return
	}
	m.loaderLag.Set(max(d, 0).Seconds())
}

// Redelivered counts a message received again.
func (m *Metrics) Redelivered() {
	if m == nil {
		return
	}
	m.loaderRedeliveries.Inc()
}

// DeadLettered counts a dead-lettered message (DeadLetterUndecodable, DeadLetterStoreFailed).
func (m *Metrics) DeadLettered(reason string) {
	if m == nil {
		return
	}
	m.loaderDeadLetters.WithLabelValues(oneOf(reason, []string{DeadLetterUndecodable, DeadLetterStoreFailed})).Inc()
}

// SegmentComputed records a segment compute that took d and left members members.
func (m *Metrics) SegmentComputed(d time.Duration, members int64, err error) {
	if m == nil {
		return
	}
	o := outcome(err)
	m.segmentComputes.WithLabelValues(o).Inc()
	m.segmentComputeDuration.WithLabelValues(o).Observe(d.Seconds())
	if err == nil {
		m.segmentMembers.Observe(float64(members))
	}
}

// SyncPushed records an activation sync push attempt to platform (a connector kind) that took d
// and added and removed that many users.
func (m *Metrics) SyncPushed(platform string, d time.Duration, added, removed int64, err error) {
	if m == nil {
		return
	}
	p, o := oneOf(platform, Platforms), outcome(err)
	m.syncs.WithLabelValues(p, o).Inc()
	m.syncDuration.WithLabelValues(p, o).Observe(d.Seconds())
	if added > 0 {
		m.usersPushed.WithLabelValues(p, "add").Add(float64(added))
	}
	if removed > 0 {
		m.usersPushed.WithLabelValues(p, "remove").Add(float64(removed))
	}
}

// Searched records a semantic search that took d (OutcomeOK, OutcomeRejected, OutcomeError).
func (m *Metrics) Searched(d time.Duration, outcome string) {
	if m == nil {
		return
	}
	o := oneOf(outcome, []string{OutcomeOK, OutcomeRejected, OutcomeError})
	m.searches.WithLabelValues(o).Inc()
	m.searchDuration.WithLabelValues(o).Observe(d.Seconds())
}

// PageRead counts a public page read (ReadOK, ReadNotFound, ReadError).
func (m *Metrics) PageRead(outcome string) {
	if m == nil {
		return
	}
	m.pageReads.WithLabelValues(oneOf(outcome, []string{ReadOK, ReadNotFound, ReadError})).Inc()
}

// ExportFinished records a page export in format (json, html, tsx, zip) that took d.
func (m *Metrics) ExportFinished(format string, d time.Duration, err error) {
	if m == nil {
		return
	}
	f, o := oneOf(format, ExportFormats), outcome(err)
	m.exports.WithLabelValues(f, o).Inc()
	m.exportDuration.WithLabelValues(f, o).Observe(d.Seconds())
}

// FeedSynced records a feed sync that read items products and took d.
func (m *Metrics) FeedSynced(items int, d time.Duration, err error) {
	if m == nil {
		return
	}
	o := outcome(err)
	m.feedSyncs.WithLabelValues(o).Inc()
	m.feedDuration.WithLabelValues(o).Observe(d.Seconds())
	if items > 0 {
		m.feedItems.Add(float64(items))
	}
}

// SearchUnavailable counts a semantic search answered 503 with the error code reason.
func (m *Metrics) SearchUnavailable(reason string) {
	if m == nil {
		return
	}
	m.searchUnavailable.WithLabelValues(labelValue(reason, "other")).Inc()
}

// EmbeddingBacklog sets the embedding backlog: products queued and still tried, and how long
// the oldest of them has waited.
func (m *Metrics) EmbeddingBacklog(products int64, oldest time.Duration) {
	if m == nil {
		return
	}
	m.embeddingBacklog.Set(float64(max(products, 0)))
	if products <= 0 {
		oldest = 0
	}
	m.embeddingBacklogAge.Set(max(oldest, 0).Seconds())
}

// BuildFinished counts a page build that ended with outcome (BuildOutcomes).
func (m *Metrics) BuildFinished(outcome string) {
	if m == nil {
		return
	}
	m.builds.WithLabelValues(oneOf(outcome, BuildOutcomes)).Inc()
}

// PageGenerated counts a page generation that ended: ready (err nil) or failed.
func (m *Metrics) PageGenerated(err error) {
	if m == nil {
		return
	}
	m.generations.WithLabelValues(outcome(err)).Inc()
}

// SegmentExported counts a segment member export that ended: ready (err nil) or failed.
func (m *Metrics) SegmentExported(err error) {
	if m == nil {
		return
	}
	m.segmentExports.WithLabelValues(outcome(err)).Inc()
}
