package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagegen"
	"github.com/cohort-dev/cohort/internal/search"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

const testPage = int64(55)

// pageScript drives the mocked page activities of one test. Errors are keyed by page and call
// (1-based, per page); delays apply to every call.
type pageScript struct {
	loadDelay, searchDelay, copyDelay, failDelay time.Duration
	loadErrs, searchErrs, copyErrs, saveErrs     map[int]error
	byPage                                       map[int64]map[string]error // page -> activity -> error of every call
	signals                                      []timedSignal
	pending                                      [][]int64 // bulk: ListBulkPages answers in turn
	more                                         []bool
	// backlog: CheckPageEmbeddings's Pending answers in turn (then 0); embeddingWait its MaxWait.
	backlog       []int64
	embeddingWait time.Duration
}

// pageRecorder records the mocked activities' calls (they run on the test environment's
// goroutines, hence the lock).
type pageRecorder struct {
	mu                               sync.Mutex
	loads                            []activities.LoadPageQueryInput
	searches                         []activities.SearchPageProductsInput
	checks                           []time.Time // CheckPageEmbeddings, at workflow time
	copies                           []activities.GeneratePageCopyInput
	saves                            []activities.SavePageCopyInput
	fails                            []activities.FailPageGenerationInput
	finished                         []activities.FinishBulkPageInput
	started, listed, jobsDone        int
	inFlight, maxInFlight            int
	calls                            map[int64]map[string]int
	finishJob                        activities.FinishBulkJobResult
	loadsByPage, pagesFinishedByPage map[int64]int
}

func (r *pageRecorder) call(pageID int64, name string) int {
	if r.calls == nil {
		r.calls = map[int64]map[string]int{}
	}
	if r.calls[pageID] == nil {
		r.calls[pageID] = map[string]int{}
	}
	r.calls[pageID][name]++
	return r.calls[pageID][name]
}

func (s pageScript) err(pageID int64, name string, n int, byCall map[int]error) error {
	if e := s.byPage[pageID][name]; e != nil {
		return e
	}
	return byCall[n]
}

func testProducts() []pagegen.Product {
	return []pagegen.Product{{SKU: "A-1", Name: "Linen dress"}, {SKU: "B-2", Name: "Cotton dress"}}
}

func testCopy() pagegen.Copy {
	return pagegen.Copy{IntroCopy: "Dresses.", ProductSKUs: []string{"A-1", "B-2"}, Attempts: 1, Blocks: []block.Block{
		{ID: "blk_hero", Type: block.Hero, Props: map[string]any{"headline": "Dresses"}},
		{ID: "blk_grid", Type: block.ProductGrid, Props: map[string]any{"product_skus": []any{"A-1", "B-2"}, "columns": 3.0}},
	}}
}

// mockPageActivities registers the page activities on env, answering from s into rec.
func mockPageActivities(env *testsuite.TestWorkflowEnvironment, s pageScript, rec *pageRecorder) {
	env.RegisterActivity(&activities.Pages{})
	env.OnActivity(pageActs.LoadPageQuery, mock.Anything, mock.Anything).After(s.loadDelay).Return(
		func(_ context.Context, in activities.LoadPageQueryInput) (activities.LoadPageQueryResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.loads = append(rec.loads, in)
			rec.inFlight++
			rec.maxInFlight = max(rec.maxInFlight, rec.inFlight)
			n := rec.call(in.PageID, "load")
			if err := s.err(in.PageID, "load", n, s.loadErrs); err != nil {
				return activities.LoadPageQueryResult{}, err
			}
			seg := int64(9)
			return activities.LoadPageQueryResult{Title: fmt.Sprintf("Page %d", in.PageID), QueryID: 3, QueryText: "linen dresses", ProductSegmentID: &seg}, nil
		})
	env.OnActivity(pageActs.CheckPageEmbeddings, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckPageEmbeddingsInput) (activities.CheckPageEmbeddingsResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			i := len(rec.checks)
			rec.checks = append(rec.checks, env.Now())
			var n int64
			if i < len(s.backlog) {
				n = s.backlog[i]
			}
			wait := s.embeddingWait
			if wait == 0 {
				wait = activities.DefaultEmbeddingWait
			}
			return activities.CheckPageEmbeddingsResult{Products: 10, Embedded: 10 - n, Pending: n, MaxWait: wait}, nil
		})
	env.OnActivity(pageActs.SearchPageProducts, mock.Anything, mock.Anything).After(s.searchDelay).Return(
		func(_ context.Context, in activities.SearchPageProductsInput) (activities.SearchPageProductsResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.searches = append(rec.searches, in)
			n := rec.call(in.PageID, "search")
			if err := s.err(in.PageID, "search", n, s.searchErrs); err != nil {
				return activities.SearchPageProductsResult{}, err
			}
			return activities.SearchPageProductsResult{Products: testProducts()}, nil
		})
	env.OnActivity(pageActs.GeneratePageCopy, mock.Anything, mock.Anything).After(s.copyDelay).Return(
		func(_ context.Context, in activities.GeneratePageCopyInput) (pagegen.Copy, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.copies = append(rec.copies, in)
			n := rec.call(in.PageID, "copy")
			if err := s.err(in.PageID, "copy", n, s.copyErrs); err != nil {
				return pagegen.Copy{}, err
			}
			return testCopy(), nil
		})
	env.OnActivity(pageActs.SavePageCopy, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SavePageCopyInput) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.saves = append(rec.saves, in)
			n := rec.call(in.PageID, "save")
			return s.err(in.PageID, "save", n, s.saveErrs)
		})
	env.OnActivity(pageActs.FailPageGeneration, mock.Anything, mock.Anything).After(s.failDelay).Return(
		func(_ context.Context, in activities.FailPageGenerationInput) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.fails = append(rec.fails, in)
			return nil
		})
	env.OnActivity(pageActs.StartBulkJob, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.BulkJobRef) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.started++
			return nil
		})
	env.OnActivity(pageActs.ListBulkPages, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ListBulkPagesInput) (activities.ListBulkPagesResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			i := rec.listed
			rec.listed++
			if i >= len(s.pending) {
				return activities.ListBulkPagesResult{}, nil
			}
			return activities.ListBulkPagesResult{PageIDs: s.pending[i], More: i < len(s.more) && s.more[i]}, nil
		})
	env.OnActivity(pageActs.FinishBulkPage, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.FinishBulkPageInput) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.finished = append(rec.finished, in)
			rec.inFlight--
			return nil
		})
	env.OnActivity(pageActs.FinishBulkJob, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.BulkJobRef) (activities.FinishBulkJobResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.jobsDone++
			res := activities.FinishBulkJobResult{Status: page.JobComplete}
			for _, f := range rec.finished {
				res.Total++
				if f.Error != "" {
					res.Failed++
				} else {
					res.Completed++
				}
			}
			if res.Failed > 0 {
				res.Status = page.JobPartialFailure
			}
			rec.finishJob = res
			return res, nil
		})
}

