// Package monitoring_test checks that the alerts and the dashboard use metric names Cohort exports.
package monitoring_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/metrics"
)

func TestRulesAndDashboardUseRealNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	ai.NewMetrics(reg)
	if _, err := aispend.New(nil, time.Now, nil, reg, aispend.Config{}); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{
		// api/middleware.go
		"cohort_http_request_duration_seconds": true, "cohort_http_requests_in_flight": true,
	}
	for _, f := range fams {
		known[f.GetName()] = true
	}
	// Families without a series until first use.
	for _, n := range []string{"cohort_ingest_events_skipped_total", "cohort_bus_publish_duration_seconds",
		"cohort_segment_compute_duration_seconds", "cohort_activation_sync_duration_seconds",
		"cohort_activation_users_pushed_total", "cohort_search_duration_seconds", "cohort_page_exports_total",
		"cohort_page_export_duration_seconds", "cohort_feed_sync_duration_seconds", "cohort_ai_request_duration_seconds",
		"cohort_ai_usage_calls_total", "cohort_ai_usage_tokens_total"} {
		known[n] = true
	}
	name := regexp.MustCompile(`cohort_[a-z0-9_]+`)
	for _, file := range []string{"rules.yaml", "dashboard.json"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, n := range name.FindAllString(string(raw), -1) {
			base := n
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(n, s); ok && known[b] {
					base = b
				}
			}
			if !known[base] && n != "cohort_pipelines" {
				t.Errorf("%s uses %s, which Cohort does not export", file, n)
			}
			found++
		}
		if found < 5 {
			t.Errorf("%s names only %d metrics", file, found)
		}
	}
}
