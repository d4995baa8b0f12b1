package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/ai/aitest"
	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagebuild"
)

// spendServer is buildServer with the AI limiter and a metered scripted model.
func spendServer(t testing.TB, model *aitest.Provider, cfg aispend.Config) (*buildEnv, *aispend.Service) {
	t.Helper()
	f := newFixture(t)
	spend, err := aispend.New(f.db.Pool, time.Now, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gen := &fakePageGenerator{}
	svc := page.NewService(f.db.Pool, gen, time.Now, nil, page.Options{PublicCacheTTL: -1})
	b := pagebuild.NewService(f.db.Pool, svc, nil, ai.NewMetered(model, spend), time.Now, nil, pagebuild.Options{})
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: svc, Builder: b}
		d.Spend = spend
		// Routes only: a refusal must come before their handlers, which these could not serve.
		d.Segments = &SegmentsDeps{}
		d.Design = &DesignDeps{}
	}))
	return &buildEnv{pagesEnv: &pagesEnv{f: f, ts: ts, svc: svc, gen: gen}, builder: b}, spend
}

// runBuild runs a build of the page to its end and returns the event types.
func runBuild(t *testing.T, e *buildEnv, c tenantCreds, pageID int64, msg string) []string {
	t.Helper()
	s := openBuild(t, context.Background(), e, c, pageID, fmt.Sprintf(`{"message":%q}`, msg))
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("build: status %d", s.resp.StatusCode)
	}
	var types []string
	for {
		ev := s.next(t)
		types = append(types, ev.Type)
		if ev.Type == pagebuild.EventDone || ev.Type == pagebuild.EventError {
			return types
		}
	}
}

