package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// fakePageGenerator records generation starts instead of starting workflows (the generation
// workflows are another package's); err makes starts fail.
type fakePageGenerator struct {
	mu    sync.Mutex
	pages [][2]int64
	bulks [][2]int64
	err   error
}

func (g *fakePageGenerator) StartGeneration(_ context.Context, tenantID, pageID int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pages = append(g.pages, [2]int64{tenantID, pageID})
	return g.err
}

func (g *fakePageGenerator) StartBulk(_ context.Context, tenantID, jobID int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bulks = append(g.bulks, [2]int64{tenantID, jobID})
	return g.err
}

func (g *fakePageGenerator) calls() (pages, bulks [][2]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.pages), slices.Clone(g.bulks)
}

type pagesEnv struct {
	f   *fixture
	ts  *httptest.Server
	svc *page.Service
	gen *fakePageGenerator
}

// pagesServer is the real API with the AI page routes over the fixture's database (tenants A and
// B), a recording generator and the given service options.
func pagesServer(t *testing.T, opts page.Options) *pagesEnv {
	t.Helper()
	f := newFixture(t)
	gen := &fakePageGenerator{}
	svc := page.NewService(f.db.Pool, gen, time.Now, nil, opts)
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Pages = &PagesDeps{Service: svc} }))
	return &pagesEnv{f: f, ts: ts, svc: svc, gen: gen}
}

func (e *pagesEnv) query(t testing.TB, c tenantCreds, body string) page.AIQuery {
	t.Helper()
	var q page.AIQuery
	ok(t, jsonCall(t, e.ts, http.MethodPost, "/api/ai-pages/queries/", bearer(c), body), http.StatusCreated, &q)
	return q
}

func (e *pagesEnv) page(t testing.TB, c tenantCreds, body string) page.Page {
	t.Helper()
	var p page.Page
	ok(t, jsonCall(t, e.ts, http.MethodPost, "/api/ai-pages/pages/", bearer(c), body), http.StatusCreated, &p)
	return p
}

// generate writes content to a page as the generation would.
func (e *pagesEnv) generate(t *testing.T, tenantID, pageID int64, headline string, skus ...string) {
	t.Helper()
	items := make([]any, len(skus))
	for i, s := range skus {
		items[i] = s
	}
	blocks := []block.Block{{Type: block.Hero, Props: map[string]any{"headline": headline}}}
	if len(skus) > 0 {
		blocks = append(blocks, block.Block{Type: block.ProductGrid, Props: map[string]any{"product_skus": items}})
	}
	if err := e.svc.SaveGenerated(context.Background(), tenantID, pageID, page.GeneratedContent{IntroCopy: "About " + headline, ProductSKUs: skus, Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
}

func apiKey(c tenantCreds) http.Header { return hdr("Authorization", "ApiKey "+c.SK) }

func TestAIQueriesAPI(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	var segA, segB int64
	for _, s := range []struct {
		tenant int64
		id     *int64
	}{{f.A.T.ID, &segA}, {f.B.T.ID, &segB}} {
		if err := f.db.Pool.QueryRow(context.Background(), `INSERT INTO product_segments (tenant_id, name, name_key, definition) VALUES ($1, 'reds', 'reds', '{}') RETURNING id`, s.tenant).Scan(s.id); err != nil {
			t.Fatal(err)
		}
	}
	q := e.query(t, f.A, `{"text":"  linen summer dresses under 80 euros "}`)
	if q.Text != "linen summer dresses under 80 euros" || !q.Active || q.ProductSegmentID != nil || q.CreatedAt.IsZero() {
		t.Fatalf("created %+v", q)
	}
	q2 := e.query(t, f.A, fmt.Sprintf(`{"text":"wool coats","active":false,"product_segment_id":%d}`, segA))
	if q2.Active || q2.ProductSegmentID == nil || *q2.ProductSegmentID != segA {
		t.Fatalf("created %+v", q2)
	}
	var list []page.AIQuery
	ok(t, send(t, ts, http.MethodGet, "/api/ai-pages/queries/", apiKey(f.A), nil), http.StatusOK, &list)
	if len(list) != 2 || list[0].ID != q2.ID || list[1].ID != q.ID {
		t.Fatalf("list %+v", list)
	}
	path := fmt.Sprintf("/api/ai-pages/queries/%d/", q2.ID)
	var got page.AIQuery
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &got)
	if got.ID != q2.ID || got.Text != "wool coats" {
		t.Fatalf("get %+v", got)
	}
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"text":"warm wool coats","active":true}`), http.StatusOK, &got)
	if got.Text != "warm wool coats" || !got.Active || got.ProductSegmentID == nil || !got.UpdatedAt.After(got.CreatedAt) {
		t.Fatalf("patched %+v", got)
	}
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"product_segment_id":null}`), http.StatusOK, &got)
	if got.ProductSegmentID != nil || got.Text != "warm wool coats" {
		t.Fatalf("cleared %+v", got)
	}
	for _, tc := range []struct {
		name, method, target, body string
		status                     int
		code                       string
		fields                     []string
	}{
		{"create without text", http.MethodPost, "/api/ai-pages/queries/", `{}`, 400, "validation_failed", []string{"text"}},
		{"create blank text", http.MethodPost, "/api/ai-pages/queries/", `{"text":" \t "}`, 400, "validation_failed", []string{"text"}},
		{"create long text", http.MethodPost, "/api/ai-pages/queries/", `{"text":"` + strings.Repeat("a", 501) + `"}`, 400, "validation_failed", []string{"text"}},
		{"create control chars", http.MethodPost, "/api/ai-pages/queries/", `{"text":"a\u0007b"}`, 400, "validation_failed", []string{"text"}},
		{"create other tenant's segment", http.MethodPost, "/api/ai-pages/queries/", fmt.Sprintf(`{"text":"x","product_segment_id":%d}`, segB), 400, "validation_failed", []string{"product_segment_id"}},
		{"create unknown field", http.MethodPost, "/api/ai-pages/queries/", `{"text":"x","color":"red"}`, 400, "invalid_json", []string{"color"}},
		{"create wrong type", http.MethodPost, "/api/ai-pages/queries/", `{"text":5}`, 400, "invalid_json", []string{"text"}},
		{"create null body", http.MethodPost, "/api/ai-pages/queries/", `null`, 400, "invalid_json", nil},
		{"create array body", http.MethodPost, "/api/ai-pages/queries/", `[]`, 400, "invalid_json", []string{"body"}},
		{"patch blank text", http.MethodPatch, path, `{"text":""}`, 400, "validation_failed", []string{"text"}},
		{"patch segment string", http.MethodPatch, path, `{"product_segment_id":"1"}`, 400, "validation_failed", []string{"product_segment_id"}},
		{"patch other tenant's segment", http.MethodPatch, path, fmt.Sprintf(`{"product_segment_id":%d}`, segB), 400, "validation_failed", []string{"product_segment_id"}},
		{"patch active string", http.MethodPatch, path, `{"active":"yes"}`, 400, "invalid_json", []string{"active"}},
		{"get id zero", http.MethodGet, "/api/ai-pages/queries/0/", ``, 404, "not_found", nil},
		{"get id text", http.MethodGet, "/api/ai-pages/queries/abc/", ``, 404, "not_found", nil},
		{"get id huge", http.MethodGet, "/api/ai-pages/queries/99999999999999999999/", ``, 404, "not_found", nil},
		{"get missing", http.MethodGet, "/api/ai-pages/queries/999999/", ``, 404, "not_found", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, jsonCall(t, ts, tc.method, tc.target, bearer(f.A), tc.body), tc.status, tc.code, tc.fields...)
		})
	}
	r := send(t, ts, http.MethodDelete, path, bearer(f.A), nil)
	if r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	wantError(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusNotFound, "not_found")
	wantError(t, send(t, ts, http.MethodDelete, path, bearer(f.A), nil), http.StatusNotFound, "not_found")
}

