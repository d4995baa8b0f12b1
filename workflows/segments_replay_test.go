package workflows

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

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
	replayHistories(t, segmentComputeHistories, SegmentCompute)
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
	events := recordHistory(ctx, t, tc, id, run.GetRunID(), out)
	t.Logf("recorded %d events of %d runs into testdata/%s", events, res.Runs, out)
}
