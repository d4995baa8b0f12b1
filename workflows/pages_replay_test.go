package workflows

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagegen"
)

// Recorded histories of the page workflows, recorded on the embedded Temporal server by
// TestPageWorkflowsOnTheServer (COHORT_RECORD_PAGE_HISTORIES=1) with the workflow code of their
// time. A change that breaks a running execution's command sequence fails
// TestPageWorkflowsReplay; such a change goes behind workflow.GetVersion, and a new recording is
// added here beside the old ones.
//
//   - page_generate_v0.json: PageGenerate started by a request, a regenerate during its search
//     (one more run), the first run failing (its product segment deleted), the second ready.
//   - page_bulk_generate_v0.json: PageBulkGenerate over three pages, one whose generation was
//     already running (the job waits and generates it after), one failing (invalid copy).
//   - page_generate_v1.json, page_bulk_generate_v1.json: the same runs once a generation checks
//     the queued embeddings before it searches (pageGenerateWaitsForEmbeddings).
var pageHistories = []string{"page_generate_v0.json", "page_bulk_generate_v0.json", "page_generate_v1.json", "page_bulk_generate_v1.json"}

func TestPageWorkflowsReplay(t *testing.T) {
	replayHistories(t, pageHistories, PageGenerate, PageBulkGenerate)
}

// serverTenant is the tenant of TestPageWorkflowsOnTheServer's workflow ids (no database).
const serverTenant = int64(900001)

// fakePages are page activities registered by name on a real worker: page 1's first search
// waits for release and then fails as a deleted segment; page 3's copy is invalid.
type fakePages struct {
	mu       sync.Mutex
	release  chan struct{}
	loads    map[int64][]bool // MarkGenerating of each load, by page
	active   map[int64]int    // runs of a page between load and save or failure
	overlap  bool             // two runs of one page at once
	searches map[int64]int
	fails    map[int64][]string
	finished map[int64]string
	saved    map[int64]int
}

func newFakePages() *fakePages {
	return &fakePages{release: make(chan struct{}), loads: map[int64][]bool{}, active: map[int64]int{},
		searches: map[int64]int{}, fails: map[int64][]string{}, finished: map[int64]string{}, saved: map[int64]int{}}
}

func (f *fakePages) register(w worker.Worker) {
	reg := func(fn any, name string) { w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(_ context.Context, in activities.LoadPageQueryInput) (activities.LoadPageQueryResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.loads[in.PageID] = append(f.loads[in.PageID], in.MarkGenerating)
		f.active[in.PageID]++
		if f.active[in.PageID] > 1 {
			f.overlap = true
		}
		seg := int64(4)
		return activities.LoadPageQueryResult{Title: "Dresses", QueryID: in.PageID, QueryText: "linen dresses", ProductSegmentID: &seg}, nil
	}, "LoadPageQuery")
	reg(func(_ context.Context, in activities.SearchPageProductsInput) (activities.SearchPageProductsResult, error) {
		f.mu.Lock()
		f.searches[in.PageID]++
		n := f.searches[in.PageID]
		f.mu.Unlock()
		if in.PageID == 1 && n == 1 {
			<-f.release
			return activities.SearchPageProductsResult{}, temporal.NewNonRetryableApplicationError(
				"product segment 4 of the AIQuery no longer exists", activities.ErrTypeProductSegmentGone, nil)
		}
		return activities.SearchPageProductsResult{Products: testProducts()}, nil
	}, "SearchPageProducts")
	reg(func(context.Context, activities.CheckPageEmbeddingsInput) (activities.CheckPageEmbeddingsResult, error) {
		return activities.CheckPageEmbeddingsResult{MaxWait: activities.DefaultEmbeddingWait}, nil
	}, "CheckPageEmbeddings")
	reg(func(_ context.Context, in activities.GeneratePageCopyInput) (pagegen.Copy, error) {
		if in.PageID == 3 {
			return pagegen.Copy{}, temporal.NewNonRetryableApplicationError(
				"the AI provider gave no valid page copy in 3 attempts", activities.ErrTypeInvalidLLMOutput, nil)
		}
		return testCopy(), nil
	}, "GeneratePageCopy")
	reg(func(_ context.Context, in activities.SavePageCopyInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active[in.PageID]--
		f.saved[in.PageID]++
		return nil
	}, "SavePageCopy")
	reg(func(_ context.Context, in activities.FailPageGenerationInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active[in.PageID]--
		f.fails[in.PageID] = append(f.fails[in.PageID], in.Message)
		return nil
	}, "FailPageGeneration")
	reg(func(context.Context, activities.BulkJobRef) error { return nil }, "StartBulkJob")
	reg(func(context.Context, activities.ListBulkPagesInput) (activities.ListBulkPagesResult, error) {
		return activities.ListBulkPagesResult{PageIDs: []int64{1, 2, 3}}, nil
	}, "ListBulkPages")
	reg(func(_ context.Context, in activities.FinishBulkPageInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.finished[in.PageID] = in.Error
		return nil
	}, "FinishBulkPage")
	reg(func(context.Context, activities.BulkJobRef) (activities.FinishBulkJobResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		res := activities.FinishBulkJobResult{Status: page.JobComplete, Total: len(f.finished)}
		for _, msg := range f.finished {
			if msg != "" {
				res.Failed++
			} else {
				res.Completed++
			}
		}
		if res.Failed > 0 {
			res.Status = page.JobPartialFailure
		}
		return res, nil
	}, "FinishBulkJob")
}