func TestPagesAPI(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	q := e.query(t, f.A, `{"text":"Linen Summer Dresses under 80 €"}`)
	p1 := e.page(t, f.A, fmt.Sprintf(`{"query":%d}`, q.ID))
	if p1.Slug != "linen-summer-dresses-under-80" || p1.Title != q.Text || p1.Published || p1.Status != "generating" || *p1.Query != q.ID {
		t.Fatalf("created %+v", p1)
	}
	p2 := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"title":"Second","published":true}`, q.ID))
	if p2.Slug != "linen-summer-dresses-under-80-2" || p2.Title != "Second" || !p2.Published {
		t.Fatalf("created %+v", p2)
	}
	p3 := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"slug":"summer"}`, q.ID))
	if p3.Slug != "summer" {
		t.Fatalf("created %+v", p3)
	}
	if pages, _ := e.gen.calls(); len(pages) != 3 || pages[2] != [2]int64{f.A.T.ID, p3.ID} {
		t.Fatalf("generation starts %v", pages)
	}
	// B may use the same slug.
	qb := e.query(t, f.B, `{"text":"b"}`)
	e.page(t, f.B, fmt.Sprintf(`{"query":%d,"slug":"summer"}`, qb.ID))

	wantError(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), fmt.Sprintf(`{"query":%d,"slug":"summer"}`, q.ID)), http.StatusConflict, "slug_taken")
	for _, tc := range []struct {
		name, body string
		code       string
		fields     []string
	}{
		{"no query", `{}`, "validation_failed", []string{"query"}},
		{"query null", `{"query":null}`, "validation_failed", []string{"query"}},
		{"query zero", `{"query":0}`, "validation_failed", []string{"query"}},
		{"query string", `{"query":"1"}`, "invalid_json", []string{"query"}},
		{"query float", `{"query":1.5}`, "invalid_json", []string{"query"}},
		{"unknown query", `{"query":999999}`, "validation_failed", []string{"query"}},
		{"other tenant's query", fmt.Sprintf(`{"query":%d}`, qb.ID), "validation_failed", []string{"query"}},
		{"bad slug", fmt.Sprintf(`{"query":%d,"slug":"Summer Sale"}`, q.ID), "validation_failed", []string{"slug"}},
		{"empty slug", fmt.Sprintf(`{"query":%d,"slug":""}`, q.ID), "validation_failed", []string{"slug"}},
		{"long slug", fmt.Sprintf(`{"query":%d,"slug":"%s"}`, q.ID, strings.Repeat("a", 81)), "validation_failed", []string{"slug"}},
		{"blank title", fmt.Sprintf(`{"query":%d,"title":"  "}`, q.ID), "validation_failed", []string{"title"}},
		{"published string", fmt.Sprintf(`{"query":%d,"published":"true"}`, q.ID), "invalid_json", []string{"published"}},
		{"blocks on create", fmt.Sprintf(`{"query":%d,"blocks":[]}`, q.ID), "invalid_json", []string{"blocks"}},
		{"truncated", `{"query":`, "invalid_json", nil},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			wantError(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), tc.body), http.StatusBadRequest, tc.code, tc.fields...)
		})
	}

	// The list is newest first and omits intro_copy, product_skus and blocks.
	e.generate(t, f.A.T.ID, p1.ID, "Linen", "SKU-1")
	r := send(t, ts, http.MethodGet, "/api/ai-pages/pages/", bearer(f.A), nil)
	var raw []map[string]any
	ok(t, r, http.StatusOK, &raw)
	if len(raw) != 3 || raw[0]["id"] != float64(p3.ID) || raw[2]["id"] != float64(p1.ID) {
		t.Fatalf("list %s", r.Body)
	}
	for _, k := range []string{"intro_copy", "product_skus", "blocks"} {
		if _, has := raw[2][k]; has {
			t.Errorf("list has %s: %v", k, raw[2])
		}
	}
	for _, k := range []string{"slug", "title", "published", "status", "view_count", "last_ai_crawl_at", "generated_at", "query"} {
		if _, has := raw[2][k]; !has {
			t.Errorf("list lacks %s: %v", k, raw[2])
		}
	}
	path := fmt.Sprintf("/api/ai-pages/pages/%d/", p1.ID)
	var full map[string]any
	ok(t, send(t, ts, http.MethodGet, path, apiKey(f.A), nil), http.StatusOK, &full)
	for _, k := range []string{"id", "slug", "query", "title", "published", "intro_copy", "product_skus", "blocks", "status", "last_error", "generated_at", "view_count", "last_ai_crawl_at", "ai_crawls", "version", "created_at", "updated_at"} {
		if _, has := full[k]; !has {
			t.Errorf("page lacks %s: %v", k, full)
		}
	}
	if full["status"] != "ready" || full["intro_copy"] != "About Linen" || len(full["blocks"].([]any)) != 2 || full["version"] != 1.0 {
		t.Fatalf("page %v", full)
	}

	// PATCH: slug, title, published; blocks validated with their path.
	var pg page.Page
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"slug":"linen","title":"Linen dresses","published":true}`), http.StatusOK, &pg)
	if pg.Slug != "linen" || pg.Title != "Linen dresses" || !pg.Published || pg.Version != 1 {
		t.Fatalf("patched %+v", pg)
	}
	wantError(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"slug":"summer"}`), http.StatusConflict, "slug_taken")
	for _, tc := range []struct {
		name, body string
		code       string
		fields     []string
	}{
		{"missing headline", `{"blocks":[{"type":"hero","props":{}}]}`, "validation_failed", []string{"blocks[0].props.headline"}},
		{"unknown type", `{"blocks":[{"type":"hero","props":{"headline":"x"}},{"type":"carousel","props":{}}]}`, "validation_failed", []string{"blocks[1].type"}},
		{"unknown prop", `{"blocks":[{"type":"hero","props":{"headline":"x","color":"red"}}]}`, "validation_failed", []string{"blocks[0].props.color"}},
		{"wrong type", `{"blocks":[{"type":"hero","props":{"headline":5}}]}`, "validation_failed", []string{"blocks[0].props.headline"}},
		{"javascript url", `{"blocks":[{"type":"hero","props":{"headline":"x","cta_url":"javascript:alert(1)"}}]}`, "validation_failed", []string{"blocks[0].props.cta_url"}},
		{"blocks null", `{"blocks":null}`, "validation_failed", []string{"blocks"}},
		{"blocks object", `{"blocks":{}}`, "validation_failed", []string{"blocks"}},
		{"block field", `{"blocks":[{"type":"hero","props":{"headline":"x"},"style":1}]}`, "validation_failed", []string{"blocks[0].style"}},
		{"duplicate ids", `{"blocks":[{"id":"a","type":"hero","props":{"headline":"x"}},{"id":"a","type":"hero","props":{"headline":"y"}}]}`, "validation_failed", []string{"blocks[1].id"}},
		{"bad slug", `{"slug":"-x"}`, "validation_failed", []string{"slug"}},
		{"title too long", `{"title":"` + strings.Repeat("t", 501) + `"}`, "validation_failed", []string{"title"}},
		{"unknown field", `{"intro_copy":"x"}`, "invalid_json", []string{"intro_copy"}},
		{"empty body", ``, "invalid_json", nil},
	} {
		t.Run("patch "+tc.name, func(t *testing.T) {
			wantError(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), tc.body), http.StatusBadRequest, tc.code, tc.fields...)
		})
	}
	tooMany := make([]string, block.MaxBlocks+1)
	for i := range tooMany {
		tooMany[i] = `{"type":"hero","props":{"headline":"x"}}`
	}
	wantError(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"blocks":[`+strings.Join(tooMany, ",")+`]}`), http.StatusBadRequest, "validation_failed", "blocks")
	// 100 blocks with long text fit the body limit.
	hundred := make([]string, block.MaxBlocks)
	for i := range hundred {
		hundred[i] = fmt.Sprintf(`{"type":"text_section","props":{"heading":"h%d","body":"%s"}}`, i, strings.Repeat("b", 5000))
	}
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"blocks":[`+strings.Join(hundred, ",")+`]}`), http.StatusOK, &pg)
	if len(pg.Blocks) != block.MaxBlocks || pg.Version != 2 {
		t.Fatalf("100 blocks: %d blocks, version %d", len(pg.Blocks), pg.Version)
	}
	wantError(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"title":"`+strings.Repeat("x", 3<<20)+`"}`), http.StatusRequestEntityTooLarge, "too_large")

	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"blocks":[{"id":"hero-1","type":"hero","props":{"headline":"Edited"}}]}`), http.StatusOK, &pg)
	if pg.Version != 3 || len(pg.Blocks) != 1 || pg.Blocks[0].ID != "hero-1" {
		t.Fatalf("patched blocks %+v", pg)
	}
	// The same blocks again store no version.
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"blocks":[{"id":"hero-1","type":"hero","props":{"headline":"Edited"}}]}`), http.StatusOK, &pg)
	if pg.Version != 3 {
		t.Fatalf("unchanged blocks made version %d", pg.Version)
	}

	// Versions, newest first; restore the generated one.
	var versions []page.Version
	ok(t, send(t, ts, http.MethodGet, path+"versions/", bearer(f.A), nil), http.StatusOK, &versions)
	if len(versions) != 3 || versions[0].N != 3 || versions[0].Source != "patch" || versions[0].BlockCount != 1 || versions[2].Source != "generation" || versions[2].BlockCount != 2 {
		t.Fatalf("versions %+v", versions)
	}
	var v1 page.VersionDetail
	ok(t, send(t, ts, http.MethodGet, path+"versions/1/", bearer(f.A), nil), http.StatusOK, &v1)
	if v1.N != 1 || len(v1.Blocks) != 2 || v1.IntroCopy != "About Linen" || v1.Title != q.Text {
		t.Fatalf("version 1 %+v", v1)
	}
	ok(t, send(t, ts, http.MethodPost, path+"versions/1/restore/", bearer(f.A), nil), http.StatusOK, &pg)
	if pg.Version != 4 || len(pg.Blocks) != 2 || pg.Blocks[0].ID != v1.Blocks[0].ID || pg.Title != q.Text || pg.IntroCopy != "About Linen" || pg.Slug != "linen" {
		t.Fatalf("restored %+v", pg)
	}
	ok(t, send(t, ts, http.MethodGet, path+"versions/", bearer(f.A), nil), http.StatusOK, &versions)
	if versions[0].Source != "restore" || versions[0].Message != "restored version 1" {
		t.Fatalf("versions %+v", versions)
	}
	for _, target := range []string{path + "versions/99/", path + "versions/0/", path + "versions/x/", path + "versions/-1/"} {
		wantError(t, send(t, ts, http.MethodGet, target, bearer(f.A), nil), http.StatusNotFound, "not_found")
	}
	wantError(t, send(t, ts, http.MethodPost, path+"versions/99/restore/", bearer(f.A), nil), http.StatusNotFound, "not_found")

	// Regenerate: 202 queued, the generator is asked.
	var queued map[string]any
	ok(t, send(t, ts, http.MethodPost, path+"regenerate/", bearer(f.A), nil), http.StatusAccepted, &queued)
	if len(queued) != 1 || queued["status"] != "queued" {
		t.Fatalf("regenerate %v", queued)
	}
	if pages, _ := e.gen.calls(); pages[len(pages)-1] != [2]int64{f.A.T.ID, p1.ID} {
		t.Fatalf("starts %v", pages)
	}
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &pg)
	if pg.Status != "generating" || pg.Version != 4 {
		t.Fatalf("after regenerate %+v", pg)
	}
	e.gen.mu.Lock()
	e.gen.err = errors.New("temporal is down")
	e.gen.mu.Unlock()
	wantError(t, send(t, ts, http.MethodPost, path+"regenerate/", bearer(f.A), nil), http.StatusServiceUnavailable, "generation_unavailable")
	wantError(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), fmt.Sprintf(`{"query":%d}`, q.ID)), http.StatusServiceUnavailable, "generation_unavailable")
	e.gen.mu.Lock()
	e.gen.err = nil
	e.gen.mu.Unlock()

	// Deleting the query keeps the page; it can no longer be regenerated.
	r = send(t, ts, http.MethodDelete, fmt.Sprintf("/api/ai-pages/queries/%d/", q.ID), bearer(f.A), nil)
	if r.Status != http.StatusNoContent {
		t.Fatalf("delete query %d %s", r.Status, r.Body)
	}
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &pg)
	if pg.Query != nil {
		t.Fatalf("page query after delete %v", *pg.Query)
	}
	wantError(t, send(t, ts, http.MethodPost, path+"regenerate/", bearer(f.A), nil), http.StatusConflict, "query_deleted")

	r = send(t, ts, http.MethodDelete, path, bearer(f.A), nil)
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete %d %s", r.Status, r.Body)
	}
	wantError(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusNotFound, "not_found")
	wantError(t, send(t, ts, http.MethodGet, path+"versions/", bearer(f.A), nil), http.StatusNotFound, "not_found")
	if n := testenv.Count(t, f.db, `SELECT count(*) FROM page_versions WHERE page_id = $1`, p1.ID); n != 0 {
		t.Fatalf("%d versions left", n)
	}
}

func TestPagesAPIPageLimit(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	if err := e.svc.SetPageLimit(context.Background(), f.A.T.Slug, 2); err != nil {
		t.Fatal(err)
	}
	q := e.query(t, f.A, `{"text":"dresses"}`)
	body := fmt.Sprintf(`{"query":%d}`, q.ID)
	e.page(t, f.A, body)
	p := e.page(t, f.A, body)
	wantError(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), body), http.StatusForbidden, "page_limit_reached")
	// B's limit is its own.
	qb := e.query(t, f.B, `{"text":"dresses"}`)
	for range 3 {
		e.page(t, f.B, fmt.Sprintf(`{"query":%d}`, qb.ID))
	}
	// Deleting a page frees a place.
	if r := send(t, ts, http.MethodDelete, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), bearer(f.A), nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete %d", r.Status)
	}
	e.page(t, f.A, body)
}

func TestPagesAPIBulkGenerate(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	q1 := e.query(t, f.A, `{"text":"linen dresses"}`)
	existing := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"slug":"linen"}`, q1.ID))
	q2 := e.query(t, f.A, `{"text":"wool coats"}`)
	e.query(t, f.A, `{"text":"not now","active":false}`)
	q3 := e.query(t, f.A, `{"text":"silk scarves"}`)
	e.query(t, f.B, `{"text":"b's query"}`)

	var started map[string]any
	ok(t, send(t, ts, http.MethodPost, "/api/ai-pages/pages/bulk-generate/", bearer(f.A), nil), http.StatusAccepted, &started)
	if started["status"] != "queued" || started["job_id"] == nil || len(started) != 2 {
		t.Fatalf("bulk %v", started)
	}
	jobID := int64(started["job_id"].(float64))
	if _, bulks := e.gen.calls(); len(bulks) != 1 || bulks[0] != [2]int64{f.A.T.ID, jobID} {
		t.Fatalf("bulk starts %v", bulks)
	}
	var job page.BulkJobDetail
	ok(t, send(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/jobs/%d/", jobID), bearer(f.A), nil), http.StatusOK, &job)
	if job.Status != "pending" || job.Total != 3 || job.Completed != 0 || job.Failed != 0 || job.FinishedAt != nil || len(job.Pages) != 3 {
		t.Fatalf("job %+v", job)
	}
	if *job.Pages[0].PageID != existing.ID || job.Pages[0].Slug != "linen" || job.Pages[1].Slug != "wool-coats" || job.Pages[2].Slug != "silk-scarves" {
		t.Fatalf("job pages %+v", job.Pages)
	}
	for i, q := range []int64{q1.ID, q2.ID, q3.ID} {
		if *job.Pages[i].QueryID != q || job.Pages[i].Status != "pending" {
			t.Errorf("job page %d %+v", i, job.Pages[i])
		}
	}
	var pages []page.PageSummary
	ok(t, send(t, ts, http.MethodGet, "/api/ai-pages/pages/", bearer(f.A), nil), http.StatusOK, &pages)
	if len(pages) != 3 {
		t.Fatalf("pages %+v", pages)
	}
	for _, p := range pages {
		if p.Status != "generating" {
			t.Errorf("page %+v", p)
		}
	}
	// The generation reports back.
	ctx := context.Background()
	if err := e.svc.MarkBulkRunning(ctx, f.A.T.ID, jobID); err != nil {
		t.Fatal(err)
	}
	e.generate(t, f.A.T.ID, *job.Pages[0].PageID, "Linen")
	if err := e.svc.FinishBulkPage(ctx, f.A.T.ID, jobID, *job.Pages[0].PageID, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.FinishBulkPage(ctx, f.A.T.ID, jobID, *job.Pages[1].PageID, errors.New("product segment 7 no longer exists")); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.FinishBulkPage(ctx, f.A.T.ID, jobID, *job.Pages[2].PageID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.FinishBulk(ctx, f.A.T.ID, jobID); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	r := send(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/jobs/%d/", jobID), bearer(f.A), nil)
	ok(t, r, http.StatusOK, &raw)
	if raw["status"] != "partial_failure" || raw["completed"] != 2.0 || raw["failed"] != 1.0 || raw["finished_at"] == nil {
		t.Fatalf("job %s", r.Body)
	}
	jp := raw["pages"].([]any)
	if _, has := jp[0].(map[string]any)["error"]; has || jp[0].(map[string]any)["status"] != "ready" {
		t.Errorf("ready page %v", jp[0])
	}
	if p := jp[1].(map[string]any); p["status"] != "error" || p["error"] != "product segment 7 no longer exists" {
		t.Errorf("failed page %v", p)
	}
	ok(t, send(t, ts, http.MethodPost, "/api/ai-pages/pages/bulk-generate/", apiKey(f.A), nil), http.StatusAccepted, &started)
	var jobs []map[string]any
	ok(t, send(t, ts, http.MethodGet, "/api/ai-pages/jobs/", bearer(f.A), nil), http.StatusOK, &jobs)
	if len(jobs) != 2 || jobs[0]["id"] != started["job_id"] || jobs[1]["id"] != float64(jobID) {
		t.Fatalf("jobs %v", jobs)
	}
	if _, has := jobs[0]["pages"]; has {
		t.Errorf("job list has pages: %v", jobs[0])
	}
	ok(t, send(t, ts, http.MethodGet, "/api/ai-pages/jobs/", bearer(f.B), nil), http.StatusOK, &jobs)
	if len(jobs) != 0 {
		t.Fatalf("B's jobs %v", jobs)
	}
}

type publicBody struct {
	ID            int64                `json:"id"`
	Slug          string               `json:"slug"`
	Title         string               `json:"title"`
	IntroCopy     string               `json:"intro_copy"`
	ProductSKUs   []string             `json:"product_skus"`
	Blocks        []block.Block        `json:"blocks"`
	Products      []page.PublicProduct `json:"products"`
	ViewCount     int64                `json:"view_count"`
	LastAICrawlAt *time.Time           `json:"last_ai_crawl_at"`
}

func TestPublicPageAPI(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	ctx := context.Background()
	testenv.Exec(t, f.db, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES
		($1, 'LIN-1', 'Linen dress', 'lin-1', 'linen dress', '{"price": 79, "image_url": "https://img.example/lin-1.jpg"}')`, f.A.T.ID)
	q := e.query(t, f.A, `{"text":"linen dresses"}`)
	pub := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"published":true}`, q.ID))
	e.generate(t, f.A.T.ID, pub.ID, "Linen", "LIN-1")
	draft := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"slug":"draft"}`, q.ID))
	qb := e.query(t, f.B, `{"text":"b"}`)
	bPage := e.page(t, f.B, fmt.Sprintf(`{"query":%d,"slug":"b-only","published":true}`, qb.ID))
	_ = draft
	_ = bPage

	target := "/api/ai-pages/public/pages/" + f.A.T.Slug + "/" + pub.Slug + "/"
	var b publicBody
	r := send(t, ts, http.MethodGet, target, hdr("User-Agent", "Mozilla/5.0"), nil)
	ok(t, r, http.StatusOK, &b)
	if b.ID != pub.ID || b.IntroCopy != "About Linen" || len(b.Blocks) != 2 || len(b.ProductSKUs) != 1 || b.ViewCount != 1 || b.LastAICrawlAt != nil {
		t.Fatalf("public page %s", r.Body)
	}
	if len(b.Products) != 1 || b.Products[0].Name != "Linen dress" || *b.Products[0].Price != 79 || *b.Products[0].ImageURL != "https://img.example/lin-1.jpg" {
		t.Fatalf("products %+v", b.Products)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	ok(t, send(t, ts, http.MethodGet, target, nil, nil), http.StatusOK, &b)
	if b.ViewCount != 2 {
		t.Fatalf("second read view_count %d", b.ViewCount)
	}

	// Unknown tenant, unknown page, unpublished, another tenant's: the same 404.
	var first ErrorDetail
	for i, tgt := range []string{
		"/api/ai-pages/public/pages/nobody/" + pub.Slug + "/",
		"/api/ai-pages/public/pages/" + f.A.T.Slug + "/missing/",
		"/api/ai-pages/public/pages/" + f.A.T.Slug + "/draft/",
		"/api/ai-pages/public/pages/" + f.B.T.Slug + "/" + pub.Slug + "/",
		"/api/ai-pages/public/pages/" + f.A.T.Slug + "/b-only/",
		"/api/ai-pages/public/pages/" + f.A.T.Slug + "/NOT%20A%20SLUG/",
		"/api/ai-pages/public/pages/-/" + pub.Slug + "/",
	} {
		got := wantError(t, send(t, ts, http.MethodGet, tgt, nil, nil), http.StatusNotFound, "not_found")
		if i == 0 {
			first = got
		} else if got.Message != first.Message || len(got.Fields) != 0 {
			t.Errorf("%s: %+v differs from %+v", tgt, got, first)
		}
	}

	// A crawler read sets last_ai_crawl_at and counts under the crawler's name.
	ok(t, send(t, ts, http.MethodGet, target, hdr("User-Agent", "Mozilla/5.0 (compatible; GPTBot/1.1; +https://openai.com/gptbot)"), nil), http.StatusOK, &b)
	ok(t, send(t, ts, http.MethodGet, target, hdr("User-Agent", "NotGPTBotX"), nil), http.StatusOK, &b)
	if b.ViewCount != 4 {
		t.Fatalf("view_count %d", b.ViewCount)
	}
	var pg page.Page
	ok(t, send(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A), nil), http.StatusOK, &pg)
	if pg.ViewCount != 4 || pg.LastAICrawlAt == nil || len(pg.AICrawls) != 1 || pg.AICrawls["GPTBot"] != 1 {
		t.Fatalf("before the flush %+v", pg)
	}
	if err := e.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, pub.ID); n != 4 {
		t.Fatalf("stored view_count %d", n)
	}
	if n := testenv.Count(t, f.db, `SELECT count FROM page_ai_crawls WHERE page_id = $1 AND crawler = 'GPTBot'`, pub.ID); n != 1 {
		t.Fatalf("stored crawls %d", n)
	}
	ok(t, send(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A), nil), http.StatusOK, &pg)
	if pg.ViewCount != 4 || pg.LastAICrawlAt == nil || pg.AICrawls["GPTBot"] != 1 {
		t.Fatalf("after the flush %+v", pg)
	}

	// Unpublishing takes the page offline at once on this replica.
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A), `{"published":false}`), http.StatusOK, nil)
	wantError(t, send(t, ts, http.MethodGet, target, nil, nil), http.StatusNotFound, "not_found")
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", pub.ID), bearer(f.A), `{"published":true}`), http.StatusOK, nil)
	ok(t, send(t, ts, http.MethodGet, target, nil, nil), http.StatusOK, &b)
	if b.ViewCount != 5 {
		t.Fatalf("view_count after republishing %d", b.ViewCount)
	}
}

// TestPublicPageConcurrentReads: 1,000 concurrent public reads raise view_count by exactly 1,000.
func TestPublicPageConcurrentReads(t *testing.T) {
	e := pagesServer(t, page.Options{FlushEvery: 10 * time.Millisecond})
	f, ts := e.f, e.ts
	q := e.query(t, f.A, `{"text":"busy page"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"published":true}`, q.ID))
	e.generate(t, f.A.T.ID, p.ID, "Busy")
	testenv.Exec(t, f.db, `UPDATE generated_pages SET view_count = 41 WHERE id = $1`, p.ID)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }() // flushes while the reads run

	target := ts.URL + "/api/ai-pages/public/pages/" + f.A.T.Slug + "/" + p.Slug + "/"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	const reads = 1000
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for i := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodGet, target, nil)
			if i%4 == 0 {
				req.Header.Set("User-Agent", "ClaudeBot/1.0")
			}
			resp, err := client.Do(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				mu.Lock()
				failures++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if failures != 0 {
		t.Fatalf("%d reads failed", failures)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 41+reads {
		t.Fatalf("view_count %d, want %d", n, 41+reads)
	}
	if n := testenv.Count(t, f.db, `SELECT count FROM page_ai_crawls WHERE page_id = $1 AND crawler = 'ClaudeBot'`, p.ID); n != reads/4 {
		t.Fatalf("ClaudeBot crawls %d, want %d", n, reads/4)
	}
}

// TestPublicPageFlushOnShutdown: reads counted before the role stops are written by Run's final
// flush, not lost.
func TestPublicPageFlushOnShutdown(t *testing.T) {
	e := pagesServer(t, page.Options{FlushEvery: time.Hour})
	f, ts := e.f, e.ts
	q := e.query(t, f.A, `{"text":"shutdown"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"published":true}`, q.ID))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	for range 25 {
		ok(t, send(t, ts, http.MethodGet, "/api/ai-pages/public/pages/"+f.A.T.Slug+"/"+p.Slug+"/", hdr("User-Agent", "PerplexityBot/1.0"), nil), http.StatusOK, nil)
	}
	if n := testenv.Count(t, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 0 {
		t.Fatalf("view_count %d before shutdown (flush every hour)", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, f.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 25 {
		t.Fatalf("view_count %d after shutdown, want 25", n)
	}
	if n := testenv.Count(t, f.db, `SELECT count(*) FROM generated_pages WHERE id = $1 AND last_ai_crawl_at IS NOT NULL`, p.ID); n != 1 {
		t.Fatal("last_ai_crawl_at not set")
	}
}

// TestPagesAPIIsolation: tenant B gets 404 for A's query, page, version and job on every route,
// and nothing of A's changes.
func TestPagesAPIIsolation(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	q := e.query(t, f.A, `{"text":"mine"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d,"published":true}`, q.ID))
	e.generate(t, f.A.T.ID, p.ID, "Mine")
	var started page.BulkStarted
	ok(t, send(t, ts, http.MethodPost, "/api/ai-pages/pages/bulk-generate/", bearer(f.A), nil), http.StatusAccepted, &started)
	pagePath := fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID)
	queryPath := fmt.Sprintf("/api/ai-pages/queries/%d/", q.ID)
	before := send(t, ts, http.MethodGet, pagePath, bearer(f.A), nil)
	startsBefore, bulksBefore := e.gen.calls()
	routes := []struct{ method, target, body string }{
		{http.MethodGet, queryPath, ""},
		{http.MethodPatch, queryPath, `{"text":"theirs"}`},
		{http.MethodDelete, queryPath, ""},
		{http.MethodGet, pagePath, ""},
		{http.MethodPatch, pagePath, `{"title":"theirs"}`},
		{http.MethodPatch, pagePath, `{"blocks":[{"type":"hero","props":{"headline":"theirs"}}]}`},
		{http.MethodDelete, pagePath, ""},
		{http.MethodPost, pagePath + "regenerate/", ""},
		{http.MethodGet, pagePath + "versions/", ""},
		{http.MethodGet, pagePath + "versions/1/", ""},
		{http.MethodPost, pagePath + "versions/1/restore/", ""},
		{http.MethodGet, fmt.Sprintf("/api/ai-pages/jobs/%d/", started.JobID), ""},
	}
	for _, h := range []http.Header{bearer(f.B), apiKey(f.B)} {
		for _, rt := range routes {
			t.Run(rt.method+" "+rt.target, func(t *testing.T) {
				wantError(t, jsonCall(t, ts, rt.method, rt.target, h, rt.body), http.StatusNotFound, "not_found")
			})
		}
	}
	// B's create cannot point at A's query.
	wantError(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.B), fmt.Sprintf(`{"query":%d}`, q.ID)), http.StatusBadRequest, "validation_failed", "query")
	for _, list := range []string{"/api/ai-pages/queries/", "/api/ai-pages/pages/", "/api/ai-pages/jobs/"} {
		var out []any
		ok(t, send(t, ts, http.MethodGet, list, bearer(f.B), nil), http.StatusOK, &out)
		if len(out) != 0 {
			t.Errorf("B lists %s: %v", list, out)
		}
	}
	after := send(t, ts, http.MethodGet, pagePath, bearer(f.A), nil)
	if canonJSON(t, before.Body) != canonJSON(t, after.Body) {
		t.Errorf("B changed A's page:\n %s\n %s", before.Body, after.Body)
	}
	if starts, bulks := e.gen.calls(); len(starts) != len(startsBefore) || len(bulks) != len(bulksBefore) {
		t.Errorf("B's requests reached the generator: %v %v", starts, bulks)
	}
	// Credentials the pages endpoints do not accept.
	wantError(t, send(t, ts, http.MethodGet, "/api/ai-pages/pages/", nil, nil), http.StatusUnauthorized, "unauthenticated")
	wantError(t, send(t, ts, http.MethodGet, "/api/ai-pages/pages/", hdr("Authorization", "ApiKey "+f.A.PK), nil), http.StatusForbidden, "forbidden")
	wantError(t, send(t, ts, http.MethodGet, "/api/ai-pages/pages/", hdr("Authorization", "Bearer "+f.A.Session), nil), http.StatusForbidden, "forbidden")
}

// TestPagesAPIBadInput: no body or id makes a 500.
func TestPagesAPIBadInput(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	q := e.query(t, f.A, `{"text":"bad input"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d}`, q.ID))
	ids := []string{"0", "-1", "abc", "1.5", "99999999999999999999", "%00", "1e3", fmt.Sprint(p.ID)}
	bodies := []string{"", "null", "[]", "{", `{"x":1}`, `"s"`, "1", `{"query":{}}`, `{"blocks":[null]}`, `{"blocks":"x"}`,
		`{"blocks":[{"type":"product_grid","props":{"product_skus":[1,2]}}]}`, `{"blocks":[{"type":"product_grid","props":{"product_skus":[],"columns":99}}]}`,
		`{"slug":null,"title":null}`, `{"text":null}`, `{"product_segment_id":-5}`, `{"active":null}`, "\xff\xfe", `{"title":"\u0000"}`}
	var routes []struct{ method, path string }
	for _, id := range ids {
		for _, rt := range []struct{ method, path string }{
			{http.MethodGet, "/api/ai-pages/queries/" + id + "/"},
			{http.MethodPatch, "/api/ai-pages/queries/" + id + "/"},
			{http.MethodDelete, "/api/ai-pages/queries/999" + id + "/"},
			{http.MethodGet, "/api/ai-pages/pages/" + id + "/"},
			{http.MethodPatch, "/api/ai-pages/pages/" + id + "/"},
			{http.MethodPost, "/api/ai-pages/pages/" + id + "/regenerate/"},
			{http.MethodGet, "/api/ai-pages/pages/" + id + "/versions/"},
			{http.MethodGet, "/api/ai-pages/pages/" + id + "/versions/" + id + "/"},
			{http.MethodPost, "/api/ai-pages/pages/" + id + "/versions/" + id + "/restore/"},
			{http.MethodGet, "/api/ai-pages/jobs/" + id + "/"},
			{http.MethodGet, "/api/ai-pages/public/pages/" + id + "/" + id + "/"},
		} {
			routes = append(routes, rt)
		}
	}
	routes = append(routes, []struct{ method, path string }{
		{http.MethodPost, "/api/ai-pages/queries/"}, {http.MethodPost, "/api/ai-pages/pages/"}, {http.MethodPost, "/api/ai-pages/pages/bulk-generate/"},
	}...)
	for _, rt := range routes {
		for _, body := range bodies {
			if rt.method == http.MethodGet && body != "" {
				continue
			}
			r := jsonCall(t, ts, rt.method, rt.path, bearer(f.A), body)
			if r.Status >= 500 {
				t.Errorf("%s %s %q: %d %s", rt.method, rt.path, body, r.Status, r.Body)
			}
			if r.Status >= 400 {
				var env errorEnvelope
				if err := json.Unmarshal(r.Body, &env); err != nil || env.Error == nil || env.Error.Code == "" {
					t.Errorf("%s %s %q: %d without the error shape: %s", rt.method, rt.path, body, r.Status, r.Body)
				}
			}
		}
	}
}
