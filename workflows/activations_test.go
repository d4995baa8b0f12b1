package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/errs"
)

// syncActs is the receiver of the mocked activation activities (see acts in segments_test.go).
var syncActs *activities.Activations

const (
	testConnector  = int64(3)
	testSegmentRun = int64(101)
	testSyncRun    = int64(55)
)

// The platform's own 401 answer, as activities.syncError reports it.
const klaviyo401 = "klaviyo: HTTP 401: not_authenticated: Missing or invalid private key."

// syncRecorder records what the mocked sync activities were asked.
type syncRecorder struct {
	mu       sync.Mutex
	begins   []activities.BeginSyncInput
	pushes   []activities.PushSyncInput
	attempts []int32 // activity.GetInfo(ctx).Attempt of every PushSync call
	pushAt   []time.Time
	finishes []activities.FinishSyncInput
}

// syncCase configures the mocks of one ActivationSync scenario.
type syncCase struct {
	name    string
	in      ActivationSyncInput
	skipped string // BeginSync's SkipReason
	// pushErrs is what PushSync returns on each call (1-based); a call without an entry succeeds
	// with pushOK.
	pushErrs  map[int]error
	pushOK    activities.PushSyncResult
	finishErr error

	wantPushes   int
	wantFinish   *activities.FinishSyncInput // nil: FinishSync is never called
	wantErrType  string                      // "" means the workflow succeeds
	wantErrMsg   string                      // the workflow error contains it
	wantResult   ActivationSyncResult
	wantAttempts []int32 // the Attempt of each PushSync call; nil: not checked
}

func recomputeInput() ActivationSyncInput {
	return ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: testConnector, RunID: testSegmentRun, Trigger: TriggerRecompute}
}

func manualInput() ActivationSyncInput {
	return ActivationSyncInput{TenantID: testTenant, SegmentID: testSegment, ConnectorID: testConnector, SyncRunID: testSyncRun, Trigger: TriggerManual}
}

// runSync runs ActivationSync against mocks configured by c.
func runSync(t *testing.T, c syncCase) (*syncRecorder, *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	env := newTestEnv()
	env.RegisterActivity(&activities.Activations{})
	rec := &syncRecorder{}
	env.OnActivity(syncActs.BeginSync, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BeginSyncInput) (activities.BeginSyncResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.begins = append(rec.begins, in)
			if c.skipped != "" {
				return activities.BeginSyncResult{SkipReason: c.skipped}, nil
			}
			return activities.BeginSyncResult{SyncRunID: testSyncRun}, nil
		})
	env.OnActivity(syncActs.PushSync, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.PushSyncInput) (activities.PushSyncResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.pushes = append(rec.pushes, in)
			rec.attempts = append(rec.attempts, activity.GetInfo(ctx).Attempt)
			rec.pushAt = append(rec.pushAt, env.Now())
			if err := c.pushErrs[len(rec.pushes)]; err != nil {
				return activities.PushSyncResult{}, err
			}
			return c.pushOK, nil
		})
	env.OnActivity(syncActs.FinishSync, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishSyncInput) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.finishes = append(rec.finishes, in)
			return c.finishErr
		})
	env.ExecuteWorkflow(ActivationSync, c.in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	return rec, env
}

