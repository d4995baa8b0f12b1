package workflows

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// recordEnv set to 1 makes the server tests of the workflows recorded since issue 24
// (replay_test.go) write their histories into testdata again.
const recordEnv = "COHORT_RECORD_HISTORIES"

// recording says whether the server tests record their histories (recordEnv).
func recording() bool { return os.Getenv(recordEnv) != "" }

// replayHistories replays each recorded history in testdata against the workflow functions of
// today (each a function, or a Definition registered under its name): a change that breaks a
// running execution's command sequence fails here.
func replayHistories(t *testing.T, names []string, fns ...any) {
	t.Helper()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("recorded history: %v", err)
			}
			r := worker.NewWorkflowReplayer()
			for _, fn := range fns {
				if d, ok := fn.(Definition); ok {
					r.RegisterWorkflowWithOptions(d.Func, workflow.RegisterOptions{Name: d.Name})
					continue
				}
				r.RegisterWorkflow(fn)
			}
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
				t.Fatalf("replay %s: %v", name, err)
			}
		})
	}
}

// recordHistory writes a workflow execution's history into testdata/name and returns how many
// events it holds.
func recordHistory(ctx context.Context, t *testing.T, tc client.Client, id, runID, name string) int {
	t.Helper()
	hist := &historypb.History{}
	it := tc.GetWorkflowHistory(ctx, id, runID, false, 0)
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
	if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return len(hist.Events)
}
