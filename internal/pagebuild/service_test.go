package pagebuild

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/ai/aitest"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

type nopGenerator struct{}

func (nopGenerator) StartGeneration(context.Context, int64, int64) error { return nil }
func (nopGenerator) StartBulk(context.Context, int64, int64) error       { return nil }

type env struct {
	ctx   context.Context
	db    *store.DB
	pages *page.Service
	a, b  int64
}

func newEnv(t testing.TB) *env {
	db := testenv.OpenDB(t)
	e := &env{ctx: context.Background(), db: db}
	e.pages = page.NewService(db.Pool, nopGenerator{}, time.Now, nil, page.Options{PublicCacheTTL: -1, DisableViewCounting: true})
	e.a = testenv.Tenant(t, db, "tenant-a")
	e.b = testenv.Tenant(t, db, "tenant-b")
	return e
}

// page creates a page of the tenant with basePage's blocks (version 1).
func (e *env) page(t testing.TB, tenantID int64, slug string) *page.Page {
	t.Helper()
	q, err := e.pages.CreateQuery(e.ctx, tenantID, page.QueryInput{Text: "winter shoes " + slug})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.pages.CreatePage(e.ctx, tenantID, page.CreateInput{Query: &q.ID, Slug: &slug})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pages.SaveGenerated(e.ctx, tenantID, p.ID, page.GeneratedContent{IntroCopy: "Intro", Blocks: basePage().Blocks}); err != nil {
		t.Fatal(err)
	}
	p, err = e.pages.GetPage(e.ctx, tenantID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) service(p ai.Provider, opts Options) *Service {
	return NewService(e.db.Pool, e.pages, fakeSearch{}, p, time.Now, nil, opts)
}

func collect(r *Run, ctx context.Context) []Event {
	var evs []Event
	r.Execute(ctx, func(ev Event) error { evs = append(evs, ev); return nil })
	return evs
}

func types(evs []Event) string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return strings.Join(out, ",")
}

