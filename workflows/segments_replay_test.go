package workflows

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// Recorded histories of SegmentCompute. Each was recorded on the embedded Temporal server by
// TestRecordSegmentComputeHistory with the workflow code of its time:
//
//   - segment_compute_v0.json: before continue-as-new (no version marker); four runs, one of
//     them failed, driven by compute and recompute signals.
//   - segment_compute_v1.json: with continue-as-new (version marker 1).
//
// A change that breaks a running execution's command sequence fails TestSegmentComputeReplay.
var segmentComputeHistories = []string{"segment_compute_v0.json", "segment_compute_v1.json"}

func TestSegmentComputeReplay(t *testing.T) {
	for _, name := range segmentComputeHistories {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("recorded history: %v", err)
			}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(SegmentCompute)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
				t.Fatalf("replay %s: %v", name, err)
			}
		})
	}
}

// TestRecordSegmentComputeHistory records a SegmentCompute history on the embedded Temporal
// server, driving it with the signals of a busy segment, into testdata/$COHORT_RECORD_HISTORY.
// Record a new file when the workflow's command sequence changes (behind workflow.GetVersion),
// keep the old ones, and list the new one in segmentComputeHistories.
func TestRecordSegmentComputeHistory(t *testing.T) {
	out := os.Getenv("COHORT_RECORD_HISTORY")
	if out == "" {
		t.Skip("set COHORT_RECORD_HISTORY=<file name> to record a history into testdata/")
	}
	tc := testenv.Temporal(t)
	queue := testenv.TaskQueue(t)
	id := SegmentComputeID(testTenant, testSegment) + "-record"
	signal := func(name string) {
		if err := tc.SignalWorkflow(context.Background(), id, "", name, nil); err != nil {
			t.Errorf("signal %s: %v", name, err)
		}
	}
	var mu sync.Mutex
	begins, mats := 0, 0
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflow(SegmentCompute)
	w.RegisterActivityWithOptions(func(_ context.Context, in activities.BeginComputeInput) (activities.BeginComputeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		begins++
		return activities.BeginComputeResult{RunID: int64(begins)}, nil
	}, activity.RegisterOptions{Name: "BeginCompute"})
	w.RegisterActivityWithOptions(func(_ context.Context, in activities.MaterializeInput) (segment.RunResult, error) {
		mu.Lock()
		mats++
		n := mats
		mu.Unlock()
		switch n {
		case 1: // requests while the first run computes: they join it, but a new definition asks for one more run
			signal(SignalCompute)
			signal(SignalRecompute)
			signal(SignalCompute)
		case 2, 3:
			signal(SignalRecompute)
		}
		time.Sleep(200 * time.Millisecond) // the signals land while the activity runs
		if n == 3 {
			return segment.RunResult{}, temporal.NewNonRetryableApplicationError("warehouse unavailable", "Test", nil)
		}
		return segment.RunResult{RunID: in.RunID, Version: 1, LatestVersion: 1, Matched: int64(n)}, nil
	}, activity.RegisterOptions{Name: "Materialize"})
	w.RegisterActivityWithOptions(func(context.Context, activities.FailComputeInput) error { return nil },
		activity.RegisterOptions{Name: "FailCompute"})
	w.RegisterActivityWithOptions(func(context.Context, activities.ActivationTargetsInput) (activities.ActivationTargetsResult, error) {
		return activities.ActivationTargetsResult{}, nil
	}, activity.RegisterOptions{Name: "ActivationTargets"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := tc.SignalWithStartWorkflow(ctx, id, SignalCompute, nil, client.StartWorkflowOptions{ID: id, TaskQueue: queue},
		SegmentCompute, SegmentComputeInput{TenantID: testTenant, SegmentID: testSegment})
	if err != nil {
		t.Fatal(err)
	}
	var res SegmentComputeResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	hist := &historypb.History{}
	it := tc.GetWorkflowHistory(ctx, id, run.GetRunID(), false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", out), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events of %d runs into testdata/%s", len(hist.Events), res.Runs, out)
}
