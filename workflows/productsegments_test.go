package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// psActs is the receiver of the mocked product segment activity methods.
var psActs *activities.ProductSegments

const testProductSegment = int64(31)

// psRecorder records the mocked activities' inputs (the mocks run on the test environment's
// goroutines, hence the lock).
type psRecorder struct {
	mu       sync.Mutex
	begins   []activities.BeginProductSegmentComputeInput
	computes []activities.ComputeProductSegmentInput
	fails    []activities.FailProductSegmentComputeInput
}

type psCase struct {
	name         string
	beginDelay   time.Duration
	computeDelay time.Duration
	failDelay    time.Duration
	beginErrs    map[int]error // by BeginProductSegmentCompute call (1-based)
	computeErrs  map[int]error // by ComputeProductSegment call (1-based)
	failErr      error
	signals      []timedSignal
	// signals delivered in the same workflow task as, and just before, the completion of the
	// first ComputeProductSegment
	withCompute []string

	wantBegins   int
	wantComputes int
	wantRuns     int    // successful runs (the result's Runs when the workflow succeeds)
	wantErrType  string // "" means the workflow succeeds
	wantFails    []string
}

func runProductSegmentCompute(t *testing.T, c psCase) (*psRecorder, ProductSegmentComputeResult, error) {
	t.Helper()
	env := newTestEnv()
	env.RegisterActivity(&activities.ProductSegments{})
	env.RegisterWorkflow(ProductSegmentCompute)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ProductSegmentComputeID(testTenant, testProductSegment), TaskQueue: "test"})
	rec := &psRecorder{}
	env.OnActivity(psActs.BeginProductSegmentCompute, mock.Anything, mock.Anything).After(c.beginDelay).Return(
		func(_ context.Context, in activities.BeginProductSegmentComputeInput) (activities.BeginProductSegmentComputeResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.begins = append(rec.begins, in)
			return activities.BeginProductSegmentComputeResult{}, c.beginErrs[len(rec.begins)]
		})
	env.OnActivity(psActs.ComputeProductSegment, mock.Anything, mock.Anything).After(c.computeDelay).Return(
		func(_ context.Context, in activities.ComputeProductSegmentInput) (prodseg.ComputeResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.computes = append(rec.computes, in)
			n := len(rec.computes)
			if n == 1 {
				for _, name := range c.withCompute {
					env.SignalWorkflowSkippingWorkflowTask(name, nil)
				}
			}
			if err := c.computeErrs[n]; err != nil {
				return prodseg.ComputeResult{}, err
			}
			return prodseg.ComputeResult{Matched: int64(10 * n), Added: int64(n), Version: 1}, nil
		})
	env.OnActivity(psActs.FailProductSegmentCompute, mock.Anything, mock.Anything).After(c.failDelay).Return(
		func(_ context.Context, in activities.FailProductSegmentComputeInput) (activities.FailProductSegmentComputeResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.fails = append(rec.fails, in)
			return activities.FailProductSegmentComputeResult{}, c.failErr
		})
	for _, sig := range c.signals {
		name := sig.name
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, nil) }, sig.at)
	}
	env.ExecuteWorkflow(ProductSegmentCompute, ProductSegmentComputeInput{TenantID: testTenant, SegmentID: testProductSegment})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var out ProductSegmentComputeResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&out); gerr != nil {
			t.Fatalf("workflow result: %v", gerr)
		}
	}
	return rec, out, err
}

