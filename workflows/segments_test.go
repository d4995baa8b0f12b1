package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/segment"
)

// acts is the receiver of the mocked activity methods: a method value of a *Segments (even a nil
// one) has the activity's own signature, unlike the method expression (*Segments).Method.
var acts *activities.Segments

const (
	testTenant  = int64(7)
	testSegment = int64(42)
)

// timedSignal is a signal the test sends at a workflow-clock offset from the start.
type timedSignal struct {
	at   time.Duration
	name string
}

// childStart is one started activation sync child.
type childStart struct {
	ID       string
	Input    ActivationSyncInput
	ParentID string
}

// computeRecorder records what the mocked compute activities were asked; the mocks run on the
// test environment's goroutines, hence the lock.
type computeRecorder struct {
	mu           sync.Mutex
	begins       []activities.BeginComputeInput
	materializes []activities.MaterializeInput
	fails        []activities.FailComputeInput
	targets      []activities.ActivationTargetsInput
	children     []childStart
	results      []segment.RunResult // every successful Materialize result, in order
}

// computeCase configures the mocks of one SegmentCompute scenario.
type computeCase struct {
	name string

	beginDelay   time.Duration
	matDelay     time.Duration
	targetsDelay time.Duration
	failDelay    time.Duration
	beginErrs    map[int]error // by BeginCompute call (1-based)
	matErrs      map[int]error // by Materialize call (1-based)
	connectors   []int64       // ActivationTargets' answer on every run
	targetsErr   error
	childErr     error // what every sync child returns
	childNoStart bool  // the sync children fail to start
	staleFirst   bool  // the first run computed an older version than the segment's latest
	signals      []timedSignal
	// signals delivered in the same workflow task as, and just before, the completion of the
	// first call of an activity (sent without a workflow task of their own)
	withBegin       []string
	withMaterialize []string
	withTargets     []string
	withFail        []string

	// wantRuns is how many runs loaded membership: SegmentComputeResult.Runs when the workflow
	// succeeds, and the number of ActivationTargets calls (each such run fans out once).
	wantRuns int
	// wantBegins is how many times BeginCompute was called; 0 means wantRuns (no run failed).
	wantBegins   int
	wantErrType  string // "" means the workflow succeeds
	wantErrMsg   string // the workflow error contains it
	wantFails    []activities.FailComputeInput
	wantChildren []childStart
}

// runCompute runs SegmentCompute against mocks configured by c and returns the recorder, the
// result and the workflow error.
func runCompute(t *testing.T, c computeCase) (*computeRecorder, SegmentComputeResult, error) {
	t.Helper()
	env := newTestEnv()
	env.RegisterActivity(&activities.Segments{})
	env.RegisterWorkflow(SegmentCompute)
	rec := &computeRecorder{}
	wfID := SegmentComputeID(testTenant, testSegment)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wfID, TaskQueue: "test"})
	// deliverWith sends the signals of a with* field when call is an activity's first one.
	deliverWith := func(call int, names []string) {
		if call == 1 {
			for _, name := range names {
				env.SignalWorkflowSkippingWorkflowTask(name, nil)
			}
		}
	}

	env.OnActivity(acts.BeginCompute, mock.Anything, mock.Anything).After(c.beginDelay).Return(
		func(_ context.Context, in activities.BeginComputeInput) (activities.BeginComputeResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.begins = append(rec.begins, in)
			n := len(rec.begins)
			deliverWith(n, c.withBegin)
			if err := c.beginErrs[n]; err != nil {
				return activities.BeginComputeResult{}, err
			}
			return activities.BeginComputeResult{RunID: int64(100 + n), Version: n}, nil
		})
	env.OnActivity(acts.Materialize, mock.Anything, mock.Anything).After(c.matDelay).Return(
		func(_ context.Context, in activities.MaterializeInput) (segment.RunResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.materializes = append(rec.materializes, in)
			n := len(rec.materializes)
			deliverWith(n, c.withMaterialize)
			if err := c.matErrs[n]; err != nil {
				return segment.RunResult{}, err
			}
			res := segment.RunResult{RunID: in.RunID, Version: n, LatestVersion: n, Matched: int64(10 * n), Entered: int64(n), Exited: int64(n - 1)}
			if c.staleFirst && n == 1 {
				res.LatestVersion = n + 1
			}
			rec.results = append(rec.results, res)
			return res, nil
		})
	env.OnActivity(acts.FailCompute, mock.Anything, mock.Anything).After(c.failDelay).Return(
		func(_ context.Context, in activities.FailComputeInput) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.fails = append(rec.fails, in)
			deliverWith(len(rec.fails), c.withFail)
			return nil
		})
	env.OnActivity(acts.ActivationTargets, mock.Anything, mock.Anything).After(c.targetsDelay).Return(
		func(_ context.Context, in activities.ActivationTargetsInput) (activities.ActivationTargetsResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.targets = append(rec.targets, in)
			deliverWith(len(rec.targets), c.withTargets)
			if c.targetsErr != nil {
				return activities.ActivationTargetsResult{}, c.targetsErr
			}
			return activities.ActivationTargetsResult{ConnectorIDs: append([]int64{}, c.connectors...)}, nil
		})

	// The activations capability registers the real ActivationSync; a stub stands in for it.
	childErr := c.childErr
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ActivationSyncInput) error {
		return childErr
	}, workflow.RegisterOptions{Name: ActivationSyncWorkflow})
	if c.childNoStart {
		env.OnWorkflow(ActivationSyncWorkflow, mock.Anything, mock.Anything).Return(testsuite.ErrMockStartChildWorkflowFailed)
	}
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		var in ActivationSyncInput
		if err := args.Get(&in); err != nil {
			t.Errorf("decode child input: %v", err)
		}
		cs := childStart{ID: info.WorkflowExecution.ID, Input: in}
		if info.ParentWorkflowExecution != nil {
			cs.ParentID = info.ParentWorkflowExecution.ID
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.children = append(rec.children, cs)
	})

	for _, sig := range c.signals {
		name := sig.name
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, nil) }, sig.at)
	}
	env.ExecuteWorkflow(SegmentCompute, SegmentComputeInput{TenantID: testTenant, SegmentID: testSegment})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var out SegmentComputeResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&out); gerr != nil {
			t.Fatalf("workflow result: %v", gerr)
		}
	}
	return rec, out, err
}

