// Package pagebuild is the page builder agent: a marketer's message about a generated page runs a
// tool-calling loop over the chat model (internal/ai) whose tools read and edit a working copy of
// the page's blocks. Every tool call is validated against the block registry (internal/block)
// before it is applied; the result is committed once, as one page version (page.Service.
// ApplyBuild), so a build is atomic and the pages' restore undoes it. Each build is recorded in
// page_builds, whose running row also lets one build per page run at a time across replicas.
//
// With the local provider the model's part is played by Planner, a deterministic chat model that
// reads plain-English commands (local.go, planner.go), so the same tool loop runs offline and its
// tool calls take the same validated path.
package pagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/page"
)

// Event types of the build stream (api/openapi.yaml, BuildEvent).
const (
	EventThinking = "thinking"
	EventBlock    = "block"
	EventText     = "text"
	EventError    = "error"
	EventDone     = "done"
)

// Event is one event of the build stream. A block event carries a block the agent added, changed
// or moved, in its state afterwards; removals and page title/intro changes are reported by text
// events.
type Event struct {
	Type    string       `json:"type"`
	Content string       `json:"content,omitempty"`
	Block   *block.Block `json:"block,omitempty"`
}

// Outcomes of a build.
const (
	OutcomeRunning   = "running"
	OutcomeApplied   = "applied"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
	OutcomeNoChanges = "no_changes"
)

// Limits of a build.
const (
	MaxMessageChars = 4000 // characters of a build message
	MaxBuildsListed = 100  // builds GET .../builds/ lists, newest first
)

// Options tune a Service; the zero value is the production default.
type Options struct {
	MaxSteps   int           // model calls per build (default 12)
	MaxTokens  int           // prompt plus completion tokens per build (default 60000)
	StepTokens int           // completion tokens per model call (default 1024)
	Attempts   int           // tries of a model call on 429/5xx (default 3)
	RetryBase  time.Duration // first backoff (default 500ms), doubling; a Retry-After hint wins
	RetryMax   time.Duration // longest backoff (default 8s)
	Timeout    time.Duration // one build at most (default 5 minutes)
	Lease      time.Duration // a running build older than this was abandoned (default Timeout + 5 minutes)

	// Metrics counts finished builds by outcome (nil: none).
	Metrics *metrics.Metrics
}

func (o Options) withDefaults() Options {
	if o.MaxSteps <= 0 {
		o.MaxSteps = 12
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 60000
	}
	if o.StepTokens <= 0 {
		o.StepTokens = 1024
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 500 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 8 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Lease <= 0 {
		o.Lease = o.Timeout + 5*time.Minute
	}
	return o
}

// Pages is what the agent needs of the page service.
type Pages interface {
	GetPage(ctx context.Context, tenantID, id int64) (*page.Page, error)
	ApplyBuild(ctx context.Context, tenantID, pageID int64, baseVersion int, blocks []block.Block, title, introCopy *string, message string) (*page.Page, error)
}

// Service runs builds and lists them.
type Service struct {
	pool   *pgxpool.Pool
	pages  Pages
	search Searcher // nil: search_products answers that search is unavailable
	model  chatModel
	now    func() time.Time
	log    *slog.Logger
	opts   Options
}

// NewService builds the service. search may be nil. With the local provider (or none) the
// agent's model is the local Planner; otherwise it is the provider's chat model.
func NewService(pool *pgxpool.Pool, pages Pages, search Searcher, provider ai.Provider, now func() time.Time, log *slog.Logger, opts Options) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	var model chatModel = Planner{}
	if provider != nil && provider.Name() != ai.ProviderLocal {
		model = provider
	}
	return &Service{pool: pool, pages: pages, search: search, model: model, now: now, log: log, opts: opts}
}