// TestPageGenerateWaitsForEmbeddings: while products are queued for their embeddings the run
// checks again with a growing wait and searches only once none is left; when they stay queued,
// it searches once the bound has passed, not before and not never.
func TestPageGenerateWaitsForEmbeddings(t *testing.T) {
	rec, res, err := runPageGenerate(t, pageScript{backlog: []int64{7, 4, 4, 1}})
	if err != nil || res.Status != page.StatusReady {
		t.Fatalf("result %+v, error %v", res, err)
	}
	if len(rec.checks) != 5 || len(rec.searches) != 1 || len(rec.saves) != 1 {
		t.Fatalf("%d checks, %d searches, %d saves; want 5 checks (7, 4, 4, 1, 0 queued), then the search and the save",
			len(rec.checks), len(rec.searches), len(rec.saves))
	}
	for i, want := range []time.Duration{embeddingPollWait, 2 * embeddingPollWait, 4 * embeddingPollWait, 8 * embeddingPollWait} {
		if got := rec.checks[i+1].Sub(rec.checks[i]); got != want {
			t.Errorf("wait %d: %s, want %s", i+1, got, want)
		}
	}

	// Embeddings that stay queued: the wait stops at the bound, then the page is generated.
	stuck := make([]int64, 100)
	for i := range stuck {
		stuck[i] = 3
	}
	rec, res, err = runPageGenerate(t, pageScript{backlog: stuck, embeddingWait: 3 * time.Minute})
	if err != nil || res.Status != page.StatusReady || len(rec.searches) != 1 || len(rec.saves) != 1 {
		t.Fatalf("bound passed: result %+v, error %v, %d searches, %d saves", res, err, len(rec.searches), len(rec.saves))
	}
	if waited := rec.checks[len(rec.checks)-1].Sub(rec.checks[0]); waited != 3*time.Minute {
		t.Errorf("waited %s between the first and the last check, want the 3m bound", waited)
	}
	if n := len(rec.checks); n > 12 {
		t.Errorf("%d checks in 3 minutes: the wait does not back off", n)
	}
}

func runPageGenerate(t *testing.T, s pageScript) (*pageRecorder, PageGenerateResult, error) {
	t.Helper()
	env := newTestEnv()
	env.RegisterWorkflow(PageGenerate)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: PageGenerateID(testTenant, testPage), TaskQueue: "test"})
	rec := &pageRecorder{}
	mockPageActivities(env, s, rec)
	for _, sig := range s.signals {
		name := sig.name
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, nil) }, sig.at)
	}
	env.ExecuteWorkflow(PageGenerate, PageGenerateInput{TenantID: testTenant, PageID: testPage})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var out PageGenerateResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&out); gerr != nil {
			t.Fatalf("workflow result: %v", gerr)
		}
	}
	return rec, out, err
}