func appErr(msg, typ string) error {
	return temporal.NewNonRetryableApplicationError(msg, typ, nil)
}

func TestSegmentCompute(t *testing.T) {
	wfID := SegmentComputeID(testTenant, testSegment)
	cases := []computeCase{
		{
			name:     "happy path without connectors",
			wantRuns: 1,
		},
		{
			name:       "happy path with slow activities",
			beginDelay: time.Second,
			matDelay:   time.Hour,
			wantRuns:   1,
		},
		{
			name:       "initial SignalWithStart compute signal does not rerun",
			beginDelay: time.Second,
			matDelay:   time.Minute,
			signals:    []timedSignal{{0, SignalCompute}},
			wantRuns:   1,
		},
		{
			name:       "initial SignalWithStart recompute signal does not rerun",
			beginDelay: time.Second,
			matDelay:   time.Minute,
			signals:    []timedSignal{{0, SignalRecompute}},
			wantRuns:   1,
		},
		{
			name:       "initial signals of both kinds do not rerun",
			beginDelay: time.Second,
			matDelay:   time.Minute,
			signals:    []timedSignal{{0, SignalCompute}, {0, SignalRecompute}, {0, SignalCompute}},
			wantRuns:   1,
		},
		{
			name:     "compute while materializing joins the run",
			matDelay: 10 * time.Minute,
			signals:  []timedSignal{{time.Minute, SignalCompute}},
			wantRuns: 1,
		},
		{
			name:         "compute after load while fanning out runs once more",
			matDelay:     time.Minute,
			targetsDelay: 10 * time.Minute,
			signals:      []timedSignal{{5 * time.Minute, SignalCompute}},
			wantRuns:     2,
		},
		{
			name:     "recompute while materializing runs once more",
			matDelay: 10 * time.Minute,
			signals:  []timedSignal{{time.Minute, SignalRecompute}},
			wantRuns: 2,
		},
		{
			name:         "recompute while fanning out runs once more",
			matDelay:     time.Minute,
			targetsDelay: 10 * time.Minute,
			signals:      []timedSignal{{5 * time.Minute, SignalRecompute}},
			wantRuns:     2,
		},
		{
			name:     "several signals while materializing give one extra run",
			matDelay: 10 * time.Minute,
			signals: []timedSignal{
				{time.Minute, SignalCompute}, {time.Minute, SignalRecompute}, {time.Minute, SignalRecompute},
				{2 * time.Minute, SignalCompute}, {3 * time.Minute, SignalRecompute},
			},
			wantRuns: 2,
		},
		{
			name:         "several signals while fanning out give one extra run",
			matDelay:     time.Minute,
			targetsDelay: 10 * time.Minute,
			signals: []timedSignal{
				{5 * time.Minute, SignalCompute}, {5 * time.Minute, SignalCompute}, {5 * time.Minute, SignalRecompute},
				{6 * time.Minute, SignalCompute}, {7 * time.Minute, SignalRecompute},
			},
			wantRuns: 2,
		},
		{
			name:         "signals in the second run's load join it",
			matDelay:     10 * time.Minute,
			targetsDelay: time.Minute,
			signals: []timedSignal{
				{time.Minute, SignalRecompute},    // run 1 materializing: one more run
				{15 * time.Minute, SignalCompute}, // run 2 materializing: joins it
				{16 * time.Minute, SignalCompute},
			},
			wantRuns: 2,
		},
		{
			name:         "compute delivered with the final workflow task is not dropped",
			matDelay:     time.Minute,
			targetsDelay: 10 * time.Minute,
			withTargets:  []string{SignalCompute},
			wantRuns:     2,
		},
		{
			name:         "recompute delivered with the final workflow task is not dropped",
			matDelay:     time.Minute,
			targetsDelay: 10 * time.Minute,
			withTargets:  []string{SignalRecompute},
			wantRuns:     2,
		},
		{
			name:            "compute delivered with the Materialize completion joins the run",
			matDelay:        10 * time.Minute,
			withMaterialize: []string{SignalCompute},
			wantRuns:        1,
		},
		{
			name:       "compute while BeginCompute runs joins the run",
			beginDelay: 10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalCompute}},
			wantRuns:   1,
		},
		{
			// The run has not read the definition yet as far as the workflow knows (see the
			// report: BeginCompute may in fact already have read it).
			name:       "recompute while BeginCompute runs is served by the run",
			beginDelay: 10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalRecompute}},
			wantRuns:   1,
		},
		{
			// BeginCompute read the version just before a PATCH committed and the recompute
			// signal arrived while it ran: the result says the definition moved on.
			name:       "a run that computed an older version than the latest runs again",
			beginDelay: 10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalRecompute}},
			staleFirst: true,
			wantRuns:   2,
		},
		{
			name:       "recompute delivered just before the BeginCompute completion is served by the run",
			beginDelay: time.Minute,
			withBegin:  []string{SignalRecompute},
			wantRuns:   1,
		},
		{
			// Only the first request of a task can be ordered against the completion; the
			// others count as after it, which costs at most one extra run, never a request.
			name:            "two computes delivered with the Materialize completion give one extra run",
			matDelay:        10 * time.Minute,
			withMaterialize: []string{SignalCompute, SignalCompute},
			wantRuns:        2,
		},
		{
			name:            "recompute delivered with the Materialize completion runs once more",
			matDelay:        10 * time.Minute,
			withMaterialize: []string{SignalRecompute},
			wantRuns:        2,
		},
		{
			name:       "compute delivered with the final FailCompute completion runs again",
			matErrs:    map[int]error{1: appErr("bad definition", activities.ErrTypeInvalidSegment)},
			failDelay:  time.Minute,
			withFail:   []string{SignalCompute},
			wantBegins: 2,
			wantRuns:   1,
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 101, Message: "bad definition"},
			},
		},
		{
			name:        "invalid segment fails the compute",
			matErrs:     map[int]error{1: appErr("unknown property \"plan\"", activities.ErrTypeInvalidSegment)},
			wantBegins:  1,
			wantErrType: activities.ErrTypeInvalidSegment,
			wantErrMsg:  "unknown property \"plan\"",
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 101, Message: "unknown property \"plan\""},
			},
		},
		{
			name:        "no definition fails before the run begins",
			beginErrs:   map[int]error{1: appErr("segment 42: segment has no definition", activities.ErrTypeNoDefinition)},
			wantBegins:  1,
			wantErrType: activities.ErrTypeNoDefinition,
			wantErrMsg:  "segment has no definition",
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 0, Message: "segment 42: segment has no definition"},
			},
		},
		{
			name:        "compute signal during a failing load does not rerun",
			matDelay:    10 * time.Minute,
			matErrs:     map[int]error{1: appErr("boom", activities.ErrTypeInvalidSegment)},
			signals:     []timedSignal{{time.Minute, SignalCompute}},
			wantBegins:  1,
			wantErrType: activities.ErrTypeInvalidSegment,
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 101, Message: "boom"},
			},
		},
		{
			name:       "failure with a pending recompute runs again",
			matDelay:   10 * time.Minute,
			matErrs:    map[int]error{1: appErr("bad definition", activities.ErrTypeInvalidSegment)},
			signals:    []timedSignal{{time.Minute, SignalRecompute}},
			wantBegins: 2,
			wantRuns:   1, // only the second run succeeded
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 101, Message: "bad definition"},
			},
		},
		{
			name:       "compute signal while recording the failure runs again",
			matErrs:    map[int]error{1: appErr("bad definition", activities.ErrTypeInvalidSegment)},
			failDelay:  10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalCompute}},
			wantBegins: 2,
			wantRuns:   1,
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 101, Message: "bad definition"},
			},
		},
		{
			name:        "both runs failing returns the second error",
			matDelay:    10 * time.Minute,
			matErrs:     map[int]error{1: appErr("first", activities.ErrTypeInvalidSegment), 2: appErr("second", activities.ErrTypeInvalidSegment)},
			signals:     []timedSignal{{time.Minute, SignalRecompute}},
			wantBegins:  2,
			wantErrType: activities.ErrTypeInvalidSegment,
			wantErrMsg:  "second",
			wantFails: []activities.FailComputeInput{
				{TenantID: testTenant, SegmentID: testSegment, RunID: 101, Message: "first"},
				{TenantID: testTenant, SegmentID: testSegment, RunID: 102, Message: "second"},
			},
		},
		{
			name:       "two connectors start two abandoned sync children",
			connectors: []int64{3, 9},
			wantRuns:   1,
			wantChildren: []childStart{
				{ID: "activation-sync:7:3:101", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 3, RunID: 101, Trigger: TriggerRecompute}},
				{ID: "activation-sync:7:9:101", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 9, RunID: 101, Trigger: TriggerRecompute}},
			},
		},
		{
			name:       "failing sync children do not fail the compute",
			connectors: []int64{3, 9},
			childErr:   temporal.NewNonRetryableApplicationError("platform said no", "ActivationFailed", nil),
			wantRuns:   1,
			wantChildren: []childStart{
				{ID: "activation-sync:7:3:101", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 3, RunID: 101, Trigger: TriggerRecompute}},
				{ID: "activation-sync:7:9:101", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 9, RunID: 101, Trigger: TriggerRecompute}},
			},
		},
		{
			name:         "sync children that cannot start do not fail the compute",
			connectors:   []int64{3},
			childNoStart: true,
			wantRuns:     1,
			// the start is attempted (the listener sees it) and fails
			wantChildren: []childStart{
				{ID: "activation-sync:7:3:101", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 3, RunID: 101, Trigger: TriggerRecompute}},
			},
		},
		{
			name:       "a failing ActivationTargets does not fail the compute",
			targetsErr: appErr("connectors unavailable", "Whatever"),
			wantRuns:   1,
		},
		{
			name:       "each run fans out with its own run id",
			connectors: []int64{3},
			matDelay:   10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalRecompute}},
			wantRuns:   2,
			wantChildren: []childStart{
				{ID: "activation-sync:7:3:101", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 3, RunID: 101, Trigger: TriggerRecompute}},
				{ID: "activation-sync:7:3:102", ParentID: wfID, Input: ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: 3, RunID: 102, Trigger: TriggerRecompute}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, out, err := runCompute(t, c)
			rec.mu.Lock()
			defer rec.mu.Unlock()

			if c.wantErrType == "" {
				if err != nil {
					t.Fatalf("workflow error: %v", err)
				}
			} else {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) {
					t.Fatalf("workflow error = %v, want an application error of type %s", err, c.wantErrType)
				}
				if app.Type() != c.wantErrType {
					t.Errorf("error type = %q, want %q", app.Type(), c.wantErrType)
				}
				if !strings.Contains(err.Error(), c.wantErrMsg) {
					t.Errorf("error %q does not contain %q", err, c.wantErrMsg)
				}
			}

			wantBegins := c.wantBegins
			if wantBegins == 0 {
				wantBegins = c.wantRuns
			}
			if len(rec.begins) != wantBegins {
				t.Errorf("BeginCompute called %d times, want %d", len(rec.begins), wantBegins)
			}
			for i, in := range rec.begins {
				want := activities.BeginComputeInput{TenantID: testTenant, SegmentID: testSegment, WorkflowID: wfID}
				if in != want {
					t.Errorf("BeginCompute #%d input = %+v, want %+v", i+1, in, want)
				}
			}
			// Materialize gets the run BeginCompute made, in order.
			for i, in := range rec.materializes {
				if in.TenantID != testTenant {
					t.Errorf("Materialize #%d tenant = %d", i+1, in.TenantID)
				}
			}
			wantMatRuns := []int64{}
			for i := 1; i <= len(rec.begins); i++ {
				if c.beginErrs[i] == nil {
					wantMatRuns = append(wantMatRuns, int64(100+i))
				}
			}
			gotMatRuns := []int64{}
			for _, in := range rec.materializes {
				gotMatRuns = append(gotMatRuns, in.RunID)
			}
			if !reflect.DeepEqual(gotMatRuns, wantMatRuns) {
				t.Errorf("Materialize runs = %v, want %v", gotMatRuns, wantMatRuns)
			}

			if c.wantErrType == "" {
				if out.Runs != c.wantRuns {
					t.Errorf("Runs = %d, want %d", out.Runs, c.wantRuns)
				}
				if len(rec.results) == 0 {
					t.Fatal("no Materialize succeeded")
				}
				if last := rec.results[len(rec.results)-1]; out.Last != last {
					t.Errorf("Last = %+v, want the last Materialize result %+v", out.Last, last)
				}
			}

			if c.wantFails == nil {
				c.wantFails = []activities.FailComputeInput{}
			}
			if rec.fails == nil {
				rec.fails = []activities.FailComputeInput{}
			}
			if !reflect.DeepEqual(rec.fails, c.wantFails) {
				t.Errorf("FailCompute inputs = %+v, want %+v", rec.fails, c.wantFails)
			}

			if len(rec.targets) != c.wantRuns {
				t.Errorf("ActivationTargets called %d times, want once per loaded run (%d)", len(rec.targets), c.wantRuns)
			}
			for i, in := range rec.targets {
				if i < len(rec.results) {
					want := activities.ActivationTargetsInput{TenantID: testTenant, SegmentID: testSegment, RunID: rec.results[i].RunID}
					if in != want {
						t.Errorf("ActivationTargets #%d input = %+v, want %+v", i+1, in, want)
					}
				}
			}

			if c.wantChildren == nil {
				c.wantChildren = []childStart{}
			}
			if got := append([]childStart{}, rec.children...); !reflect.DeepEqual(got, c.wantChildren) {
				t.Errorf("children = %+v, want %+v", got, c.wantChildren)
			}
		})
	}
}

