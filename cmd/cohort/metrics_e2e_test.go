package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cohort-dev/cohort/internal/connector/platformfake"
)

// TestMetricsAfterPipelines runs the acceptance flow of ingestion (a batch through the API, loaded
// by the worker), a segment compute, an activation sync to the Talon.One fake and a search in one
// cohort dev, then scrapes /metrics: the pipeline families and the Temporal SDK's have non-zero
// values, and promlint (what `promtool check metrics` runs) finds no problem.
func TestMetricsAfterPipelines(t *testing.T) {
	const talonKey = "talon-metrics-key-0123456789"
	to := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: talonKey})
	t.Cleanup(to.Close)
	to.CreateAudience(77)

	f := newFanOut(t) // 30 users ingested and loaded, a segment of 20 computed
	// One invalid event in a batch: skipped with its code.
	body := `{"events":[{"user_id":"u01","event_type":"page_view","occurred_at":"2024-01-01T00:00:00Z","payload":{}},{"user_id":"u02","event_type":"Not Snake","occurred_at":"2024-01-01T00:00:00Z","payload":{}}]}`
	var batch struct {
		Queued, Skipped int
	}
	if code := f.a.do(t, http.MethodPost, "/api/ingestion/track/batch/", "ApiKey "+f.s.secret, body, &batch); code != http.StatusAccepted || batch.Queued != 1 || batch.Skipped != 1 {
		t.Fatalf("batch with one invalid event: %d %+v", code, batch)
	}
	id := f.talonConnector(t, "metrics", to.URL(), talonKey, 77)
	if code := f.a.do(t, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", id), f.bearer, "", nil); code != http.StatusAccepted {
		t.Fatalf("sync: %d", code)
	}
	run := f.a.waitSucceeded(t, f.bearer, id, 0)
	if run.Added == 0 {
		t.Fatalf("sync run added nobody: %+v", run)
	}
	f.a.do(t, http.MethodGet, "/api/ai-pages/query?q="+url.QueryEscape("warm jacket"), f.bearer, "", nil)

	var fams map[string]*dto.MetricFamily
	var text string
	eventually(t, "the page batch loaded and counted", func() bool {
		text, fams = scrape(t, f.s.base+"/metrics")
		return sum(fams, "cohort_loader_events_stored_total") >= 31
	})
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"cohort_ingest_events_accepted_total", nil, 31},
		{"cohort_ingest_events_skipped_total", map[string]string{"reason": "invalid_event_type"}, 1},
		{"cohort_bus_publish_duration_seconds", map[string]string{"bus": "nats", "outcome": "ok"}, 2},
		{"cohort_loader_batches_total", map[string]string{"outcome": "ok"}, 1},
		{"cohort_loader_events_stored_total", nil, 31},
		{"cohort_segment_computes_total", map[string]string{"outcome": "ok"}, 1},
		{"cohort_segment_compute_duration_seconds", map[string]string{"outcome": "ok"}, 1},
		{"cohort_segment_compute_members", nil, 1},
		{"cohort_activation_syncs_total", map[string]string{"platform": "talon_one", "outcome": "ok"}, 1},
		{"cohort_activation_users_pushed_total", map[string]string{"platform": "talon_one", "operation": "add"}, float64(run.Added)},
		{"cohort_activation_sync_duration_seconds", map[string]string{"platform": "talon_one"}, 1},
		{"cohort_search_requests_total", nil, 1},
		// The search's query embedding, metered by the process's provider (dev: the local one).
		{"cohort_ai_usage_calls_total", map[string]string{"operation": "search"}, 1},
		{"cohort_search_index_loads_total", nil, 1},        // the search loaded the tenant's vectors
		{"cohort_search_index_budget_bytes", nil, 1 << 20}, // half of GOMEMLIMIT, or the default
		{"cohort_http_request_duration_seconds", nil, 1},
		{"temporal_request_total", nil, 1},
		{"temporal_workflow_completed_total", nil, 1},
		{"temporal_activity_execution_latency_seconds", nil, 1},
	} {
		if got := value(fams, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	// Lag and dead letters exist (zero in a healthy run).
	for _, name := range []string{"cohort_loader_lag_seconds", "cohort_loader_dead_letters_total", "cohort_loader_redeliveries_total"} {
		if fams[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	// One family per meaning: the provider's HTTP calls by outcome (cohort_ai_requests_total),
	// metered uses and tokens by model and operation (cohort_ai_usage_*), no older overlapping
	// calls counter, and no outcome on the usage calls.
	for _, name := range []string{"cohort_ai_calls_total", "cohort_ai_tokens_total"} {
		if fams[name] != nil {
			t.Errorf("family %s is exported; it is cohort_ai_usage_* now", name)
		}
	}
	for _, m := range fams["cohort_ai_usage_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" {
				t.Errorf("cohort_ai_usage_calls_total has an outcome label (that is cohort_ai_requests_total's)")
			}
		}
	}
	// No label carries a tenant or user id.
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetName(), "tenant") || strings.Contains(l.GetName(), "user") {
					t.Errorf("%s has label %s", name, l.GetName())
				}
			}
		}
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// scrape GETs a Prometheus endpoint and parses it.
func scrape(t *testing.T, u string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := apiClient.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, raw)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	return string(raw), fams
}

// value sums the family's series whose labels include labels: counter and gauge values,
// histogram sample counts.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	fam := fams[name]
	if fam == nil {
		return 0
	}
	var v float64
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, want := range labels {
			if have[k] != want {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}

func sum(fams map[string]*dto.MetricFamily, name string) float64 { return value(fams, name, nil) }

// TestMetricsListener: with COHORT_METRICS_ADDR, dev serves /metrics and /healthz there and not
// on the API port (as serve does).
func TestMetricsListener(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := startDevWith(t, map[string]string{"COHORT_METRICS_ADDR": addr}, nil)
	resp, err := apiClient.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the API port: %d, want 404", resp.StatusCode)
	}
	_, fams := scrape(t, "http://"+addr+"/metrics")
	for _, name := range []string{"cohort_http_request_duration_seconds", "cohort_loader_lag_seconds", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("metrics listener lacks %s", name)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := apiClient.Get("http://" + addr + "/healthz")
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(raw), `"status":"ok"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz on the metrics listener: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
