package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagegen"
	"github.com/cohort-dev/cohort/internal/search"
)

// Error types of permanent page generation failures (non-retryable application errors). A
// failed generation records the error's message as the page's last_error.
const (
	// ErrTypePageGone: the page was deleted; there is nothing to generate or to record.
	ErrTypePageGone = "PageNotFound"
	// ErrTypePageQueryGone: the page's AIQuery was deleted.
	ErrTypePageQueryGone = "PageQueryDeleted"
	// ErrTypePageNoProducts: the search found no product for the query.
	ErrTypePageNoProducts = "PageNoProducts"
	// ErrTypePageCopyRejected: the AI provider refused the request (not a passing failure).
	ErrTypePageCopyRejected = "PageCopyRejected"
	// ErrTypePageContentInvalid: the page refused the generated content.
	ErrTypePageContentInvalid = "PageContentInvalid"
	// ErrTypeBulkJobGone: the bulk generation job does not exist (its tenant was deleted).
	ErrTypeBulkJobGone = "PageBulkJobNotFound"
	// ErrTypePageAIRateLimited: the AI provider said 429 with a Retry-After; retried after it.
	ErrTypePageAIRateLimited = "PageAIRateLimited"
	// ErrTypePageQueryNoWords: the AIQuery's text has nothing the search can embed.
	ErrTypePageQueryNoWords = "PageQueryHasNoWords"
)

// DefaultEmbeddingWait is how long a generation waits at most for the queued embeddings of the
// products its query could match (COHORT_PAGE_EMBEDDING_WAIT).
const DefaultEmbeddingWait = 10 * time.Minute

// The product segment of an AIQuery that was deleted is ErrTypeProductSegmentGone; copy that
// never validated is ErrTypeInvalidLLMOutput.

// PageStore is the part of the page service (internal/page) the generation activities use.
type PageStore interface {
	GenerationTarget(ctx context.Context, tenantID, pageID int64) (*page.GenerationTarget, error)
	MarkGenerating(ctx context.Context, tenantID, pageID int64) error
	SaveGenerated(ctx context.Context, tenantID, pageID int64, g page.GeneratedContent) error
	MarkGenerationFailed(ctx context.Context, tenantID, pageID int64, msg string) error
	SetPendingEmbeddings(ctx context.Context, tenantID, pageID, n int64) error
	MarkBulkRunning(ctx context.Context, tenantID, jobID int64) error
	BulkPages(ctx context.Context, tenantID, jobID int64) ([]page.BulkJobPage, error)
	FinishBulkPage(ctx context.Context, tenantID, jobID, pageID int64, genErr error) error
	FinishBulk(ctx context.Context, tenantID, jobID int64) (*page.BulkJob, error)
}

// ProductSearch is the part of the semantic search (internal/search) the generation uses: the
// tenant's products closest in meaning to a query, best match first, restricted to the members
// of a product segment when one is set. A segment that does not exist is errs.ErrNotFound; an
// embedding provider that is down is errs.ErrUnavailable (code embedding_unavailable). Backlog
// counts the embeddings of the products a search could match.
type ProductSearch interface {
	Search(ctx context.Context, tenantID int64, in search.In) (*search.Result, error)
	Backlog(ctx context.Context, tenantID int64, segmentID *int64) (search.Backlog, error)
}

// Pages are the page generation activities.
type Pages struct {
	store         PageStore
	search        ProductSearch
	copy          *pagegen.Generator
	embeddingWait time.Duration
	metrics       *metrics.Metrics
}

// PagesOption tunes the activities.
type PagesOption func(*Pages)

// WithEmbeddingWait bounds how long a generation waits for queued embeddings (d <= 0: the
// DefaultEmbeddingWait).
func WithEmbeddingWait(d time.Duration) PagesOption {
	return func(a *Pages) {
		if d > 0 {
			a.embeddingWait = d
		}
	}
}

// WithPageMetrics counts the generations that end (ready or failed) on m.
func WithPageMetrics(m *metrics.Metrics) PagesOption {
	return func(a *Pages) { a.metrics = m }
}

// NewPages builds the activities over the page service, the semantic search and the AI provider
// that writes the copy.
func NewPages(store PageStore, search ProductSearch, provider ai.Provider, opts ...PagesOption) *Pages {
	a := &Pages{store: store, search: search, copy: pagegen.New(provider), embeddingWait: DefaultEmbeddingWait}
	for _, o := range opts {
		o(a)
	}
	return a
}