// TestSegmentComputeChildOptions checks the search attributes of the activation children (the
// listener does not see them); TestSegmentComputeAbandonsSyncChildren checks their parent close
// policy.
func TestSegmentComputeChildOptions(t *testing.T) {
	env := newTestEnv()
	env.RegisterActivity(&activities.Segments{})
	env.OnActivity(acts.BeginCompute, mock.Anything, mock.Anything).Return(activities.BeginComputeResult{RunID: 5, Version: 1}, nil)
	env.OnActivity(acts.Materialize, mock.Anything, mock.Anything).Return(segment.RunResult{RunID: 5, Version: 1, Matched: 3}, nil)
	env.OnActivity(acts.ActivationTargets, mock.Anything, mock.Anything).Return(activities.ActivationTargetsResult{ConnectorIDs: []int64{11}}, nil)
	env.OnActivity(acts.FailCompute, mock.Anything, mock.Anything).Return(nil).Never()

	type seen struct {
		tenant, segment, connector int64
		ok                         bool
	}
	var mu sync.Mutex
	var got []seen
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ActivationSyncInput) error {
		sa := workflow.GetTypedSearchAttributes(ctx)
		tn, ok1 := sa.GetInt64(temporal.NewSearchAttributeKeyInt64(SearchAttrTenant))
		sg, ok2 := sa.GetInt64(temporal.NewSearchAttributeKeyInt64(SearchAttrSegment))
		cn, ok3 := sa.GetInt64(temporal.NewSearchAttributeKeyInt64(SearchAttrConnector))
		mu.Lock()
		got = append(got, seen{tn, sg, cn, ok1 && ok2 && ok3})
		mu.Unlock()
		return nil
	}, workflow.RegisterOptions{Name: ActivationSyncWorkflow})

	env.ExecuteWorkflow(SegmentCompute, SegmentComputeInput{TenantID: testTenant, SegmentID: testSegment})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	env.AssertExpectations(t)
	mu.Lock()
	defer mu.Unlock()
	want := []seen{{testTenant, testSegment, 11, true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("child search attributes = %+v, want %+v", got, want)
	}
}