// Build is one build record as GET /api/ai-pages/pages/{id}/builds/ lists it.
type Build struct {
	ID               int64       `json:"id"`
	Message          string      `json:"message"`
	Operations       []Operation `json:"operations"`
	Outcome          string      `json:"outcome"`
	Error            *string     `json:"error"`
	DurationMS       int64       `json:"duration_ms"`
	PromptTokens     int         `json:"prompt_tokens"`
	CompletionTokens int         `json:"completion_tokens"`
	Version          *int        `json:"version"` // the page version committed, when applied
	CreatedAt        time.Time   `json:"created_at"`
}

// CheckMessage validates a build message: 1 to MaxMessageChars characters, not blank, valid
// UTF-8 without control characters other than newline and tab. It returns the trimmed message.
func CheckMessage(msg string) (string, error) {
	m := strings.TrimSpace(msg)
	switch {
	case !utf8.ValidString(msg):
		return "", errs.Invalid("message", "must be valid UTF-8 text")
	case m == "":
		return "", errs.Invalid("message", "is required")
	case utf8.RuneCountInString(msg) > MaxMessageChars:
		return "", errs.Invalid("message", fmt.Sprintf("must be at most %d characters", MaxMessageChars))
	}
	for _, r := range m {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
			return "", errs.Invalid("message", "must not contain control characters other than newline and tab")
		}
	}
	return m, nil
}

// Run is a started build: the page is loaded and the build holds the page's running slot until
// Execute returns.
type Run struct {
	s        *Service
	id       int64
	tenantID int64
	page     *page.Page
	message  string
	started  time.Time
	wc       *workingCopy
	prompt   int
	complete int
}

// Begin checks and starts a build: the message (400), the page (404 when missing or another
// tenant's), that no other build of the page runs (409 build_in_progress) and the tenant's page
// limit (403 page_limit_reached when it holds more pages than its limit). The caller must call
// Execute on the Run it returns.
//
// The page's running slot is claimed before the page is read, in one statement (the partial
// unique index on running builds decides between concurrent claims): a build's copy of the page
// is read while it holds the slot, so no other build can commit in between, and of concurrent
// starts exactly one gets the slot and the others a 409 before any stream.
func (s *Service) Begin(ctx context.Context, tenantID, pageID int64, message string) (*Run, error) {
	started := s.now()
	msg, err := CheckMessage(message)
	if err != nil {
		return nil, err
	}
	id, err := s.claim(ctx, tenantID, pageID, msg)
	if err != nil {
		return nil, err
	}
	p, err := s.loadForBuild(ctx, tenantID, pageID)
	if err != nil {
		s.release(tenantID, id)
		return nil, err
	}
	return &Run{s: s, id: id, tenantID: tenantID, page: p, message: msg, started: started, wc: newWorkingCopy(p)}, nil
}

// claim records a running build of the page, which is its running slot.
func (s *Service) claim(ctx context.Context, tenantID, pageID int64, msg string) (int64, error) {
	now := s.now().UTC()
	// A running build older than the lease belongs to a replica that died mid-build.
	if _, err := s.pool.Exec(ctx, `UPDATE page_builds SET outcome = 'failed', error = 'the build was abandoned'
		WHERE tenant_id = $1 AND page_id = $2 AND outcome = 'running' AND created_at < $3`,
		tenantID, pageID, now.Add(-s.opts.Lease)); err != nil {
		return 0, fmt.Errorf("expire page %d builds: %w", pageID, err)
	}
	var id int64
	err := s.pool.QueryRow(ctx, `INSERT INTO page_builds (tenant_id, page_id, message, created_at) VALUES ($1, $2, $3, $4) RETURNING id`,
		tenantID, pageID, msg, now).Scan(&id)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			switch pe.Code {
			case "23505":
				return 0, errs.Coded(errs.ErrConflict, "build_in_progress", "a build of page %d is running; wait for it to finish", pageID)
			case "23503":
				return 0, errs.Coded(errs.ErrNotFound, "not_found", "page %d not found", pageID)
			}
		}
		return 0, fmt.Errorf("record page %d build: %w", pageID, err)
	}
	return id, nil
}

