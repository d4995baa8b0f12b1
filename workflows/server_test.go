package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// Server tests of the workflows recorded since issue 24: each runs its workflow on the embedded
// Temporal server with scripted activities registered by name, started through its client-side
// starter (so with its summary, read back from the server), and records its history into testdata
// when COHORT_RECORD_HISTORIES=1 (replay_test.go replays them).

// fakeNamer answers fixed names by kind.
type fakeNamer map[summary.Kind]summary.Names

func (f fakeNamer) Names(_ context.Context, _ int64, kind summary.Kind, _ int64) (summary.Names, error) {
	return f[kind], nil
}

// serverRun is a worker on a fresh task queue of the shared embedded server.
type serverRun struct {
	tc     client.Client
	queue  string
	w      worker.Worker
	ctx    context.Context
	tenant int64 // unique on the shared server
}

func newServerRun(t *testing.T, wfs ...any) *serverRun {
	t.Helper()
	r := &serverRun{tc: testenv.Temporal(t), queue: testenv.TaskQueue(t), tenant: time.Now().UnixNano()}
	r.w = worker.New(r.tc, r.queue, worker.Options{})
	for _, wf := range wfs {
		r.w.RegisterWorkflow(wf)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	return r
}

// act registers a scripted activity under name.
func (r *serverRun) act(name string, fn any) {
	r.w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
}

func (r *serverRun) start(t *testing.T) {
	t.Helper()
	if err := r.w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.w.Stop)
}

// wantSummary reads the workflow's user metadata from the server and compares its summary; the
// details must name the tenant and hold each of details.
func (r *serverRun) wantSummary(t *testing.T, id, want string, details ...string) {
	t.Helper()
	d, err := r.tc.DescribeWorkflow(r.ctx, id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	got, err := d.GetStaticSummary()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s summary %q, want %q", id, got, want)
	}
	det, err := d.GetStaticDetails()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range details {
		if !strings.Contains(det, w) {
			t.Errorf("%s details %q lack %q", id, det, w)
		}
	}
}

// record writes the execution's history into testdata/name when recording.
func (r *serverRun) record(t *testing.T, id, runID, name string) {
	t.Helper()
	if recording() {
		n := recordHistory(r.ctx, t, r.tc, id, runID, name)
		t.Logf("recorded %d events into testdata/%s", n, name)
	}
}

func TestActivationSyncOnTheServer(t *testing.T) {
	r := newServerRun(t)
	r.w.RegisterWorkflowWithOptions(ActivationSync, workflow.RegisterOptions{Name: ActivationSyncWorkflow})
	var mu sync.Mutex
	var finished []activities.FinishSyncInput
	r.act("BeginSync", func(_ context.Context, in activities.BeginSyncInput) (activities.BeginSyncResult, error) {
		return activities.BeginSyncResult{SyncRunID: in.SyncRunID}, nil
	})
	r.act("PushSync", func(context.Context, activities.PushSyncInput) (activities.PushSyncResult, error) {
		return activities.PushSyncResult{Added: 3, Removed: 1}, nil
	})
	r.act("FinishSync", func(_ context.Context, in activities.FinishSyncInput) error {
		mu.Lock()
		defer mu.Unlock()
		finished = append(finished, in)
		return nil
	})
	r.start(t)
	jobs := &Starter{Client: r.tc, TaskQueue: r.queue, Names: fakeNamer{
		summary.Connector: {Tenant: "acme", Name: "VIP list", Of: "High value", Detail: "klaviyo"},
	}}
	if err := jobs.StartSync(r.ctx, r.tenant, 5, 7, 44); err != nil {
		t.Fatal(err)
	}
	id := ManualSyncID(r.tenant, 7, 44)
	run := r.tc.GetWorkflow(r.ctx, id, "")
	var res ActivationSyncResult
	if err := run.Get(r.ctx, &res); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if res.SyncRunID != 44 || res.Added != 3 || res.Removed != 1 {
		t.Errorf("result %+v", res)
	}
	mu.Lock()
	if len(finished) != 1 || finished[0].Error != "" || finished[0].SyncRunID != 44 {
		t.Errorf("finished %+v, want one success of run 44", finished)
	}
	mu.Unlock()
	r.wantSummary(t, id, `acme · sync connector "VIP list" (klaviyo) of segment "High value", manual`,
		`connector: "VIP list" (id 7)`, `segment: "High value" (id 5)`, "trigger: manual, sync run 44")
	r.record(t, id, run.GetRunID(), "activation_sync_v0.json")
}