func (f *fakePages) finishedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.finished)
}

// TestPageWorkflowsOnTheServer runs the page workflows on the embedded Temporal server with
// scripted activities: a regenerate during a run follows it (one more run, never two at once),
// and a bulk job started while the page's generation runs waits for it and generates the page
// after it, while its other pages go on; one failing page does not stop the others.
func TestPageWorkflowsOnTheServer(t *testing.T) {
	fake := newFakePages()
	r := newServerRun(t, PageGenerate, PageBulkGenerate)
	fake.register(r.w)
	r.start(t)
	tc, queue, ctx := r.tc, r.queue, r.ctx
	jobs := &Starter{Client: tc, TaskQueue: queue}
	jobID := time.Now().UnixNano() // unique on the shared server

	if err := jobs.StartGeneration(ctx, serverTenant, 1); err != nil {
		t.Fatal(err)
	}
	pageID := PageGenerateID(serverTenant, 1)
	desc, err := tc.DescribeWorkflowExecution(ctx, pageID, "")
	if err != nil {
		t.Fatal(err)
	}
	pageRun := desc.WorkflowExecutionInfo.Execution.RunId
	// Wait for the first search, then regenerate (one more run) and start the bulk job.
	waitFor(t, func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.searches[1] == 1
	})
	if err := jobs.StartGeneration(ctx, serverTenant, 1); err != nil {
		t.Fatal(err)
	}
	if err := jobs.StartBulk(ctx, serverTenant, jobID); err != nil {
		t.Fatal(err)
	}
	// Pages 2 and 3 finish while page 1's generation still runs.
	waitFor(t, func() bool { return fake.finishedCount() == 2 })
	close(fake.release)

	var first PageGenerateResult
	if err := tc.GetWorkflow(ctx, pageID, pageRun).Get(ctx, &first); err != nil {
		t.Fatalf("page generation: %v", err)
	}
	if first.Runs != 2 || first.Status != page.StatusReady {
		t.Errorf("page generation %+v, want two runs, the last ready", first)
	}
	bulkRun := tc.GetWorkflow(ctx, PageBulkGenerateID(serverTenant, jobID), "")
	var res PageBulkGenerateResult
	if err := bulkRun.Get(ctx, &res); err != nil {
		t.Fatalf("bulk: %v", err)
	}
	if want := (PageBulkGenerateResult{Status: page.JobPartialFailure, Total: 3, Completed: 2, Failed: 1}); res != want {
		t.Errorf("bulk %+v, want %+v", res, want)
	}
	fake.mu.Lock()
	if fake.overlap {
		t.Error("two generations of one page ran at once")
	}
	if got := fake.loads[1]; len(got) != 3 || got[0] || !got[1] || got[2] {
		t.Errorf("page 1 loads (marking generating) %v, want the request's run, its follow-up, then the job's", got)
	}
	if fake.saved[1] != 2 || len(fake.fails[1]) != 1 || fake.fails[1][0] != "product segment 4 of the AIQuery no longer exists" {
		t.Errorf("page 1: %d saves, failures %q", fake.saved[1], fake.fails[1])
	}
	if fake.finished[1] != "" || fake.finished[2] != "" || fake.finished[3] != "the AI provider gave no valid page copy in 3 attempts" {
		t.Errorf("job pages %v", fake.finished)
	}
	fake.mu.Unlock()

	if os.Getenv("COHORT_RECORD_PAGE_HISTORIES") != "" {
		recordHistory(ctx, t, tc, pageID, pageRun, "page_generate_v1.json")
		recordHistory(ctx, t, tc, PageBulkGenerateID(serverTenant, jobID), bulkRun.GetRunID(), "page_bulk_generate_v1.json")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