func TestActivationSync(t *testing.T) {
	counts := activities.PushSyncResult{Added: 12, Removed: 4, Skipped: 3, Failed: 1}
	rejected := temporal.NewNonRetryableApplicationError(klaviyo401, activities.ErrTypePlatformRejected, nil)
	unavailable := func() error {
		return temporal.NewApplicationError("talon_one: HTTP 503: service unavailable", activities.ErrTypePlatformUnavailable)
	}
	cases := []syncCase{
		{
			name:       "connector no longer active: skipped, nothing pushed or recorded",
			in:         recomputeInput(),
			skipped:    "the connector is not active",
			wantResult: ActivationSyncResult{SkipReason: "the connector is not active"},
		},
		{
			name:       "connector deleted: skipped",
			in:         manualInput(),
			skipped:    "the connector was deleted",
			wantResult: ActivationSyncResult{SkipReason: "the connector was deleted"},
		},
		{
			name:         "recompute sync succeeds",
			in:           recomputeInput(),
			pushOK:       counts,
			wantPushes:   1,
			wantFinish:   &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun},
			wantResult:   ActivationSyncResult{SyncRunID: testSyncRun, PushSyncResult: counts},
			wantAttempts: []int32{1},
		},
		{
			name:       "manual sync succeeds",
			in:         manualInput(),
			pushOK:     counts,
			wantPushes: 1,
			wantFinish: &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun},
			wantResult: ActivationSyncResult{SyncRunID: testSyncRun, PushSyncResult: counts},
		},
		{
			name:         "platform 4xx is final: recorded with the platform's message, not retried",
			in:           recomputeInput(),
			pushErrs:     map[int]error{1: rejected},
			wantPushes:   1,
			wantFinish:   &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun, Error: klaviyo401},
			wantErrType:  activities.ErrTypePlatformRejected,
			wantErrMsg:   klaviyo401,
			wantResult:   ActivationSyncResult{SyncRunID: testSyncRun},
			wantAttempts: []int32{1},
		},
		{
			name:         "platform unavailable is retried, then succeeds",
			in:           recomputeInput(),
			pushErrs:     map[int]error{1: unavailable(), 2: unavailable()},
			pushOK:       counts,
			wantPushes:   3,
			wantFinish:   &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun},
			wantResult:   ActivationSyncResult{SyncRunID: testSyncRun, PushSyncResult: counts},
			wantAttempts: []int32{1, 2, 3},
		},
		{
			name: "platform unavailable on every attempt: fails after the retry policy's attempts",
			in:   manualInput(),
			pushErrs: map[int]error{1: unavailable(), 2: unavailable(), 3: unavailable(), 4: unavailable(),
				5: unavailable(), 6: unavailable(), 7: unavailable(), 8: unavailable(), 9: unavailable()},
			wantPushes:   8, // MaximumAttempts
			wantFinish:   &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun, Error: "talon_one: HTTP 503: service unavailable"},
			wantErrType:  activities.ErrTypePlatformUnavailable,
			wantErrMsg:   "service unavailable",
			wantResult:   ActivationSyncResult{SyncRunID: testSyncRun},
			wantAttempts: []int32{1, 2, 3, 4, 5, 6, 7, 8},
		},
		{
			name:        "connector deleted during the push: final",
			in:          recomputeInput(),
			pushErrs:    map[int]error{1: temporal.NewNonRetryableApplicationError("activation connector 3: not found", activities.ErrTypeConnectorGone, nil)},
			wantPushes:  1,
			wantFinish:  &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun, Error: "activation connector 3: not found"},
			wantErrType: activities.ErrTypeConnectorGone,
			wantErrMsg:  "not found",
			wantResult:  ActivationSyncResult{SyncRunID: testSyncRun},
		},
		{
			name:        "recording a success fails: the workflow fails",
			in:          recomputeInput(),
			pushOK:      counts,
			finishErr:   temporal.NewNonRetryableApplicationError("database gone", "DB", nil),
			wantPushes:  1,
			wantFinish:  &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun},
			wantErrType: "DB",
			wantErrMsg:  "database gone",
			wantResult:  ActivationSyncResult{SyncRunID: testSyncRun, PushSyncResult: counts},
		},
		{
			name:        "recording a failure fails: the push's error is the workflow's",
			in:          recomputeInput(),
			pushErrs:    map[int]error{1: rejected},
			finishErr:   temporal.NewNonRetryableApplicationError("database gone", "DB", nil),
			wantPushes:  1,
			wantFinish:  &activities.FinishSyncInput{TenantID: testTenant, SyncRunID: testSyncRun, Error: klaviyo401},
			wantErrType: activities.ErrTypePlatformRejected,
			wantErrMsg:  klaviyo401,
			wantResult:  ActivationSyncResult{SyncRunID: testSyncRun},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, env := runSync(t, c)
			err := env.GetWorkflowError()
			rec.mu.Lock()
			defer rec.mu.Unlock()

			wantBegin := activities.BeginSyncInput{TenantID: c.in.TenantID, ConnectorID: c.in.ConnectorID,
				SegmentRunID: c.in.RunID, SyncRunID: c.in.SyncRunID, Trigger: c.in.Trigger}
			if !reflect.DeepEqual(rec.begins, []activities.BeginSyncInput{wantBegin}) {
				t.Errorf("BeginSync inputs = %+v, want [%+v]", rec.begins, wantBegin)
			}
			if len(rec.pushes) != c.wantPushes {
				t.Errorf("PushSync executed %d times, want %d", len(rec.pushes), c.wantPushes)
			}
			for _, in := range rec.pushes {
				if want := (activities.PushSyncInput{TenantID: testTenant, SyncRunID: testSyncRun}); in != want {
					t.Errorf("PushSync input = %+v, want %+v", in, want)
				}
			}
			if c.wantAttempts != nil && !reflect.DeepEqual(rec.attempts, c.wantAttempts) {
				t.Errorf("PushSync attempts = %v, want %v", rec.attempts, c.wantAttempts)
			}
			switch {
			case c.wantFinish == nil && len(rec.finishes) != 0:
				t.Errorf("FinishSync called with %+v, want never", rec.finishes)
			case c.wantFinish != nil && !reflect.DeepEqual(rec.finishes, []activities.FinishSyncInput{*c.wantFinish}):
				t.Errorf("FinishSync inputs = %+v, want [%+v]", rec.finishes, *c.wantFinish)
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
			var out ActivationSyncResult
			if err := env.GetWorkflowResult(&out); err != nil {
				t.Fatal(err)
			}
			if out != c.wantResult {
				t.Errorf("result = %+v, want %+v", out, c.wantResult)
			}
		})
	}
}

