package worker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The activity's StartToClose timeout: a worker that stopped without handing its activity's
// outcome to the server would leave the workflow waiting this long.
const stepTimeout = 2 * time.Minute

// stepWorkflow runs a step (slow, or heartbeating when heartbeat is set) and then a quick one.
func stepWorkflow(ctx workflow.Context, heartbeat bool) (string, error) {
	opts := workflow.ActivityOptions{StartToCloseTimeout: stepTimeout}
	name := "SlowStep"
	if heartbeat {
		opts.HeartbeatTimeout = time.Minute
		name = "HeartbeatStep"
	}
	var out, last string
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), name).Get(ctx, &out); err != nil {
		return "", err
	}
	quick := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: stepTimeout})
	if err := workflow.ExecuteActivity(quick, "QuickStep").Get(ctx, &last); err != nil {
		return "", err
	}
	return out + "," + last, nil
}

// steps are one worker's activities; started tells the test where each step began.
type steps struct {
	name    string
	slow    time.Duration
	started chan string
}

// Slow works for s.slow whatever happens, as a page's copy does while the model answers.
func (s *steps) Slow(ctx context.Context) (string, error) {
	s.started <- s.name
	time.Sleep(s.slow)
	return "slow@" + s.name, nil
}

// Heartbeat works (for longer than any test waits) until its context ends, heartbeating.
func (s *steps) Heartbeat(ctx context.Context) (string, error) {
	s.started <- fmt.Sprintf("%s#%d", s.name, activity.GetInfo(ctx).Attempt)
	if activity.GetInfo(ctx).Attempt > 1 {
		return "heartbeat@" + s.name, nil // a retry resumes and finishes
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
			activity.RecordHeartbeat(ctx)
		}
	}
}

func (s *steps) Quick(context.Context) (string, error) { return "quick@" + s.name, nil }

func (s *steps) register(r sdkworker.Registry) {
	r.RegisterWorkflowWithOptions(stepWorkflow, workflow.RegisterOptions{Name: "StepWorkflow"})
	r.RegisterActivityWithOptions(s.Slow, activity.RegisterOptions{Name: "SlowStep"})
	r.RegisterActivityWithOptions(s.Heartbeat, activity.RegisterOptions{Name: "HeartbeatStep"})
	r.RegisterActivityWithOptions(s.Quick, activity.RegisterOptions{Name: "QuickStep"})
}

// syncBuffer is a log sink the workers write to from their goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// running is a worker role running until stop is called; stop returns when Run has.
type running struct {
	stop func() error
	log  *syncBuffer
}

