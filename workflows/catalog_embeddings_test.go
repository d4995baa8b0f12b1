package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// embedStep is one EmbedPending call's answer.
type embedStep struct {
	res        activities.EmbedPendingResult
	err        error
	signalWith bool // deliver SignalEmbed with this call's completion (no workflow task of its own)
}

type embedCase struct {
	name    string
	steps   []embedStep        // the calls' answers in order; after them {Read: 0}
	always  *embedStep         // every call's answer (instead of steps)
	signals []time.Duration    // SignalEmbed at these workflow-clock offsets
	want    []time.Duration    // the calls' workflow-clock offsets from the start
	wantErr func(error) string // "" when err is as expected; nil: the workflow succeeds
	wantRes *ProductEmbeddingsResult
}

func TestProductEmbeddings(t *testing.T) {
	full := func(n int) embedStep {
		return embedStep{res: activities.EmbedPendingResult{Read: n, Embedded: n, More: true}}
	}
	last := func(n int) embedStep { return embedStep{res: activities.EmbedPendingResult{Read: n, Embedded: n}} }
	empty := embedStep{}
	s := time.Second
	cases := []embedCase{
		{
			name:    "drains until empty, lingers, drains once more and ends",
			steps:   []embedStep{full(512), full(512), last(10)},
			want:    []time.Duration{0, 0, 0, EmbedLinger},
			wantRes: &ProductEmbeddingsResult{Drains: 4, Embedded: 1034},
		},
		{
			name:    "a signal during the linger drains again at once",
			steps:   []embedStep{last(3), last(1)},
			signals: []time.Duration{2 * s},
			want:    []time.Duration{0, 2 * s, 2*s + EmbedLinger},
			wantRes: &ProductEmbeddingsResult{Drains: 3, Embedded: 4},
		},
		{
			name:  "work found by the final drain: linger again",
			steps: []embedStep{empty, last(2)},
			want:  []time.Duration{0, EmbedLinger, 2 * EmbedLinger},
		},
		{
			name:  "the final drain leaves more: drain until empty",
			steps: []embedStep{empty, full(512), last(1)},
			want:  []time.Duration{0, EmbedLinger, EmbedLinger, 2 * EmbedLinger},
		},
		{
			name:  "a signal with the final drain is not lost",
			steps: []embedStep{empty, {signalWith: true}},
			want:  []time.Duration{0, EmbedLinger, EmbedLinger, 2 * EmbedLinger},
		},
		{
			name:  "a signal while draining drains again after the batch",
			steps: []embedStep{{res: activities.EmbedPendingResult{Read: 512, More: true}, signalWith: true}, last(1)},
			want:  []time.Duration{0, 0, 0, EmbedLinger},
		},
		{
			name:  "rows leased by a drain that died: wait for the lease and drain again",
			steps: []embedStep{empty, {res: activities.EmbedPendingResult{NextReadyIn: 20 * s}}, last(2)},
			want:  []time.Duration{0, EmbedLinger, EmbedLinger + 20*s, 2*EmbedLinger + 20*s},
		},
		{
			name:    "a signal while waiting for leased rows drains at once",
			steps:   []embedStep{empty, {res: activities.EmbedPendingResult{NextReadyIn: 20 * s}}, last(1)},
			signals: []time.Duration{EmbedLinger + 3*s},
			want:    []time.Duration{0, EmbedLinger, EmbedLinger + 3*s, 2*EmbedLinger + 3*s},
		},
		{
			name:  "a wait for leased rows is bounded",
			steps: []embedStep{empty, {res: activities.EmbedPendingResult{NextReadyIn: time.Hour}}},
			want:  []time.Duration{0, EmbedLinger, EmbedLinger + embedLeaseWaitMax, 2*EmbedLinger + embedLeaseWaitMax},
		},
		{
			name:  "a failed drain is retried",
			steps: []embedStep{{err: errors.New("ai provider unavailable")}, last(1)},
			want:  []time.Duration{0, s, s + EmbedLinger},
		},
		{
			name:  "no provider: the workflow fails",
			steps: []embedStep{{err: temporal.NewNonRetryableApplicationError("no ai provider", activities.ErrTypeNoEmbeddingProvider, nil)}},
			want:  []time.Duration{0},
			wantErr: func(err error) string {
				var app *temporal.ApplicationError
				if errors.As(err, &app) && app.Type() == activities.ErrTypeNoEmbeddingProvider {
					return ""
				}
				return "want " + activities.ErrTypeNoEmbeddingProvider
			},
		},
		{
			name:   "continues as new after EmbedDrainsPerRun drains",
			always: &embedStep{res: activities.EmbedPendingResult{Read: 512, Embedded: 512, More: true}},
			wantErr: func(err error) string {
				if workflow.IsContinueAsNewError(err) {
					return ""
				}
				return "want continue-as-new"
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runProductEmbeddings(t, c) })
	}
}

