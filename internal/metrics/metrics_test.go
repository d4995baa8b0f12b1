package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/cohort-dev/cohort/internal/metrics"
)

func TestRecording(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	boom := errors.New("boom")
	m.EventsAccepted(3)
	m.EventSkipped("invalid_event_type")
	m.EventSkipped("Free text with tenant 42") // not a code: folded into other
	m.Published("nats", 5*time.Millisecond, nil)
	m.Published("kafka", time.Millisecond, boom)
	m.LoaderBatch(10, 8, nil)
	m.LoaderBatch(4, 0, boom)
	m.LoaderLag(1500 * time.Millisecond)
	m.Redelivered()
	m.DeadLettered(metrics.DeadLetterStoreFailed)
	m.SegmentComputed(2*time.Second, 20, nil)
	m.SyncPushed("talon_one", time.Second, 5, 2, nil)
	m.SyncPushed("mailchimp", time.Second, 0, 0, boom)
	m.Searched(time.Millisecond, metrics.OutcomeRejected)
	m.PageRead(metrics.ReadNotFound)
	m.ExportFinished("zip", time.Second, nil)
	m.FeedSynced(12, time.Second, nil)
	m.SearchUnavailable("embedding_unavailable")
	m.SearchUnavailable("search_index_loading")
	m.SearchUnavailable("Tenant 42's index") // not a code: folded into other
	m.EmbeddingBacklog(7, 90*time.Second)
	m.BuildFinished("failed")
	m.BuildFinished("exploded") // not an outcome: other
	m.PageGenerated(boom)
	m.PageGenerated(nil)
	m.PageGenerated(nil)
	m.SegmentExported(boom)

	text := expose(t, reg)
	for _, want := range []string{
		"cohort_ingest_events_accepted_total 3",
		`cohort_ingest_events_skipped_total{reason="invalid_event_type"} 1`,
		`cohort_ingest_events_skipped_total{reason="other"} 1`, // free text folded
		"cohort_loader_events_stored_total 8",
		"cohort_loader_lag_seconds 1.5",
		`cohort_loader_batches_total{outcome="error"} 1`,
		`cohort_loader_batches_total{outcome="ok"} 1`,
		"cohort_loader_batch_events_sum 10",
		"cohort_loader_redeliveries_total 1",
		`cohort_loader_dead_letters_total{reason="store_failed"} 1`,
		`cohort_loader_dead_letters_total{reason="undecodable"} 0`, // present before the first one
		`cohort_bus_publish_duration_seconds_count{bus="nats",outcome="ok"} 1`,
		`cohort_bus_publish_duration_seconds_count{bus="other",outcome="error"} 1`,
		`cohort_segment_computes_total{outcome="ok"} 1`,
		"cohort_segment_compute_members_sum 20",
		`cohort_activation_syncs_total{outcome="ok",platform="talon_one"} 1`,
		`cohort_activation_syncs_total{outcome="error",platform="other"} 1`,
		`cohort_activation_users_pushed_total{operation="add",platform="talon_one"} 5`,
		`cohort_activation_users_pushed_total{operation="remove",platform="talon_one"} 2`,
		`cohort_search_requests_total{outcome="rejected"} 1`,
		`cohort_page_public_reads_total{outcome="not_found"} 1`,
		`cohort_page_exports_total{format="zip",outcome="ok"} 1`,
		`cohort_feed_syncs_total{outcome="ok"} 1`,
		"cohort_feed_sync_items_total 12",
		`cohort_page_exports_total{format="html",outcome="error"} 0`, // present before the first one
		`cohort_search_unavailable_total{reason="embedding_unavailable"} 1`,
		`cohort_search_unavailable_total{reason="search_index_loading"} 1`,
		`cohort_search_unavailable_total{reason="other"} 1`,
		`cohort_search_unavailable_total{reason="unavailable"} 0`,
		"cohort_embedding_backlog_products 7",
		"cohort_embedding_backlog_age_seconds 90",
		`cohort_page_builds_total{outcome="failed"} 1`,
		`cohort_page_builds_total{outcome="other"} 1`,
		`cohort_page_builds_total{outcome="applied"} 0`,
		`cohort_page_generations_total{outcome="error"} 1`,
		`cohort_page_generations_total{outcome="ok"} 2`,
		`cohort_segment_exports_total{outcome="error"} 1`,
		`cohort_segment_exports_total{outcome="ok"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in the exposition", want)
		}
	}
	problems, err := promlint.New(strings.NewReader(expose(t, reg))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// A nil *Metrics records nothing and does not panic (code under test needs none).
func TestNilRecordsNothing(t *testing.T) {
	var m *metrics.Metrics
	m.EventsAccepted(1)
	m.EventSkipped("x")
	m.Published("nats", 0, nil)
	m.LoaderBatch(1, 1, nil)
	m.LoaderLag(time.Second)
	m.Redelivered()
	m.DeadLettered("x")
	m.SegmentComputed(0, 1, nil)
	m.SyncPushed("braze", 0, 1, 1, nil)
	m.Searched(0, "ok")
	m.PageRead("ok")
	m.ExportFinished("zip", 0, nil)
	m.FeedSynced(1, 0, nil)
	m.SearchUnavailable("x")
	m.EmbeddingBacklog(1, time.Second)
	m.BuildFinished("applied")
	m.PageGenerated(nil)
	m.SegmentExported(nil)
}

// An empty backlog has no age, whatever the sweep measured.
func TestEmbeddingBacklogEmptyHasNoAge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.EmbeddingBacklog(3, time.Minute)
	m.EmbeddingBacklog(0, time.Hour)
	text := expose(t, reg)
	for _, want := range []string{"cohort_embedding_backlog_products 0", "cohort_embedding_backlog_age_seconds 0"} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in the exposition", want)
		}
	}
}

func TestMux(t *testing.T) {
	reg := metrics.NewRegistry()
	metrics.New(reg).EventsAccepted(2)
	ts := httptest.NewServer(metrics.Mux(reg, "v1.2.3"))
	defer ts.Close()
	for _, c := range []struct{ path, want string }{
		{"/metrics", "cohort_ingest_events_accepted_total 2"},
		{"/metrics", "go_goroutines"},
		{"/healthz", `{"status":"ok","version":"v1.2.3"}`},
	} {
		resp, err := http.Get(ts.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), c.want) {
			t.Errorf("GET %s: %d, want %q in %.300s", c.path, resp.StatusCode, c.want, raw)
		}
	}
	resp, err := http.Get(ts.URL + "/api/segments/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("other paths: %d, want 404", resp.StatusCode)
	}
}

func expose(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
