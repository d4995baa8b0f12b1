package workflows

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagegen"
)

// Page generation: one workflow per page (search -> copy -> save), one per bulk job.
const (
	KindPageGenerate     = "page-generate"
	KindPageBulkGenerate = "page-bulk-generate"

	// SignalGenerate asks for a generation of the page (create, regenerate; through
	// SignalWithStart, so the first one starts the workflow).
	SignalGenerate = "generate"

	// PageProducts is how many found products a page is generated from.
	PageProducts = 12
	// BulkConcurrency is how many pages of a bulk job generate at once.
	BulkConcurrency = 8
	// BulkPagesPerRun bounds the pages one execution of a bulk job generates; then it continues
	// as new (the job's pending pages in Postgres are the work), so its history stays bounded.
	BulkPagesPerRun = 500
	// pageGenerateMaxRuns bounds the runs of one execution of a page's workflow, so a page
	// regenerated back to back keeps a bounded history.
	pageGenerateMaxRuns = 50
	// bulkFollowWait is the first wait before a bulk job starts a page's generation again when
	// one of that page was already running (it follows it); the wait doubles up to
	// bulkFollowMaxWait.
	bulkFollowWait    = 2 * time.Second
	bulkFollowMaxWait = 30 * time.Second
	// embeddingPollWait is the first wait before a generation counts the queued embeddings it
	// waits for again; the wait doubles up to embeddingPollMaxWait (the bound of the whole wait
	// comes from the activities: CheckPageEmbeddingsResult.MaxWait).
	embeddingPollWait    = 2 * time.Second
	embeddingPollMaxWait = 30 * time.Second
)

// Versions of PageGenerate's command sequence (workflow.GetVersion).
const (
	pageGenerateVersionID = "page-generate"
	// pageGenerateWaitsForEmbeddings: a run counts the queued embeddings of the products its
	// query could match (CheckPageEmbeddings) and waits for them before it searches.
	pageGenerateWaitsForEmbeddings = 1
)

// PageGenerateID is the generation workflow of a page: one at a time; a request while it runs
// joins it or asks for one more run (see PageGenerate).
func PageGenerateID(tenantID, pageID int64) string { return ID(KindPageGenerate, tenantID, pageID) }

// PageBulkGenerateID is the workflow of a bulk generation job.
func PageBulkGenerateID(tenantID, jobID int64) string {
	return ID(KindPageBulkGenerate, tenantID, jobID)
}

// PageGenerateInput names the page.
type PageGenerateInput struct {
	TenantID int64
	PageID   int64
}

// PageGenerateResult is the outcome of this execution's runs: the last one's status (ready or
// error) and its error message. A page that was deleted ends the workflow with Gone.
type PageGenerateResult struct {
	Runs   int
	Status string
	Error  string
	Gone   bool
}

var pageActs *activities.Pages

// pageActivityOptions are the options of the generation's activities.
func pageActivityOptions(ctx workflow.Context) (short, searchCtx, llm workflow.Context) {
	short = shortActivity(ctx)
	searchCtx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		// A provider that stays down fails the page after a few minutes instead of forever.
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeProductSegmentGone, activities.ErrTypePageNoProducts}},
	})
	llm = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// Up to pagegen.MaxAttempts chat completions in one attempt.
		StartToCloseTimeout:    5 * time.Minute,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 2 * time.Minute,
			MaximumAttempts:        6,
			NonRetryableErrorTypes: []string{activities.ErrTypeInvalidLLMOutput, activities.ErrTypePageCopyRejected}},
	})
	return short, searchCtx, llm
}