// TestActivationSyncResultKeepsSkippedCount: the workflow's result (what the Temporal UI and a
// caller of the workflow see) carries all four counts of the push, skipped included.
func TestActivationSyncResultKeepsSkippedCount(t *testing.T) {
	counts := activities.PushSyncResult{Added: 12, Removed: 4, Skipped: 3, Failed: 1}
	_, env := runSync(t, syncCase{in: recomputeInput(), pushOK: counts})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var out ActivationSyncResult
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if out.PushSyncResult != counts {
		t.Errorf("workflow result counts = %+v, want %+v", out.PushSyncResult, counts)
	}
	// The skip reason once shared the name Skipped with the embedded count and shadowed it in
	// JSON, the default data converter's encoding.
	raw, err := json.Marshal(ActivationSyncResult{SyncRunID: 1, PushSyncResult: counts})
	if err != nil {
		t.Fatal(err)
	}
	var back ActivationSyncResult
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.PushSyncResult.Skipped != counts.Skipped {
		t.Errorf("JSON of the result %s loses the skipped count (shadowed by the skip reason)", raw)
	}
}

// TestActivationSyncRetryBackoff: the retries of an unavailable platform wait out the retry
// policy's backoff (5 s, then 10 s) and a Retry-After the platform asked for.
func TestActivationSyncRetryBackoff(t *testing.T) {
	unavailable := temporal.NewApplicationError("braze: HTTP 502: bad gateway", activities.ErrTypePlatformUnavailable)
	throttled := temporal.NewApplicationErrorWithOptions("braze: HTTP 429: too many requests", activities.ErrTypePlatformUnavailable,
		temporal.ApplicationErrorOptions{NextRetryDelay: 2 * time.Minute})
	rec, env := runSync(t, syncCase{
		in:       recomputeInput(),
		pushErrs: map[int]error{1: unavailable, 2: unavailable, 3: throttled},
		pushOK:   activities.PushSyncResult{Added: 1},
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.pushAt) != 4 {
		t.Fatalf("PushSync attempts = %d, want 4", len(rec.pushAt))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 2 * time.Minute}
	for i, w := range want {
		if got := rec.pushAt[i+1].Sub(rec.pushAt[i]); got < w {
			t.Errorf("wait before attempt %d = %v, want at least %v", i+2, got, w)
		}
	}
	if len(rec.finishes) != 1 || rec.finishes[0].Error != "" {
		t.Errorf("FinishSync inputs = %+v, want one success", rec.finishes)
	}
}

// stringPaths returns the paths of the fields of t that can carry text (a string, bytes, an
// interface, or a container or struct holding one).
func stringPaths(t reflect.Type, path string) []string {
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		return []string{path}
	case reflect.Slice, reflect.Array, reflect.Pointer:
		return stringPaths(t.Elem(), path+"[]")
	case reflect.Map:
		return append(stringPaths(t.Key(), path+"{key}"), stringPaths(t.Elem(), path+"{}")...)
	case reflect.Struct:
		var out []string
		for i := range t.NumField() {
			f := t.Field(i)
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			out = append(out, stringPaths(f.Type, p)...)
		}
		return out
	}
	return nil
}