// TestSegmentComputeAbandonsSyncChildren: the compute ends without waiting for its sync
// children, and they run to their end after it (abandoned, not terminated with the parent).
func TestSegmentComputeAbandonsSyncChildren(t *testing.T) {
	env := newTestEnv()
	env.RegisterActivity(&activities.Segments{})
	env.OnActivity(acts.BeginCompute, mock.Anything, mock.Anything).Return(activities.BeginComputeResult{RunID: 5, Version: 1}, nil).Once()
	env.OnActivity(acts.Materialize, mock.Anything, mock.Anything).Return(segment.RunResult{RunID: 5, Version: 1, Matched: 3}, nil).Once()
	env.OnActivity(acts.ActivationTargets, mock.Anything, mock.Anything).Return(activities.ActivationTargetsResult{ConnectorIDs: []int64{3, 9}}, nil).Once()
	var mu sync.Mutex
	finished := map[int64]bool{}
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ActivationSyncInput) error {
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return err
		}
		mu.Lock()
		finished[in.ConnectorID] = true
		mu.Unlock()
		if in.ConnectorID == 9 {
			return temporal.NewNonRetryableApplicationError("platform said no", "ActivationFailed", nil)
		}
		return nil
	}, workflow.RegisterOptions{Name: ActivationSyncWorkflow})
	checked, parentDoneEarly := false, false
	env.RegisterDelayedCallback(func() { checked, parentDoneEarly = true, env.IsWorkflowCompleted() }, 30*time.Minute)

	env.ExecuteWorkflow(SegmentCompute, SegmentComputeInput{TenantID: testTenant, SegmentID: testSegment})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out SegmentComputeResult
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if out.Runs != 1 {
		t.Errorf("Runs = %d, want 1", out.Runs)
	}
	env.AssertExpectations(t)
	switch {
	case !checked:
		t.Error("nothing ran 30 minutes after the start: the sync children did not outlive the compute")
	case !parentDoneEarly:
		t.Error("the compute waited for its sync children")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[int64]bool{3: true, 9: true}; !reflect.DeepEqual(finished, want) {
		t.Errorf("children that ran to their end = %v, want %v", finished, want)
	}
}