func TestProductSegmentComputeWorkflow(t *testing.T) {
	invalid := appErr("the definition no longer fits the product schema: conditions[0].field: is not a field", activities.ErrTypeProductSegmentInvalid)
	gone := appErr("product segment 31: not found", activities.ErrTypeProductSegmentGone)
	cases := []psCase{
		{name: "one run", wantBegins: 1, wantComputes: 1, wantRuns: 1},
		{name: "slow activities", beginDelay: time.Minute, computeDelay: time.Hour, wantBegins: 1, wantComputes: 1, wantRuns: 1},
		{
			name: "the starting signal does not rerun", beginDelay: time.Second, computeDelay: time.Minute,
			signals: []timedSignal{{0, SignalCompute}}, wantBegins: 1, wantComputes: 1, wantRuns: 1,
		},
		{
			name: "a request while the run starts joins it", beginDelay: 10 * time.Minute,
			signals: []timedSignal{{time.Minute, SignalCompute}, {2 * time.Minute, SignalCompute}}, wantBegins: 1, wantComputes: 1, wantRuns: 1,
		},
		{
			name: "a request while computing runs once more", computeDelay: 10 * time.Minute,
			signals: []timedSignal{{time.Minute, SignalCompute}}, wantBegins: 2, wantComputes: 2, wantRuns: 2,
		},
		{
			name: "several requests while computing run once more", computeDelay: 10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalCompute}, {2 * time.Minute, SignalCompute}, {3 * time.Minute, SignalCompute}},
			wantBegins: 2, wantComputes: 2, wantRuns: 2,
		},
		{
			name: "a request in each run's computation", computeDelay: 10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalCompute}, {15 * time.Minute, SignalCompute}},
			wantBegins: 3, wantComputes: 3, wantRuns: 3,
		},
		{
			name: "a request delivered with the compute's completion is not dropped", computeDelay: time.Minute,
			withCompute: []string{SignalCompute}, wantBegins: 2, wantComputes: 2, wantRuns: 2,
		},
		{
			name: "an invalid definition fails the compute", computeErrs: map[int]error{1: invalid},
			wantBegins: 1, wantComputes: 1, wantErrType: activities.ErrTypeProductSegmentInvalid,
			wantFails: []string{"the definition no longer fits the product schema: conditions[0].field: is not a field"},
		},
		{
			name: "a deleted segment fails before computing", beginErrs: map[int]error{1: gone},
			wantBegins: 1, wantComputes: 0, wantErrType: activities.ErrTypeProductSegmentGone,
			wantFails: []string{"product segment 31: not found"},
		},
		{
			name: "recording the failure failing keeps the compute's error", computeErrs: map[int]error{1: invalid},
			failErr:    appErr("database down", "Unavailable"),
			wantBegins: 1, wantComputes: 1, wantErrType: activities.ErrTypeProductSegmentInvalid,
			wantFails: []string{"the definition no longer fits the product schema: conditions[0].field: is not a field"},
		},
		{
			name: "a request during a failing compute runs again", computeDelay: 10 * time.Minute, computeErrs: map[int]error{1: invalid},
			signals:    []timedSignal{{time.Minute, SignalCompute}},
			wantBegins: 2, wantComputes: 2, wantRuns: 1,
			wantFails: []string{"the definition no longer fits the product schema: conditions[0].field: is not a field"},
		},
		{
			name: "a request while recording the failure runs again", computeErrs: map[int]error{1: invalid}, failDelay: 10 * time.Minute,
			signals:    []timedSignal{{time.Minute, SignalCompute}},
			wantBegins: 2, wantComputes: 2, wantRuns: 1,
			wantFails: []string{"the definition no longer fits the product schema: conditions[0].field: is not a field"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, out, err := runProductSegmentCompute(t, c)
			if c.wantErrType == "" {
				if err != nil {
					t.Fatalf("workflow error: %v", err)
				}
				if out.Runs != c.wantRuns || out.Last.Matched != int64(10*c.wantComputes) {
					t.Errorf("result %+v, want %d runs, the last of compute call %d", out, c.wantRuns, c.wantComputes)
				}
			} else {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != c.wantErrType {
					t.Fatalf("workflow error %v, want application error %s", err, c.wantErrType)
				}
			}
			if len(rec.begins) != c.wantBegins || len(rec.computes) != c.wantComputes {
				t.Errorf("%d begins and %d computes, want %d and %d", len(rec.begins), len(rec.computes), c.wantBegins, c.wantComputes)
			}
			want := activities.ComputeProductSegmentInput{TenantID: testTenant, SegmentID: testProductSegment}
			for i, in := range rec.computes {
				if in != want || (i < len(rec.begins) && rec.begins[i] != activities.BeginProductSegmentComputeInput(want)) {
					t.Errorf("call %d: begin %+v compute %+v, want %+v", i, rec.begins[i], in, want)
				}
			}
			var fails []string
			for _, f := range rec.fails {
				if f.TenantID != testTenant || f.SegmentID != testProductSegment {
					t.Errorf("fail input %+v", f)
				}
				fails = append(fails, f.Message)
			}
			if !slices.Equal(fails, c.wantFails) {
				t.Errorf("recorded failures %q, want %q", fails, c.wantFails)
			}
		})
	}
}

// fakeProductSegments is the service behind the real activities: it answers with the errors it
// is given, one per Compute call.
type fakeProductSegments struct {
	mu          sync.Mutex
	computeErrs []error
	computes    int
	begins      int
	errors      []string
}