// TestActivationSyncCarriesNoSecrets: what a sync's workflow history records (the workflow's
// input and result, the activities' inputs and results) has no text field that could carry a
// connector's key; the only text is the trigger, the skip reason and the (scrubbed) error.
func TestActivationSyncCarriesNoSecrets(t *testing.T) {
	cases := []struct {
		v     any
		allow []string
	}{
		{ActivationSyncInput{}, []string{"Trigger"}},
		{ActivationSyncResult{}, []string{"SkipReason"}},
		{activities.BeginSyncInput{}, []string{"Trigger"}},
		{activities.BeginSyncResult{}, []string{"SkipReason"}},
		{activities.PushSyncInput{}, nil},
		{activities.PushSyncResult{}, nil},
		{activities.FinishSyncInput{}, []string{"Error"}},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.v)
		got := stringPaths(typ, "")
		sort.Strings(got)
		if !reflect.DeepEqual(got, c.allow) && !(len(got) == 0 && len(c.allow) == 0) {
			t.Errorf("%s: text fields %q, want only %q", typ, got, c.allow)
		}
	}
	// The trigger is one of the known words, never anything a caller supplies.
	for _, in := range []ActivationSyncInput{recomputeInput(), manualInput()} {
		if in.Trigger != TriggerRecompute && in.Trigger != TriggerManual {
			t.Errorf("trigger %q", in.Trigger)
		}
	}
}

func TestActivationSyncIDs(t *testing.T) {
	if got := ActivationSyncID(7, 3, 101); got != "activation-sync:7:3:101" {
		t.Errorf("ActivationSyncID = %q", got)
	}
	if got := ManualSyncID(7, 3, 12); got != "activation-sync:7:3:manual-12" {
		t.Errorf("ManualSyncID = %q", got)
	}
	sa := ConnectorSearchAttributes(7, 42, 3)
	for key, want := range map[string]int64{SearchAttrTenant: 7, SearchAttrSegment: 42, SearchAttrConnector: 3} {
		if got, ok := sa.GetInt64(temporal.NewSearchAttributeKeyInt64(key)); !ok || got != want {
			t.Errorf("search attribute %s = %d (set %v), want %d", key, got, ok, want)
		}
	}
	if sa.Size() != 3 {
		t.Errorf("%d search attributes, want 3", sa.Size())
	}
}

// startRecorder is a client.Client whose ExecuteWorkflow records the start (every other method
// panics: the embedded nil interface).
type startRecorder struct {
	client.Client
	opts []client.StartWorkflowOptions
	name []any
	args [][]any
	err  error
}

func (r *startRecorder) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	r.opts, r.name, r.args = append(r.opts, o), append(r.name, wf), append(r.args, args)
	return nil, r.err
}

// TestSyncJobsStartsTheManualSync: POST /sync/'s workflow start: its ID, task queue, search
// attributes and an input of ids and the manual trigger.
func TestSyncJobsStartsTheManualSync(t *testing.T) {
	rec := &startRecorder{}
	jobs := &Starter{Client: rec, TaskQueue: "cohort"}
	if err := jobs.StartSync(context.Background(), 7, 42, 3, 12); err != nil {
		t.Fatal(err)
	}
	if len(rec.opts) != 1 {
		t.Fatalf("%d starts, want 1", len(rec.opts))
	}
	o := rec.opts[0]
	if o.ID != "activation-sync:7:3:manual-12" || o.TaskQueue != "cohort" || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		t.Errorf("start options = %+v", o)
	}
	if id := jobs.SyncWorkflowID(7, 3, 12); id != o.ID {
		t.Errorf("SyncWorkflowID = %q, the started workflow is %q", id, o.ID)
	}
	for key, want := range map[string]int64{SearchAttrTenant: 7, SearchAttrSegment: 42, SearchAttrConnector: 3} {
		if got, ok := o.TypedSearchAttributes.GetInt64(temporal.NewSearchAttributeKeyInt64(key)); !ok || got != want {
			t.Errorf("search attribute %s = %d (set %v), want %d", key, got, ok, want)
		}
	}
	if rec.name[0] != ActivationSyncWorkflow {
		t.Errorf("workflow = %v, want %s", rec.name[0], ActivationSyncWorkflow)
	}
	want := ActivationSyncInput{TenantID: 7, SegmentID: 42, ConnectorID: 3, SyncRunID: 12, Trigger: TriggerManual}
	if !reflect.DeepEqual(rec.args[0], []any{want}) {
		t.Errorf("args = %+v, want [%+v]", rec.args[0], want)
	}

	rec.err = errors.New("connection refused")
	err := jobs.StartSync(context.Background(), 7, 42, 3, 13)
	if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("start failure = %v, want ErrUnavailable wrapping the cause", err)
	}
}

// newTestEnv is a test workflow environment whose deadlock detector allows for a starved CPU: its
// default (a workflow task may run 1 s) failed tests at random when the whole suite shares 2 cores
// with Postgres. Real workers keep the default.
func newTestEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}