func TestPageGenerateWorkflow(t *testing.T) {
	segmentGone := appErr("product segment 9 of the AIQuery no longer exists", activities.ErrTypeProductSegmentGone)
	invalid := appErr("the AI provider gave no valid page copy in 3 attempts; the last answer's problems: blocks[0].props.headline: is required", activities.ErrTypeInvalidLLMOutput)
	pageGone := appErr("page 55 not found", activities.ErrTypePageGone)
	queryGone := appErr("page 55 has no AIQuery any more (it was deleted), so it cannot be generated again", activities.ErrTypePageQueryGone)
	cases := []struct {
		name         string
		script       pageScript
		wantLoads    int
		wantSaves    int
		wantRuns     int
		wantStatus   string
		wantErrType  string
		wantFails    []string
		wantGone     bool
		wantMarkLast bool // the last run marks the page generating (it follows another run)
	}{
		{name: "search, copy, save", wantLoads: 1, wantSaves: 1, wantRuns: 1, wantStatus: page.StatusReady},
		{
			name: "slow activities", script: pageScript{loadDelay: time.Minute, searchDelay: time.Minute, copyDelay: 10 * time.Minute},
			wantLoads: 1, wantSaves: 1, wantRuns: 1, wantStatus: page.StatusReady,
		},
		{
			name:      "the segment was deleted: the page fails with the reason",
			script:    pageScript{searchErrs: map[int]error{1: segmentGone}},
			wantLoads: 1, wantRuns: 1, wantStatus: page.StatusError, wantErrType: activities.ErrTypeProductSegmentGone,
			wantFails: []string{"product segment 9 of the AIQuery no longer exists"},
		},
		{
			name:      "invalid copy is never saved",
			script:    pageScript{copyErrs: map[int]error{1: invalid}},
			wantLoads: 1, wantRuns: 1, wantStatus: page.StatusError, wantErrType: activities.ErrTypeInvalidLLMOutput,
			wantFails: []string{"the AI provider gave no valid page copy in 3 attempts; the last answer's problems: blocks[0].props.headline: is required"},
		},
		{
			name:      "a passing provider failure is retried",
			script:    pageScript{copyErrs: map[int]error{1: errors.New("openai chat: ai provider unavailable (http 502)")}},
			wantLoads: 1, wantSaves: 1, wantRuns: 1, wantStatus: page.StatusReady,
		},
		{
			name:      "a deleted page ends quietly",
			script:    pageScript{loadErrs: map[int]error{1: pageGone}},
			wantLoads: 1, wantRuns: 1, wantGone: true,
		},
		{
			name:      "a page deleted before the save ends quietly",
			script:    pageScript{saveErrs: map[int]error{1: pageGone}},
			wantLoads: 1, wantSaves: 1, wantRuns: 1, wantGone: true,
		},
		{
			name:      "a deleted query fails the page",
			script:    pageScript{loadErrs: map[int]error{1: queryGone}},
			wantLoads: 1, wantRuns: 1, wantStatus: page.StatusError, wantErrType: activities.ErrTypePageQueryGone,
			wantFails: []string{"page 55 has no AIQuery any more (it was deleted), so it cannot be generated again"},
		},
		{
			name:      "the starting signal does not rerun",
			script:    pageScript{loadDelay: time.Second, signals: []timedSignal{{0, SignalGenerate}}},
			wantLoads: 1, wantSaves: 1, wantRuns: 1, wantStatus: page.StatusReady,
		},
		{
			name:      "a regenerate while the run starts joins it",
			script:    pageScript{loadDelay: 10 * time.Minute, signals: []timedSignal{{time.Minute, SignalGenerate}, {2 * time.Minute, SignalGenerate}}},
			wantLoads: 1, wantSaves: 1, wantRuns: 1, wantStatus: page.StatusReady,
		},
		{
			name:      "regenerates while generating run once more after it",
			script:    pageScript{copyDelay: 10 * time.Minute, signals: []timedSignal{{time.Minute, SignalGenerate}, {2 * time.Minute, SignalGenerate}}},
			wantLoads: 2, wantSaves: 2, wantRuns: 2, wantStatus: page.StatusReady, wantMarkLast: true,
		},
		{
			name: "a regenerate after a failure runs again",
			script: pageScript{searchDelay: 10 * time.Minute, searchErrs: map[int]error{1: segmentGone},
				signals: []timedSignal{{time.Minute, SignalGenerate}}},
			wantLoads: 2, wantSaves: 1, wantRuns: 2, wantStatus: page.StatusReady, wantMarkLast: true,
			wantFails: []string{"product segment 9 of the AIQuery no longer exists"},
		},
		{
			name:      "a regenerate while the failure is recorded runs again",
			script:    pageScript{failDelay: 10 * time.Minute, copyErrs: map[int]error{1: invalid}, signals: []timedSignal{{time.Minute, SignalGenerate}}},
			wantLoads: 2, wantSaves: 1, wantRuns: 2, wantStatus: page.StatusReady, wantMarkLast: true,
			wantFails: []string{"the AI provider gave no valid page copy in 3 attempts; the last answer's problems: blocks[0].props.headline: is required"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, out, err := runPageGenerate(t, c.script)
			if c.wantErrType == "" {
				if err != nil {
					t.Fatalf("workflow error: %v", err)
				}
				if out.Runs != c.wantRuns || out.Status != c.wantStatus || out.Gone != c.wantGone {
					t.Errorf("result %+v, want %d runs, status %q, gone %v", out, c.wantRuns, c.wantStatus, c.wantGone)
				}
			} else {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != c.wantErrType || !app.NonRetryable() {
					t.Fatalf("workflow error %v, want non-retryable application error %s", err, c.wantErrType)
				}
				if app.Message() != c.wantFails[len(c.wantFails)-1] {
					t.Errorf("workflow error message %q, want the page's", app.Message())
				}
			}
			if len(rec.loads) != c.wantLoads || len(rec.saves) != c.wantSaves {
				t.Errorf("%d loads and %d saves, want %d and %d", len(rec.loads), len(rec.saves), c.wantLoads, c.wantSaves)
			}
			for i, l := range rec.loads {
				wantMark := c.wantMarkLast && i > 0
				if l.TenantID != testTenant || l.PageID != testPage || l.MarkGenerating != wantMark {
					t.Errorf("load %d: %+v", i, l)
				}
			}
			for _, s := range rec.searches {
				if s.Query != "linen dresses" || s.Limit != PageProducts || s.ProductSegmentID == nil || *s.ProductSegmentID != 9 {
					t.Errorf("search %+v, want the query's text and segment", s)
				}
			}
			for _, cp := range rec.copies {
				if cp.Title != "Page 55" || cp.Query != "linen dresses" || len(cp.Products) != 2 {
					t.Errorf("copy input %+v", cp)
				}
			}
			for _, s := range rec.saves {
				if s.Copy.IntroCopy != "Dresses." || len(s.Copy.Blocks) != 2 {
					t.Errorf("save %+v", s)
				}
			}
			var fails []string
			for _, f := range rec.fails {
				fails = append(fails, f.Message)
			}
			if !slices.Equal(fails, c.wantFails) {
				t.Errorf("failures recorded %q, want %q", fails, c.wantFails)
			}
		})
	}
}