// PageGenerate generates a page: semantic search for its AIQuery's text (restricted to the
// query's product segment), copy through the AI provider (validated against the block
// registry), then saves it (status ready, a new page version). Before it searches, a run waits
// while products the query could match are still queued for their embeddings (see
// waitForEmbeddings), so a page created right after a catalogue upload is built from all of it. A permanent failure (the
// query's product segment was deleted, no valid copy in pagegen.MaxAttempts answers, a provider
// that stays down) sets the page's status error with last_error, and the workflow fails with
// that error; a page deleted meanwhile ends it quietly.
//
// Requests arrive as SignalGenerate. One delivered before the run has read the page's query
// joins the run; one delivered later asks for exactly one more run after it (several requests,
// one more run), so a regenerate never runs beside another generation of the page and the page
// is never older than the last request. A bulk job starts this workflow as its child, under the
// same ID, so a regenerate during a bulk job joins or follows it too. After a run with requests
// pending, the execution continues as new when the server suggests it (or after
// pageGenerateMaxRuns runs).
func PageGenerate(ctx workflow.Context, in PageGenerateInput) (PageGenerateResult, error) {
	var out PageGenerateResult
	begun := false
	reqs := newRequests(ctx, on(SignalGenerate, func() bool { return begun }))
	short, searchCtx, llm := pageActivityOptions(ctx)
	for {
		begun, reqs.rerun = false, false
		err := generatePage(ctx, in, out.Runs > 0, reqs.await, &begun, short, searchCtx, llm)
		begun = true
		out.Runs++
		if isPageGone(err) {
			workflow.GetLogger(ctx).Info("page gone; nothing to generate", "error", err)
			return PageGenerateResult{Runs: out.Runs, Gone: true}, nil
		}
		out.Status, out.Error = page.StatusReady, ""
		if err != nil {
			out.Status, out.Error = page.StatusError, failureMessage("generation", err)
			if ferr := workflow.ExecuteActivity(short, pageActs.FailPageGeneration, activities.FailPageGenerationInput{
				TenantID: in.TenantID, PageID: in.PageID, Message: out.Error,
			}).Get(ctx, nil); ferr != nil {
				workflow.GetLogger(ctx).Warn("recording the page generation failure failed", "error", ferr)
			}
		}
		if !reqs.pending() {
			if err != nil {
				return out, temporal.NewNonRetryableApplicationError(out.Error, failureType(err), nil)
			}
			return out, nil
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || out.Runs >= pageGenerateMaxRuns {
			return out, workflow.NewContinueAsNewError(ctx, PageGenerate, in)
		}
	}
}

// generatePage is one run: load the query, search, write the copy, save it. again says the run
// follows another one of this execution (the page is marked generating again).
func generatePage(ctx workflow.Context, in PageGenerateInput, again bool, await func(workflow.Future, any) error,
	begun *bool, short, searchCtx, llm workflow.Context) error {
	var target activities.LoadPageQueryResult
	if err := await(workflow.ExecuteActivity(short, pageActs.LoadPageQuery, activities.LoadPageQueryInput{
		TenantID: in.TenantID, PageID: in.PageID, MarkGenerating: again,
	}), &target); err != nil {
		return err
	}
	*begun = true
	if workflow.GetVersion(ctx, pageGenerateVersionID, workflow.DefaultVersion, pageGenerateWaitsForEmbeddings) >= pageGenerateWaitsForEmbeddings {
		if err := waitForEmbeddings(ctx, in, target.ProductSegmentID, await, short); err != nil {
			return err
		}
	}
	var found activities.SearchPageProductsResult
	if err := await(workflow.ExecuteActivity(searchCtx, pageActs.SearchPageProducts, activities.SearchPageProductsInput{
		TenantID: in.TenantID, PageID: in.PageID, Query: target.QueryText, Limit: PageProducts, ProductSegmentID: target.ProductSegmentID,
	}), &found); err != nil {
		return err
	}
	var written pagegen.Copy
	if err := await(workflow.ExecuteActivity(llm, pageActs.GeneratePageCopy, activities.GeneratePageCopyInput{
		TenantID: in.TenantID, PageID: in.PageID, Query: target.QueryText, Title: target.Title, Products: found.Products,
	}), &written); err != nil {
		return err
	}
	return await(workflow.ExecuteActivity(short, pageActs.SavePageCopy, activities.SavePageCopyInput{
		TenantID: in.TenantID, PageID: in.PageID, Copy: written,
	}), nil)
}

// waitForEmbeddings waits while products the page's query could match (the catalogue, or the
// query's product segment) are queued for their embeddings: it counts them (CheckPageEmbeddings,
// which shows the count on the page as pending_embeddings), and while there are any it checks
// again after a wait that doubles from embeddingPollWait to embeddingPollMaxWait, for at most the
// activities' MaxWait. Products the embedding provider refused are not waited for (they may
// never be embedded). Once the bound has passed the run goes on with the products embedded by
// then; the page keeps the count of those left out in pending_embeddings.
func waitForEmbeddings(ctx workflow.Context, in PageGenerateInput, segmentID *int64, await func(workflow.Future, any) error, short workflow.Context) error {
	start := workflow.Now(ctx)
	wait := embeddingPollWait
	for {
		var b activities.CheckPageEmbeddingsResult
		if err := await(workflow.ExecuteActivity(short, pageActs.CheckPageEmbeddings, activities.CheckPageEmbeddingsInput{
			TenantID: in.TenantID, PageID: in.PageID, ProductSegmentID: segmentID,
		}), &b); err != nil {
			return err
		}
		if b.Pending == 0 {
			return nil
		}
		left := b.MaxWait - workflow.Now(ctx).Sub(start)
		if left <= 0 {
			workflow.GetLogger(ctx).Warn("generating before every product is embedded: the wait's bound passed",
				"pending_embeddings", b.Pending, "waited", workflow.Now(ctx).Sub(start))
			return nil
		}
		if err := await(workflow.NewTimer(ctx, min(wait, left)), nil); err != nil {
			return err
		}
		wait = min(2*wait, embeddingPollMaxWait)
	}
}

// isPageGone reports an activity failure saying the page no longer exists.
func isPageGone(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTypePageGone
}

// failureType is the application error type of a failure ("" when it has none).
func failureType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "Timeout"
	}
	return ""
}