func TestCatalogImportOnTheServer(t *testing.T) {
	r := newServerRun(t, CatalogImport)
	var mu sync.Mutex
	var reasons []string
	r.act("RunImport", func(context.Context, activities.RunImportInput) (activities.RunImportResult, error) {
		return activities.RunImportResult{}, temporal.NewNonRetryableApplicationError(
			"the file has no sku column", activities.ErrTypeImportFailed, nil)
	})
	r.act("FailImport", func(_ context.Context, in activities.FailImportInput) error {
		mu.Lock()
		defer mu.Unlock()
		reasons = append(reasons, in.Reason)
		return nil
	})
	r.start(t)
	jobs := &Starter{Client: r.tc, TaskQueue: r.queue, Names: fakeNamer{summary.ImportJob: {Tenant: "acme", Name: "products.csv"}}}
	id, err := jobs.StartImport(r.ctx, r.tenant, 3)
	if err != nil {
		t.Fatal(err)
	}
	run := r.tc.GetWorkflow(r.ctx, id, "")
	err = run.Get(r.ctx, nil)
	if err == nil || failureMessage("", err) != "the file has no sku column" {
		t.Errorf("import error %v, want the reason", err)
	}
	mu.Lock()
	if len(reasons) != 1 || reasons[0] != "the file has no sku column" {
		t.Errorf("reasons recorded %q", reasons)
	}
	mu.Unlock()
	r.wantSummary(t, id, `acme · import "products.csv" (job 3)`, `import job: "products.csv" (id 3)`)
	r.record(t, id, run.GetRunID(), "catalog_import_v0.json")
}

func TestProductEmbeddingsOnTheServer(t *testing.T) {
	r := newServerRun(t, ProductEmbeddings)
	jobs := &Starter{Client: r.tc, TaskQueue: r.queue, Names: fakeNamer{summary.Tenant: {Tenant: "acme"}}}
	var mu sync.Mutex
	drains := 0
	signalled := make(chan error, 1)
	r.act("EmbedPending", func(_ context.Context, in activities.EmbedPendingInput) (activities.EmbedPendingResult, error) {
		mu.Lock()
		defer mu.Unlock()
		drains++
		switch drains {
		case 1:
			return activities.EmbedPendingResult{Read: in.Limit, Embedded: in.Limit, More: true}, nil
		case 2:
			// More products are saved while the workflow lingers: their kick signals it.
			time.AfterFunc(500*time.Millisecond, func() { signalled <- jobs.ScheduleEmbeddings(r.ctx, r.tenant) })
			return activities.EmbedPendingResult{Read: 3, Embedded: 2, Unchanged: 1}, nil
		case 5:
			// A row is leased by a drain that died: wait for its lease, then drain it.
			return activities.EmbedPendingResult{NextReadyIn: time.Second}, nil
		case 6:
			return activities.EmbedPendingResult{Read: 1, Embedded: 1}, nil
		}
		return activities.EmbedPendingResult{}, nil
	})
	r.start(t)
	if err := jobs.ScheduleEmbeddings(r.ctx, r.tenant); err != nil {
		t.Fatal(err)
	}
	id := ProductEmbeddingsID(r.tenant)
	run := r.tc.GetWorkflow(r.ctx, id, "")
	var res ProductEmbeddingsResult
	if err := run.Get(r.ctx, &res); err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	if err := <-signalled; err != nil {
		t.Fatalf("signal while lingering: %v", err)
	}
	// Drains: more, some; the starting signal still pending ends the first linger at once:
	// nothing; the save's signal ends the second: nothing; the third linger runs out: nothing
	// ready, a row leased for a second; after the wait: the row; a last linger: nothing.
	if want := (ProductEmbeddingsResult{Drains: 7, Embedded: EmbedBatch + 3, Unchanged: 1}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	r.wantSummary(t, id, "acme · embed the queued products", "tenant: \"acme\" (id ")
	r.record(t, id, run.GetRunID(), "product_embeddings_v1.json")
}

func TestProductSegmentComputeOnTheServer(t *testing.T) {
	r := newServerRun(t, ProductSegmentCompute)
	jobs := &Starter{Client: r.tc, TaskQueue: r.queue, Names: fakeNamer{summary.ProductSegment: {Tenant: "acme", Name: "Summer dresses"}}}
	var mu sync.Mutex
	computes := 0
	var failures []string
	r.act("BeginProductSegmentCompute", func(context.Context, activities.BeginProductSegmentComputeInput) error { return nil })
	r.act("ComputeProductSegment", func(_ context.Context, in activities.ComputeProductSegmentInput) (prodseg.ComputeResult, error) {
		mu.Lock()
		computes++
		n := computes
		mu.Unlock()
		if n == 1 {
			// A request while the evaluation runs: one more run after it.
			if _, err := jobs.StartCompute(context.Background(), in.TenantID, in.SegmentID); err != nil {
				return prodseg.ComputeResult{}, err
			}
			time.Sleep(200 * time.Millisecond) // the signal lands while the activity runs
			return prodseg.ComputeResult{Matched: 4, Added: 4, Version: 1}, nil
		}
		return prodseg.ComputeResult{}, temporal.NewNonRetryableApplicationError(
			"field colour is no longer in the product schema", activities.ErrTypeProductSegmentInvalid, nil)
	})
	r.act("FailProductSegmentCompute", func(_ context.Context, in activities.FailProductSegmentComputeInput) error {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, in.Message)
		return nil
	})
	r.start(t)
	id, err := jobs.StartCompute(r.ctx, r.tenant, 9)
	if err != nil {
		t.Fatal(err)
	}
	run := r.tc.GetWorkflow(r.ctx, id, "")
	if err := run.Get(r.ctx, nil); err == nil || failureMessage("", err) != "field colour is no longer in the product schema" {
		t.Errorf("compute error %v", err)
	}
	mu.Lock()
	if computes != 2 || len(failures) != 1 || failures[0] != "field colour is no longer in the product schema" {
		t.Errorf("%d computes, failures %q", computes, failures)
	}
	mu.Unlock()
	r.wantSummary(t, id, `acme · compute product segment "Summer dresses"`, `product segment: "Summer dresses" (id 9)`)
	r.record(t, id, run.GetRunID(), "product_segment_compute_v0.json")
}

