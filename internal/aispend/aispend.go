// Package aispend bounds and meters what tenants spend on model tokens. Every endpoint that
// spends tokens (page builds, design extraction, page generation, regenerate, bulk generation,
// segment drafts) calls Allow before it starts: a per-tenant rate limit shared by every replica
// (the api_rate_take counter in Postgres that semantic search uses, under its own bucket) and
// the tenant's optional monthly token budget. Record is the ai.Meter of the process's provider:
// it adds each call's tokens, as the provider reported them, to the tenant's hourly usage in
// Postgres (ai_usage) and to Prometheus counters by model and operation (never by tenant).
//
// The budget is checked before a build or generation starts, never between its steps, so a
// page is never left half-made; the call that crosses the budget finishes, and the next start
// is refused.
package aispend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
)

// Defaults and bounds.
const (
	DefaultRateLimit  = 60          // AI requests per tenant per window (COHORT_AI_RATE_LIMIT)
	DefaultRateWindow = time.Minute // COHORT_AI_RATE_WINDOW
	MaxRateLimit      = 10_000
	// MaxBudget is the largest monthly token budget a tenant can be given.
	MaxBudget = int64(1) << 50
	// RateBucket is the api_rate_limits bucket of the AI endpoints.
	RateBucket = "ai_spend"
	// recordTimeout bounds the write of one call's usage.
	recordTimeout = 5 * time.Second
	// maxWindow is the longest usage window GET /api/usage/ reads.
	maxWindow = 90 * 24 * time.Hour
)

// CodeBudgetExceeded is the error code of a refusal on the budget (403).
const CodeBudgetExceeded = "ai_budget_exceeded"

// Config sets the rate limit.
type Config struct {
	RateLimit  int           // requests per tenant per RateWindow (default 60, at most MaxRateLimit)
	RateWindow time.Duration // default one minute
}

// Service is the limiter, the meter and the usage reader. Safe for concurrent use.
type Service struct {
	pool   *pgxpool.Pool
	now    func() time.Time
	log    *slog.Logger
	limit  int
	window time.Duration

	calls  *prometheus.CounterVec
	tokens *prometheus.CounterVec
}

var _ ai.Meter = (*Service)(nil)

// New builds the service; reg, when not nil, gets its counters (once per registry).
func New(pool *pgxpool.Pool, now func() time.Time, log *slog.Logger, reg prometheus.Registerer, cfg Config) (*Service, error) {
	if cfg.RateLimit == 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if cfg.RateLimit < 1 || cfg.RateLimit > MaxRateLimit || cfg.RateWindow < 0 {
		return nil, fmt.Errorf("ai rate limit: want 1 to %d requests per positive window, got %d per %s", MaxRateLimit, cfg.RateLimit, cfg.RateWindow)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{pool: pool, now: now, log: log, limit: cfg.RateLimit, window: cfg.RateWindow,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cohort_ai_usage_calls_total",
			Help: "Metered model uses (an embedding of a batch of texts, a chat, a stream), failed or not, by model and operation (what they were for). The provider's HTTP calls and their outcomes are cohort_ai_requests_total.",
		}, []string{"model", "operation"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cohort_ai_usage_tokens_total",
			Help: "Model tokens the provider reported, by model, operation (what they were for) and type (prompt, completion).",
		}, []string{"model", "operation", "type"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{s.calls, s.tokens} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register ai spend metrics: %w", err)
			}
		}
	}
	return s, nil
}

