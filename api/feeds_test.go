package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/feed"
)

// recordingFeedStarter records feed sync starts in place of the workflow client.
type recordingFeedStarter struct {
	mu     sync.Mutex
	starts [][2]int64
}

func (r *recordingFeedStarter) StartFeedSync(_ context.Context, tenantID, feedID int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, [2]int64{tenantID, feedID})
	return nil
}

// newFeedsServer is the real API with the feed endpoints over real Postgres; tenants A and B have
// a product schema with a price and a brand.
func newFeedsServer(t testing.TB, st feed.SyncStarter) (*fixture, http.Handler) {
	fx := newFixture(t)
	cat := catalog.NewService(fx.db.Pool, time.Now)
	for _, id := range []int64{fx.A.T.ID, fx.B.T.ID} {
		if _, err := cat.PutSchema(context.Background(), id, catalog.Schema{Fields: []catalog.Field{
			{Name: "price", Type: catalog.TypePrice}, {Name: "brand", Type: catalog.TypeString, Facet: true},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	svc := feed.NewService(fx.db.Pool, cat, st, time.Now, feed.Options{})
	return fx, fx.newServer(t, func(d *Deps) { d.Feeds = &FeedsDeps{Service: svc} }).Handler()
}

func TestFeedsAPI(t *testing.T) {
	st := &recordingFeedStarter{}
	fx, h := newFeedsServer(t, st)
	ts := httptest.NewServer(h)
	defer ts.Close()
	call := func(method, path string, c tenantCreds, body string) result {
		return send(t, ts, method, path, bearer(c), strings.NewReader(body))
	}

	r := call(http.MethodPost, "/api/ai-pages/feeds/", fx.A, `{"name":"Google Merchant","url":"https://shop.example.com/google.xml","format":"xml",
		"field_map":{"g:id":"sku","g:title":"name","g:price":"price","g:brand":"brand"}}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var created map[string]any
	if err := json.Unmarshal(r.Body, &created); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "name", "url", "format", "field_map", "last_synced_at", "created_at", "status", "last_error", "counts", "failed_items"} {
		if _, ok := created[k]; !ok {
			t.Errorf("feed has no %q: %s", k, r.Body)
		}
	}
	if created["status"] != "idle" || created["last_synced_at"] != nil {
		t.Errorf("new feed %s", r.Body)
	}
	id := int64(created["id"].(float64))
	path := fmt.Sprintf("/api/ai-pages/feeds/%d/", id)

	if r := call(http.MethodGet, "/api/ai-pages/feeds/", fx.A, ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"Google Merchant"`) {
		t.Errorf("list: %d %s", r.Status, r.Body)
	}
	if r := call(http.MethodPatch, path, fx.A, `{"name":"Renamed","field_map":{"g:id":"sku","g:title":"name"}}`); r.Status != http.StatusOK ||
		!strings.Contains(string(r.Body), `"Renamed"`) || strings.Contains(string(r.Body), "g:brand") {
		t.Errorf("patch: %d %s", r.Status, r.Body)
	}
	r = call(http.MethodPost, path+"sync/", fx.A, "")
	var queued struct {
		Status string `json:"status"`
		Feed   struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		} `json:"feed"`
	}
	if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &queued) != nil || queued.Status != "queued" || queued.Feed.ID != id || queued.Feed.Status != "queued" {
		t.Errorf("sync: %d %s", r.Status, r.Body)
	}
	if len(st.starts) != 1 || st.starts[0] != [2]int64{fx.A.T.ID, id} {
		t.Errorf("starts %v", st.starts)
	}

	bad := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"no body", http.MethodPost, "/api/ai-pages/feeds/", "", 400, ""},
		{"missing fields", http.MethodPost, "/api/ai-pages/feeds/", `{}`, 400, "name"},
		{"file url", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"x","url":"file:///etc/passwd","format":"json"}`, 400, "url"},
		{"bad format", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"x","url":"https://a.example/f","format":"yaml"}`, 400, "format"},
		{"unknown target", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"x","url":"https://a.example/f","format":"json","field_map":{"id":"sku","c":"colour"}}`, 400, "field_map.c"},
		{"no sku", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"x","url":"https://a.example/f","format":"json","field_map":{"t":"name"}}`, 400, "field_map"},
		{"map of numbers", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"x","url":"https://a.example/f","format":"json","field_map":{"id":1}}`, 400, ""},
		{"unknown field", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"x","url":"https://a.example/f","format":"json","items":"x"}`, 400, "items"},
		{"bad patch", http.MethodPatch, path, `{"url":"gopher://a.example/"}`, 400, "url"},
		{"bad id", http.MethodGet, "/api/ai-pages/feeds/abc/", "", 404, ""},
		{"unknown id", http.MethodGet, "/api/ai-pages/feeds/99999999/", "", 404, ""},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := call(c.method, c.path, fx.A, c.body)
			if r.Status != c.status {
				t.Fatalf("%d %s, want %d", r.Status, r.Body, c.status)
			}
			e := errorBody(t, r)
			if c.field != "" && e.Fields[c.field] == "" {
				t.Errorf("no message for %s: %+v", c.field, e)
			}
		})
	}

	// Tenant B sees none of A's feed.
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, path, ""}, {http.MethodPatch, path, `{"name":"mine"}`}, {http.MethodPost, path + "sync/", ""}, {http.MethodDelete, path, ""},
	} {
		if r := call(c.method, c.path, fx.B, c.body); r.Status != http.StatusNotFound {
			t.Errorf("tenant B %s %s: %d %s", c.method, c.path, r.Status, r.Body)
		} else {
			errorBody(t, r)
		}
	}
	if r := call(http.MethodGet, "/api/ai-pages/feeds/", fx.B, ""); r.Status != http.StatusOK || string(r.Body) != "[]" {
		t.Errorf("tenant B list: %d %s", r.Status, r.Body)
	}
	if len(st.starts) != 1 {
		t.Errorf("tenant B started a sync: %v", st.starts)
	}
	if r := send(t, ts, http.MethodGet, "/api/ai-pages/feeds/", nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("no credentials: %d", r.Status)
	}

	if r := call(http.MethodDelete, path, fx.A, ""); r.Status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.Status, r.Body)
	}
	if r := call(http.MethodGet, path, fx.A, ""); r.Status != http.StatusNotFound {
		t.Errorf("after delete: %d", r.Status)
	}
}