func startWorker(t *testing.T, c client.Client, tq string, s *steps, stopTimeout time.Duration) *running {
	t.Helper()
	log := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := worker.New(worker.Deps{
		Temporal: c, TaskQueue: tq, Logger: slog.New(slog.NewTextHandler(log, nil)),
		Registrations: []worker.Registration{s.register}, StopTimeout: stopTimeout,
	})
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() error {
		var err error
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				err = errors.New("the worker did not stop within a minute")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	// Run starts the Temporal worker before it blocks; give it a moment to poll.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), "temporal worker started") {
		if time.Now().After(deadline) {
			t.Fatalf("worker did not start: %s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &running{stop: stop, log: log}
}

// workflowTask is the key under which attempts lists the workflow tasks that timed out.
const workflowTask = "workflow task"

// attempts lists, per activity type, how each attempt of the workflow's activities ended (the
// attempts before the last one that failed, then the last).
func attempts(t *testing.T, c client.Client, id string) map[string][]string {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{}
	started := map[int64]int32{}
	out := map[string][]string{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		end := func(scheduledID int64, how string) {
			out[scheduled[scheduledID]] = append(out[scheduled[scheduledID]], fmt.Sprintf("attempt %d %s", started[scheduledID], how))
		}
		switch a := e.Attributes.(type) {
		case *historypb.HistoryEvent_ActivityTaskScheduledEventAttributes:
			scheduled[e.EventId] = a.ActivityTaskScheduledEventAttributes.ActivityType.GetName()
		case *historypb.HistoryEvent_ActivityTaskStartedEventAttributes:
			// Attempts the server retried are not events of their own: the started event of
			// the last attempt carries the failure of the one before.
			at := a.ActivityTaskStartedEventAttributes
			started[at.ScheduledEventId] = at.Attempt
			if f := at.GetLastFailure(); f != nil {
				typ := scheduled[at.ScheduledEventId]
				out[typ] = append(out[typ], fmt.Sprintf("attempt %d failed: %s", at.Attempt-1, f.GetMessage()))
			}
		case *historypb.HistoryEvent_ActivityTaskCompletedEventAttributes:
			end(a.ActivityTaskCompletedEventAttributes.ScheduledEventId, "completed")
		case *historypb.HistoryEvent_ActivityTaskFailedEventAttributes:
			end(a.ActivityTaskFailedEventAttributes.ScheduledEventId, "failed: "+a.ActivityTaskFailedEventAttributes.Failure.GetMessage())
		case *historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes:
			end(a.ActivityTaskTimedOutEventAttributes.ScheduledEventId, "timed out")
		case *historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes:
			// A workflow task dispatched to a worker that was stopping, or left on its sticky
			// queue: the workflow waited for the timeout.
			out[workflowTask] = append(out[workflowTask], "timed out: "+a.WorkflowTaskTimedOutEventAttributes.TimeoutType.String())
		}
	}
	return out
}

// A worker stopped (SIGTERM) while an activity runs stops polling, lets the activity finish
// within its stop timeout, reports its result, and only then returns: the workflow goes on
// with the next worker at once instead of waiting for the activity's StartToClose timeout.
func TestStopLetsRunningActivityFinish(t *testing.T) {
	c := testenv.Temporal(t)
	tq := testenv.TaskQueue(t)
	first := &steps{name: "first", slow: 2 * time.Second, started: make(chan string, 4)}
	w1 := startWorker(t, c, tq, first, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "stop-finishes-" + tq
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, "StepWorkflow", false)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.started:
	case <-ctx.Done():
		t.Fatal("the slow step never started")
	}
	stopAt := time.Now()
	if err := w1.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped := time.Since(stopAt)
	if stopped > 10*time.Second {
		t.Errorf("stop took %s; the step needed 2s", stopped)
	}
	logged := w1.log.String()
	for _, want := range []string{"running_activities=1", "temporal worker stopped", "completed=1", "cancelled_at_timeout=0", "still_running=0"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}

	// Another worker (the rollout's new pod) finishes the workflow.
	second := &steps{name: "second", slow: 0, started: make(chan string, 4)}
	startWorker(t, c, tq, second, 30*time.Second)
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if took := time.Since(stopAt); took > 20*time.Second {
		t.Errorf("workflow finished %s after the stop; it waited for a timeout", took)
	}
	if out != "slow@first,quick@second" {
		t.Errorf("workflow result %q, want the first worker's slow step and the second's quick one", out)
	}
	got := attempts(t, c, id)
	if fmt.Sprint(got["SlowStep"]) != "[attempt 1 completed]" {
		t.Errorf("SlowStep attempts %v, want attempt 1 completed", got["SlowStep"])
	}
}

// Two workers share the queue; the one running the activity is stopped. Its activity completes
// (attempt 1), and the second worker picks up the rest promptly.
func TestStoppedWorkerHandsOverToTheOther(t *testing.T) {
	c := testenv.Temporal(t)
	tq := testenv.TaskQueue(t)
	first := &steps{name: "first", slow: 2 * time.Second, started: make(chan string, 4)}
	w1 := startWorker(t, c, tq, first, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "stop-handover-" + tq
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, "StepWorkflow", false)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.started:
	case <-ctx.Done():
		t.Fatal("the slow step never started")
	}
	second := &steps{name: "second", started: make(chan string, 4)}
	startWorker(t, c, tq, second, 30*time.Second)
	stopAt := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- w1.stop() }()
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if took := time.Since(stopAt); took > 15*time.Second {
		t.Errorf("workflow finished %s after the stop; it waited for a timeout", took)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if out != "slow@first,quick@second" {
		t.Errorf("workflow result %q, want the first worker's slow step and the second's quick one", out)
	}
	got := attempts(t, c, id)
	if fmt.Sprint(got["SlowStep"]) != "[attempt 1 completed]" || fmt.Sprint(got["QuickStep"]) != "[attempt 1 completed]" {
		t.Errorf("attempts %v, want attempt 1 of each step completed", got)
	}
	if wt := got[workflowTask]; len(wt) > 0 {
		t.Errorf("workflow tasks %v across the stop, want none timed out", wt)
	}
}

// A heartbeating activity (long by nature: imports, feed syncs, exports) sees the stop as a
// cancellation and hands back at once: attempt 1 fails as WorkerStopping, and attempt 2 runs
// on the other worker right away, long before either timeout.
func TestStopHandsBackHeartbeatingActivity(t *testing.T) {
	c := testenv.Temporal(t)
	tq := testenv.TaskQueue(t)
	first := &steps{name: "first", started: make(chan string, 4)}
	w1 := startWorker(t, c, tq, first, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := "stop-handback-" + tq
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, "StepWorkflow", true)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-first.started:
		if s != "first#1" {
			t.Fatalf("started %s", s)
		}
	case <-ctx.Done():
		t.Fatal("the heartbeating step never started")
	}
	second := &steps{name: "second", started: make(chan string, 4)}
	startWorker(t, c, tq, second, 30*time.Second)
	stopAt := time.Now()
	if err := w1.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopAt); took > 5*time.Second {
		t.Errorf("stop took %s; a heartbeating activity should hand back at once", took)
	}
	if !strings.Contains(w1.log.String(), "handed_back=1") {
		t.Errorf("log does not count the hand-back:\n%s", w1.log.String())
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if took := time.Since(stopAt); took > 15*time.Second {
		t.Errorf("workflow finished %s after the stop", took)
	}
	if out != "heartbeat@second,quick@second" {
		t.Errorf("workflow result %q", out)
	}
	all := attempts(t, c, id)
	if wt := all[workflowTask]; len(wt) > 0 {
		t.Errorf("workflow tasks %v across the stop, want none timed out", wt)
	}
	got := all["HeartbeatStep"]
	if len(got) != 2 || !strings.HasPrefix(got[0], "attempt 1 failed: the worker is stopping") || got[1] != "attempt 2 completed" {
		t.Errorf("HeartbeatStep attempts %v, want attempt 1 handed back and attempt 2 completed", got)
	}
}