// PageBulkGenerateInput names the job.
type PageBulkGenerateInput struct {
	TenantID int64
	JobID    int64
	// TenantSlug is for the summaries of the pages' workflows only ("" before it existed).
	TenantSlug string `json:",omitempty"`
}

// PageBulkGenerateResult is the job as it ended (Status complete or partial_failure); an
// execution that continued as new returns none.
type PageBulkGenerateResult struct {
	Status    string
	Total     int
	Completed int
	Failed    int
}

// PageBulkGenerate generates the pages of a bulk job: it marks the job running, then generates
// its pending pages with at most BulkConcurrency at a time, each as a PageGenerate child under
// the page's own workflow ID (so it never runs beside a regenerate of that page: when one runs,
// the job waits for it to end and generates the page after it), records each page's ready or
// error as it finishes (one failing page never stops the others), and ends the job complete, or
// partial_failure when a page failed. After BulkPagesPerRun pages, or when the server suggests
// it, the execution lets its running pages finish and continues as new; the pages still pending
// in Postgres are the rest of the work.
func PageBulkGenerate(ctx workflow.Context, in PageBulkGenerateInput) (PageBulkGenerateResult, error) {
	short := shortActivity(ctx)
	job := activities.BulkJobRef{TenantID: in.TenantID, JobID: in.JobID}
	if err := workflow.ExecuteActivity(short, pageActs.StartBulkJob, job).Get(ctx, nil); err != nil {
		return PageBulkGenerateResult{}, err
	}
	var list activities.ListBulkPagesResult
	if err := workflow.ExecuteActivity(short, pageActs.ListBulkPages, activities.ListBulkPagesInput{
		TenantID: in.TenantID, JobID: in.JobID, Limit: BulkPagesPerRun,
	}).Get(ctx, &list); err != nil {
		return PageBulkGenerateResult{}, err
	}
	done := workflow.NewChannel(ctx)
	running, next := 0, 0
	stopping := false
	var recordErr error
	for next < len(list.PageIDs) || running > 0 {
		for !stopping && running < BulkConcurrency && next < len(list.PageIDs) {
			pageID := list.PageIDs[next]
			next++
			running++
			workflow.Go(ctx, func(gctx workflow.Context) {
				msg := bulkPage(gctx, in, pageID)
				if err := workflow.ExecuteActivity(shortActivity(gctx), pageActs.FinishBulkPage, activities.FinishBulkPageInput{
					TenantID: in.TenantID, JobID: in.JobID, PageID: pageID, Error: msg,
				}).Get(gctx, nil); err != nil && recordErr == nil {
					recordErr = err // coroutines run one at a time
				}
				done.Send(gctx, pageID)
			})
		}
		if running == 0 {
			break
		}
		done.Receive(ctx, nil)
		running--
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			stopping = true
		}
	}
	if recordErr != nil {
		// The job's record could not be updated (the database stayed down through the
		// retries): the job fails visibly; FinishBulk was not reached, so it stays running.
		return PageBulkGenerateResult{}, recordErr
	}
	if stopping && next < len(list.PageIDs) || list.More {
		return PageBulkGenerateResult{}, workflow.NewContinueAsNewError(ctx, PageBulkGenerate, in)
	}
	var res activities.FinishBulkJobResult
	if err := workflow.ExecuteActivity(short, pageActs.FinishBulkJob, job).Get(ctx, &res); err != nil {
		return PageBulkGenerateResult{}, err
	}
	return PageBulkGenerateResult(res), nil
}

// bulkPage generates one page of a bulk job as a child workflow and returns its error message
// ("" when the page is ready). When a generation of the page already runs (a regenerate), it
// waits and starts the page's generation again once that one has ended.
func bulkPage(ctx workflow.Context, in PageBulkGenerateInput, pageID int64) string {
	tenantID := in.TenantID
	md := bulkPageMeta(tenantID, in.TenantSlug, in.JobID, pageID)
	wait := bulkFollowWait
	for {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            PageGenerateID(tenantID, pageID),
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			// A page whose generation started completes it even when the job is terminated.
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			TypedSearchAttributes: TenantSearchAttributes(tenantID),
			StaticSummary:         md.Summary,
			StaticDetails:         md.Details,
		})
		f := workflow.ExecuteChildWorkflow(cctx, PageGenerate, PageGenerateInput{TenantID: tenantID, PageID: pageID})
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
				if serr := workflow.Sleep(ctx, wait); serr != nil {
					return "the bulk generation was cancelled"
				}
				wait = min(2*wait, bulkFollowMaxWait)
				continue
			}
			return failureMessage("generation", err)
		}
		var res PageGenerateResult
		if err := f.Get(ctx, &res); err != nil {
			return failureMessage("generation", err)
		}
		switch {
		case res.Gone:
			return "the page was deleted"
		case res.Status == page.StatusError:
			return res.Error
		}
		return ""
	}
}