func mustLocal(t testing.TB) ai.Provider {
	p, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildCommitsOneVersionAndRestoreUndoesIt(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	s := e.service(mustLocal(t), Options{})
	msg := "add a testimonial from Jane about fast shipping; make the grid four columns; move the product grid above the text"
	r, err := s.Begin(e.ctx, e.a, p.ID, msg)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(r, e.ctx)
	if got := types(evs); got != "thinking,thinking,block,thinking,block,thinking,block,text,text,done" {
		t.Fatalf("events = %s (%+v)", got, evs)
	}
	after, err := e.pages.GetPage(e.ctx, e.a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != p.Version+1 {
		t.Fatalf("version = %d, want %d (one version per build)", after.Version, p.Version+1)
	}
	if got := render(after.Blocks); got != strings.Join([]string{h1,
		`g1:product_grid{"columns":4,"product_skus":["SKU-1","SKU-2"]}`, t1, q1,
		`new:testimonial{"author":"Jane","quote":"I love the fast shipping!"}`}, " ") {
		t.Fatalf("blocks = %s", got)
	}
	vs, err := e.pages.ListVersions(e.ctx, e.a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Source != page.SourceBuild || vs[0].Message != msg {
		t.Fatalf("latest version = %+v", vs[0])
	}
	builds, err := s.List(e.ctx, e.a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(builds) != 1 || builds[0].Outcome != OutcomeApplied || len(builds[0].Operations) != 3 || builds[0].Version == nil || *builds[0].Version != after.Version || builds[0].Message != msg {
		t.Fatalf("builds = %+v", builds[0])
	}
	// Restore undoes the build.
	restored, err := e.pages.RestoreVersion(e.ctx, e.a, p.ID, p.Version)
	if err != nil {
		t.Fatal(err)
	}
	if render(restored.Blocks) != render(p.Blocks) {
		t.Fatalf("restored blocks = %s, want %s", render(restored.Blocks), render(p.Blocks))
	}
}

func TestBeginRefuses(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	s := e.service(mustLocal(t), Options{})
	cases := []struct {
		name    string
		tenant  int64
		page    int64
		msg     string
		kind    error
		code    string
		setup   func()
		cleanup func()
	}{
		{name: "empty message", tenant: e.a, page: p.ID, msg: "  \n", kind: errs.ErrInvalid},
		{name: "too long", tenant: e.a, page: p.ID, msg: strings.Repeat("é", MaxMessageChars+1), kind: errs.ErrInvalid},
		{name: "control character", tenant: e.a, page: p.ID, msg: "add a\x00 hero", kind: errs.ErrInvalid},
		{name: "invalid utf-8", tenant: e.a, page: p.ID, msg: "add \xff", kind: errs.ErrInvalid},
		{name: "missing page", tenant: e.a, page: p.ID + 1000, msg: "remove the hero", kind: errs.ErrNotFound},
		{name: "another tenant's page", tenant: e.b, page: p.ID, msg: "remove the hero", kind: errs.ErrNotFound},
		{name: "over the page limit", tenant: e.a, page: p.ID, msg: "remove the hero", kind: errs.ErrForbidden, code: "page_limit_reached",
			setup:   func() { testenv.Exec(t, e.db, `UPDATE tenants SET page_limit = 0 WHERE id = $1`, e.a) },
			cleanup: func() { testenv.Exec(t, e.db, `UPDATE tenants SET page_limit = 1000 WHERE id = $1`, e.a) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
				defer tc.cleanup()
			}
			_, err := s.Begin(e.ctx, tc.tenant, tc.page, tc.msg)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want %v", err, tc.kind)
			}
			var ce *errs.CodedError
			if tc.code != "" && (!errors.As(err, &ce) || ce.Code != tc.code) {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
		})
	}
	t.Run("a second build of the page", func(t *testing.T) {
		r, err := s.Begin(e.ctx, e.a, p.ID, "remove the hero")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Begin(e.ctx, e.a, p.ID, "remove the hero")
		var ce *errs.CodedError
		if !errors.Is(err, errs.ErrConflict) || !errors.As(err, &ce) || ce.Code != "build_in_progress" {
			t.Fatalf("err = %v, want build_in_progress", err)
		}
		collect(r, e.ctx)
		r2, err := s.Begin(e.ctx, e.a, p.ID, "remove the text")
		if err != nil {
			t.Fatalf("after the first build finished: %v", err)
		}
		collect(r2, e.ctx)
	})
	t.Run("an abandoned build's lease expires", func(t *testing.T) {
		testenv.Exec(t, e.db, `INSERT INTO page_builds (tenant_id, page_id, message, created_at) VALUES ($1, $2, 'x', now() - interval '1 hour')`, e.a, p.ID)
		r, err := s.Begin(e.ctx, e.a, p.ID, "remove the grid")
		if err != nil {
			t.Fatal(err)
		}
		collect(r, e.ctx)
	})
}

func calls(tcs ...ai.ToolCall) ai.ChatResponse {
	for i := range tcs {
		tcs[i].ID = fmt.Sprintf("c%d", i)
	}
	return ai.ChatResponse{ToolCalls: tcs, Usage: ai.Usage{PromptTokens: 10, CompletionTokens: 5}}
}

func TestInvalidToolCallsAreRefused(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	m := aitest.New(aitest.Step{Response: calls(
		ai.ToolCall{Name: ToolAddBlock, Arguments: `{"type":"carousel","props":{}}`},
		ai.ToolCall{Name: ToolAddBlock, Arguments: `{"type":"testimonial","props":{"quote":"Nice"}}`},
		ai.ToolCall{Name: ToolUpdateBlock, Arguments: `{"id":"g1","props":{"columns":"four"}}`},
		ai.ToolCall{Name: ToolRemoveBlock, Arguments: `{"id":"nope"}`},
		ai.ToolCall{Name: ToolMoveBlock, Arguments: `{"id":"h1","position":99}`},
		ai.ToolCall{Name: ToolAddBlock, Arguments: `{"type":"hero","props":{"headline":`},
		ai.ToolCall{Name: "drop_table", Arguments: `{}`},
		ai.ToolCall{Name: ToolUpdateBlock, Arguments: `{"id":"g1","props":{"columns":4}}`},
	)})
	s := e.service(m, Options{})
	r, err := s.Begin(e.ctx, e.a, p.ID, "make some changes")
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(r, e.ctx)
	if got := types(evs); got != "thinking,thinking,thinking,thinking,thinking,thinking,thinking,thinking,block,text,text,done" {
		t.Fatalf("events = %s: %+v", got, evs)
	}
	// The refusals went back to the model as tool results.
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	var results []string
	for _, msg := range last {
		if msg.Role == ai.RoleTool {
			results = append(results, msg.Content)
		}
	}
	if len(results) != 8 {
		t.Fatalf("tool results = %d, want 8", len(results))
	}
	for i, want := range []string{"must be one of", "is required", "must be", "no block has the id", "position must be", "not a valid JSON", "there is no tool", "updated"} {
		if !strings.Contains(results[i], want) {
			t.Errorf("result %d = %s, want it to contain %q", i, results[i], want)
		}
	}
	after, err := e.pages.GetPage(e.ctx, e.a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := block.Validate("blocks", after.Blocks); err != nil {
		t.Fatalf("page invalid: %v", err)
	}
	if got := render(after.Blocks); got != strings.Join([]string{h1, t1, `g1:product_grid{"columns":4,"product_skus":["SKU-1","SKU-2"]}`, q1}, " ") {
		t.Fatalf("blocks = %s", got)
	}
	builds, _ := s.List(e.ctx, e.a, p.ID)
	if builds[0].PromptTokens != 10 || builds[0].CompletionTokens != 5 || len(builds[0].Operations) != 1 {
		t.Fatalf("build = %+v", builds[0])
	}
}

func TestProviderFailures(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	rate := &ai.ProviderError{Provider: "openai", Op: "chat stream", Kind: ai.ErrRateLimited, StatusCode: 429, RetryAfter: time.Millisecond}
	down := &ai.ProviderError{Provider: "openai", Op: "chat stream", Kind: ai.ErrUnavailable, StatusCode: 503}
	reg := prometheus.NewRegistry()
	counted := metrics.New(reg) // the builds' outcomes, as the build failure alert reads them
	t.Run("retried", func(t *testing.T) {
		m := aitest.New(aitest.Fail(rate), aitest.Fail(down), aitest.Step{Response: calls(ai.ToolCall{Name: ToolRemoveBlock, Arguments: `{"id":"q1"}`})})
		s := e.service(m, Options{RetryBase: time.Millisecond, Metrics: counted})
		r, err := s.Begin(e.ctx, e.a, p.ID, "remove the testimonial")
		if err != nil {
			t.Fatal(err)
		}
		evs := collect(r, e.ctx)
		if got := types(evs); got != "thinking,thinking,thinking,text,text,text,done" {
			t.Fatalf("events = %s: %+v", got, evs)
		}
	})
	t.Run("given up: error then done, nothing saved", func(t *testing.T) {
		before, _ := e.pages.GetPage(e.ctx, e.a, p.ID)
		m := aitest.New(aitest.Fail(down), aitest.Fail(down), aitest.Fail(down))
		s := e.service(m, Options{RetryBase: time.Millisecond, Metrics: counted})
		r, err := s.Begin(e.ctx, e.a, p.ID, "remove the hero")
		if err != nil {
			t.Fatal(err)
		}
		evs := collect(r, e.ctx)
		if got := types(evs); got != "thinking,thinking,thinking,error,done" || !strings.Contains(evs[3].Content, "nothing was saved") {
			t.Fatalf("events = %s: %+v", got, evs)
		}
		after, _ := e.pages.GetPage(e.ctx, e.a, p.ID)
		if after.Version != before.Version {
			t.Fatalf("version moved: %d -> %d", before.Version, after.Version)
		}
		builds, _ := s.List(e.ctx, e.a, p.ID)
		if builds[0].Outcome != OutcomeFailed || builds[0].Error == nil {
			t.Fatalf("build = %+v", builds[0])
		}
	})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() == "cohort_page_builds_total" {
			for _, s := range f.GetMetric() {
				got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	if want := map[string]float64{OutcomeApplied: 1, OutcomeFailed: 1, OutcomeNoChanges: 0, OutcomeCancelled: 0}; !maps.Equal(got, want) {
		t.Errorf("cohort_page_builds_total by outcome = %v, want %v", got, want)
	}
}

func TestDisconnectSavesNothing(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	thinking := make(chan struct{})
	m := aitest.New(aitest.Step{Response: calls(ai.ToolCall{Name: ToolRemoveBlock, Arguments: `{"id":"q1"}`})}, aitest.Hold(thinking))
	s := e.service(m, Options{})
	ctx, cancel := context.WithCancel(e.ctx)
	r, err := s.Begin(ctx, e.a, p.ID, "remove the testimonial")
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-thinking; cancel() }()
	collect(r, ctx)
	after, _ := e.pages.GetPage(e.ctx, e.a, p.ID)
	if after.Version != p.Version || render(after.Blocks) != render(p.Blocks) {
		t.Fatalf("the page changed: version %d, blocks %s", after.Version, render(after.Blocks))
	}
	builds, _ := s.List(e.ctx, e.a, p.ID)
	if builds[0].Outcome != OutcomeCancelled {
		t.Fatalf("build = %+v", builds[0])
	}
	// The page's slot is free again.
	r2, err := e.service(mustLocal(t), Options{}).Begin(e.ctx, e.a, p.ID, "remove the hero")
	if err != nil {
		t.Fatal(err)
	}
	collect(r2, e.ctx)
}

func TestConflictingEditSavesNothing(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	m := aitest.New(aitest.Step{Response: calls(ai.ToolCall{Name: ToolRemoveBlock, Arguments: `{"id":"q1"}`})})
	s := e.service(m, Options{})
	r, err := s.Begin(e.ctx, e.a, p.ID, "remove the testimonial")
	if err != nil {
		t.Fatal(err)
	}
	// Someone restores a version while the agent works.
	if _, err := e.pages.RestoreVersion(e.ctx, e.a, p.ID, p.Version); err != nil {
		t.Fatal(err)
	}
	evs := collect(r, e.ctx)
	if got := types(evs); !strings.HasSuffix(got, "error,done") {
		t.Fatalf("events = %s", got)
	}
	builds, _ := s.List(e.ctx, e.a, p.ID)
	if builds[0].Outcome != OutcomeFailed {
		t.Fatalf("build = %+v", builds[0])
	}
}

func TestListBuildsIsolatesTenants(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	s := e.service(mustLocal(t), Options{})
	if _, err := s.List(e.ctx, e.b, p.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("another tenant's builds: err = %v", err)
	}
	r, _ := s.Begin(e.ctx, e.a, p.ID, "make it pop")
	collect(r, e.ctx)
	builds, err := s.List(e.ctx, e.a, p.ID)
	if err != nil || len(builds) != 1 || builds[0].Outcome != OutcomeNoChanges {
		t.Fatalf("builds = %+v, %v", builds, err)
	}
}

func TestBuildTimeoutSavesNothing(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	m := aitest.New(aitest.Step{Response: calls(ai.ToolCall{Name: ToolRemoveBlock, Arguments: `{"id":"q1"}`})}, aitest.Hold(nil))
	s := e.service(m, Options{Timeout: 100 * time.Millisecond})
	r, err := s.Begin(e.ctx, e.a, p.ID, "remove the testimonial")
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(r, e.ctx)
	if got := types(evs); !strings.HasSuffix(got, "error,done") || !strings.Contains(evs[len(evs)-2].Content, "too long") {
		t.Fatalf("events = %s: %+v", got, evs)
	}
	builds, _ := s.List(e.ctx, e.a, p.ID)
	if builds[0].Outcome != OutcomeFailed {
		t.Fatalf("build = %+v", builds[0])
	}
	after, _ := e.pages.GetPage(e.ctx, e.a, p.ID)
	if after.Version != p.Version {
		t.Fatalf("saved after a timeout")
	}
}

// TestModelLinkRefused: a model's call that sets a link the page cannot use (javascript:, data:,
// ftp:, a bare word) is refused in the stream and saves nothing; the block keeps its link.
func TestModelLinkRefused(t *testing.T) {
	e := newEnv(t)
	for _, link := range []string{"javascript:alert(1)", "data:text/html,hi", "ftp://example.com/x", "shop"} {
		t.Run(link, func(t *testing.T) {
			p := e.page(t, e.a, "link-"+strings.NewReplacer(":", "", "/", "", ",", "", ".", "", "(", "", ")", "").Replace(link))
			m := aitest.New(
				aitest.Step{Response: calls(
					ai.ToolCall{Name: ToolAddBlock, Arguments: argsJSON(map[string]any{"type": "cta_banner", "props": map[string]any{"headline": "Go", "cta_label": "Go", "cta_url": link}})},
					ai.ToolCall{Name: ToolUpdateBlock, Arguments: argsJSON(map[string]any{"id": "h1", "props": map[string]any{"cta_url": link}})},
				)},
				aitest.Content("Done."),
			)
			r, err := e.service(m, Options{}).Begin(e.ctx, e.a, p.ID, "link the button to "+link)
			if err != nil {
				t.Fatal(err)
			}
			evs := collect(r, e.ctx)
			refused := 0
			for _, ev := range evs {
				if ev.Type == EventBlock {
					t.Fatalf("a block event for a refused link: %+v", ev.Block)
				}
				if strings.Contains(ev.Content, "call was refused") && strings.Contains(ev.Content, "cta_url") {
					refused++
				}
			}
			if refused != 2 {
				t.Fatalf("%d refusals naming cta_url in the stream, want 2: %+v", refused, evs)
			}
			after, _ := e.pages.GetPage(e.ctx, e.a, p.ID)
			if after.Version != p.Version || after.Blocks[0].Props["cta_url"] != "/shop" {
				t.Fatalf("saved: version %d, hero %+v", after.Version, after.Blocks[0].Props)
			}
		})
	}
}