// FuzzFeedsBodies sends fuzzed bodies to the feed endpoints that take one (create, PATCH) and to
// the sync endpoint through the real router over real Postgres: never a 5xx, and every 4xx is the
// one error shape. Run it with
//
//	go test ./api -run '^$' -fuzz FuzzFeedsBodies -fuzztime 30s
func FuzzFeedsBodies(f *testing.F) {
	fx, h := newFeedsServer(f, &recordingFeedStarter{})
	ctx := context.Background()
	req := httptest.NewRequest(http.MethodPost, "/api/ai-pages/feeds/", strings.NewReader(`{"name":"F","url":"https://a.example/f.json","format":"json"}`))
	req.Header.Set("Authorization", "Bearer "+fx.A.Bearer)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var created struct {
		ID int64 `json:"id"`
	}
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &created) != nil {
		f.Fatalf("setup feed: %d %s", rec.Code, rec.Body)
	}
	endpoints := []struct {
		method, path string
		seeds        []string
	}{
		{http.MethodPost, "/api/ai-pages/feeds/", []string{
			`{"name":"G","url":"https://shop.example/g.xml","format":"xml","field_map":{"g:id":"sku","g:price":"price"}}`,
			`{"name":"J","url":"http://shop.example/p.json","format":"JSON","field_map":{"offers.sku":"sku","vendor.name":"brand"}}`,
		}},
		{http.MethodPatch, fmt.Sprintf("/api/ai-pages/feeds/%d/", created.ID), []string{
			`{"name":"N"}`, `{"format":"xml","field_map":{"g:id":"sku"}}`, `{"url":"https://x.example/","field_map":null}`,
		}},
		{http.MethodPost, fmt.Sprintf("/api/ai-pages/feeds/%d/sync/", created.ID), []string{``, `{}`}},
	}
	for i, ep := range endpoints {
		for _, s := range append(ep.seeds, `null`, `[]`, `{"":0}`, `{"field_map":{"":""}}`, `{"field_map":[]}`) {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := endpoints[int(which)%len(endpoints)]
		fuzzCall(ctx, t, h, ep.method, ep.path, bearer(fx.A), body)
	})
}
