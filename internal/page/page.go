// Package page holds the AI landing pages of every tenant: the AIQueries pages are generated
// from, the generated pages and every version of their blocks, the public read of a published
// page (with view counting and AI-crawler tracking, counted in memory and flushed in batches),
// and the records of bulk generation jobs.
//
// Generation itself (semantic search and copy) runs elsewhere, behind the Generator this package
// declares; it writes its results back through SaveGenerated, MarkGenerationFailed and the bulk
// job methods. Every write of blocks goes through the block registry (internal/block) and stores
// a page version.
package page

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/block"
)

// Statuses of a generated page.
//
//	generating  a generation was requested or runs
//	ready       the last generation finished; its content is on the page
//	error       the last generation failed (or could not start); last_error says why, the page
//	            keeps its previous content
const (
	StatusGenerating = "generating"
	StatusReady      = "ready"
	StatusError      = "error"
)

// Sources of a page version: what changed the blocks.
const (
	SourceGeneration = "generation"
	SourcePatch      = "patch"
	SourceRestore    = "restore"
	SourceBuild      = "build"
)

// Statuses of a bulk generation job and of its pages.
const (
	JobPending        = "pending"
	JobRunning        = "running"
	JobComplete       = "complete"
	JobPartialFailure = "partial_failure"

	JobPagePending = "pending"
	JobPageReady   = "ready"
	JobPageError   = "error"
)

// Limits of AIQueries, pages and versions.
const (
	MaxQueryTextLength = 500     // characters of an AIQuery's text
	MaxTitleLength     = 500     // characters of a page title
	MaxSlugLength      = 80      // bytes of a page slug
	MaxIntroCopyLength = 20000   // characters of a page's intro copy
	MaxProductSKUs     = 100     // SKUs on a page
	MaxSKULength       = 255     // bytes of one SKU
	MaxErrorLength     = 2000    // bytes of last_error and of a bulk page's error
	MaxMessageLength   = 2000    // bytes of a version's message
	KeptVersions       = 100     // versions kept per page; older ones are pruned
	DefaultPageLimit   = 1000    // pages per tenant unless set (cohort tenants set --page-limit)
	MaxJobsListed      = 100     // bulk jobs GET /api/ai-pages/jobs/ lists, newest first
	MaxPageLimit       = 1 << 30 // the largest page limit a tenant can be given
)

// Generator starts page generation: a workflow per page (started, or joined when one runs) and
// a workflow per bulk job. It returns once the work is queued, not when it is done; errors mean
// nothing was queued (the service records that and answers 503).
type Generator interface {
	StartGeneration(ctx context.Context, tenantID, pageID int64) error
	StartBulk(ctx context.Context, tenantID, jobID int64) error
}

// Options tune a Service; the zero value is the production default.
type Options struct {
	// FlushEvery is how often counted views and crawls are written (default one second).
	FlushEvery time.Duration
	// FlushTimeout bounds one flush, and the final flush when Run stops (default ten seconds).
	FlushTimeout time.Duration
	// PublicCacheTTL is how long a public page read is served from memory (default two
	// seconds; negative: no cache). This replica's own writes invalidate it at once.
	PublicCacheTTL time.Duration
	// DisableViewCounting turns view and crawler counting off (benchmarks compare with it).
	DisableViewCounting bool
}

const (
	defaultFlushEvery     = time.Second
	defaultFlushTimeout   = 10 * time.Second
	defaultPublicCacheTTL = 2 * time.Second
)

// Service owns the AIQueries, generated pages, versions and bulk jobs of every tenant.
type Service struct {
	pool     *pgxpool.Pool
	flushDB  txBeginner // begins view count flushes: pool
	gen      Generator  // nil where generation is not started (answers 503)
	now      func() time.Time
	log      *slog.Logger
	opts     Options
	counter  *viewCounter
	cache    *publicCache
	crawlers *crawlerMatcher
}

// NewService builds the service. gen starts generation (nil in a process that does not: there
// creating, regenerating and bulk-generating answer 503). The view counter it holds is written
// by Run, which the role runs while it serves public reads.
func NewService(pool *pgxpool.Pool, gen Generator, now func() time.Time, log *slog.Logger, opts Options) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = defaultFlushEvery
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = defaultFlushTimeout
	}
	if opts.PublicCacheTTL == 0 {
		opts.PublicCacheTTL = defaultPublicCacheTTL
	}
	return &Service{
		pool:     pool,
		flushDB:  pool,
		gen:      gen,
		now:      now,
		log:      log,
		opts:     opts,
		counter:  newViewCounter(len(Crawlers)),
		cache:    newPublicCache(opts.PublicCacheTTL),
		crawlers: newCrawlerMatcher(Crawlers),
	}
}