// TestPageGenerateContinuesAsNew: regenerates during every run make the execution continue as
// new after pageGenerateMaxRuns runs.
func TestPageGenerateContinuesAsNew(t *testing.T) {
	var signals []timedSignal
	for i := range pageGenerateMaxRuns + 5 {
		signals = append(signals, timedSignal{time.Duration(i)*10*time.Minute + time.Minute, SignalGenerate})
	}
	rec, _, err := runPageGenerate(t, pageScript{copyDelay: 10 * time.Minute, signals: signals})
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow error %v, want continue-as-new", err)
	}
	if len(rec.saves) != pageGenerateMaxRuns {
		t.Errorf("%d saves, want %d before continuing as new", len(rec.saves), pageGenerateMaxRuns)
	}
}

func runBulk(t *testing.T, s pageScript) (*pageRecorder, PageBulkGenerateResult, error) {
	t.Helper()
	env := newTestEnv()
	env.RegisterWorkflow(PageBulkGenerate)
	env.RegisterWorkflow(PageGenerate)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: PageBulkGenerateID(testTenant, 77), TaskQueue: "test"})
	rec := &pageRecorder{}
	mockPageActivities(env, s, rec)
	env.ExecuteWorkflow(PageBulkGenerate, PageBulkGenerateInput{TenantID: testTenant, JobID: 77})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var out PageBulkGenerateResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&out); gerr != nil {
			t.Fatalf("workflow result: %v", gerr)
		}
	}
	return rec, out, err
}

func pageIDs(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

func TestPageBulkGenerateWorkflow(t *testing.T) {
	segmentGone := appErr("product segment 9 of the AIQuery no longer exists", activities.ErrTypeProductSegmentGone)
	pageGone := appErr("page 2 not found", activities.ErrTypePageGone)
	cases := []struct {
		name       string
		script     pageScript
		wantResult PageBulkGenerateResult
		wantErrs   map[int64]string
		wantMax    int // pages in flight at once, when the script's delays make it certain
	}{
		{
			name:       "every page ready",
			script:     pageScript{pending: [][]int64{{1, 2, 3}}},
			wantResult: PageBulkGenerateResult{Status: page.JobComplete, Total: 3, Completed: 3},
		},
		{
			name:       "one failing page does not stop the others",
			script:     pageScript{pending: [][]int64{{1, 2, 3}}, byPage: map[int64]map[string]error{2: {"search": segmentGone}}},
			wantResult: PageBulkGenerateResult{Status: page.JobPartialFailure, Total: 3, Completed: 2, Failed: 1},
			wantErrs:   map[int64]string{2: "product segment 9 of the AIQuery no longer exists"},
		},
		{
			name:       "a deleted page is recorded failed",
			script:     pageScript{pending: [][]int64{{1, 2}}, byPage: map[int64]map[string]error{2: {"load": pageGone}}},
			wantResult: PageBulkGenerateResult{Status: page.JobPartialFailure, Total: 2, Completed: 1, Failed: 1},
			wantErrs:   map[int64]string{2: "the page was deleted"},
		},
		{
			name:       "bounded concurrency",
			script:     pageScript{pending: [][]int64{pageIDs(100, 30)}, searchDelay: time.Minute, copyDelay: time.Minute},
			wantResult: PageBulkGenerateResult{Status: page.JobComplete, Total: 30, Completed: 30},
			wantMax:    BulkConcurrency,
		},
		{
			name:       "nothing pending",
			script:     pageScript{pending: [][]int64{{}}},
			wantResult: PageBulkGenerateResult{Status: page.JobComplete},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, out, err := runBulk(t, c.script)
			if err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			if out != c.wantResult {
				t.Errorf("result %+v, want %+v", out, c.wantResult)
			}
			if rec.started != 1 || rec.jobsDone != 1 {
				t.Errorf("job started %d and finished %d times, want once each", rec.started, rec.jobsDone)
			}
			// How many pages overlap without delays depends on the test server's scheduling: only
			// the bound is certain there; with delays every slot fills.
			if rec.maxInFlight > BulkConcurrency || (c.wantMax > 0 && rec.maxInFlight != c.wantMax) {
				t.Errorf("at most %d pages at once, want %d (never more than %d)", rec.maxInFlight, c.wantMax, BulkConcurrency)
			}
			got := map[int64]string{}
			for _, f := range rec.finished {
				if f.TenantID != testTenant || f.JobID != 77 {
					t.Errorf("finish %+v", f)
				}
				if _, dup := got[f.PageID]; dup {
					t.Errorf("page %d finished twice", f.PageID)
				}
				got[f.PageID] = f.Error
			}
			for _, id := range c.script.pending[0] {
				msg, ok := got[id]
				if !ok {
					t.Errorf("page %d never finished", id)
				}
				if msg != c.wantErrs[id] {
					t.Errorf("page %d error %q, want %q", id, msg, c.wantErrs[id])
				}
			}
		})
	}
}