func TestFailureMessage(t *testing.T) {
	timeout := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"application error", temporal.NewNonRetryableApplicationError("bad field", activities.ErrTypeInvalidSegment, nil), "bad field"},
		{"wrapped application error", fmt.Errorf("activity: %w", temporal.NewApplicationError("quota", "Q")), "quota"},
		{"timeout names the job", fmt.Errorf("activity: %w", timeout), "the export timed out: " + timeout.Error()},
		{"plain error", errors.New("plain"), "plain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := failureMessage("export", c.err); got != c.want {
				t.Errorf("failureMessage = %q, want %q", got, c.want)
			}
		})
	}
}

func TestSegmentDraft(t *testing.T) {
	def := json.RawMessage(`{"all":[{"event":"signup"}]}`)
	saved := &segment.Segment{ID: testSegment, TenantID: testTenant, Name: "ai", Definition: def, Version: 4, Status: "draft"}
	type draftAnswer struct {
		res activities.DraftResult
		err error
	}
	cases := []struct {
		name        string
		answers     []draftAnswer // by attempt; the last repeats
		saveErr     error
		wantPrev    []string // PreviousError of each DraftDefinition call, one per call
		wantSaved   bool
		wantErrType string
		wantErrMsg  string
	}{
		{
			name:      "valid at once",
			answers:   []draftAnswer{{res: activities.DraftResult{Definition: def}}},
			wantPrev:  []string{""},
			wantSaved: true,
		},
		{
			name: "invalid twice then valid",
			answers: []draftAnswer{
				{res: activities.DraftResult{Invalid: "unknown event \"sign_up\""}},
				{res: activities.DraftResult{Invalid: "no JSON in the answer"}},
				{res: activities.DraftResult{Definition: def}},
			},
			wantPrev:  []string{"", "unknown event \"sign_up\"", "no JSON in the answer"},
			wantSaved: true,
		},
		{
			name: "always invalid",
			answers: []draftAnswer{
				{res: activities.DraftResult{Invalid: "first problem"}},
				{res: activities.DraftResult{Invalid: "second problem"}},
				{res: activities.DraftResult{Invalid: "third problem"}},
			},
			wantPrev:    []string{"", "first problem", "second problem"}, // DraftAttempts calls
			wantErrType: activities.ErrTypeInvalidLLMOutput,
			wantErrMsg:  "third problem",
		},
		{
			name:        "provider error is surfaced",
			answers:     []draftAnswer{{err: appErr("only ai segments are drafted", activities.ErrTypeInvalidSegment)}},
			wantPrev:    []string{""},
			wantErrType: activities.ErrTypeInvalidSegment,
			wantErrMsg:  "only ai segments are drafted",
		},
		{
			name: "error after an invalid attempt is surfaced",
			answers: []draftAnswer{
				{res: activities.DraftResult{Invalid: "first problem"}},
				{err: appErr("segment gone", activities.ErrTypeSegmentGone)},
			},
			wantPrev:    []string{"", "first problem"},
			wantErrType: activities.ErrTypeSegmentGone,
			wantErrMsg:  "segment gone",
		},
		{
			name:        "save error is surfaced",
			answers:     []draftAnswer{{res: activities.DraftResult{Definition: def}}},
			saveErr:     appErr("segment gone", activities.ErrTypeSegmentGone),
			wantPrev:    []string{""},
			wantSaved:   true,
			wantErrType: activities.ErrTypeSegmentGone,
			wantErrMsg:  "segment gone",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv()
			env.RegisterActivity(&activities.Segments{})
			var mu sync.Mutex
			var prevs []string
			var saves []activities.SaveDraftInput
			env.OnActivity(acts.DraftDefinition, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.DraftInput) (activities.DraftResult, error) {
					mu.Lock()
					defer mu.Unlock()
					if in.TenantID != testTenant || in.SegmentID != testSegment {
						t.Errorf("DraftDefinition input = %+v", in)
					}
					prevs = append(prevs, in.PreviousError)
					a := c.answers[min(len(prevs), len(c.answers))-1]
					return a.res, a.err
				})
			env.OnActivity(acts.SaveDraft, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.SaveDraftInput) (*segment.Segment, error) {
					mu.Lock()
					defer mu.Unlock()
					saves = append(saves, in)
					if c.saveErr != nil {
						return nil, c.saveErr
					}
					return saved, nil
				})

			env.ExecuteWorkflow(SegmentDraft, SegmentDraftInput{TenantID: testTenant, SegmentID: testSegment})
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			err := env.GetWorkflowError()
			mu.Lock()
			defer mu.Unlock()

			if !reflect.DeepEqual(prevs, c.wantPrev) {
				t.Errorf("DraftDefinition PreviousError per call = %q, want %q", prevs, c.wantPrev)
			}
			if c.wantSaved {
				want := []activities.SaveDraftInput{{TenantID: testTenant, SegmentID: testSegment, Definition: def}}
				if !reflect.DeepEqual(saves, want) {
					t.Errorf("SaveDraft inputs = %+v, want %+v", saves, want)
				}
			} else if len(saves) != 0 {
				t.Errorf("SaveDraft called with %+v, want never", saves)
			}

			if c.wantErrType != "" {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) {
					t.Fatalf("workflow error = %v, want an application error of type %s", err, c.wantErrType)
				}
				if app.Type() != c.wantErrType {
					t.Errorf("error type = %q, want %q", app.Type(), c.wantErrType)
				}
				if !strings.Contains(app.Error(), c.wantErrMsg) {
					t.Errorf("error %q does not contain %q", app.Error(), c.wantErrMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			var out segment.Segment
			if err := env.GetWorkflowResult(&out); err != nil {
				t.Fatal(err)
			}
			if out.ID != saved.ID || out.Version != saved.Version || out.Status != "draft" || string(out.Definition) != string(def) {
				t.Errorf("result = %+v, want %+v", out, *saved)
			}
		})
	}
}