// AIQuery is a marketer's query that pages are generated from.
type AIQuery struct {
	ID     int64  `json:"id"`
	Text   string `json:"text"`
	Active bool   `json:"active"`
	// ProductSegmentID restricts the query's products to the members of that product segment.
	ProductSegmentID *int64    `json:"product_segment_id"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// QueryInput is the body of POST /api/ai-pages/queries/.
type QueryInput struct {
	Text             string `json:"text"`
	Active           *bool  `json:"active"` // default true
	ProductSegmentID *int64 `json:"product_segment_id"`
}

// QueryPatch is the body of PATCH /api/ai-pages/queries/{id}/: only the fields present change;
// product_segment_id null removes the restriction.
type QueryPatch struct {
	Text             *string         `json:"text"`
	Active           *bool           `json:"active"`
	ProductSegmentID json.RawMessage `json:"product_segment_id"`
}

// Page is a generated page as GET /api/ai-pages/pages/{id}/ shows it.
type Page struct {
	ID          int64         `json:"id"`
	Slug        string        `json:"slug"`
	Query       *int64        `json:"query"` // the AIQuery's id; null once the query was deleted
	Title       string        `json:"title"`
	Published   bool          `json:"published"`
	IntroCopy   string        `json:"intro_copy"`
	ProductSKUs []string      `json:"product_skus"`
	Blocks      []block.Block `json:"blocks"`
	Status      string        `json:"status"`
	LastError   *string       `json:"last_error"`
	// PendingEmbeddings: while generating, how many products the page's query could match are
	// still queued for their embeddings (the generation waits for them, up to a bound); on a
	// ready page, how many were still queued when the bound passed, so the page was generated
	// without them (regenerate once they are embedded); null when none.
	PendingEmbeddings *int64           `json:"pending_embeddings"`
	GeneratedAt       *time.Time       `json:"generated_at"`
	ViewCount         int64            `json:"view_count"`
	LastAICrawlAt     *time.Time       `json:"last_ai_crawl_at"`
	AICrawls          map[string]int64 `json:"ai_crawls"` // reads per known AI crawler
	Version           int              `json:"version"`   // the latest version's n; 0 before any
	CreatedAt         time.Time        `json:"created_at"`
	UpdatedAt         time.Time        `json:"updated_at"`
}

// PageSummary is a page in GET /api/ai-pages/pages/: without intro_copy, product_skus, blocks
// and ai_crawls.
type PageSummary struct {
	ID            int64      `json:"id"`
	Slug          string     `json:"slug"`
	Query         *int64     `json:"query"`
	Title         string     `json:"title"`
	Published     bool       `json:"published"`
	Status        string     `json:"status"`
	LastError     *string    `json:"last_error"`
	GeneratedAt   *time.Time `json:"generated_at"`
	ViewCount     int64      `json:"view_count"`
	LastAICrawlAt *time.Time `json:"last_ai_crawl_at"`
	Version       int        `json:"version"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// CreateInput is the body of POST /api/ai-pages/pages/.
type CreateInput struct {
	Query     *int64  `json:"query"`
	Slug      *string `json:"slug"`
	Title     *string `json:"title"`
	Published *bool   `json:"published"`
	// TemplateID creates the page from a page template of the tenant: its blocks are copied (with
	// new block ids), the page is ready at once and no generation is started (regenerate runs one).
	TemplateID *int64 `json:"template_id"`
}

// PatchInput is the body of PATCH /api/ai-pages/pages/{id}/: only the fields present change.
type PatchInput struct {
	Slug      *string         `json:"slug"`
	Title     *string         `json:"title"`
	Published *bool           `json:"published"`
	Blocks    json.RawMessage `json:"blocks"`
}

// Version is one stored version of a page in the versions list.
type Version struct {
	N          int       `json:"n"`
	Source     string    `json:"source"`
	Message    string    `json:"message"`
	BlockCount int       `json:"block_count"`
	CreatedAt  time.Time `json:"created_at"`
}

// VersionDetail is one version with its content.
type VersionDetail struct {
	Version
	Title       string        `json:"title"`
	IntroCopy   string        `json:"intro_copy"`
	ProductSKUs []string      `json:"product_skus"`
	Blocks      []block.Block `json:"blocks"`
}

// GeneratedContent is what a generation writes to a page.
type GeneratedContent struct {
	IntroCopy   string
	ProductSKUs []string
	Blocks      []block.Block
	Title       *string // nil keeps the page's title
}

// GenerationTarget is what a generation of a page works from.
type GenerationTarget struct {
	TenantID  int64
	PageID    int64
	Slug      string
	Title     string
	QueryID   int64
	QueryText string
	// ProductSegmentID restricts the products (the segment may have been deleted since: the
	// generation then fails with that reason).
	ProductSegmentID *int64
}

// BulkJob is a bulk generation job as GET /api/ai-pages/jobs/ lists it.
type BulkJob struct {
	ID         int64      `json:"id"`
	Status     string     `json:"status"`
	Total      int        `json:"total"`
	Completed  int        `json:"completed"` // pages generated
	Failed     int        `json:"failed"`    // pages that could not be created or generated
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// BulkJobDetail is a job with its pages (GET /api/ai-pages/jobs/{id}/).
type BulkJobDetail struct {
	BulkJob
	Pages []BulkJobPage `json:"pages"`
}

// BulkJobPage is one page of a bulk job, in the job's order.
type BulkJobPage struct {
	// PageID is null when the page could not be created (the page limit) or was deleted since.
	PageID  *int64  `json:"page_id"`
	QueryID *int64  `json:"query_id"`
	Slug    string  `json:"slug"`
	Status  string  `json:"status"` // pending, ready or error
	Error   *string `json:"error,omitempty"`
}

// BulkStarted answers POST /api/ai-pages/pages/bulk-generate/.
type BulkStarted struct {
	JobID  int64  `json:"job_id"`
	Status string `json:"status"` // queued
}

// PublicProduct is a product of a public page: what a storefront needs to render it.
type PublicProduct struct {
	SKU      string         `json:"sku"`
	Name     string         `json:"name"`
	Price    *float64       `json:"price"`
	Currency string         `json:"currency,omitempty"`
	ImageURL *string        `json:"image_url"`
	Data     map[string]any `json:"data"`
}
