package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/feed"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagetemplate"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

// TestInvalidUTF8Refused: every JSON body the API binds follows ingestion's rule. Raw invalid
// UTF-8 bytes and \u escapes of unpaired surrogates (which encoding/json would store as U+FFFD)
// are a 400 naming the field by its path, and nothing is stored or changed.
func TestInvalidUTF8Refused(t *testing.T) {
	f := newFixture(t)
	cat := catalog.NewService(f.db.Pool, time.Now)
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Catalog = &CatalogDeps{Service: cat}
		d.Pages = &PagesDeps{Service: page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{})}
		d.Design = &DesignDeps{Store: design.NewStore(f.db.Pool, time.Now), Extractor: design.NewExtractor(design.ExtractorOptions{
			HTTP: safehttp.NewClient(safehttp.Options{Timeout: 5 * time.Second}), MaxBytes: 1 << 20,
		})}
		d.Templates = &TemplatesDeps{Service: pagetemplate.NewService(f.db.Pool, time.Now)}
		d.Feeds = &FeedsDeps{Service: feed.NewService(f.db.Pool, cat, &recordingFeedStarter{}, time.Now, feed.Options{})}
	}))
	h := bearer(f.A)
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", h, `{"fields":[{"name":"brand","type":"string","facet":true}]}`), http.StatusOK, nil)
	var q page.AIQuery
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/queries/", h, `{"text":"linen dresses"}`), http.StatusCreated, &q)
	var p page.Page
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", h, fmt.Sprintf(`{"query":%d,"title":"Linen"}`, q.ID)), http.StatusCreated, &p)
	var tpl pagetemplate.Template
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/templates/", h, templateBody), http.StatusCreated, &tpl)
	var fd struct {
		ID int64 `json:"id"`
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/feeds/", h, `{"name":"Merchant","url":"https://shop.example.com/feed.xml","format":"xml","field_map":{"g:id":"sku","g:title":"name"}}`), http.StatusCreated, &fd)
	var prod struct {
		ID int64 `json:"id"`
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", h, `{"sku":"A-1","name":"Dress","data":{"brand":"Acme"}}`), http.StatusCreated, &prod)

	// What a tenant can read back: every list and every resource the bodies below aim at.
	reads := []string{
		"/api/ai-pages/queries/", fmt.Sprintf("/api/ai-pages/queries/%d/", q.ID),
		"/api/ai-pages/pages/", fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID),
		"/api/ai-pages/templates/", fmt.Sprintf("/api/ai-pages/templates/%d/", tpl.ID),
		"/api/ai-pages/feeds/", fmt.Sprintf("/api/ai-pages/feeds/%d/", fd.ID),
		"/api/ai-pages/design-system/",
		"/api/pim/products/", fmt.Sprintf("/api/pim/products/%d/", prod.ID),
	}
	snapshot := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, path := range reads {
			r := jsonCall(t, ts, http.MethodGet, path, h, "")
			ok(t, r, http.StatusOK, nil)
			out[path] = canonJSON(t, r.Body)
		}
		return out
	}
	before := snapshot()

	// BAD is replaced by each bad spelling in turn.
	tests := []struct {
		name, method, path, body, field string
	}{
		{"AIQuery create text", http.MethodPost, "/api/ai-pages/queries/", `{"text":"linen BAD"}`, "text"},
		{"AIQuery patch text", http.MethodPatch, fmt.Sprintf("/api/ai-pages/queries/%d/", q.ID), `{"text":"BAD"}`, "text"},
		{"page create title", http.MethodPost, "/api/ai-pages/pages/", fmt.Sprintf(`{"query":%d,"title":"BAD"}`, q.ID), "title"},
		{"page patch title", http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), `{"title":"Linen BAD"}`, "title"},
		{"page patch block prop", http.MethodPatch, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID),
			`{"blocks":[{"type":"hero","props":{"headline":"ok"}},{"type":"text_section","props":{"heading":"h","body":"xBADx"}}]}`, "blocks[1].props.body"},
		{"template create name", http.MethodPost, "/api/ai-pages/templates/", `{"name":"BAD","blocks":[]}`, "name"},
		{"template create block", http.MethodPost, "/api/ai-pages/templates/", `{"name":"T","blocks":[{"type":"hero","props":{"headline":"BAD"}}]}`, "blocks[0].props.headline"},
		{"template patch name", http.MethodPatch, fmt.Sprintf("/api/ai-pages/templates/%d/", tpl.ID), `{"name":"BAD"}`, "name"},
		{"feed create name", http.MethodPost, "/api/ai-pages/feeds/", `{"name":"BAD","url":"https://shop.example.com/2.xml","format":"xml","field_map":{"g:id":"sku","g:title":"name"}}`, "name"},
		{"feed patch name", http.MethodPatch, fmt.Sprintf("/api/ai-pages/feeds/%d/", fd.ID), `{"name":"BAD"}`, "name"},
		{"feed patch field map", http.MethodPatch, fmt.Sprintf("/api/ai-pages/feeds/%d/", fd.ID), `{"field_map":{"g:id":"sku","g:title":"BAD"}}`, "field_map.g:title"},
		{"design system custom_css", http.MethodPut, "/api/ai-pages/design-system/", `{"custom_css":".a{content:\"BAD\"}"}`, "custom_css"},
		{"product create (not AI pages)", http.MethodPost, "/api/pim/products/", `{"sku":"A-2","name":"BAD","data":{"brand":"x"}}`, "name"},
		{"product patch data", http.MethodPatch, fmt.Sprintf("/api/pim/products/%d/", prod.ID), `{"data":{"brand":"BAD"}}`, "data.brand"},
	}
	bad := []struct{ name, text string }{
		{"raw invalid byte", "\xff"},
		{"truncated sequence", "\xe2\x82"},
		{"lone high surrogate escape", `\ud800`},
		{"lone low surrogate escape", `\uDC00`},
		{"high surrogate then non-surrogate", `\ud83d\u0041`},
	}
	for _, tt := range tests {
		for _, b := range bad {
			t.Run(tt.name+" "+b.name, func(t *testing.T) {
				r := jsonCall(t, ts, tt.method, tt.path, h, strings.ReplaceAll(tt.body, "BAD", b.text))
				e := wantError(t, r, http.StatusBadRequest, "invalid_json", tt.field)
				if e.Fields[tt.field] != "must be valid UTF-8" {
					t.Errorf("fields %v", e.Fields)
				}
			})
		}
	}
	if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		for _, path := range reads {
			if after[path] != before[path] {
				t.Errorf("%s changed:\n%s\nwas\n%s", path, after[path], before[path])
			}
		}
	}

	// A valid surrogate pair and multibyte text are stored as sent.
	var q2 page.AIQuery
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/ai-pages/queries/%d/", q.ID), h, `{"text":"linen \ud83d\ude00 été"}`), http.StatusOK, &q2)
	if q2.Text != "linen 😀 été" {
		t.Fatalf("text %q", q2.Text)
	}
}