func runProductEmbeddings(t *testing.T, c embedCase) {
	env := newTestEnv()
	env.RegisterActivity(&activities.ProductEmbeddings{})
	var (
		mu    sync.Mutex
		calls []time.Duration
		start time.Time
	)
	env.OnActivity(productEmbeddingActs.EmbedPending, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.EmbedPendingInput) (activities.EmbedPendingResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if in != (activities.EmbedPendingInput{TenantID: testTenant, Limit: EmbedBatch}) {
				t.Errorf("input %+v", in)
			}
			// A drain whose worker died is retried within the heartbeat timeout.
			if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb != embedHeartbeat {
				t.Errorf("heartbeat timeout %v, want %v", hb, embedHeartbeat)
			}
			calls = append(calls, env.Now().Sub(start))
			step := embedStep{}
			switch {
			case c.always != nil:
				step = *c.always
			case len(calls) <= len(c.steps):
				step = c.steps[len(calls)-1]
			}
			if step.signalWith {
				env.SignalWorkflowSkippingWorkflowTask(SignalEmbed, nil)
			}
			return step.res, step.err
		})
	for _, at := range c.signals {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalEmbed, nil) }, at)
	}
	start = env.Now()
	env.ExecuteWorkflow(ProductEmbeddings, ProductEmbeddingsInput{TenantID: testTenant})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	err := env.GetWorkflowError()
	switch {
	case c.wantErr != nil:
		if msg := c.wantErr(err); msg != "" {
			t.Fatalf("workflow error %v: %s", err, msg)
		}
	case err != nil:
		t.Fatalf("workflow error %v", err)
	}
	if c.always != nil {
		if len(calls) != EmbedDrainsPerRun {
			t.Fatalf("%d drains before continue-as-new, want %d", len(calls), EmbedDrainsPerRun)
		}
		return
	}
	if !slices.Equal(calls, c.want) {
		t.Fatalf("drains at %v, want %v", calls, c.want)
	}
	if c.wantRes != nil {
		var res ProductEmbeddingsResult
		if err := env.GetWorkflowResult(&res); err != nil || res != *c.wantRes {
			t.Fatalf("result %+v (%v), want %+v", res, err, *c.wantRes)
		}
	}
}

// signalRecorder is a client.Client whose SignalWithStartWorkflow records its call (every other
// method panics: the embedded nil interface).
type signalRecorder struct {
	client.Client
	mu     sync.Mutex
	ids    []string
	sigs   []string
	opts   []client.StartWorkflowOptions
	wfs    []any
	args   [][]any
	err    error
	failAt int // the call (1-based) that fails with err; 0: every call
}

func (r *signalRecorder) SignalWithStartWorkflow(_ context.Context, id, signal string, _ any, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids, r.sigs, r.opts, r.wfs, r.args = append(r.ids, id), append(r.sigs, signal), append(r.opts, o), append(r.wfs, wf), append(r.args, args)
	if r.err != nil && (r.failAt == 0 || r.failAt == len(r.ids)) {
		return nil, r.err
	}
	return nil, nil
}