// TestPageBulkGenerateContinuesAsNew: a job with more pending pages than one execution takes
// continues as new once the taken ones are done, without finishing the job.
func TestPageBulkGenerateContinuesAsNew(t *testing.T) {
	rec, _, err := runBulk(t, pageScript{pending: [][]int64{{1, 2}}, more: []bool{true}})
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow error %v, want continue-as-new", err)
	}
	if len(rec.finished) != 2 || rec.jobsDone != 0 {
		t.Errorf("%d pages finished and the job finished %d times, want 2 and 0", len(rec.finished), rec.jobsDone)
	}
}

// pagesStack is the real generation stack on the embedded Temporal server and Postgres: the
// catalogue, semantic search over the in-process index, the page service and a worker with the
// page workflows and activities, all with the local AI provider.
type pagesStack struct {
	db      *store.DB
	tc      client.Client
	catalog *catalog.Service
	search  *search.Service
	pages   *page.Service
	jobs    *Starter
	ai      ai.Provider
}

func newPagesStack(t testing.TB, opts ...activities.PagesOption) *pagesStack {
	t.Helper()
	db := testenv.OpenDB(t)
	tc := testenv.Temporal(t)
	queue := testenv.TaskQueue(t)
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	index := search.NewEmbedded(db.Pool, logger, time.Now, search.IndexConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	listened := make(chan error, 1)
	go func() { listened <- index.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-listened; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("index listener: %v", err)
		}
	})
	s := &pagesStack{db: db, tc: tc, ai: local, jobs: &Starter{Client: tc, TaskQueue: queue}}
	s.catalog = catalog.NewService(db.Pool, time.Now)
	s.search = search.NewService(db.Pool, local, index, time.Now, logger, search.Config{})
	s.pages = page.NewService(db.Pool, s.jobs, time.Now, logger, page.Options{})
	w := worker.New(tc, queue, worker.Options{})
	w.RegisterWorkflow(PageGenerate)
	w.RegisterWorkflow(PageBulkGenerate)
	w.RegisterActivity(activities.NewPages(s.pages, s.search, local, opts...))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return s
}