// TestAIUsageAndBudget: GET /api/usage/ shows the tokens a build spent, equal to the sum of what
// the model reported, and nothing of another tenant's; a tenant at its monthly budget is
// refused with 403 ai_budget_exceeded on build, regenerate, bulk generation, page creation,
// segment drafts and design extraction before anything starts, while another tenant goes on.
func TestAIUsageAndBudget(t *testing.T) {
	script := []ai.ChatResponse{
		toolStep(pagebuild.ToolAddBlock, `{"type":"testimonial","props":{"quote":"Fast shipping","author":"Jane"},"position":1}`),
		{Content: "I added a testimonial."},
	}
	script[0].Usage = ai.Usage{PromptTokens: 1200, CompletionTokens: 45}
	script[1].Usage = ai.Usage{PromptTokens: 1330, CompletionTokens: 12}
	var reported ai.Usage
	for _, r := range script {
		reported.PromptTokens += r.Usage.PromptTokens
		reported.CompletionTokens += r.Usage.CompletionTokens
	}
	model := aitest.New(aitest.Answers(script...)...)
	e, spend := spendServer(t, model, aispend.Config{RateLimit: 100})
	f := e.f
	p := e.builtPage(t, f.A, "linen")
	if got := runBuild(t, e, f.A, p.ID, "add a testimonial"); got[len(got)-1] != pagebuild.EventDone {
		t.Fatalf("build events %v", got)
	}

	var rep aispend.Report
	ok(t, send(t, e.ts, http.MethodGet, "/api/usage/?window=24h", bearer(f.A), nil), http.StatusOK, &rep)
	want := aispend.UsageRow{Operation: ai.OpBuild, Model: model.ChatModel(), Tokens: aispend.Tokens{
		Calls: int64(len(script)), PromptTokens: int64(reported.PromptTokens), CompletionTokens: int64(reported.CompletionTokens),
		TotalTokens: int64(reported.PromptTokens + reported.CompletionTokens)}}
	if len(rep.Usage) != 1 || rep.Usage[0] != want || rep.Totals != want.Tokens || rep.Window != "24h" || rep.Budget.MonthlyTokens != nil {
		t.Fatalf("usage %+v, want one row %+v", rep, want)
	}
	ok(t, send(t, e.ts, http.MethodGet, "/api/usage/", bearer(f.B), nil), http.StatusOK, &rep)
	if len(rep.Usage) != 0 || rep.Totals.TotalTokens != 0 || rep.Window != "month" {
		t.Fatalf("tenant B sees %+v", rep)
	}
	wantError(t, send(t, e.ts, http.MethodGet, "/api/usage/?window=forever", bearer(f.A), nil), http.StatusBadRequest, "validation_failed", "window")

	// The budget is spent: everything that would spend tokens is refused before it starts.
	if err := spend.SetBudget(context.Background(), f.A.T.Slug, new(want.TotalTokens)); err != nil {
		t.Fatal(err)
	}
	pagesBefore, bulksBefore := e.gen.calls()
	q := e.query(t, f.A, `{"text":"more linen"}`)
	refusals := []struct {
		name, method, path, body string
	}{
		{"build", http.MethodPost, fmt.Sprintf("/api/ai-pages/pages/%d/build/", p.ID), `{"message":"again"}`},
		{"regenerate", http.MethodPost, fmt.Sprintf("/api/ai-pages/pages/%d/regenerate/", p.ID), ``},
		{"bulk generate", http.MethodPost, "/api/ai-pages/pages/bulk-generate/", ``},
		{"create a generated page", http.MethodPost, "/api/ai-pages/pages/", fmt.Sprintf(`{"query":%d}`, q.ID)},
		{"segment draft", http.MethodPost, "/api/segments/1/draft/", ``},
		{"design extraction", http.MethodPost, "/api/ai-pages/design-system/extract/", `{"image_url":"https://example.com/a.png"}`},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			res := jsonCall(t, e.ts, r.method, r.path, bearer(f.A), r.body)
			d := wantError(t, res, http.StatusForbidden, aispend.CodeBudgetExceeded)
			if d.Message == "" {
				t.Error("no message")
			}
		})
	}
	if pages, bulks := e.gen.calls(); len(pages) != len(pagesBefore) || len(bulks) != len(bulksBefore) {
		t.Fatalf("a refused request started a generation: %v %v", pages, bulks)
	}
	if n := model.Calls(); n != len(script) {
		t.Fatalf("the model was called %d times, want %d (none after the budget)", n, len(script))
	}
	ok(t, send(t, e.ts, http.MethodGet, "/api/usage/", bearer(f.A), nil), http.StatusOK, &rep)
	if rep.Budget.MonthlyTokens == nil || *rep.Budget.MonthlyTokens != want.TotalTokens || rep.Budget.UsedThisMonth != want.TotalTokens {
		t.Fatalf("budget %+v", rep.Budget)
	}
	// Tenant B is not limited by A's budget.
	qb := e.query(t, f.B, `{"text":"wool"}`)
	e.page(t, f.B, fmt.Sprintf(`{"query":%d}`, qb.ID))
}

// TestAIRateLimit: beyond the tenant's AI rate limit a spending endpoint answers 429 with
// Retry-After; endpoints that spend nothing (a page from a template, reads) are not counted.
func TestAIRateLimit(t *testing.T) {
	e, _ := spendServer(t, aitest.New(), aispend.Config{RateLimit: 2, RateWindow: time.Hour})
	f := e.f
	q := e.query(t, f.A, `{"text":"linen"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d}`, q.ID)) // 1
	path := fmt.Sprintf("/api/ai-pages/pages/%d/regenerate/", p.ID)
	ok(t, send(t, e.ts, http.MethodPost, path, bearer(f.A), nil), http.StatusAccepted, nil) // 2
	res := send(t, e.ts, http.MethodPost, path, bearer(f.A), nil)
	wantError(t, res, http.StatusTooManyRequests, "rate_limited")
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 3500 || s > 3600 {
		t.Fatalf("Retry-After %q, want about an hour", res.Header.Get("Retry-After"))
	}
	// Another tenant has its own count.
	qb := e.query(t, f.B, `{"text":"wool"}`)
	e.page(t, f.B, fmt.Sprintf(`{"query":%d}`, qb.ID))
}
