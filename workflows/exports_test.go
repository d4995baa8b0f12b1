package workflows

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
)

// Recorded history of PageExport (TestPageExportOnTheServer with COHORT_RECORD_PAGE_HISTORIES=1):
//
//   - page_export_v0.json: a build that fails once (retried) and then stores the file.
var exportHistories = []string{"page_export_v0.json"}

func TestPageExportReplay(t *testing.T) {
	replayHistories(t, exportHistories, PageExport)
}

// fakeExports are the export activities registered by name: export 1 builds after one passing
// failure, export 2 fails permanently (its page is gone), export 3 fails on every attempt.
type fakeExports struct {
	mu       sync.Mutex
	attempts map[int64]int
	failed   map[int64]string
}

func (f *fakeExports) register(w worker.Worker) {
	w.RegisterActivityWithOptions(func(_ context.Context, in activities.PageExportRef) (activities.BuildPageExportResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.attempts[in.ExportID]++
		switch {
		case in.ExportID == 2:
			return activities.BuildPageExportResult{}, temporal.NewNonRetryableApplicationError("page 9 not found", activities.ErrTypePageExportGone, nil)
		case in.ExportID == 3 || f.attempts[in.ExportID] == 1:
			return activities.BuildPageExportResult{}, errors.New("blob store unavailable")
		}
		return activities.BuildPageExportResult{Key: "exports/t1/page-1-export-1.html", SizeBytes: 1234}, nil
	}, activity.RegisterOptions{Name: "BuildPageExport"})
	w.RegisterActivityWithOptions(func(_ context.Context, in activities.FailPageExportInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.failed[in.ExportID] = in.Message
		return nil
	}, activity.RegisterOptions{Name: "FailPageExport"})
}

// TestPageExportOnTheServer runs PageExport on the embedded Temporal server: a passing failure is
// retried; a gone export ends quietly without recording a failure; a build failing through its
// retries is recorded on the export and fails the workflow.
func TestPageExportOnTheServer(t *testing.T) {
	fake := &fakeExports{attempts: map[int64]int{}, failed: map[int64]string{}}
	r := newServerRun(t, PageExport)
	fake.register(r.w)
	r.start(t)
	tc, queue, ctx := r.tc, r.queue, r.ctx
	jobs := &Starter{Client: tc, TaskQueue: queue}

	for _, id := range []int64{1, 2, 3} {
		if err := jobs.StartExport(ctx, serverTenant, id); err != nil {
			t.Fatal(err)
		}
	}
	var res activities.BuildPageExportResult
	run1 := tc.GetWorkflow(ctx, PageExportID(serverTenant, 1), "")
	if err := run1.Get(ctx, &res); err != nil || res.SizeBytes != 1234 {
		t.Fatalf("export 1: %+v, %v", res, err)
	}
	if err := tc.GetWorkflow(ctx, PageExportID(serverTenant, 2), "").Get(ctx, &res); err != nil {
		t.Fatalf("export 2 (gone): %v", err)
	}
	err := tc.GetWorkflow(ctx, PageExportID(serverTenant, 3), "").Get(ctx, &res)
	if err == nil {
		t.Fatal("export 3 succeeded")
	}
	fake.mu.Lock()
	if fake.attempts[1] != 2 || fake.attempts[2] != 1 || fake.attempts[3] != 5 {
		t.Errorf("attempts %v, want 2, 1 and 5", fake.attempts)
	}
	if _, ok := fake.failed[1]; ok || len(fake.failed) != 1 || fake.failed[3] != "blob store unavailable" {
		t.Errorf("failures recorded %v, want only export 3's", fake.failed)
	}
	fake.mu.Unlock()
	if os.Getenv("COHORT_RECORD_PAGE_HISTORIES") != "" {
		recordHistory(ctx, t, tc, PageExportID(serverTenant, 1), run1.GetRunID(), "page_export_v0.json")
	}
}