// drain embeds every queued product of the tenant.
func (s *pagesStack) drain(t testing.TB, tenantID int64) {
	t.Helper()
	for {
		res, err := s.catalog.DrainEmbeddings(context.Background(), tenantID, s.ai, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !res.More {
			return
		}
	}
}

// waitPage waits for the page's generation workflow and returns the page.
func (s *pagesStack) waitPage(t *testing.T, tenantID, pageID int64) (*page.Page, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res PageGenerateResult
	werr := s.tc.GetWorkflow(ctx, PageGenerateID(tenantID, pageID), "").Get(ctx, &res)
	p, err := s.pages.GetPage(context.Background(), tenantID, pageID)
	if err != nil {
		t.Fatal(err)
	}
	return p, werr
}

var e2eProducts = []map[string]any{
	{"sku": "LD-1", "name": "Linen Midi Dress", "data": map[string]any{"category": "dresses", "material": "linen", "color": "white", "price": 59.0, "description": "A light linen summer dress"}},
	{"sku": "LD-2", "name": "Linen Wrap Dress", "data": map[string]any{"category": "dresses", "material": "linen", "color": "sand", "price": 74.0, "description": "Breathable linen dress for summer days"}},
	{"sku": "LD-3", "name": "Linen Maxi Summer Dress", "data": map[string]any{"category": "dresses", "material": "linen", "color": "navy", "price": 79.0, "description": "Long linen dress"}},
	{"sku": "WC-1", "name": "Wool Winter Coat", "data": map[string]any{"category": "coats", "material": "wool", "color": "grey", "price": 220.0, "description": "A warm wool coat for winter"}},
	{"sku": "WC-2", "name": "Wool Pea Coat", "data": map[string]any{"category": "coats", "material": "wool", "color": "navy", "price": 180.0, "description": "Classic warm wool pea coat"}},
	{"sku": "PC-3", "name": "Padded Winter Parka", "data": map[string]any{"category": "coats", "material": "polyester", "color": "black", "price": 160.0, "description": "Warm padded parka for cold winter days"}},
	{"sku": "CS-1", "name": "Cotton Summer Shirt", "data": map[string]any{"category": "shirts", "material": "cotton", "color": "white", "price": 35.0, "description": "Light cotton shirt"}},
	{"sku": "CS-2", "name": "Linen Summer Shirt", "data": map[string]any{"category": "shirts", "material": "linen", "color": "blue", "price": 45.0, "description": "Airy linen shirt for summer"}},
	{"sku": "LS-1", "name": "Leather Sneakers", "data": map[string]any{"category": "shoes", "material": "leather", "color": "white", "price": 95.0}},
	{"sku": "WS-1", "name": "Wool Scarf", "data": map[string]any{"category": "accessories", "material": "wool", "color": "red", "price": 29.0}},
}

// seedCatalog stores the schema and products, embeds them and returns product ids by SKU.
func (s *pagesStack) seedCatalog(t testing.TB, tenantID int64) map[string]int64 {
	t.Helper()
	s.storeCatalog(t, tenantID)
	s.drain(t, tenantID)
	return s.productIDs(t, tenantID)
}

// storeCatalog stores the schema and products; their embeddings stay queued.
func (s *pagesStack) storeCatalog(t testing.TB, tenantID int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.catalog.PutSchema(ctx, tenantID, catalog.Schema{Fields: []catalog.Field{
		{Name: "category", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "material", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "color", Type: catalog.TypeString, Facet: true, Searchable: true},
		{Name: "price", Type: catalog.TypePrice},
		{Name: "description", Type: catalog.TypeText, Searchable: true},
	}, DefaultCurrency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.catalog.Bulk(ctx, tenantID, e2eProducts); err != nil {
		t.Fatal(err)
	}
}

// productIDs returns the tenant's product ids by SKU.
func (s *pagesStack) productIDs(t testing.TB, tenantID int64) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	ids := map[string]int64{}
	rows, err := s.db.Pool.Query(ctx, `SELECT sku, id FROM products WHERE tenant_id = $1`, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sku string
		var id int64
		if err := rows.Scan(&sku, &id); err != nil {
			t.Fatal(err)
		}
		ids[sku] = id
	}
	return ids
}

// productSegment stores a computed product segment with the given members.
func (s *pagesStack) productSegment(t testing.TB, tenantID int64, name string, members ...int64) int64 {
	t.Helper()
	var id int64
	if err := s.db.Pool.QueryRow(context.Background(), `INSERT INTO product_segments (tenant_id, name, name_key, definition, status, computed_count, computed_version, last_computed_at)
		VALUES ($1, $2, lower($2), '{"conditions": []}', 'ready', $3, 1, now()) RETURNING id`, tenantID, name, len(members)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, s.db, `INSERT INTO product_segment_members (tenant_id, segment_id, product_id) SELECT $1, $2, unnest($3::bigint[])`, tenantID, id, members)
	return id
}

// checkGenerated checks a ready page: blocks valid against the registry, a hero and a product
// grid whose SKUs are among the page's products, and the versions.
func checkGenerated(t *testing.T, p *page.Page, wantVersion int) {
	t.Helper()
	if p.Status != page.StatusReady || p.LastError != nil || p.GeneratedAt == nil {
		t.Fatalf("page %d: status %s, last_error %v, generated_at %v", p.ID, p.Status, p.LastError, p.GeneratedAt)
	}
	if p.Version != wantVersion {
		t.Errorf("page %d version %d, want %d", p.ID, p.Version, wantVersion)
	}
	if _, err := block.Validate("blocks", p.Blocks); err != nil {
		t.Fatalf("page %d blocks do not validate against the registry: %v", p.ID, err)
	}
	if p.IntroCopy == "" || len(p.ProductSKUs) == 0 {
		t.Errorf("page %d: intro %q, skus %v", p.ID, p.IntroCopy, p.ProductSKUs)
	}
	var types []string
	for _, b := range p.Blocks {
		types = append(types, b.Type)
		if b.Type == block.ProductGrid {
			skus, _ := b.Props["product_skus"].([]any)
			for _, s := range skus {
				if !slices.Contains(p.ProductSKUs, s.(string)) {
					t.Errorf("page %d grid shows %v, not one of the found products %v", p.ID, s, p.ProductSKUs)
				}
			}
		}
	}
	if !slices.Contains(types, block.Hero) || !slices.Contains(types, block.ProductGrid) {
		t.Errorf("page %d blocks %v lack a hero or a product grid", p.ID, types)
	}
}

// TestPageGenerationEndToEnd runs generation on the embedded Temporal server against Postgres
// with the local provider: products -> embeddings -> AIQuery -> page ready with valid blocks ->
// regenerate makes a new version -> bulk generation over three active queries, one of whose
// product segment was deleted, ends partial_failure with that page's error.
func TestPageGenerationEndToEnd(t *testing.T) {
	ctx := context.Background()
	s := newPagesStack(t)
	tn := testenv.Tenant(t, s.db, "e2e-pages")
	ids := s.seedCatalog(t, tn)
	coats := s.productSegment(t, tn, "Coats", ids["WC-1"], ids["WC-2"], ids["PC-3"])
	shirts := s.productSegment(t, tn, "Shirts", ids["CS-1"], ids["CS-2"])

	dress, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "linen summer dress"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.pages.CreatePage(ctx, tn, page.CreateInput{Query: &dress.ID})
	if err != nil {
		t.Fatal(err)
	}
	got, werr := s.waitPage(t, tn, p.ID)
	if werr != nil {
		t.Fatalf("generation: %v", werr)
	}
	checkGenerated(t, got, 1)
	if len(got.ProductSKUs) != len(e2eProducts) || !strings.HasPrefix(got.ProductSKUs[0], "LD-") {
		t.Errorf("products %v: want every product, a linen dress first", got.ProductSKUs)
	}
	if got.Blocks[0].Props["headline"] != "Linen summer dress" {
		t.Errorf("hero %v", got.Blocks[0].Props)
	}

	// Regenerate: a new version with the same (deterministic) content.
	if err := s.pages.Regenerate(ctx, tn, p.ID); err != nil {
		t.Fatal(err)
	}
	again, werr := s.waitPage(t, tn, p.ID)
	if werr != nil {
		t.Fatalf("regeneration: %v", werr)
	}
	checkGenerated(t, again, 2)
	if again.IntroCopy != got.IntroCopy || !again.GeneratedAt.After(*got.GeneratedAt) {
		t.Errorf("regenerated intro %q at %v, first %q at %v", again.IntroCopy, again.GeneratedAt, got.IntroCopy, got.GeneratedAt)
	}
	versions, err := s.pages.ListVersions(ctx, tn, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 2 || versions[0].Source != page.SourceGeneration {
		t.Errorf("versions %+v, want two generations", versions)
	}

	// Bulk: the dress query (its page reused), a coat query restricted to the coats, and a
	// shirt query whose segment is deleted.
	coatQ, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "warm winter coat", ProductSegmentID: &coats})
	if err != nil {
		t.Fatal(err)
	}
	shirtQ, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "summer shirts", ProductSegmentID: &shirts})
	if err != nil {
		t.Fatal(err)
	}
	off := false
	inactive, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "sneakers", Active: &off})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, s.db, `DELETE FROM product_segments WHERE tenant_id = $1 AND id = $2`, tn, shirts)
	started, err := s.pages.BulkGenerate(ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var res PageBulkGenerateResult
	if err := s.tc.GetWorkflow(wctx, PageBulkGenerateID(tn, started.JobID), "").Get(wctx, &res); err != nil {
		t.Fatalf("bulk workflow: %v", err)
	}
	want := PageBulkGenerateResult{Status: page.JobPartialFailure, Total: 3, Completed: 2, Failed: 1}
	if res != want {
		t.Errorf("bulk result %+v, want %+v", res, want)
	}
	job, err := s.pages.BulkJob(ctx, tn, started.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != page.JobPartialFailure || job.Total != 3 || job.Completed != 2 || job.Failed != 1 || job.FinishedAt == nil {
		t.Errorf("job %+v", job.BulkJob)
	}
	byQuery := map[int64]page.BulkJobPage{}
	for _, jp := range job.Pages {
		byQuery[*jp.QueryID] = jp
	}
	if _, ok := byQuery[inactive.ID]; ok || len(job.Pages) != 3 {
		t.Errorf("job pages %+v, want the three active queries", job.Pages)
	}
	if jp := byQuery[dress.ID]; jp.Status != page.JobPageReady || *jp.PageID != p.ID {
		t.Errorf("dress page in the job %+v, want page %d reused and ready", jp, p.ID)
	}
	reused, _ := s.pages.GetPage(ctx, tn, p.ID)
	checkGenerated(t, reused, 3)

	coatPage := byQuery[coatQ.ID]
	if coatPage.Status != page.JobPageReady || coatPage.PageID == nil {
		t.Fatalf("coat page %+v", coatPage)
	}
	cp, _ := s.pages.GetPage(ctx, tn, *coatPage.PageID)
	checkGenerated(t, cp, 1)
	if !slices.Equal(slices.Sorted(slices.Values(cp.ProductSKUs)), []string{"PC-3", "WC-1", "WC-2"}) {
		t.Errorf("coat page products %v, want the coats segment's", cp.ProductSKUs)
	}

	shirtPage := byQuery[shirtQ.ID]
	wantErr := fmt.Sprintf("product segment %d of the AIQuery no longer exists", shirts)
	if shirtPage.Status != page.JobPageError || shirtPage.Error == nil || *shirtPage.Error != wantErr {
		t.Errorf("shirt page in the job %+v, want error %q", shirtPage, wantErr)
	}
	sp, _ := s.pages.GetPage(ctx, tn, *shirtPage.PageID)
	if sp.Status != page.StatusError || sp.LastError == nil || *sp.LastError != wantErr || sp.Version != 0 || len(sp.Blocks) != 0 {
		t.Errorf("shirt page: status %s, last_error %v, version %d, blocks %d", sp.Status, sp.LastError, sp.Version, len(sp.Blocks))
	}

	// An operator finds the job in Temporal by tenant and job.
	desc, err := s.tc.DescribeWorkflowExecution(ctx, PageBulkGenerateID(tn, started.JobID), "")
	if err != nil {
		t.Fatal(err)
	}
	if desc.WorkflowExecutionInfo.Type.Name != "PageBulkGenerate" {
		t.Errorf("job workflow %s", desc.WorkflowExecutionInfo.Type.Name)
	}
	// Starting the finished job again leaves it as it ended.
	if err := s.jobs.StartBulk(ctx, tn, started.JobID); err != nil {
		t.Fatalf("start the finished job again: %v", err)
	}
	if err := s.tc.GetWorkflow(wctx, PageBulkGenerateID(tn, started.JobID), "").Get(wctx, &res); err != nil || res != want {
		t.Errorf("the job run again: %+v, %v; want %+v", res, err, want)
	}
	if again, _ := s.pages.BulkJob(ctx, tn, started.JobID); again.Status != job.Status || again.Failed != 1 || !again.FinishedAt.Equal(*job.FinishedAt) {
		t.Errorf("job after a second start %+v, was %+v", again.BulkJob, job.BulkJob)
	}
}

// pollPage reads the page until cond holds (within a minute) and returns it.
func (s *pagesStack) pollPage(t *testing.T, tenantID, pageID int64, what string, cond func(*page.Page) bool) *page.Page {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := s.pages.GetPage(context.Background(), tenantID, pageID)
		if err != nil {
			t.Fatal(err)
		}
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; page status %s, pending_embeddings %s, last_error %s", what, p.Status, asJSON(p.PendingEmbeddings), asJSON(p.LastError))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pendingIs(p *page.Page, n int64) bool {
	return p.PendingEmbeddings != nil && *p.PendingEmbeddings == n
}

// TestPageGenerationWaitsForEmbeddings runs generation on the embedded Temporal server against
// Postgres: a page created while its catalogue's embeddings are still queued waits (GET shows it
// generating with the pending count) and, once they are embedded, is ready from every matching
// product. A page whose embeddings stay queued past the bound is generated from the embedded
// ones and keeps the count of those left out.
func TestPageGenerationWaitsForEmbeddings(t *testing.T) {
	ctx := context.Background()
	t.Run("embedded while waiting", func(t *testing.T) {
		s := newPagesStack(t, activities.WithEmbeddingWait(time.Minute))
		tn := testenv.Tenant(t, s.db, "e2e-pages-wait")
		s.storeCatalog(t, tn) // queued, none embedded
		q, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "linen summer dress"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.pages.CreatePage(ctx, tn, page.CreateInput{Query: &q.ID})
		if err != nil {
			t.Fatal(err)
		}
		s.pollPage(t, tn, p.ID, "the pending count while waiting", func(p *page.Page) bool {
			return p.Status == page.StatusGenerating && pendingIs(p, int64(len(e2eProducts)))
		})
		s.drain(t, tn)
		got, werr := s.waitPage(t, tn, p.ID)
		if werr != nil {
			t.Fatalf("generation: %v", werr)
		}
		checkGenerated(t, got, 1)
		if len(got.ProductSKUs) != len(e2eProducts) || !strings.HasPrefix(got.ProductSKUs[0], "LD-") || got.PendingEmbeddings != nil {
			t.Errorf("products %v, pending_embeddings %v: want every product, a linen dress first, none pending",
				got.ProductSKUs, got.PendingEmbeddings)
		}
	})
	t.Run("bound passed", func(t *testing.T) {
		s := newPagesStack(t, activities.WithEmbeddingWait(3*time.Second))
		tn := testenv.Tenant(t, s.db, "e2e-pages-wait-bound")
		s.storeCatalog(t, tn)
		if _, err := s.catalog.DrainEmbeddings(ctx, tn, s.ai, 4); err != nil {
			t.Fatal(err)
		}
		q, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "linen summer dress"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.pages.CreatePage(ctx, tn, page.CreateInput{Query: &q.ID})
		if err != nil {
			t.Fatal(err)
		}
		left := int64(len(e2eProducts) - 4)
		s.pollPage(t, tn, p.ID, "the pending count while waiting", func(p *page.Page) bool {
			return p.Status == page.StatusGenerating && pendingIs(p, left)
		})
		got, werr := s.waitPage(t, tn, p.ID)
		if werr != nil {
			t.Fatalf("generation past the bound: %v", werr)
		}
		checkGenerated(t, got, 1)
		if len(got.ProductSKUs) != 4 || !pendingIs(got, left) {
			t.Errorf("products %v, pending_embeddings %v: want the 4 embedded and %d left out", got.ProductSKUs, got.PendingEmbeddings, left)
		}
	})
}

// TestPageGenerationQueryWithoutWords: a page whose AIQuery's text was changed to one the search
// cannot use fails with a message that names the query, not the catalogue.
func TestPageGenerationQueryWithoutWords(t *testing.T) {
	ctx := context.Background()
	s := newPagesStack(t)
	tn := testenv.Tenant(t, s.db, "e2e-pages-nowords")
	s.seedCatalog(t, tn)
	q, err := s.pages.CreateQuery(ctx, tn, page.QueryInput{Text: "linen summer dress"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.pages.CreatePage(ctx, tn, page.CreateInput{Query: &q.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, werr := s.waitPage(t, tn, p.ID); werr != nil {
		t.Fatal(werr)
	}
	if _, err := s.pages.UpdateQuery(ctx, tn, q.ID, page.QueryPatch{Text: new("?! ...")}); err != nil {
		t.Fatal(err)
	}
	if err := s.pages.Regenerate(ctx, tn, p.ID); err != nil {
		t.Fatal(err)
	}
	got, werr := s.waitPage(t, tn, p.ID)
	want := `the AIQuery's text "?! ..." ` + search.NoWordsMessage
	if werr == nil || got.Status != page.StatusError || got.LastError == nil || *got.LastError != want {
		t.Fatalf("page %s, last_error %v, workflow error %v; want error %q", got.Status, got.LastError, werr, want)
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