// PageRef names a page.
type PageRef struct {
	TenantID int64
	PageID   int64
}

// LoadPageQueryInput names the page; MarkGenerating marks it generating first (a run that follows
// another one, whose end set the page ready or error).
type LoadPageQueryInput struct {
	TenantID       int64
	PageID         int64
	MarkGenerating bool
}

// LoadPageQueryResult is what the page is generated from.
type LoadPageQueryResult struct {
	Title            string
	QueryID          int64
	QueryText        string
	ProductSegmentID *int64
}

// LoadPageQuery reads the page's title and its AIQuery (text, product segment).
func (a *Pages) LoadPageQuery(ctx context.Context, in LoadPageQueryInput) (LoadPageQueryResult, error) {
	if in.MarkGenerating {
		if err := a.store.MarkGenerating(ctx, in.TenantID, in.PageID); err != nil {
			return LoadPageQueryResult{}, pageError(err)
		}
	}
	t, err := a.store.GenerationTarget(ctx, in.TenantID, in.PageID)
	if err != nil {
		return LoadPageQueryResult{}, pageError(err)
	}
	return LoadPageQueryResult{Title: t.Title, QueryID: t.QueryID, QueryText: t.QueryText, ProductSegmentID: t.ProductSegmentID}, nil
}

// CheckPageEmbeddingsInput names the page and the product segment its query is restricted to.
type CheckPageEmbeddingsInput struct {
	TenantID         int64
	PageID           int64
	ProductSegmentID *int64
}

// CheckPageEmbeddingsResult is the embedding backlog of the products the page's query could
// match (search.Backlog), and how long the generation waits for it at most.
type CheckPageEmbeddingsResult struct {
	Products, Embedded, Pending, Refused int64
	MaxWait                              time.Duration
}

// CheckPageEmbeddings counts the products the page's query could match whose embeddings are
// still queued (Pending; those the provider refused are Refused and are not waited for) and
// records Pending on the page (pending_embeddings; cleared at 0).
func (a *Pages) CheckPageEmbeddings(ctx context.Context, in CheckPageEmbeddingsInput) (CheckPageEmbeddingsResult, error) {
	b, err := a.search.Backlog(ctx, in.TenantID, in.ProductSegmentID)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return CheckPageEmbeddingsResult{}, segmentGone(in.ProductSegmentID, err)
		}
		return CheckPageEmbeddingsResult{}, err
	}
	if err := a.store.SetPendingEmbeddings(ctx, in.TenantID, in.PageID, b.Queued); err != nil {
		return CheckPageEmbeddingsResult{}, pageError(err)
	}
	return CheckPageEmbeddingsResult{Products: b.Products, Embedded: b.Embedded, Pending: b.Queued, Refused: b.Refused,
		MaxWait: a.embeddingWait}, nil
}

func segmentGone(segmentID *int64, err error) error {
	msg := "the AIQuery's product segment no longer exists"
	if segmentID != nil {
		msg = fmt.Sprintf("product segment %d of the AIQuery no longer exists", *segmentID)
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeProductSegmentGone, err)
}

// SearchPageProductsInput is one semantic search for a page.
type SearchPageProductsInput struct {
	TenantID         int64
	PageID           int64
	Query            string
	Limit            int
	ProductSegmentID *int64
}

// SearchPageProductsResult holds the found products, best match first, compacted for the
// workflow history (pagegen.Compact).
type SearchPageProductsResult struct {
	Products []pagegen.Product
}

