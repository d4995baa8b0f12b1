package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/ai/aitest"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagebuild"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// gated is a scripted model whose steps wait for the test: step i answers once gates[i] is
// closed (or the request ends), so the test sees each event arrive before the next is made.
func gated(steps ...ai.ChatResponse) (*aitest.Provider, []chan struct{}) {
	script, gates := aitest.Gated(aitest.Answers(steps...)...)
	return aitest.New(script...), gates
}

type buildEnv struct {
	*pagesEnv
	builder *pagebuild.Service
}

func buildServer(t testing.TB, provider ai.Provider) *buildEnv {
	t.Helper()
	f := newFixture(t)
	gen := &fakePageGenerator{}
	svc := page.NewService(f.db.Pool, gen, time.Now, nil, page.Options{PublicCacheTTL: -1})
	b := pagebuild.NewService(f.db.Pool, svc, nil, provider, time.Now, nil, pagebuild.Options{})
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Pages = &PagesDeps{Service: svc, Builder: b} }))
	return &buildEnv{pagesEnv: &pagesEnv{f: f, ts: ts, svc: svc, gen: gen}, builder: b}
}

// builtPage is a page of tenant c with a hero, a text section and a product grid.
func (e *buildEnv) builtPage(t testing.TB, c tenantCreds, slug string) page.Page {
	t.Helper()
	q := e.query(t, c, `{"text":"linen shirts `+slug+`"}`)
	p := e.page(t, c, fmt.Sprintf(`{"query":%d,"slug":%q}`, q.ID, slug))
	blocks := []block.Block{
		{ID: "hero", Type: block.Hero, Props: map[string]any{"headline": "Linen"}},
		{ID: "text", Type: block.TextSection, Props: map[string]any{"body": "Cool in summer."}},
		{ID: "grid", Type: block.ProductGrid, Props: map[string]any{"product_skus": []any{"SKU-1"}}},
	}
	if err := e.svc.SaveGenerated(context.Background(), c.T.ID, p.ID, page.GeneratedContent{Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.GetPage(context.Background(), c.T.ID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	return *out
}

// stream is an open build stream read event by event.
type stream struct {
	resp *http.Response
	rd   *bufio.Reader
}

func openBuild(t *testing.T, ctx context.Context, e *buildEnv, c tenantCreds, pageID int64, body string) *stream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/ai-pages/pages/%d/build/", e.ts.URL, pageID), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = bearer(c)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &stream{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next reads the next event (skipping comment lines), failing after a timeout.
func (s *stream) next(t *testing.T) pagebuild.Event {
	t.Helper()
	type res struct {
		ev  pagebuild.Event
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			line, err := s.rd.ReadString('\n')
			if err != nil {
				ch <- res{err: err}
				return
			}
			if strings.HasPrefix(line, ":") || line == "\n" {
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				ch <- res{err: fmt.Errorf("line %q is not an event", line)}
				return
			}
			blank, err := s.rd.ReadString('\n')
			if err != nil || blank != "\n" {
				ch <- res{err: fmt.Errorf("no blank line after an event: %q %v", blank, err)}
				return
			}
			var ev pagebuild.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				ch <- res{err: err}
				return
			}
			ch <- res{ev: ev}
			return
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("read event: %v", r.err)
		}
		return r.ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s: the stream is buffered or stuck")
	}
	return pagebuild.Event{}
}

func toolStep(name, args string) ai.ChatResponse {
	return ai.ChatResponse{ToolCalls: []ai.ToolCall{{ID: "c-" + name, Name: name, Arguments: args}}}
}

func TestBuildStreamsIncrementally(t *testing.T) {
	m, gates := gated(
		toolStep(pagebuild.ToolAddBlock, `{"type":"testimonial","props":{"quote":"Fast shipping","author":"Jane"},"position":1}`),
		toolStep(pagebuild.ToolUpdateBlock, `{"id":"grid","props":{"columns":4}}`),
		ai.ChatResponse{Content: "I added a testimonial and widened the grid."},
	)
	e := buildServer(t, m)
	f := e.f
	p := e.builtPage(t, f.A, "linen")
	s := openBuild(t, context.Background(), e, f.A, p.ID, `{"message":"add a testimonial and make the grid four columns"}`)
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", s.resp.StatusCode)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := s.resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// The first event arrives before the model answered anything.
	if ev := s.next(t); ev.Type != pagebuild.EventThinking {
		t.Fatalf("first event %+v, want thinking", ev)
	}
	close(gates[0])
	ev := s.next(t)
	if ev.Type != pagebuild.EventBlock || ev.Block == nil || ev.Block.Type != block.Testimonial || ev.Block.Props["author"] != "Jane" {
		t.Fatalf("event %+v, want the testimonial block", ev)
	}
	close(gates[1])
	ev = s.next(t)
	if ev.Type != pagebuild.EventBlock || ev.Block.ID != "grid" || ev.Block.Props["columns"] != float64(4) {
		t.Fatalf("event %+v, want the grid block", ev)
	}
	close(gates[2])
	var rest []string
	for {
		ev := s.next(t)
		rest = append(rest, ev.Type)
		if ev.Type == pagebuild.EventDone {
			break
		}
	}
	if got := strings.Join(rest, ","); got != "text,text,done" {
		t.Fatalf("the stream ended with %s", got)
	}

	// One version with the message; the full blocks are read from the page.
	var after page.Page
	ok(t, jsonCall(t, e.ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), bearer(f.A), ""), http.StatusOK, &after)
	if after.Version != p.Version+1 || len(after.Blocks) != 4 || after.Blocks[1].Type != block.Testimonial {
		t.Fatalf("page after the build: version %d, blocks %+v", after.Version, after.Blocks)
	}
	var builds []pagebuild.Build
	ok(t, jsonCall(t, e.ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/builds/", p.ID), bearer(f.A), ""), http.StatusOK, &builds)
	if len(builds) != 1 || builds[0].Outcome != pagebuild.OutcomeApplied || len(builds[0].Operations) != 2 || *builds[0].Version != after.Version {
		t.Fatalf("builds = %+v", builds)
	}
	// Restore undoes the build.
	var restored page.Page
	ok(t, jsonCall(t, e.ts, http.MethodPost, fmt.Sprintf("/api/ai-pages/pages/%d/versions/%d/restore/", p.ID, p.Version), bearer(f.A), ""), http.StatusOK, &restored)
	if len(restored.Blocks) != 3 || restored.Blocks[2].Props["columns"] != nil {
		t.Fatalf("restored blocks = %+v", restored.Blocks)
	}
	// Another tenant sees neither the page's builds nor can build it.
	if r := jsonCall(t, e.ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/builds/", p.ID), bearer(f.B), ""); r.Status != http.StatusNotFound {
		t.Fatalf("tenant B lists A's builds: %d", r.Status)
	}
}

func TestBuildLocalAgentOverHTTP(t *testing.T) {
	e := buildServer(t, localAgent(t))
	p := e.builtPage(t, e.f.A, "linen")
	s := openBuild(t, context.Background(), e, e.f.A, p.ID, `{"message":"add a testimonial from Jane about fast shipping, then move the product grid above the text"}`)
	var got []string
	for {
		ev := s.next(t)
		got = append(got, ev.Type)
		if ev.Type == pagebuild.EventDone {
			break
		}
	}
	if strings.Join(got, ",") != "thinking,thinking,block,thinking,block,text,text,done" {
		t.Fatalf("events %v", got)
	}
	after, _ := e.svc.GetPage(context.Background(), e.f.A.T.ID, p.ID)
	var order []string
	for _, b := range after.Blocks {
		order = append(order, b.Type)
	}
	if strings.Join(order, ",") != "hero,product_grid,text_section,testimonial" {
		t.Fatalf("blocks %v", order)
	}
}

// TestBuildLocalAgentCommands: over HTTP with the local agent, a sentence starting with "Then" is
// a command of its own, and a link the page cannot use is refused in the stream and not saved
// (never replaced by "/").
func TestBuildLocalAgentCommands(t *testing.T) {
	e := buildServer(t, localAgent(t))
	cases := []struct {
		name, msg string
		blocks    string // the block types afterwards
		says      string // an event says this
	}{
		{"then starts a sentence", "Add a testimonial from Jane. Then remove the hero.", "text_section,product_grid,testimonial", "Done: 2 changes."},
		{"javascript link", "add a call to action 'Go' linking to javascript:alert(1)", "hero,text_section,product_grid", "I could not do that: invalid block"},
		{"data link", "add a call to action 'Go' linking to data:text/html,hi", "hero,text_section,product_grid", "I could not do that: invalid block"},
		{"ftp link", "add a call to action 'Go' linking to ftp://example.com/x", "hero,text_section,product_grid", "I could not do that: invalid block"},
		{"bare word link", "add a call to action 'Go' linking to checkout", "hero,text_section,product_grid", "I could not do that: invalid block"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := e.builtPage(t, e.f.A, fmt.Sprintf("commands-%d", i))
			body, _ := json.Marshal(map[string]string{"message": tc.msg})
			s := openBuild(t, context.Background(), e, e.f.A, p.ID, string(body))
			said := false
			for {
				ev := s.next(t)
				if ev.Type == pagebuild.EventText && strings.Contains(ev.Content, tc.says) {
					said = true
				}
				if ev.Type == pagebuild.EventDone {
					break
				}
			}
			if !said {
				t.Errorf("no text event says %q", tc.says)
			}
			after, _ := e.svc.GetPage(context.Background(), e.f.A.T.ID, p.ID)
			var types []string
			for _, b := range after.Blocks {
				types = append(types, b.Type)
				if u, ok := b.Props["cta_url"]; ok && u != "/" && !strings.HasPrefix(u.(string), "/") && !strings.HasPrefix(u.(string), "http") {
					t.Errorf("saved link %v", u)
				}
			}
			if got := strings.Join(types, ","); got != tc.blocks {
				t.Fatalf("blocks %s, want %s", got, tc.blocks)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	m, _ := gated(toolStep(pagebuild.ToolRemoveBlock, `{"id":"hero"}`))
	e := buildServer(t, m)
	f := e.f
	p := e.builtPage(t, f.A, "linen")
	path := fmt.Sprintf("/api/ai-pages/pages/%d/build/", p.ID)
	cases := []struct {
		name   string
		creds  tenantCreds
		path   string
		body   string
		status int
		code   string
	}{
		{"no body", f.A, path, "", http.StatusBadRequest, "invalid_json"},
		{"no message", f.A, path, `{}`, http.StatusBadRequest, "validation_failed"},
		{"message null", f.A, path, `{"message":null}`, http.StatusBadRequest, "validation_failed"},
		{"blank message", f.A, path, `{"message":"  "}`, http.StatusBadRequest, "validation_failed"},
		{"message too long", f.A, path, `{"message":"` + strings.Repeat("a", 4001) + `"}`, http.StatusBadRequest, "validation_failed"},
		{"control characters", f.A, path, `{"message":"add\u0007 a hero"}`, http.StatusBadRequest, "validation_failed"},
		{"message not a string", f.A, path, `{"message":5}`, http.StatusBadRequest, ""},
		{"unknown field", f.A, path, `{"message":"x","mode":"fast"}`, http.StatusBadRequest, ""},
		{"not JSON", f.A, path, `message=x`, http.StatusBadRequest, ""},
		{"another tenant's page", f.B, path, `{"message":"remove the hero"}`, http.StatusNotFound, "not_found"},
		{"missing page", f.A, "/api/ai-pages/pages/999999/build/", `{"message":"remove the hero"}`, http.StatusNotFound, "not_found"},
		{"bad id", f.A, "/api/ai-pages/pages/abc/build/", `{"message":"remove the hero"}`, http.StatusNotFound, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonCall(t, e.ts, http.MethodPost, tc.path, bearer(tc.creds), tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.code != "" {
				if got := errorBody(t, r); got.Code != tc.code {
					t.Fatalf("code %q, want %q", got.Code, tc.code)
				}
			}
		})
	}
	if r := jsonCall(t, e.ts, http.MethodPost, path, http.Header{}, `{"message":"x"}`); r.Status != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d", r.Status)
	}

	t.Run("over the page limit", func(t *testing.T) {
		testenv.Exec(t, f.db, `UPDATE tenants SET page_limit = 0 WHERE id = $1`, f.A.T.ID)
		defer testenv.Exec(t, f.db, `UPDATE tenants SET page_limit = 1000 WHERE id = $1`, f.A.T.ID)
		r := jsonCall(t, e.ts, http.MethodPost, path, bearer(f.A), `{"message":"remove the hero"}`)
		if r.Status != http.StatusForbidden || errorBody(t, r).Code != "page_limit_reached" {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
	})

	t.Run("a build is running, then the client disconnects", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := openBuild(t, ctx, e, f.A, p.ID, `{"message":"remove the hero"}`)
		if ev := s.next(t); ev.Type != pagebuild.EventThinking {
			t.Fatalf("first event %+v", ev)
		}
		r := jsonCall(t, e.ts, http.MethodPost, path, bearer(f.A), `{"message":"remove the hero"}`)
		if r.Status != http.StatusConflict || errorBody(t, r).Code != "build_in_progress" {
			t.Fatalf("second build: %d %s", r.Status, r.Body)
		}
		cancel() // the model is still thinking: the build is cancelled
		deadline := time.Now().Add(10 * time.Second)
		for {
			builds, err := e.builder.List(context.Background(), f.A.T.ID, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if builds[0].Outcome == pagebuild.OutcomeCancelled {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("build outcome %q, want cancelled", builds[0].Outcome)
			}
			time.Sleep(20 * time.Millisecond)
		}
		after, _ := e.svc.GetPage(context.Background(), f.A.T.ID, p.ID)
		if after.Version != p.Version || len(after.Blocks) != 3 {
			t.Fatalf("the disconnected build saved: version %d, %d blocks", after.Version, len(after.Blocks))
		}
	})
}

// FuzzBuildBody posts any body to the build endpoint through the real router with the local
// agent: never a 5xx; a 4xx is the one error shape, a 200 is an event stream ending with done.
// Run it with
//
//	go test ./api -run '^$' -fuzz FuzzBuildBody -fuzztime 30s
func FuzzBuildBody(f *testing.F) {
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		f.Fatal(err)
	}
	fx := newFixture(f)
	svc := page.NewService(fx.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{PublicCacheTTL: -1})
	b := pagebuild.NewService(fx.db.Pool, svc, nil, local, time.Now, nil, pagebuild.Options{})
	h := fx.newServer(f, func(d *Deps) { d.Pages = &PagesDeps{Service: svc, Builder: b} }).Handler()
	ctx := context.Background()
	q, err := svc.CreateQuery(ctx, fx.A.T.ID, page.QueryInput{Text: "linen"})
	if err != nil {
		f.Fatal(err)
	}
	p, err := svc.CreatePage(ctx, fx.A.T.ID, page.CreateInput{Query: &q.ID})
	if err != nil {
		f.Fatal(err)
	}
	if err := svc.SaveGenerated(ctx, fx.A.T.ID, p.ID, page.GeneratedContent{Blocks: []block.Block{
		{Type: block.Hero, Props: map[string]any{"headline": "Linen"}},
		{Type: block.ProductGrid, Props: map[string]any{"product_skus": []any{"A"}}},
	}}); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"message":"add a testimonial from Jane about fast shipping"}`, `{"message":"make the grid four columns; remove the hero"}`,
		`{"message":""}`, `{"message":"\u0000"}`, `null`, `[]`, `{"message":["x"]}`, `{"message":"x"}{}`, `{"message":"add a hero at the top"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api/ai-pages/pages/%d/build/", p.ID), strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+fx.A.Bearer)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		switch {
		case rec.Code >= 500:
			t.Fatalf("body %q: status %d %s", body, rec.Code, rec.Body)
		case rec.Code == http.StatusOK:
			if !strings.HasSuffix(rec.Body.String(), "data: {\"type\":\"done\"}\n\n") {
				t.Fatalf("body %q: the stream did not end with done: %s", body, rec.Body)
			}
		default:
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("body %q: status %d with %s", body, rec.Code, rec.Body)
			}
		}
	})
}

