package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// counterValues returns family name's counters by their outcome label.
func counterValues(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestPageGenerationsCounted: a generation is counted once it ended and its end was recorded
// (the copy saved, or the failure written to the page); an attempt whose record failed (and is
// retried) is not counted.
func TestPageGenerationsCounted(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	a := NewPages(&fakeStore{}, &fakeSearch{}, nil, WithPageMetrics(m))
	if err := a.SavePageCopy(ctx, SavePageCopyInput{TenantID: 1, PageID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := a.FailPageGeneration(ctx, FailPageGenerationInput{TenantID: 1, PageID: 3, Message: "the AI provider is unavailable"}); err != nil {
		t.Fatal(err)
	}
	down := NewPages(&fakeStore{err: errors.New("connection refused")}, &fakeSearch{}, nil, WithPageMetrics(m))
	if err := down.SavePageCopy(ctx, SavePageCopyInput{TenantID: 1, PageID: 4}); err == nil {
		t.Fatal("saved with the database down")
	}
	if err := down.FailPageGeneration(ctx, FailPageGenerationInput{TenantID: 1, PageID: 4, Message: "x"}); err == nil {
		t.Fatal("failure recorded with the database down")
	}
	if got := counterValues(t, reg, "cohort_page_generations_total"); got["ok"] != 1 || got["error"] != 1 {
		t.Errorf("cohort_page_generations_total = %v, want ok 1 and error 1", got)
	}
}

// TestSegmentExportFailuresCounted: a failed export is counted once its failure is recorded.
func TestSegmentExportFailuresCounted(t *testing.T) {
	db := testenv.OpenDB(t)
	tenant := testenv.Tenant(t, db, "acme")
	reg := prometheus.NewRegistry()
	a := &Segments{Svc: segment.NewService(db.Gorm, db.Pool, time.Now, nil), Metrics: metrics.New(reg)}
	if err := a.FailExport(context.Background(), FailExportInput{TenantID: tenant, ExportID: 12, Message: "segment 5 was never computed"}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.FailExport(cancelled, FailExportInput{TenantID: tenant, ExportID: 13, Message: "x"}); err == nil {
		t.Fatal("a failure was recorded with a cancelled context")
	}
	if got := counterValues(t, reg, "cohort_segment_exports_total"); got["error"] != 1 || got["ok"] != 0 {
		t.Errorf("cohort_segment_exports_total = %v, want error 1 and ok 0", got)
	}
}
