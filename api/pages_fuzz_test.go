package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
)

// FuzzPagesBodies sends fuzzed bodies to the AI page endpoints that take one (AIQuery create and
// PATCH, page create and PATCH) through the real router over real Postgres: never a 5xx, and every
// 4xx is the one error shape. Run it with
//
//	go test ./api -run '^$' -fuzz FuzzPagesBodies -fuzztime 30s
func FuzzPagesBodies(f *testing.F) {
	fx := newFixture(f)
	svc := page.NewService(fx.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{})
	h := fx.newServer(f, func(d *Deps) { d.Pages = &PagesDeps{Service: svc} }).Handler()
	ctx := context.Background()
	call := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fx.A.Bearer)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		return rec
	}
	var q, p struct {
		ID int64 `json:"id"`
	}
	if rec := call(http.MethodPost, "/api/ai-pages/queries/", `{"text":"linen dresses"}`); rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &q) != nil {
		f.Fatalf("setup query: %d %s", rec.Code, rec.Body)
	}
	if rec := call(http.MethodPost, "/api/ai-pages/pages/", fmt.Sprintf(`{"query":%d}`, q.ID)); rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
		f.Fatalf("setup page: %d %s", rec.Code, rec.Body)
	}
	endpoints := []struct {
		method, path string
		seeds        []string
	}{
		{http.MethodPost, "/api/ai-pages/queries/", []string{`{"text":"wool coats","active":false}`, `{"text":"x","product_segment_id":1}`}},
		{http.MethodPatch, fmt.Sprintf("/api/ai-pages/queries/%d/", q.ID), []string{`{"text":"silk"}`, `{"product_segment_id":null,"active":true}`}},
		{http.MethodPost, "/api/ai-pages/pages/", []string{fmt.Sprintf(`{"query":%d,"slug":"a-b","title":"T","published":true}`, q.ID), fmt.Sprintf(`{"query":%d}`, q.ID)}},
		{http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), []string{
			`{"slug":"new-slug","title":"New","published":false}`,
			`{"blocks":[{"type":"hero","props":{"headline":"H","cta_url":"/x"}},{"type":"product_grid","props":{"product_skus":["A"],"columns":2}}]}`,
			`{"blocks":[{"id":"b1","type":"feature_list","props":{"heading":"F","items":[{"title":"t","description":"d"}]}}]}`,
		}},
	}
	for i, ep := range endpoints {
		for _, s := range append(ep.seeds, `null`, `[]`, `{"":0}`, `{"blocks":null}`) {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := endpoints[int(which)%len(endpoints)]
		fuzzCall(ctx, t, h, ep.method, ep.path, bearer(fx.A), body)
	})
}