// BenchmarkBuildHTTP measures what a client of the build endpoint sees with the local provider,
// through the real router over loopback HTTP: the time from sending the request to the first
// event (first_event_p95_ms) and to the final done of a 5-operation build (build5_p95_ms), over
// 100 builds per iteration, each on a fresh page of three blocks.
func BenchmarkBuildHTTP(b *testing.B) {
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		b.Fatal(err)
	}
	e := buildServer(b, local)
	const builds = 100
	// Five operations: add, add, move, update, remove.
	body := `{"message":"add a testimonial from Jane about fast shipping, then add a text section about our returns policy, then move the product grid to the top, then change the headline to Summer sale, then remove the testimonial"}`
	var first, total []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pages := make([]page.Page, builds)
		for j := range pages {
			pages[j] = e.builtPage(b, e.f.A, fmt.Sprintf("bench-%d-%d", i, j))
		}
		b.StartTimer()
		for _, p := range pages {
			req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/ai-pages/pages/%d/build/", e.ts.URL, p.ID), strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header = bearer(e.f.A)
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := e.ts.Client().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			rd := bufio.NewReader(resp.Body)
			var sawFirst bool
			var blocks int
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					b.Fatalf("stream ended without done: %v", err)
				}
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				if !sawFirst {
					first = append(first, time.Since(start))
					sawFirst = true
				}
				if strings.Contains(line, `"type":"block"`) {
					blocks++
				}
				if strings.Contains(line, `"type":"done"`) {
					total = append(total, time.Since(start))
					break
				}
			}
			_ = resp.Body.Close()
			if blocks < 4 { // add, add, move, update (the removal is a text event)
				b.Fatalf("page %d: %d block events, want 4", p.ID, blocks)
			}
		}
	}
	b.ReportMetric(p95ms(first), "first_event_p95_ms")
	b.ReportMetric(p95ms(total), "build5_p95_ms")
}