func TestSegmentExportOnTheServer(t *testing.T) {
	r := newServerRun(t, SegmentExport)
	var mu sync.Mutex
	var failures []string
	r.act("WriteExport", func(context.Context, activities.ExportInput) (activities.ExportResult, error) {
		return activities.ExportResult{}, temporal.NewNonRetryableApplicationError("segment 5 was never computed", activities.ErrTypeNoDefinition, nil)
	})
	r.act("FailExport", func(_ context.Context, in activities.FailExportInput) error {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, in.Message)
		return nil
	})
	r.start(t)
	jobs := &Starter{Client: r.tc, TaskQueue: r.queue, Names: fakeNamer{summary.SegmentExport: {Tenant: "acme", Name: "High value", Detail: "csv"}}}
	if err := jobs.Export(r.ctx, r.tenant, 5, 12); err != nil {
		t.Fatal(err)
	}
	id := SegmentExportID(r.tenant, 12)
	run := r.tc.GetWorkflow(r.ctx, id, "")
	if err := run.Get(r.ctx, nil); err == nil || failureMessage("", err) != "segment 5 was never computed" {
		t.Errorf("export error %v", err)
	}
	mu.Lock()
	if len(failures) != 1 || failures[0] != "segment 5 was never computed" {
		t.Errorf("failures recorded %q", failures)
	}
	mu.Unlock()
	r.wantSummary(t, id, `acme · export segment "High value" as csv (export 12)`, `segment: "High value" (id 5)`, "export: id 12", "format: csv")
	r.record(t, id, run.GetRunID(), "segment_export_v0.json")
}

func TestSegmentDraftOnTheServer(t *testing.T) {
	r := newServerRun(t, SegmentDraft)
	var mu sync.Mutex
	var prevs []string
	def := json.RawMessage(`{"all":[{"event":"purchase","count":{"gte":2}}]}`)
	r.act("DraftDefinition", func(_ context.Context, in activities.DraftInput) (activities.DraftResult, error) {
		mu.Lock()
		defer mu.Unlock()
		prevs = append(prevs, in.PreviousError)
		if len(prevs) == 1 {
			return activities.DraftResult{Invalid: `unknown field "plan"`}, nil
		}
		return activities.DraftResult{Definition: def}, nil
	})
	r.act("SaveDraft", func(_ context.Context, in activities.SaveDraftInput) (segment.Segment, error) {
		return segment.Segment{ID: in.SegmentID, TenantID: in.TenantID, Name: "Churn risk", Definition: in.Definition, Version: 2}, nil
	})
	r.start(t)
	jobs := &Starter{Client: r.tc, TaskQueue: r.queue, Names: fakeNamer{summary.Segment: {Tenant: "acme", Name: "Churn risk"}}}
	got, err := jobs.Draft(r.ctx, r.tenant, 6)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 6 || got.Version != 2 || string(got.Definition) != string(def) {
		t.Errorf("draft %+v", got)
	}
	mu.Lock()
	if len(prevs) != 2 || prevs[0] != "" || prevs[1] != `unknown field "plan"` {
		t.Errorf("previous errors fed back %q", prevs)
	}
	mu.Unlock()
	id := SegmentDraftID(r.tenant, 6)
	r.wantSummary(t, id, `acme · draft segment "Churn risk"`, `segment: "Churn risk" (id 6)`)
	r.record(t, id, "", "segment_draft_v0.json")
}
