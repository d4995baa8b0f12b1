package aispend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestBudgetRateAndUsage: usage recorded from calls is read back by operation and model; a
// tenant at its budget is refused with ai_budget_exceeded until the month renews or the budget
// is raised; beyond the rate limit the refusal says when to retry; two services (two replicas)
// share one count; another tenant is untouched.
func TestBudgetRateAndUsage(t *testing.T) {
	db := testenv.OpenDB(t)
	a := testenv.Tenant(t, db, "spend-a")
	b := testenv.Tenant(t, db, "spend-b")
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 28, 10, 30, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	s1, err := New(db.Pool, c.now, nil, reg, Config{RateLimit: 3, RateWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(db.Pool, c.now, nil, nil, Config{RateLimit: 3, RateWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	s1.Record(ctx, ai.Call{Spend: ai.Spend{TenantID: a, Operation: ai.OpBuild}, Kind: ai.KindChat, Model: "gpt", PromptTokens: 100, CompletionTokens: 20})
	s2.Record(ctx, ai.Call{Spend: ai.Spend{TenantID: a, Operation: ai.OpBuild}, Kind: ai.KindChat, Model: "gpt", PromptTokens: 50, CompletionTokens: 5})
	s1.Record(ctx, ai.Call{Spend: ai.Spend{TenantID: a, Operation: ai.OpProductEmbed}, Kind: ai.KindEmbed, Model: "emb", PromptTokens: 30})
	s1.Record(ctx, ai.Call{Spend: ai.Spend{TenantID: a, Operation: ai.OpPageCopy}, Kind: ai.KindChat, Model: "gpt", Err: errors.New("down")})
	s1.Record(ctx, ai.Call{Spend: ai.Spend{Operation: ai.OpOther}, Kind: ai.KindEmbed, Model: "emb", PromptTokens: 9})

	rep, err := s2.Usage(ctx, a, "24h")
	if err != nil {
		t.Fatal(err)
	}
	want := []UsageRow{
		{Operation: ai.OpBuild, Model: "gpt", Tokens: Tokens{Calls: 2, PromptTokens: 150, CompletionTokens: 25, TotalTokens: 175}},
		{Operation: ai.OpProductEmbed, Model: "emb", Tokens: Tokens{Calls: 1, PromptTokens: 30, TotalTokens: 30}},
	}
	if len(rep.Usage) != 2 || rep.Usage[0] != want[0] || rep.Usage[1] != want[1] || rep.Totals.TotalTokens != 205 || rep.Budget.MonthlyTokens != nil || rep.Budget.UsedThisMonth != 205 {
		t.Fatalf("usage %+v", rep)
	}
	if got := counter(s1.tokens.WithLabelValues("gpt", ai.OpBuild, "prompt")); got != 100 {
		t.Errorf("prompt tokens counter of s1 = %v, want 100", got)
	}
	if got := counter(s1.calls.WithLabelValues("gpt", ai.OpPageCopy)); got != 1 {
		t.Errorf("calls counter of a failed call = %v, want 1", got)
	}
	if _, err := s1.Usage(ctx, a, "1y"); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("bad window: %v", err)
	}
	// An hour bucket outside the window is not read.
	c.t = c.t.Add(26 * time.Hour)
	if rep, _ := s1.Usage(ctx, a, "24h"); len(rep.Usage) != 0 || rep.Budget.UsedThisMonth != 205 {
		t.Errorf("a day later, 24h window: %+v", rep)
	}

	// Budget.
	if err := s1.SetBudget(ctx, "spend-a", new(int64(205))); err != nil {
		t.Fatal(err)
	}
	err = s2.Allow(ctx, a)
	var coded *errs.CodedError
	if !errors.As(err, &coded) || coded.Code != CodeBudgetExceeded || !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("at budget: %v, want %s", err, CodeBudgetExceeded)
	}
	if err := s1.Allow(ctx, b); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
	if err := s1.SetBudget(ctx, "spend-a", new(int64(206))); err != nil {
		t.Fatal(err)
	}
	if err := s1.Allow(ctx, a); err != nil {
		t.Fatalf("under budget: %v", err)
	}
	if err := s1.SetBudget(ctx, "nobody", nil); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	if err := s1.SetBudget(ctx, "spend-a", new(int64(-1))); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("negative budget: %v", err)
	}

	// Rate limit, shared by both services: one taken above, two more, then refused.
	for _, s := range []*Service{s2, s1} {
		if err := s.Allow(ctx, a); err != nil {
			t.Fatalf("within the rate: %v", err)
		}
	}
	err = s2.Allow(ctx, a)
	var rl *errs.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Minute {
		t.Fatalf("beyond the rate: %v", err)
	}
	c.t = c.t.Add(time.Minute)
	if err := s2.Allow(ctx, a); err != nil {
		t.Fatalf("a minute later: %v", err)
	}

	// The month renews: the budget counts again from zero.
	if err := s1.SetBudget(ctx, "spend-a", new(int64(10))); err != nil {
		t.Fatal(err)
	}
	if err := s1.Allow(ctx, a); !errors.As(err, &coded) {
		t.Fatalf("over budget: %v", err)
	}
	c.t = time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC)
	if err := s1.Allow(ctx, a); err != nil {
		t.Fatalf("next month: %v", err)
	}
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