func p95ms(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[(len(ds)*95)/100]) / float64(time.Millisecond)
}

// TestBuildKeepAlive: while the model is silent, the stream gets comment lines (here every 50 ms
// instead of 15 s), which clients skip, and the build goes on after them.
func TestBuildKeepAlive(t *testing.T) {
	m, gates := gated(ai.ChatResponse{Content: "Nothing to change."})
	f := newFixture(t)
	svc := page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{PublicCacheTTL: -1})
	b := pagebuild.NewService(f.db.Pool, svc, nil, m, time.Now, nil, pagebuild.Options{})
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: svc, Builder: b, BuildKeepAlive: 50 * time.Millisecond}
	}))
	e := &buildEnv{pagesEnv: &pagesEnv{f: f, ts: ts, svc: svc}, builder: b}
	p := e.builtPage(t, f.A, "quiet")
	s := openBuild(t, context.Background(), e, f.A, p.ID, `{"message":"anything to change?"}`)
	if ev := s.next(t); ev.Type != pagebuild.EventThinking {
		t.Fatalf("first event %+v", ev)
	}
	// The model is held: only keep-alive comments may arrive now.
	deadline := time.Now().Add(5 * time.Second)
	comments := 0
	for comments < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keep-alive comments within 5s of silence", comments)
		}
		line, err := s.rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case line == ": keep-alive\n":
			comments++
		case line == "\n":
		default:
			t.Fatalf("unexpected line while the model is silent: %q", line)
		}
	}
	close(gates[0])
	var rest []string
	for {
		ev := s.next(t)
		rest = append(rest, ev.Type)
		if ev.Type == pagebuild.EventDone {
			break
		}
	}
	if rest[0] != pagebuild.EventText {
		t.Fatalf("after the keep-alives: %v", rest)
	}
}