// loadForBuild reads the page and checks the tenant's page limit.
func (s *Service) loadForBuild(ctx context.Context, tenantID, pageID int64) (*page.Page, error) {
	p, err := s.pages.GetPage(ctx, tenantID, pageID)
	if err != nil {
		return nil, err
	}
	var limit, count int
	if err := s.pool.QueryRow(ctx, `SELECT t.page_limit, (SELECT count(*) FROM generated_pages g WHERE g.tenant_id = t.id)
		FROM tenants t WHERE t.id = $1`, tenantID).Scan(&limit, &count); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
		}
		return nil, fmt.Errorf("load tenant %d page limit: %w", tenantID, err)
	}
	if count > limit {
		return nil, errs.Coded(errs.ErrForbidden, "page_limit_reached",
			"your page limit of %d pages is exceeded (%d pages); delete pages or ask for a higher limit", limit, count)
	}
	return p, nil
}

// release deletes the record of a build that did not start, freeing the page's slot; it runs
// even when the request's context ended.
func (s *Service) release(tenantID, id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `DELETE FROM page_builds WHERE tenant_id = $1 AND id = $2`, tenantID, id); err != nil {
		s.log.Error("release page build", "tenant", tenantID, "build", id, "error", err)
	}
}

// ID is the build's record id.
func (r *Run) ID() int64 { return r.id }

// errStopped is emit's error when the client is gone.
var errStopped = errors.New("stream stopped")

// Execute runs the agent and commits its working copy, sending events to emit as they happen;
// the last event is always done. It records the build's outcome whatever happens. When ctx ends
// (the client went away) the model call is cancelled, nothing is saved and the outcome is
// cancelled. emit's error (the client is gone) stops the build the same way.
func (r *Run) Execute(ctx context.Context, emit func(Event) error) {
	ctx, cancel := context.WithTimeout(ctx, r.s.opts.Timeout)
	defer cancel()
	gone := false
	send := func(e Event) {
		if gone {
			return
		}
		if err := emit(e); err != nil {
			gone = true
			cancel()
		}
	}
	outcome, version, buildErr := r.execute(ctx, send)
	// A client gone before the commit cancels the build; once committed, the build stays applied.
	if outcome != OutcomeApplied && outcome != OutcomeNoChanges {
		switch {
		case !gone && errors.Is(ctx.Err(), context.DeadlineExceeded):
			outcome, buildErr = OutcomeFailed, errors.New("the build took too long; nothing was saved")
		case gone || ctx.Err() != nil:
			outcome, buildErr = OutcomeCancelled, errors.New("the client disconnected; nothing was saved")
		}
	}
	switch outcome {
	case OutcomeFailed:
		send(Event{Type: EventError, Content: buildErr.Error()})
	case OutcomeCancelled:
		send(Event{Type: EventError, Content: buildErr.Error()})
	}
	// Recorded before done: a client that reads the builds or starts the next build once it sees
	// done finds this one finished (and its running slot free).
	r.finish(outcome, version, buildErr)
	send(Event{Type: EventDone})
}

// finish records the outcome; it runs even when the request's context ended.
func (r *Run) finish(outcome string, version *int, buildErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ops := r.wc.ops
	if ops == nil {
		ops = []Operation{}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		raw = []byte("[]")
	}
	var msg *string
	if buildErr != nil {
		m := buildErr.Error()
		msg = &m
	}
	r.s.opts.Metrics.BuildFinished(outcome)
	dur := r.s.now().Sub(r.started).Milliseconds()
	if _, err := r.s.pool.Exec(ctx, `UPDATE page_builds SET operations = $3, outcome = $4, error = $5, duration_ms = $6,
		prompt_tokens = $7, completion_tokens = $8, version = $9 WHERE tenant_id = $1 AND id = $2`,
		r.tenantID, r.id, string(raw), outcome, msg, dur, r.prompt, r.complete, version); err != nil {
		r.s.log.Error("record page build", "tenant", r.tenantID, "build", r.id, "error", err)
	}
}