// TestSegmentDraftRetriesProviderFailures: a transient provider error is retried by Temporal
// (the activity's retry policy), not counted as an attempt of the model.
func TestSegmentDraftRetriesProviderFailures(t *testing.T) {
	env := newTestEnv()
	env.RegisterActivity(&activities.Segments{})
	def := json.RawMessage(`{"all":[]}`)
	env.OnActivity(acts.DraftDefinition, mock.Anything, mock.Anything).Return(activities.DraftResult{}, errors.New("503 from provider")).Twice()
	env.OnActivity(acts.DraftDefinition, mock.Anything, mock.Anything).Return(activities.DraftResult{Definition: def}, nil).Once()
	env.OnActivity(acts.SaveDraft, mock.Anything, mock.Anything).Return(&segment.Segment{ID: testSegment, Definition: def}, nil).Once()
	env.ExecuteWorkflow(SegmentDraft, SegmentDraftInput{TenantID: testTenant, SegmentID: testSegment})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	env.AssertExpectations(t)
	env.AssertActivityNumberOfCalls(t, "DraftDefinition", 3)
}

func TestSegmentExport(t *testing.T) {
	cases := []struct {
		name       string
		errs       []error // the first attempts' errors, in order
		writeErr   error   // then every attempt's error
		wantWrites int     // WriteExport attempts
		wantFail   *activities.FailExportInput
		wantErr    string
		wantRes    activities.ExportResult
	}{
		{
			name:       "written",
			wantWrites: 1,
			wantRes:    activities.ExportResult{RowCount: 1234, Key: "exports/7/9.csv"},
		},
		{
			name:       "permanent failure is not retried",
			writeErr:   appErr("segment 42 is not computed", activities.ErrTypeInvalidSegment),
			wantWrites: 1,
			wantFail:   &activities.FailExportInput{TenantID: testTenant, ExportID: 9, Message: "segment 42 is not computed"},
			wantErr:    activities.ErrTypeInvalidSegment,
		},
		{
			name:       "write keeps failing after retries",
			writeErr:   errors.New("blob store down"),
			wantWrites: 3, // the retry policy's MaximumAttempts
			wantFail:   &activities.FailExportInput{TenantID: testTenant, ExportID: 9, Message: "blob store down"},
			wantErr:    "blob store down",
		},
		{
			// Rolling restarts hand the write back four times: none of them uses one of the
			// retry policy's 3 attempts, which remain for real failures.
			name:       "hand-backs use none of the attempts",
			errs:       []error{handBack(), handBack(), errors.New("blob store down"), handBack(), handBack(), errors.New("blob store down")},
			wantWrites: 7,
			wantRes:    activities.ExportResult{RowCount: 1234, Key: "exports/7/9.csv"},
		},
		{
			name:       "hand-backs are bounded",
			writeErr:   handBack(),
			wantWrites: maxHandBacks + 1,
			wantFail:   &activities.FailExportInput{TenantID: testTenant, ExportID: 9, Message: "the worker is stopping"},
			wantErr:    activities.ErrTypeWorkerStopping,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv()
			env.RegisterActivity(&activities.Segments{})
			var mu sync.Mutex
			var writes []activities.ExportInput
			var fails []activities.FailExportInput
			env.OnActivity(acts.WriteExport, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.ExportInput) (activities.ExportResult, error) {
					mu.Lock()
					defer mu.Unlock()
					writes = append(writes, in)
					if n := len(writes); n <= len(c.errs) {
						return activities.ExportResult{}, c.errs[n-1]
					}
					if c.writeErr != nil {
						return activities.ExportResult{}, c.writeErr
					}
					return c.wantRes, nil
				})
			env.OnActivity(acts.FailExport, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.FailExportInput) error {
					mu.Lock()
					defer mu.Unlock()
					fails = append(fails, in)
					return nil
				})

			env.ExecuteWorkflow(SegmentExport, SegmentExportInput{TenantID: testTenant, ExportID: 9})
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			err := env.GetWorkflowError()
			mu.Lock()
			defer mu.Unlock()
			if len(writes) != c.wantWrites {
				t.Errorf("WriteExport called %d times, want %d", len(writes), c.wantWrites)
			}
			for _, in := range writes {
				if in != (activities.ExportInput{TenantID: testTenant, ExportID: 9}) {
					t.Errorf("WriteExport input = %+v", in)
				}
			}
			if c.wantFail == nil {
				if err != nil {
					t.Fatalf("workflow error: %v", err)
				}
				if len(fails) != 0 {
					t.Errorf("FailExport called with %+v, want never", fails)
				}
				var res activities.ExportResult
				if err := env.GetWorkflowResult(&res); err != nil {
					t.Fatal(err)
				}
				if res != c.wantRes {
					t.Errorf("result = %+v, want %+v", res, c.wantRes)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("workflow error = %v, want one containing %q", err, c.wantErr)
			}
			if !reflect.DeepEqual(fails, []activities.FailExportInput{*c.wantFail}) {
				t.Errorf("FailExport inputs = %+v, want [%+v]", fails, *c.wantFail)
			}
		})
	}
}