func (f *fakeProductSegments) BeginCompute(_ context.Context, tenantID, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begins++
	if tenantID != testTenant || id != testProductSegment {
		return fmt.Errorf("product segment %d: %w", id, errs.ErrNotFound)
	}
	return nil
}

func (f *fakeProductSegments) Compute(_ context.Context, _, _ int64) (prodseg.ComputeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.computes++
	if f.computes <= len(f.computeErrs) && f.computeErrs[f.computes-1] != nil {
		return prodseg.ComputeResult{}, f.computeErrs[f.computes-1]
	}
	return prodseg.ComputeResult{Matched: 3, Added: 3, Version: 2}, nil
}

func (f *fakeProductSegments) MarkError(_ context.Context, _, _ int64, msg string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, msg)
	return nil
}

// TestProductSegmentComputeActivities runs the workflow with the real activities over a fake
// service: permanent errors are not retried and reach last_error as the service worded them;
// transient ones are retried.
func TestProductSegmentComputeActivities(t *testing.T) {
	cases := []struct {
		name         string
		segment      int64
		computeErrs  []error
		wantComputes int
		wantErrType  string // an application error of this type
		wantErrText  string // or any workflow error containing this
		wantError    string // recorded with MarkError
	}{
		{name: "success", segment: testProductSegment, wantComputes: 1},
		{name: "transient errors are retried", segment: testProductSegment, computeErrs: []error{errors.New("conn reset"), errors.New("conn reset")}, wantComputes: 3},
		{
			name: "a definition the schema no longer takes is permanent", segment: testProductSegment,
			computeErrs:  []error{&errs.ValidationError{Msg: "the definition no longer fits the product schema", Fields: map[string]string{"conditions[0].field": "is not a field"}}},
			wantComputes: 1, wantErrType: activities.ErrTypeProductSegmentInvalid,
			wantError: "the definition no longer fits the product schema: conditions[0].field: is not a field",
		},
		{
			name: "a segment deleted while computing is permanent", segment: testProductSegment,
			computeErrs:  []error{fmt.Errorf("product segment 31: %w", errs.ErrNotFound)},
			wantComputes: 1, wantErrType: activities.ErrTypeProductSegmentGone, wantError: "product segment 31: not found",
		},
		{name: "a missing segment never computes", segment: 99, wantComputes: 0, wantErrType: activities.ErrTypeProductSegmentGone, wantError: "product segment 99: not found"},
		{
			name: "transient errors that never end fail after three attempts", segment: testProductSegment,
			computeErrs:  []error{errors.New("conn reset"), errors.New("conn reset"), errors.New("conn reset")},
			wantComputes: 3, wantErrText: "conn reset", wantError: "conn reset",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv()
			svc := &fakeProductSegments{computeErrs: c.computeErrs}
			env.RegisterActivity(&activities.ProductSegments{Svc: svc})
			env.RegisterWorkflow(ProductSegmentCompute)
			env.ExecuteWorkflow(ProductSegmentCompute, ProductSegmentComputeInput{TenantID: testTenant, SegmentID: c.segment})
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			err := env.GetWorkflowError()
			switch {
			case c.wantErrText != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErrText) {
					t.Fatalf("workflow error %v, want one saying %q", err, c.wantErrText)
				}
			case c.wantErrType == "":
				if err != nil {
					t.Fatalf("workflow error: %v", err)
				}
				var out ProductSegmentComputeResult
				if err := env.GetWorkflowResult(&out); err != nil || out.Runs != 1 || out.Last != (prodseg.ComputeResult{Matched: 3, Added: 3, Version: 2}) {
					t.Errorf("result %+v %v", out, err)
				}
			default:
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != c.wantErrType {
					t.Fatalf("workflow error %v, want application error %s", err, c.wantErrType)
				}
			}
			if svc.computes != c.wantComputes || svc.begins != 1 {
				t.Errorf("%d begins and %d computes, want 1 and %d", svc.begins, svc.computes, c.wantComputes)
			}
			var wantErrors []string
			if c.wantError != "" {
				wantErrors = []string{c.wantError}
			}
			if !slices.Equal(svc.errors, wantErrors) {
				t.Errorf("last_error written %q, want %q", svc.errors, wantErrors)
			}
		})
	}
}

func TestProductSegmentComputeID(t *testing.T) {
	if got := ProductSegmentComputeID(7, 31); got != "product-segment-compute:7:31" {
		t.Errorf("id %q", got)
	}
	if strings.HasPrefix(ProductSegmentComputeID(7, 31), SegmentComputeID(7, 31)) {
		t.Error("product segment and segment compute ids overlap")
	}
}