// monthStart is the first instant of t's calendar month in UTC.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Allow is checked once before an operation that spends the tenant's tokens starts: it refuses
// with 403 ai_budget_exceeded (an *errs.CodedError of errs.ErrForbidden) when the tenant's
// tokens this month have reached its budget, and with an *errs.RateLimitedError (429 with
// Retry-After) beyond the rate limit; otherwise the request is counted and nil returned. One
// round trip to Postgres.
func (s *Service) Allow(ctx context.Context, tenantID int64) error {
	now := s.now()
	var (
		budget     *int64
		used, wait int64
	)
	err := s.pool.QueryRow(ctx, `SELECT budget, used, wait FROM ai_spend_take($1, $2, $3, $4, $5, $6)`,
		tenantID, RateBucket, now.UnixMicro(), s.limit, s.window.Microseconds(), monthStart(now)).Scan(&budget, &used, &wait)
	if err != nil {
		return fmt.Errorf("ai spend limit: %w", err)
	}
	if budget != nil && used >= *budget {
		return budgetError(*budget, used, now)
	}
	if wait > 0 {
		return &errs.RateLimitedError{
			RetryAfter: time.Duration(wait) * time.Microsecond,
			Msg:        fmt.Sprintf("at most %d AI requests per %s per tenant", s.limit, s.window),
		}
	}
	return nil
}

func budgetError(budget, used int64, now time.Time) error {
	return errs.Coded(errs.ErrForbidden, CodeBudgetExceeded,
		"the tenant's monthly AI budget of %d tokens is spent (%d used since %s); it renews on %s, or raise it with cohort tenants set --ai-budget",
		budget, used, monthStart(now).Format(time.DateOnly), monthStart(now).AddDate(0, 1, 0).Format(time.DateOnly))
}

// Record meters one model call: Prometheus counters always, the tenant's usage in Postgres when
// the call names a tenant. A failure to write is logged: metering never fails the call.
func (s *Service) Record(ctx context.Context, c ai.Call) {
	op := c.Operation
	if !slices.Contains(ai.Operations, op) {
		op = ai.OpOther
	}
	s.calls.WithLabelValues(c.Model, op).Inc()
	s.tokens.WithLabelValues(c.Model, op, "prompt").Add(float64(c.PromptTokens))
	s.tokens.WithLabelValues(c.Model, op, "completion").Add(float64(c.CompletionTokens))
	if c.TenantID == 0 || (c.Err != nil && c.PromptTokens+c.CompletionTokens == 0) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	now := s.now()
	_, err := s.pool.Exec(ctx, `
		WITH hourly AS (
			INSERT INTO ai_usage (tenant_id, hour, operation, model, calls, prompt_tokens, completion_tokens)
			VALUES ($1, $2, $3, $4, 1, $5, $6)
			ON CONFLICT (tenant_id, hour, operation, model) DO UPDATE SET
				calls = ai_usage.calls + 1,
				prompt_tokens = ai_usage.prompt_tokens + EXCLUDED.prompt_tokens,
				completion_tokens = ai_usage.completion_tokens + EXCLUDED.completion_tokens)
		INSERT INTO ai_usage_months (tenant_id, month, tokens) VALUES ($1, $7, $5 + $6)
		ON CONFLICT (tenant_id, month) DO UPDATE SET tokens = ai_usage_months.tokens + EXCLUDED.tokens`,
		c.TenantID, now.UTC().Truncate(time.Hour), op, c.Model, int64(c.PromptTokens), int64(c.CompletionTokens), monthStart(now))
	if err != nil {
		s.log.Error("record ai usage", "tenant", c.TenantID, "operation", op, "model", c.Model,
			"prompt_tokens", c.PromptTokens, "completion_tokens", c.CompletionTokens, "error", err)
	}
}