// runBusyCompute runs SegmentCompute where every run up to requestRuns gets a recompute request
// while it computes (so one more run is due after it), and, when lateRequest, a request delivered
// with the completion of the next run's fan-out (in the workflow task that decides whether to
// run again). It returns the Materialize calls and the workflow's result and error.
func runBusyCompute(t *testing.T, requestRuns int, lateRequest bool, begin func(n int) error) (int, SegmentComputeResult, error) {
	t.Helper()
	env := newTestEnv()
	env.RegisterActivity(&activities.Segments{})
	env.RegisterWorkflow(SegmentCompute)
	var mu sync.Mutex
	begins, mats, targets := 0, 0, 0
	env.OnActivity(acts.BeginCompute, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.BeginComputeInput) (activities.BeginComputeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			begins++
			if begin != nil {
				if err := begin(begins); err != nil {
					return activities.BeginComputeResult{}, err
				}
			}
			return activities.BeginComputeResult{RunID: int64(begins), Version: 1}, nil
		})
	env.OnActivity(acts.Materialize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MaterializeInput) (segment.RunResult, error) {
			mu.Lock()
			defer mu.Unlock()
			mats++
			if mats <= requestRuns {
				env.SignalWorkflowSkippingWorkflowTask(SignalRecompute, nil)
			}
			return segment.RunResult{RunID: in.RunID, Version: 1, LatestVersion: 1}, nil
		})
	env.OnActivity(acts.ActivationTargets, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ActivationTargetsInput) (activities.ActivationTargetsResult, error) {
			mu.Lock()
			defer mu.Unlock()
			targets++
			if lateRequest && targets == requestRuns+1 {
				env.SignalWorkflowSkippingWorkflowTask(SignalCompute, nil)
			}
			return activities.ActivationTargetsResult{}, nil
		})
	env.OnActivity(acts.FailCompute, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(SegmentCompute, SegmentComputeInput{TenantID: testTenant, SegmentID: testSegment})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var res SegmentComputeResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&res); gerr != nil {
			t.Fatal(gerr)
		}
	}
	return mats, res, err
}