// execute runs the agent and commits; it returns the outcome, the committed version and, unless
// applied or no_changes, the error to report.
func (r *Run) execute(ctx context.Context, send func(Event)) (string, *int, error) {
	send(Event{Type: EventThinking, Content: fmt.Sprintf("Reading the page (%d blocks) and your request.", len(r.wc.blocks))})
	if err := r.runModel(ctx, send); err != nil {
		if ctx.Err() != nil {
			return OutcomeCancelled, nil, err
		}
		return OutcomeFailed, nil, fmt.Errorf("the build failed and nothing was saved: %s", describe(err))
	}
	if ctx.Err() != nil {
		return OutcomeCancelled, nil, ctx.Err()
	}
	w := r.wc
	if len(w.ops) == 0 || (sameBlocks(w.blocks, r.page.Blocks) && w.title == r.page.Title && w.introCopy == r.page.IntroCopy) {
		send(Event{Type: EventText, Content: "No changes were made to the page."})
		return OutcomeNoChanges, nil, nil
	}
	var title, intro *string
	if w.titleSet {
		title = &w.title
	}
	if w.introSet {
		intro = &w.introCopy
	}
	p, err := r.s.pages.ApplyBuild(ctx, r.tenantID, r.page.ID, r.page.Version, w.blocks, title, intro, r.message)
	if err != nil {
		if ctx.Err() != nil {
			return OutcomeCancelled, nil, err
		}
		var ce *errs.CodedError
		if errors.As(err, &ce) && ce.Code == "version_conflict" {
			return OutcomeFailed, nil, errors.New("the page was changed by someone else during the build; nothing was saved, send the request again")
		}
		if errors.Is(err, errs.ErrNotFound) {
			return OutcomeFailed, nil, errors.New("the page was deleted during the build; nothing was saved")
		}
		r.s.log.Error("commit page build", "tenant", r.tenantID, "page", r.page.ID, "error", err)
		return OutcomeFailed, nil, errors.New("the build could not be saved; nothing was saved")
	}
	v := p.Version
	send(Event{Type: EventText, Content: fmt.Sprintf("Saved as version %d (%d operations).", v, len(w.ops))})
	return OutcomeApplied, &v, nil
}

// describe is an error's text for the stream: provider failures by kind, without internals.
func describe(err error) string {
	switch {
	case errors.Is(err, ai.ErrRateLimited):
		return "the AI provider is rate limiting requests; try again shortly"
	case errors.Is(err, ai.ErrUnavailable):
		return "the AI provider is unavailable"
	case errors.Is(err, ai.ErrUnauthorized):
		return "the AI provider rejected the service's credentials"
	case errors.Is(err, ai.ErrInvalidRequest):
		return "the AI provider rejected the request"
	case errors.Is(err, context.DeadlineExceeded):
		return "the build took too long"
	}
	return err.Error()
}

// List returns the page's builds, newest first (at most MaxBuildsListed); 404 when the page is
// missing or another tenant's.
func (s *Service) List(ctx context.Context, tenantID, pageID int64) ([]*Build, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM generated_pages WHERE tenant_id = $1 AND id = $2`, tenantID, pageID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Coded(errs.ErrNotFound, "not_found", "page %d not found", pageID)
	}
	if err != nil {
		return nil, fmt.Errorf("load page %d: %w", pageID, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, message, operations, outcome, error, duration_ms, prompt_tokens, completion_tokens, version, created_at
		FROM page_builds WHERE tenant_id = $1 AND page_id = $2 ORDER BY id DESC LIMIT $3`, tenantID, pageID, MaxBuildsListed)
	if err != nil {
		return nil, fmt.Errorf("list page %d builds: %w", pageID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Build, error) {
		var b Build
		var ops []byte
		if err := row.Scan(&b.ID, &b.Message, &ops, &b.Outcome, &b.Error, &b.DurationMS, &b.PromptTokens, &b.CompletionTokens, &b.Version, &b.CreatedAt); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(ops, &b.Operations); err != nil {
			return nil, err
		}
		if b.Operations == nil {
			b.Operations = []Operation{}
		}
		return &b, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list page %d builds: %w", pageID, err)
	}
	if out == nil {
		out = []*Build{}
	}
	return out, nil
}