func TestProductEmbeddingJobs(t *testing.T) {
	rec := &signalRecorder{}
	jobs := &Starter{Client: rec, TaskQueue: "cohort"}
	if err := jobs.ScheduleEmbeddings(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	o := rec.opts[0]
	if rec.ids[0] != "product-embeddings:7" || o.ID != rec.ids[0] || rec.sigs[0] != SignalEmbed || o.TaskQueue != "cohort" ||
		o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE ||
		o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		t.Errorf("signal-with-start %s %s %+v", rec.ids[0], rec.sigs[0], o)
	}
	if got, ok := o.TypedSearchAttributes.GetInt64(temporal.NewSearchAttributeKeyInt64(SearchAttrTenant)); !ok || got != 7 {
		t.Errorf("tenant search attribute %d (set %v)", got, ok)
	}
	if reflect.ValueOf(rec.wfs[0]).Pointer() != reflect.ValueOf(ProductEmbeddings).Pointer() {
		t.Errorf("workflow %v", rec.wfs[0])
	}
	if want := (ProductEmbeddingsInput{TenantID: 7, Limit: EmbedBatch}); !reflect.DeepEqual(rec.args[0], []any{want}) {
		t.Errorf("args %+v, want [%+v]", rec.args[0], want)
	}
	rec.err = errors.New("connection refused")
	if err := jobs.ScheduleEmbeddings(context.Background(), 7); !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("failure %v, want ErrUnavailable wrapping the cause", err)
	}
}

func TestMain(m *testing.M) { testenv.Main(m) }

// TestProductEmbeddingsEndToEnd runs the real workflow and activity on the embedded Temporal
// server against Postgres with the local provider: saves kick the workflow, it embeds
// everything and ends; the sweep recovers a lost kick.
func TestProductEmbeddingsEndToEnd(t *testing.T) {
	ctx := context.Background()
	db := testenv.OpenDB(t)
	tc := testenv.Temporal(t)
	queue := testenv.TaskQueue(t)
	jobs := &Starter{Client: tc, TaskQueue: queue}
	svc := catalog.NewService(db.Pool, time.Now, catalog.WithEmbeddingScheduler(jobs, func(_ int64, err error) { t.Errorf("kick: %v", err) }))
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflow(ProductEmbeddings)
	w.RegisterActivity(&activities.ProductEmbeddings{Catalog: svc, AI: local})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	tn := testenv.Tenant(t, db, "e2e-embeddings")

	const n = 1200 // three drains
	for lo := 0; lo < n; lo += catalog.MaxBulk {
		var batch []map[string]any
		for i := lo; i < min(lo+catalog.MaxBulk, n); i++ {
			batch = append(batch, map[string]any{"sku": fmt.Sprintf("P%d", i), "name": fmt.Sprintf("Product %d", i)})
		}
		if _, err := svc.Bulk(ctx, tn, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Within the debounce of the bulk's kick: no kick of its own, drained by the same run.
	if _, err := svc.Create(ctx, tn, catalog.ProductInput{SKU: "LATE", Name: "Late product"}); err != nil {
		t.Fatal(err)
	}
	waitEmbedded(t, svc, tn, n+1)

	run := tc.GetWorkflow(ctx, ProductEmbeddingsID(tn), "")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var res ProductEmbeddingsResult
	if err := run.Get(wctx, &res); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if res.Embedded != n+1 {
		t.Errorf("workflow result %+v, want %d embedded", res, n+1)
	}

	// A kick lost: the row is queued but nobody was told. The sweeper, run as the worker role
	// runs it, tells.
	testenv.Exec(t, db, `INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at)
		SELECT id, tenant_id, now() FROM products WHERE tenant_id = $1 AND sku = 'P7'`, tn)
	testenv.Exec(t, db, `DELETE FROM product_embeddings WHERE product_id = (SELECT id FROM products WHERE tenant_id = $1 AND sku = 'P7')`, tn)
	sweeper := catalog.NewEmbeddingSweeper(svc, jobs, local, time.Hour, slog.New(slog.DiscardHandler))
	sctx, stop := context.WithCancel(ctx)
	swept := make(chan error, 1)
	go func() { swept <- sweeper.Run(sctx) }()
	waitEmbedded(t, svc, tn, n+1)
	stop()
	if err := <-swept; err != nil {
		t.Fatalf("sweeper: %v", err)
	}
}

func waitEmbedded(t *testing.T, svc *catalog.Service, tenantID int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := svc.EmbeddingStatus(context.Background(), tenantID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Embedded == want && st.Queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v after a minute, want %d embedded and nothing queued", st, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