// SearchPageProducts runs the semantic search of the page's query. A product segment that no
// longer exists and a search that finds nothing are permanent failures; a provider that is down
// is retried.
func (a *Pages) SearchPageProducts(ctx context.Context, in SearchPageProductsInput) (SearchPageProductsResult, error) {
	res, err := a.search.Search(ai.WithSpend(ctx, in.TenantID, ai.OpPageSearch), in.TenantID, search.In{Query: in.Query, Limit: in.Limit, SegmentID: in.ProductSegmentID})
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return SearchPageProductsResult{}, segmentGone(in.ProductSegmentID, err)
		}
		var ve *errs.ValidationError
		if errors.As(err, &ve) && ve.Fields["q"] != "" {
			return SearchPageProductsResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the AIQuery's text %q %s", in.Query, ve.Fields["q"]), ErrTypePageQueryNoWords, err)
		}
		if errors.Is(err, errs.ErrInvalid) {
			return SearchPageProductsResult{}, temporal.NewNonRetryableApplicationError("semantic search: "+err.Error(), ErrTypePageCopyRejected, err)
		}
		return SearchPageProductsResult{}, fmt.Errorf("semantic search: %w", err)
	}
	if len(res.Products) == 0 {
		b, err := a.search.Backlog(ctx, in.TenantID, in.ProductSegmentID)
		if err != nil {
			if errors.Is(err, errs.ErrNotFound) {
				return SearchPageProductsResult{}, segmentGone(in.ProductSegmentID, err)
			}
			return SearchPageProductsResult{}, err
		}
		return SearchPageProductsResult{}, temporal.NewNonRetryableApplicationError(noProductsMessage(in, b), ErrTypePageNoProducts, nil)
	}
	out := make([]pagegen.Product, len(res.Products))
	for i, p := range res.Products {
		var data map[string]any
		if len(p.Data) > 0 {
			if err := json.Unmarshal(p.Data, &data); err != nil {
				return SearchPageProductsResult{}, fmt.Errorf("read product %s: %w", p.SKU, err)
			}
		}
		out[i] = pagegen.Compact(pagegen.Product{SKU: p.SKU, Name: p.Name, Data: data})
	}
	return SearchPageProductsResult{Products: out}, nil
}

// noProductsMessage says why a search of the page's query found no product, from the backlog of
// the products it could match.
func noProductsMessage(in SearchPageProductsInput, b search.Backlog) string {
	scope := "the catalogue"
	if in.ProductSegmentID != nil {
		scope = fmt.Sprintf("product segment %d", *in.ProductSegmentID)
	}
	switch {
	case b.Products == 0 && in.ProductSegmentID != nil:
		return fmt.Sprintf("no product matches the query: %s has no member", scope)
	case b.Products == 0:
		return "no product matches the query: the catalogue has no product"
	case b.Embedded == 0 && b.Queued > 0:
		return fmt.Sprintf("no product matches the query: none of the %d products of %s is embedded yet (%d still queued for an embedding); regenerate once they are embedded",
			b.Products, scope, b.Queued)
	case b.Embedded == 0 && b.Refused > 0:
		return fmt.Sprintf("no product matches the query: the embedding provider refused the texts of the %d products of %s that have no embedding", b.Refused, scope)
	case b.Embedded == 0:
		return fmt.Sprintf("no product matches the query: none of the %d products of %s has an embedding of the current model", b.Products, scope)
	}
	return fmt.Sprintf("no product matches the query %q among the %d embedded products of %s", in.Query, b.Embedded, scope)
}

// GeneratePageCopyInput is what one page's copy is written from.
type GeneratePageCopyInput struct {
	TenantID int64
	PageID   int64
	Query    string
	Title    string
	Products []pagegen.Product
}

// GeneratePageCopy writes the page's intro copy and blocks (pagegen.Generator.Generate): an
// answer that never validates is a permanent failure (ErrTypeInvalidLLMOutput); a provider
// that is down or rate limited is retried.
func (a *Pages) GeneratePageCopy(ctx context.Context, in GeneratePageCopyInput) (pagegen.Copy, error) {
	out, err := a.copy.Generate(ai.WithSpend(ctx, in.TenantID, ai.OpPageCopy), pagegen.Request{Query: in.Query, Title: in.Title, Products: in.Products})
	if err != nil {
		return pagegen.Copy{}, copyError(err)
	}
	return out, nil
}

// copyError is a generation's error as the activity returns it.
func copyError(err error) error {
	var pe *ai.ProviderError
	switch {
	case errors.Is(err, pagegen.ErrInvalidOutput):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidLLMOutput, err)
	case errors.Is(err, ai.ErrRateLimited):
		if errors.As(err, &pe) && pe.RetryAfter > 0 {
			return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypePageAIRateLimited,
				temporal.ApplicationErrorOptions{NextRetryDelay: pe.RetryAfter, Cause: err})
		}
		return err
	case errors.Is(err, errs.ErrInvalid): // ai.ErrInvalidRequest matches it too
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePageCopyRejected, err)
	}
	// Unreachable, failing (5xx) or refusing our credentials: retried; the last error is the
	// page's once the attempts are spent.
	return err
}

// SavePageCopyInput is a generation's result for a page.
type SavePageCopyInput struct {
	TenantID int64
	PageID   int64
	Copy     pagegen.Copy
}