func TestSegmentComputeContinuesAsNew(t *testing.T) {
	cases := []struct {
		name        string
		requestRuns int  // runs that get a request while they compute
		lateRequest bool // one more request with the last run's final workflow task
		wantRuns    int  // runs of this execution
		wantCAN     bool
	}{
		{name: "a few requests: one execution", requestRuns: 5, wantRuns: 6},
		{name: "requests beyond the bound continue as new", requestRuns: segmentComputeMaxRuns + 20, wantRuns: segmentComputeMaxRuns, wantCAN: true},
		{name: "the bound reached with nothing pending ends", requestRuns: segmentComputeMaxRuns - 1, wantRuns: segmentComputeMaxRuns},
		// The request arrives in the very task that sees the bound: it must be taken and carried.
		{name: "a request in the last task is carried over", requestRuns: segmentComputeMaxRuns - 1, lateRequest: true, wantRuns: segmentComputeMaxRuns, wantCAN: true},
		{name: "a request in the last task of a short execution runs", requestRuns: 2, lateRequest: true, wantRuns: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mats, res, err := runBusyCompute(t, tc.requestRuns, tc.lateRequest, nil)
			if mats != tc.wantRuns {
				t.Fatalf("runs = %d, want %d", mats, tc.wantRuns)
			}
			var can *workflow.ContinueAsNewError
			if !tc.wantCAN {
				if err != nil || res.Runs != tc.wantRuns {
					t.Fatalf("result %+v, error %v; want %d runs and no continue-as-new", res, err, tc.wantRuns)
				}
				return
			}
			if !errors.As(err, &can) {
				t.Fatalf("error = %v, want continue-as-new", err)
			}
			if can.WorkflowType.Name != "SegmentCompute" {
				t.Fatalf("continued as %s", can.WorkflowType.Name)
			}
			var next SegmentComputeInput
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatal(err)
			}
			if next != (SegmentComputeInput{TenantID: testTenant, SegmentID: testSegment}) {
				t.Fatalf("continued with %+v", next)
			}
			// The new execution starts with the run the carried requests asked for.
			mats, res, err = runBusyCompute(t, 0, false, nil)
			if err != nil || mats != 1 || res.Runs != 1 {
				t.Fatalf("the continued execution: %d runs, %+v, %v; want one run", mats, res, err)
			}
		})
	}
}

// A leftover refresh schedule starts computes of a deleted segment: they end quietly.
func TestSegmentComputeSegmentGone(t *testing.T) {
	gone := temporal.NewNonRetryableApplicationError("segment 42: not found", activities.ErrTypeSegmentGone, nil)
	mats, res, err := runBusyCompute(t, 0, false, func(int) error { return gone })
	if err != nil || mats != 0 || res.Runs != 0 {
		t.Fatalf("compute of a deleted segment: %d runs, %+v, %v; want none and no error", mats, res, err)
	}
}

// handBack is the failure of an activity handed back by a stopping worker (worker/stop.go).
func handBack() error {
	return temporal.NewApplicationError("the worker is stopping", activities.ErrTypeWorkerStopping)
}