// lateLoads is the page service as the builder sees it, except that every page load after the
// first returns only once a build of the page has finished (or 5s passed), counting the loads
// that wait: with the first build held until the others are waiting here, it makes the
// interleaving that let a second build start on the page as it was before the first committed.
type lateLoads struct {
	*page.Service
	f       *fixture
	mu      sync.Mutex
	loads   int
	waiting atomic.Int32
}

func (l *lateLoads) GetPage(ctx context.Context, tenantID, id int64) (*page.Page, error) {
	l.mu.Lock()
	l.loads++
	n := l.loads
	l.mu.Unlock()
	p, err := l.Service.GetPage(ctx, tenantID, id)
	if err != nil || n == 1 {
		return p, err
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var done int
		if err := l.f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM page_builds WHERE tenant_id = $1 AND page_id = $2 AND outcome <> 'running'`,
			tenantID, id).Scan(&done); err != nil {
			return nil, err
		}
		if done > 0 {
			break
		}
	}
	return p, nil
}

// TestBuildConcurrentStartsOneWins: 20 builds of one page started at once through the router
// give exactly one 200 stream and 19 409 build_in_progress answers before any stream; the
// winning build's model answers only once the 19 have their answer (or are stuck loading the
// page, which was the defect: they then started on the page as it was). Repeated on fresh pages.
func TestBuildConcurrentStartsOneWins(t *testing.T) {
	f := newFixture(t)
	svc := page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{PublicCacheTTL: -1})
	const starts, trials = 20, 5
	for trial := range trials {
		pages := &lateLoads{Service: svc, f: f}
		script, gates := aitest.Gated(aitest.Step{Response: toolStep(pagebuild.ToolRemoveBlock, `{"id":"hero"}`)})
		b := pagebuild.NewService(f.db.Pool, pages, nil, aitest.New(script...), time.Now, nil, pagebuild.Options{})
		ts := serve(t, f.newServer(t, func(d *Deps) { d.Pages = &PagesDeps{Service: svc, Builder: b} }))
		e := &buildEnv{pagesEnv: &pagesEnv{f: f, ts: ts, svc: svc}, builder: b}
		p := e.builtPage(t, f.A, fmt.Sprintf("race-%d", trial))
		var wg sync.WaitGroup
		var answered atomic.Int32
		statuses := make([]int, starts)
		bodies := make([]string, starts)
		ready := make(chan struct{})
		for i := range starts {
			wg.Go(func() {
				<-ready
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/ai-pages/pages/%d/build/", ts.URL, p.ID), strings.NewReader(`{"message":"remove the hero"}`))
				req.Header = bearer(f.A)
				req.Header.Set("Content-Type", "application/json")
				resp, err := ts.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					answered.Add(1)
				}
				var sb strings.Builder
				_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
				statuses[i], bodies[i] = resp.StatusCode, sb.String()
			})
		}
		// The winner's model answers once the others have their answer or wait loading the page.
		go func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if answered.Load() == starts-1 || pages.waiting.Load() == starts-1 {
					break
				}
			}
			close(gates[0])
		}()
		close(ready)
		wg.Wait()
		var ok200, conflicts int
		for i, st := range statuses {
			switch {
			case st == http.StatusOK:
				ok200++
				if strings.Contains(bodies[i], `"type":"error"`) {
					t.Errorf("trial %d: a 200 stream ended in an error: %s", trial, bodies[i])
				}
			case st == http.StatusConflict && strings.Contains(bodies[i], `"build_in_progress"`):
				conflicts++
			default:
				t.Errorf("trial %d: status %d: %s", trial, st, bodies[i])
			}
		}
		if ok200 != 1 || conflicts != starts-1 {
			t.Fatalf("trial %d: %d streams and %d build_in_progress, want 1 and %d", trial, ok200, conflicts, starts-1)
		}
		after, err := svc.GetPage(context.Background(), f.A.T.ID, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != p.Version+1 || len(after.Blocks) != 2 {
			t.Fatalf("trial %d: page version %d with %d blocks, want %d with 2", trial, after.Version, len(after.Blocks), p.Version+1)
		}
	}
}

// localAgent is the provider `cohort dev` runs the builder with.
func localAgent(t testing.TB) ai.Provider {
	t.Helper()
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return local
}
