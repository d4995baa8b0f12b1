package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagetemplate"
)

const templateBody = `{"name":"Sale landing","description":"Hero and grid","tags":["Sale","summer"],
	"blocks":[{"type":"hero","props":{"headline":"Summer <b>sale</b>","cta_url":"/sale"}},{"type":"product_grid","props":{"product_skus":["A-1","B-2"]}}]}`

func TestTemplatesAPI(t *testing.T) {
	f, ts := designServer(t, false)
	var tpl pagetemplate.Template
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/templates/", bearer(f.A), templateBody), http.StatusCreated, &tpl)
	if tpl.ID == 0 || tpl.Name != "Sale landing" || len(tpl.Blocks) != 2 || tpl.Blocks[0].Props["headline"] != "Summer <b>sale</b>" ||
		strings.Join(tpl.Tags, ",") != "sale,summer" || tpl.CreatedAt.IsZero() {
		t.Fatalf("created %+v", tpl)
	}
	var plain pagetemplate.Template
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/templates/", apiKey(f.A), `{"name":"Plain","blocks":[]}`), http.StatusCreated, &plain)
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/templates/", bearer(f.B), `{"name":"B","blocks":[],"tags":["sale"]}`), http.StatusCreated, nil)

	var list []pagetemplate.Template
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/templates/", bearer(f.A), ""), http.StatusOK, &list)
	if len(list) != 2 {
		t.Fatalf("list %+v", list)
	}
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/templates/?tag=Sale", bearer(f.A), ""), http.StatusOK, &list)
	if len(list) != 1 || list[0].ID != tpl.ID {
		t.Fatalf("list by tag %+v", list)
	}
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/templates/?tag=winter", bearer(f.A), ""), http.StatusOK, &list)
	if len(list) != 0 {
		t.Fatalf("list by unknown tag %+v", list)
	}

	path := fmt.Sprintf("/api/ai-pages/templates/%d/", tpl.ID)
	var got pagetemplate.Template
	ok(t, jsonCall(t, ts, http.MethodGet, path, bearer(f.A), ""), http.StatusOK, &got)
	if got.ID != tpl.ID || len(got.Blocks) != 2 {
		t.Fatalf("get %+v", got)
	}
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"description":"Updated","tags":[]}`), http.StatusOK, &got)
	if got.Name != tpl.Name || got.Description != "Updated" || len(got.Tags) != 0 || len(got.Blocks) != 2 {
		t.Fatalf("patched %+v", got)
	}

	// Another tenant's template is a 404 on every operation; bad ids are 404 too.
	for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
		body := ""
		if m == http.MethodPatch {
			body = `{"name":"x"}`
		}
		r := jsonCall(t, ts, m, path, bearer(f.B), body)
		if r.Status != http.StatusNotFound {
			t.Errorf("%s by B: %d %s", m, r.Status, r.Body)
		}
		errorBody(t, r)
	}
	for _, p := range []string{"/api/ai-pages/templates/0/", "/api/ai-pages/templates/abc/", "/api/ai-pages/templates/99999999999999999999/"} {
		if r := jsonCall(t, ts, http.MethodGet, p, bearer(f.A), ""); r.Status != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, r.Status)
		}
	}

	for _, tc := range []struct {
		name, method, path, body string
		field                    string
	}{
		{"no name", http.MethodPost, "/api/ai-pages/templates/", `{"blocks":[]}`, "name"},
		{"no blocks", http.MethodPost, "/api/ai-pages/templates/", `{"name":"n"}`, "blocks"},
		{"invalid block", http.MethodPost, "/api/ai-pages/templates/", `{"name":"n","blocks":[{"type":"hero","props":{"headline":""}}]}`, "blocks[0].props.headline"},
		{"unknown type", http.MethodPost, "/api/ai-pages/templates/", `{"name":"n","blocks":[{"type":"video"}]}`, "blocks[0].type"},
		{"tags not strings", http.MethodPost, "/api/ai-pages/templates/", `{"name":"n","blocks":[],"tags":[1]}`, ""},
		{"unknown field", http.MethodPost, "/api/ai-pages/templates/", `{"name":"n","blocks":[],"owner":1}`, ""},
		{"patch blank name", http.MethodPatch, path, `{"name":" "}`, "name"},
		{"patch null blocks", http.MethodPatch, path, `{"blocks":null}`, "blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonCall(t, ts, tc.method, tc.path, bearer(f.A), tc.body)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if e := errorBody(t, r); tc.field != "" && e.Fields[tc.field] == "" {
				t.Errorf("no field error on %s: %+v", tc.field, e)
			}
		})
	}

	if r := jsonCall(t, ts, http.MethodDelete, path, bearer(f.A), ""); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := jsonCall(t, ts, http.MethodGet, path, bearer(f.A), ""); r.Status != http.StatusNotFound {
		t.Fatalf("get after delete: %d", r.Status)
	}
}

func TestPageFromTemplateAPI(t *testing.T) {
	f := newFixture(t)
	gen := &fakePageGenerator{}
	svc := page.NewService(f.db.Pool, gen, time.Now, nil, page.Options{})
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: svc}
		d.Templates = &TemplatesDeps{Service: pagetemplate.NewService(f.db.Pool, time.Now)}
	}))
	var tpl, tplB pagetemplate.Template
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/templates/", bearer(f.A), templateBody), http.StatusCreated, &tpl)
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/templates/", bearer(f.B), templateBody), http.StatusCreated, &tplB)
	var q page.AIQuery
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/queries/", bearer(f.A), `{"text":"summer sale"}`), http.StatusCreated, &q)

	var p page.Page
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), fmt.Sprintf(`{"query":%d,"template_id":%d}`, q.ID, tpl.ID)), http.StatusCreated, &p)
	if len(p.Blocks) != 2 || p.Blocks[0].Type != "hero" || p.Blocks[0].Props["headline"] != "Summer <b>sale</b>" || p.Blocks[1].Type != "product_grid" ||
		p.Status != page.StatusReady || p.Version != 1 || p.Slug != "summer-sale" {
		t.Fatalf("page from template %+v", p)
	}
	if p.Blocks[0].ID == tpl.Blocks[0].ID {
		t.Errorf("page reuses the template's block ids")
	}
	if pages, _ := gen.calls(); len(pages) != 0 {
		t.Errorf("a page from a template started a generation: %v", pages)
	}
	var full page.Page
	ok(t, jsonCall(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), bearer(f.A), ""), http.StatusOK, &full)
	if len(full.Blocks) != 2 {
		t.Fatalf("stored page %+v", full)
	}

	// Without an AIQuery: the template's name titles the page and makes its slug.
	var bare page.Page
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), fmt.Sprintf(`{"template_id":%d}`, tpl.ID)), http.StatusCreated, &bare)
	if len(bare.Blocks) != 2 || bare.Status != page.StatusReady || bare.Title != tpl.Name || bare.Slug == "" || bare.Slug == p.Slug {
		t.Fatalf("page from a template without a query %+v", bare)
	}
	ok(t, jsonCall(t, ts, http.MethodDelete, fmt.Sprintf("/api/ai-pages/pages/%d/", bare.ID), bearer(f.A), ""), http.StatusNoContent, nil)

	// Deleting the template keeps the page's blocks.
	ok(t, jsonCall(t, ts, http.MethodDelete, fmt.Sprintf("/api/ai-pages/templates/%d/", tpl.ID), bearer(f.A), ""), http.StatusNoContent, nil)
	ok(t, jsonCall(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), bearer(f.A), ""), http.StatusOK, &full)
	if len(full.Blocks) != 2 {
		t.Fatalf("page lost its blocks with the template: %+v", full)
	}

	for _, tc := range []struct{ name, body string }{
		{"another tenant's template", fmt.Sprintf(`{"query":%d,"template_id":%d,"slug":"x1"}`, q.ID, tplB.ID)},
		{"another tenant's template, no query", fmt.Sprintf(`{"template_id":%d,"slug":"x5"}`, tplB.ID)},
		{"neither query nor template", `{"slug":"x6"}`},
		{"deleted template", fmt.Sprintf(`{"query":%d,"template_id":%d,"slug":"x2"}`, q.ID, tpl.ID)},
		{"zero", fmt.Sprintf(`{"query":%d,"template_id":0,"slug":"x3"}`, q.ID)},
		{"not a number", fmt.Sprintf(`{"query":%d,"template_id":"1","slug":"x4"}`, q.ID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), tc.body)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			errorBody(t, r)
		})
	}
	var pages []page.PageSummary
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/pages/", bearer(f.A), ""), http.StatusOK, &pages)
	if len(pages) != 1 {
		t.Fatalf("refused creates left pages: %+v", pages)
	}
}