// SavePageCopy writes the copy to the page (status ready, generated_at, a new version).
func (a *Pages) SavePageCopy(ctx context.Context, in SavePageCopyInput) error {
	err := a.store.SaveGenerated(ctx, in.TenantID, in.PageID, page.GeneratedContent{
		IntroCopy: in.Copy.IntroCopy, ProductSKUs: in.Copy.ProductSKUs, Blocks: in.Copy.Blocks,
	})
	if err != nil {
		var ve *errs.ValidationError
		if errors.As(err, &ve) {
			return temporal.NewNonRetryableApplicationError("the generated content was refused: "+err.Error(), ErrTypePageContentInvalid, err)
		}
		return pageError(err)
	}
	a.metrics.PageGenerated(nil)
	return nil
}

// FailPageGenerationInput is a failed generation of a page.
type FailPageGenerationInput struct {
	TenantID int64
	PageID   int64
	Message  string
}

// FailPageGeneration records a failed generation: status error, the message in last_error. A
// page deleted meanwhile is no error.
func (a *Pages) FailPageGeneration(ctx context.Context, in FailPageGenerationInput) error {
	if err := a.store.MarkGenerationFailed(ctx, in.TenantID, in.PageID, in.Message); err != nil && !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	a.metrics.PageGenerated(errors.New(in.Message))
	return nil
}

// pageError turns a page that is gone or has no query any more into permanent failures.
func pageError(err error) error {
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePageGone, err)
	case errors.Is(err, errs.ErrConflict):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePageQueryGone, err)
	}
	return err
}

// BulkJobRef names a bulk generation job.
type BulkJobRef struct {
	TenantID int64
	JobID    int64
}

// StartBulkJob moves the job to running.
func (a *Pages) StartBulkJob(ctx context.Context, in BulkJobRef) error {
	return bulkError(a.store.MarkBulkRunning(ctx, in.TenantID, in.JobID))
}

// ListBulkPagesInput names the job and bounds the pages returned.
type ListBulkPagesInput struct {
	TenantID int64
	JobID    int64
	Limit    int // 0: all
}

// ListBulkPagesResult lists the job's pages still to generate, in the job's order.
type ListBulkPagesResult struct {
	PageIDs []int64
	More    bool // more pages are pending beyond Limit
}

// ListBulkPages returns the pages of the job still pending (those with a page; a page that
// could not be created was recorded failed with the job).
func (a *Pages) ListBulkPages(ctx context.Context, in ListBulkPagesInput) (ListBulkPagesResult, error) {
	pages, err := a.store.BulkPages(ctx, in.TenantID, in.JobID)
	if err != nil {
		return ListBulkPagesResult{}, bulkError(err)
	}
	var out ListBulkPagesResult
	for _, p := range pages {
		if p.Status != page.JobPagePending || p.PageID == nil {
			continue
		}
		if in.Limit > 0 && len(out.PageIDs) == in.Limit {
			out.More = true
			break
		}
		out.PageIDs = append(out.PageIDs, *p.PageID)
	}
	return out, nil
}

// FinishBulkPageInput is one page's outcome in a job: Error is empty when the page is ready.
type FinishBulkPageInput struct {
	TenantID int64
	JobID    int64
	PageID   int64
	Error    string
}

// FinishBulkPage records one page's outcome in the job (completed or failed goes up by one).
func (a *Pages) FinishBulkPage(ctx context.Context, in FinishBulkPageInput) error {
	var genErr error
	if in.Error != "" {
		genErr = errors.New(in.Error)
	}
	return bulkError(a.store.FinishBulkPage(ctx, in.TenantID, in.JobID, in.PageID, genErr))
}

// FinishBulkJobResult is the job as it ended.
type FinishBulkJobResult struct {
	Status    string
	Total     int
	Completed int
	Failed    int
}

// FinishBulkJob ends the job: complete, or partial_failure when a page failed.
func (a *Pages) FinishBulkJob(ctx context.Context, in BulkJobRef) (FinishBulkJobResult, error) {
	j, err := a.store.FinishBulk(ctx, in.TenantID, in.JobID)
	if err != nil {
		return FinishBulkJobResult{}, bulkError(err)
	}
	return FinishBulkJobResult{Status: j.Status, Total: j.Total, Completed: j.Completed, Failed: j.Failed}, nil
}

func bulkError(err error) error {
	if errors.Is(err, errs.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBulkJobGone, err)
	}
	return err
}
