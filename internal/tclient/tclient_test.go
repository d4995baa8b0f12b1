package tclient_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/devstack/temporalsrv"
	"github.com/cohort-dev/cohort/internal/tclient"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// traceOf is an activity that reports the trace its context carries.
func traceOf(ctx context.Context) (string, error) {
	return trace.SpanContextFromContext(ctx).TraceID().String(), nil
}

func tracedWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var id string
	err := workflow.ExecuteActivity(ctx, traceOf).Get(ctx, &id)
	return id, err
}

// A client from Dial traces workflow starts, and a worker built on it (with no options of its
// own) traces the workflow and its activities under the starter's trace, with the activity's
// span in its context (where database spans would join it).
func TestDialTracesWorkflowsAndActivities(t *testing.T) {
	rec := testenv.RecordSpans(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	srv, err := temporalsrv.Start(ctx, temporalsrv.Options{Logger: logger})
	if err != nil {
		t.Fatalf("embedded temporal: %v", err)
	}
	t.Cleanup(srv.Stop)
	c, err := tclient.Dial(ctx, config.TemporalConfig{Address: srv.FrontendAddress(), Namespace: srv.Namespace()}, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const tq = "tclient-tracing"
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflow(tracedWorkflow)
	w.RegisterActivity(traceOf)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	sctx, starter := otel.Tracer("test").Start(ctx, "POST /api/segments/{id}/compute/")
	run, err := c.ExecuteWorkflow(sctx, client.StartWorkflowOptions{ID: "traced-1", TaskQueue: tq}, tracedWorkflow)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	starter.End()
	var activityTrace string
	if err := run.Get(ctx, &activityTrace); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := starter.SpanContext().TraceID()
	if activityTrace != want.String() {
		t.Errorf("the activity's context carries trace %s, want the starter's %s", activityTrace, want)
	}

	// The worker ends its spans as it finishes the tasks: wait for the last ones.
	names := []string{"StartWorkflow:tracedWorkflow", "RunWorkflow:tracedWorkflow", "StartActivity:traceOf", "RunActivity:traceOf"}
	byName := map[string]sdktrace.ReadOnlySpan{}
	deadline := time.Now().Add(10 * time.Second)
	for len(byName) < len(names) && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() == want {
				byName[s.Name()] = s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range names {
		if byName[n] == nil {
			var got []string
			for _, s := range rec.Ended() {
				got = append(got, s.Name()+"@"+s.SpanContext().TraceID().String())
			}
			t.Fatalf("no span %s in the starter's trace %s; spans: %s", n, want, strings.Join(got, ", "))
		}
	}
	// The chain: starter -> StartWorkflow -> RunWorkflow -> StartActivity -> RunActivity.
	for i, n := range names {
		parent := starter.SpanContext().SpanID()
		if i > 0 {
			parent = byName[names[i-1]].SpanContext().SpanID()
		}
		if got := byName[n].Parent().SpanID(); got != parent {
			t.Errorf("%s's parent is %s, want %s", n, got, parent)
		}
	}
}