// Tokens are counts of calls and tokens.
type Tokens struct {
	Calls            int64 `json:"calls"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (t *Tokens) add(o Tokens) {
	t.Calls += o.Calls
	t.PromptTokens += o.PromptTokens
	t.CompletionTokens += o.CompletionTokens
	t.TotalTokens += o.TotalTokens
}

// UsageRow is the spend of one operation on one model.
type UsageRow struct {
	Operation string `json:"operation"`
	Model     string `json:"model"`
	Tokens
}

// Budget is the tenant's monthly token budget and what it used of it.
type Budget struct {
	MonthlyTokens *int64    `json:"monthly_tokens"` // null: no budget
	UsedThisMonth int64     `json:"used_this_month"`
	RenewsAt      time.Time `json:"renews_at"`
}

// Report is GET /api/usage/.
type Report struct {
	Window string     `json:"window"`
	From   time.Time  `json:"from"`
	To     time.Time  `json:"to"`
	Totals Tokens     `json:"totals"`
	Usage  []UsageRow `json:"usage"`
	Budget Budget     `json:"budget"`
}

var windowRE = regexp.MustCompile(`^([1-9][0-9]{0,4})([hd])$`)

// parseWindow reads a window: "month" (the calendar month so far, UTC: the budget's window),
// or a number of hours or days ("24h", "7d"), at most 90 days. Usage is kept by hour, so a window
// starts at the top of its first hour.
func parseWindow(w string, now time.Time) (time.Time, error) {
	if w == "month" {
		return monthStart(now), nil
	}
	m := windowRE.FindStringSubmatch(w)
	if m == nil {
		return time.Time{}, errs.Invalid("window", `must be "month", a number of hours ("24h") or of days ("7d")`)
	}
	n, _ := strconv.Atoi(m[1])
	d := time.Duration(n) * time.Hour
	if m[2] == "d" {
		d *= 24
	}
	if d > maxWindow {
		return time.Time{}, errs.Invalid("window", "must be at most 90 days")
	}
	return now.UTC().Add(-d).Truncate(time.Hour), nil
}

// DefaultWindow is the window of GET /api/usage/ without ?window=.
const DefaultWindow = "month"

// Usage reads the tenant's usage by operation and model over the window (see parseWindow; ""
// is DefaultWindow), and its budget.
func (s *Service) Usage(ctx context.Context, tenantID int64, window string) (*Report, error) {
	if window == "" {
		window = DefaultWindow
	}
	now := s.now().UTC()
	from, err := parseWindow(window, now)
	if err != nil {
		return nil, err
	}
	ms := monthStart(now)
	rep := &Report{Window: window, From: from, To: now, Usage: []UsageRow{},
		Budget: Budget{RenewsAt: ms.AddDate(0, 1, 0)}}
	rows, err := s.pool.Query(ctx, `
		SELECT operation, model, sum(calls), sum(prompt_tokens), sum(completion_tokens)
		FROM ai_usage WHERE tenant_id = $1 AND hour >= $2
		GROUP BY operation, model ORDER BY operation, model`, tenantID, from)
	if err != nil {
		return nil, fmt.Errorf("read ai usage of tenant %d: %w", tenantID, err)
	}
	rep.Usage, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (UsageRow, error) {
		var u UsageRow
		err := r.Scan(&u.Operation, &u.Model, &u.Calls, &u.PromptTokens, &u.CompletionTokens)
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("read ai usage of tenant %d: %w", tenantID, err)
	}
	if rep.Usage == nil {
		rep.Usage = []UsageRow{}
	}
	for _, u := range rep.Usage {
		rep.Totals.add(u.Tokens)
	}
	err = s.pool.QueryRow(ctx, `
		SELECT t.ai_monthly_token_budget,
		       COALESCE((SELECT m.tokens FROM ai_usage_months m WHERE m.tenant_id = t.id AND m.month = $2), 0)
		FROM tenants t WHERE t.id = $1`, tenantID, ms).Scan(&rep.Budget.MonthlyTokens, &rep.Budget.UsedThisMonth)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read ai budget of tenant %d: %w", tenantID, err)
	}
	return rep, nil
}

// SetBudget sets the monthly token budget of a tenant (by slug); nil removes it. A budget below
// what the tenant already used this month refuses its next AI request.
func (s *Service) SetBudget(ctx context.Context, tenantSlug string, budget *int64) error {
	if budget != nil && (*budget < 0 || *budget > MaxBudget) {
		return errs.Invalid("ai_budget", fmt.Sprintf("must be from 0 to %d tokens", MaxBudget))
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET ai_monthly_token_budget = $2, updated_at = $3 WHERE slug = $1`,
		tenantSlug, budget, s.now().UTC())
	if err != nil {
		return fmt.Errorf("set tenant %s ai budget: %w", tenantSlug, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenant %q: %w", tenantSlug, errs.ErrNotFound)
	}
	return nil
}
