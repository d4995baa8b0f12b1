package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// fakeProductSegmentJobs records compute requests instead of starting workflows.
type fakeProductSegmentJobs struct {
	mu    sync.Mutex
	calls [][2]int64
	err   error
}

func (j *fakeProductSegmentJobs) StartCompute(_ context.Context, tenantID, segmentID int64) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, [2]int64{tenantID, segmentID})
	if j.err != nil {
		return "", j.err
	}
	return fmt.Sprintf("product-segment-compute:%d:%d", tenantID, segmentID), nil
}

func (j *fakeProductSegmentJobs) Calls() [][2]int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.calls)
}

type productSegmentEnv struct {
	f    *fixture
	ts   *httptest.Server
	cat  *catalog.Service
	svc  *prodseg.Service
	jobs *fakeProductSegmentJobs
}

// productSegmentServer is the real API with the catalogue and product segment routes over the
// fixture's database; tenant A has a schema and 12 products (P01..P12, every third blue, the
// others red, price = number), tenant B the same products.
func productSegmentServer(t *testing.T) *productSegmentEnv {
	t.Helper()
	f := newFixture(t)
	cat := catalog.NewService(f.db.Pool, time.Now)
	jobs := &fakeProductSegmentJobs{}
	svc := prodseg.NewService(f.db.Pool, cat, jobs, time.Now)
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Catalog = &CatalogDeps{Service: cat}
		d.ProductSegments = &ProductSegmentsDeps{Service: svc}
	}))
	var products []string
	for i := 1; i <= 12; i++ {
		color := "red"
		if i%3 == 0 {
			color = "blue"
		}
		products = append(products, fmt.Sprintf(`{"sku":"P%02d","name":"Product %d","color":%q,"price":%d,"tags":["t%d"]}`, i, i, color, i, i%2))
	}
	for _, c := range []tenantCreds{f.A, f.B} {
		ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", xAPIKey(c),
			`{"fields":[{"name":"color","type":"string"},{"name":"price","type":"price"},{"name":"tags","type":"array"},{"name":"active","type":"boolean"}]}`), http.StatusOK, nil)
		var sum catalog.BulkSummary
		ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/bulk/", xAPIKey(c), `{"products":[`+strings.Join(products, ",")+`]}`), http.StatusOK, &sum)
		if sum.Created != 12 {
			t.Fatalf("bulk: %+v", sum)
		}
	}
	return &productSegmentEnv{f: f, ts: ts, cat: cat, svc: svc, jobs: jobs}
}

type membersPage struct {
	Results    []catalog.Product `json:"results"`
	NextCursor *int64            `json:"next_cursor"`
}

func TestProductSegmentsAPI(t *testing.T) {
	e := productSegmentServer(t)
	f, ts := e.f, e.ts
	redDef := `{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`

	// Preview: the body is the definition.
	var pv struct {
		MatchedCount int64    `json:"matched_count"`
		SampleSKUs   []string `json:"sample_skus"`
		SQL          string   `json:"sql"`
		Params       []any    `json:"params"`
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", bearer(f.A), redDef), http.StatusOK, &pv)
	if pv.MatchedCount != 8 || strings.Join(pv.SampleSKUs, ",") != "P01,P02,P04,P05,P07,P08,P10,P11" {
		t.Errorf("preview %d %v", pv.MatchedCount, pv.SampleSKUs)
	}
	if pv.SQL != "SELECT p.id FROM products p WHERE p.tenant_id = $1 AND (p.data @> $2::jsonb) ORDER BY p.id" ||
		fmt.Sprint(pv.Params) != fmt.Sprintf("[%d {\"color\":\"red\"}]", f.A.T.ID) {
		t.Errorf("preview sql %s params %v", pv.SQL, pv.Params)
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", xAPIKey(f.A),
		`{"logic":"OR","conditions":[{"field":"price","operator":"gte","value":11},{"field":"sku","operator":"in","value":["p01","P02"]}]}`), http.StatusOK, &pv)
	if pv.MatchedCount != 4 || strings.Join(pv.SampleSKUs, ",") != "P01,P02,P11,P12" {
		t.Errorf("preview OR %d %v", pv.MatchedCount, pv.SampleSKUs)
	}

	// Create, read, list.
	var seg prodseg.Segment
	r := jsonCall(t, ts, http.MethodPost, "/api/product-segments/", hdr("Authorization", "ApiKey "+f.A.SK),
		`{"name":"Reds","description":"red products","definition":`+redDef+`}`)
	ok(t, r, http.StatusCreated, &seg)
	var raw map[string]any
	_ = json.Unmarshal(r.Body, &raw)
	keys := sortedKeys(raw)
	if want := "computed_count,computed_version,created_at,definition,description,id,last_computed_at,last_error,name,status,updated_at,version"; strings.Join(keys, ",") != want {
		t.Errorf("record keys %v, want %s", keys, want)
	}
	if seg.Name != "Reds" || seg.Status != "draft" || seg.Version != 1 || seg.ComputedCount != 0 || seg.LastComputedAt != nil || seg.ComputedVersion != nil ||
		string(seg.Definition) != `{"logic":"AND","conditions":[{"field":"color","operator":"eq","value":"red"}]}` {
		t.Errorf("created %s", r.Body)
	}
	path := fmt.Sprintf("/api/product-segments/%d/", seg.ID)
	var got prodseg.Segment
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &got)
	if got.ID != seg.ID || got.Name != "Reds" {
		t.Errorf("get %+v", got)
	}
	var second prodseg.Segment
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/", bearer(f.A), `{"name":"Cheap","definition":{"conditions":[{"field":"price","operator":"lt","value":3}]}}`), http.StatusCreated, &second)
	var list []prodseg.Segment
	ok(t, send(t, ts, http.MethodGet, "/api/product-segments/", xAPIKey(f.A), nil), http.StatusOK, &list)
	if len(list) != 2 || list[0].ID != seg.ID || list[1].ID != second.ID {
		t.Errorf("list %+v", list)
	}

	// Members before the first compute: empty.
	var page membersPage
	ok(t, send(t, ts, http.MethodGet, path+"members/", bearer(f.A), nil), http.StatusOK, &page)
	if len(page.Results) != 0 || page.NextCursor != nil {
		t.Errorf("members before a compute %+v", page)
	}

	// Compute: 200 queued, the workflow requested, the segment queued.
	var cr struct {
		Status     string `json:"status"`
		SegmentID  int64  `json:"segment_id"`
		WorkflowID string `json:"workflow_id"`
	}
	ok(t, send(t, ts, http.MethodPost, path+"compute/", bearer(f.A), nil), http.StatusOK, &cr)
	if cr.Status != "queued" || cr.SegmentID != seg.ID || cr.WorkflowID != fmt.Sprintf("product-segment-compute:%d:%d", f.A.T.ID, seg.ID) {
		t.Errorf("compute answered %+v", cr)
	}
	if calls := e.jobs.Calls(); !slices.Equal(calls, [][2]int64{{f.A.T.ID, seg.ID}}) {
		t.Errorf("jobs %v", calls)
	}
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &got)
	if got.Status != "queued" {
		t.Errorf("status after compute request %s", got.Status)
	}
	// The workflow's activity.
	if _, err := e.svc.Compute(context.Background(), f.A.T.ID, seg.ID); err != nil {
		t.Fatal(err)
	}
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &got)
	if got.Status != "ready" || got.ComputedCount != 8 || got.LastComputedAt == nil || got.ComputedVersion == nil || *got.ComputedVersion != 1 {
		t.Errorf("after the compute %+v", got)
	}

	// Members, paged by offset.
	pages := []struct {
		query string
		skus  string
		next  any
	}{
		{query: "?limit=3", skus: "P01,P02,P04", next: float64(3)},
		{query: "?limit=3&cursor=3", skus: "P05,P07,P08", next: float64(6)},
		{query: "?limit=3&cursor=6", skus: "P10,P11", next: nil},
		{query: "", skus: "P01,P02,P04,P05,P07,P08,P10,P11", next: nil},
		{query: "?cursor=8", skus: "", next: nil},
		{query: "?limit=200&cursor=0", skus: "P01,P02,P04,P05,P07,P08,P10,P11", next: nil},
	}
	for _, pg := range pages {
		t.Run("members"+pg.query, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, path+"members/"+pg.query, xAPIKey(f.A), nil)
			var body struct {
				Results    []map[string]any `json:"results"`
				NextCursor any              `json:"next_cursor"`
			}
			ok(t, r, http.StatusOK, &body)
			var skus []string
			for _, p := range body.Results {
				skus = append(skus, p["sku"].(string))
				if strings.Join(sortedKeys(p), ",") != "created_at,data,id,name,sku,updated_at" {
					t.Errorf("member keys %v", sortedKeys(p))
				}
			}
			if strings.Join(skus, ",") != pg.skus || body.NextCursor != pg.next {
				t.Errorf("page %v next %v, want %s next %v", skus, body.NextCursor, pg.skus, pg.next)
			}
			if !strings.Contains(string(r.Body), `"next_cursor":`) {
				t.Errorf("next_cursor missing: %s", r.Body)
			}
		})
	}
	r = send(t, ts, http.MethodGet, path+"members/?limit=1", xAPIKey(f.A), nil)
	if got := canonJSON(t, r.Body); !strings.Contains(got, `"data":{"color":"red","price":1,"tags":["t1"]}`) || !strings.Contains(got, `"name":"Product 1"`) {
		t.Errorf("full product %s", got)
	}

	// PATCH: a new definition makes it stale; the members stay until the next compute.
	var patched prodseg.Segment
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"definition":{"conditions":[{"field":"color","operator":"eq","value":"blue"}]}}`), http.StatusOK, &patched)
	if patched.Status != "draft" || patched.Version != 2 || *patched.ComputedVersion != 1 || patched.ComputedCount != 8 || patched.Name != "Reds" {
		t.Errorf("patched %+v", patched)
	}
	ok(t, jsonCall(t, ts, http.MethodPatch, path, bearer(f.A), `{"name":"Blues","description":""}`), http.StatusOK, &patched)
	if patched.Name != "Blues" || patched.Description != "" || patched.Version != 2 {
		t.Errorf("renamed %+v", patched)
	}
	ok(t, send(t, ts, http.MethodGet, path+"members/", xAPIKey(f.A), nil), http.StatusOK, &page)
	if len(page.Results) != 8 {
		t.Errorf("members of the stale segment: %d", len(page.Results))
	}

	// Delete.
	r = send(t, ts, http.MethodDelete, path, bearer(f.A), nil)
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	wantError(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusNotFound, "not_found")
	wantError(t, send(t, ts, http.MethodGet, path+"members/", bearer(f.A), nil), http.StatusNotFound, "not_found")
	wantError(t, send(t, ts, http.MethodDelete, path, bearer(f.A), nil), http.StatusNotFound, "not_found")
}

func TestProductSegmentsAPIErrors(t *testing.T) {
	e := productSegmentServer(t)
	f, ts := e.f, e.ts
	var seg prodseg.Segment
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/", bearer(f.A), `{"name":"Reds","definition":{"conditions":[{"field":"color","operator":"eq","value":"red"}]}}`), http.StatusCreated, &seg)
	path := fmt.Sprintf("/api/product-segments/%d/", seg.ID)
	cond := func(field, op, value string) string {
		return fmt.Sprintf(`{"conditions":[{"field":%q,"operator":%q,"value":%s}]}`, field, op, value)
	}
	tests := []struct {
		name   string
		method string
		target string
		body   string
		status int
		code   string
		fields []string
	}{
		{name: "create without name", method: "POST", target: "/api/product-segments/", body: `{"definition":` + cond("color", "eq", `"red"`) + `}`, status: 400, code: "validation_failed", fields: []string{"name"}},
		{name: "create with a long name", method: "POST", target: "/api/product-segments/", body: `{"name":"` + strings.Repeat("x", 201) + `","definition":` + cond("color", "eq", `"red"`) + `}`, status: 400, code: "validation_failed", fields: []string{"name"}},
		{name: "create without definition", method: "POST", target: "/api/product-segments/", body: `{"name":"x"}`, status: 400, code: "validation_failed", fields: []string{"definition"}},
		{name: "create with an unknown field", method: "POST", target: "/api/product-segments/", body: `{"name":"x","definition":` + cond("colour", "eq", `"red"`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].field"}},
		{name: "create with gt on boolean", method: "POST", target: "/api/product-segments/", body: `{"name":"x","definition":` + cond("active", "gt", `1`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].operator"}},
		{name: "create with contains on price", method: "POST", target: "/api/product-segments/", body: `{"name":"x","definition":` + cond("price", "contains", `"1"`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].operator"}},
		{name: "create with a string for a price", method: "POST", target: "/api/product-segments/", body: `{"name":"x","definition":` + cond("price", "lt", `"10"`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].value"}},
		{name: "create with in and no list", method: "POST", target: "/api/product-segments/", body: `{"name":"x","definition":` + cond("color", "in", `"red"`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].value"}},
		{name: "create with a taken name", method: "POST", target: "/api/product-segments/", body: `{"name":"REDS","definition":` + cond("color", "eq", `"blue"`) + `}`, status: 409, code: "name_exists"},
		{name: "create with an unknown body field", method: "POST", target: "/api/product-segments/", body: `{"name":"x","definition":` + cond("color", "eq", `"red"`) + `,"tenant":1}`, status: 400, code: "invalid_json", fields: []string{"tenant"}},
		{name: "create with malformed JSON", method: "POST", target: "/api/product-segments/", body: `{"name":`, status: 400, code: "invalid_json"},
		{name: "create without a body", method: "POST", target: "/api/product-segments/", body: ``, status: 400, code: "invalid_json"},
		{name: "preview with a nested error", method: "POST", target: "/api/product-segments/preview/",
			body:   `{"conditions":[{"field":"color","operator":"eq","value":"red"},{"logic":"OR","conditions":[{"field":"tags","operator":"in","value":["a",2]}]}]}`,
			status: 400, code: "validation_failed", fields: []string{"conditions[1].conditions[0].value[1]"}},
		{name: "preview without a body", method: "POST", target: "/api/product-segments/preview/", body: ``, status: 400, code: "validation_failed", fields: []string{"definition"}},
		{name: "preview with malformed JSON", method: "POST", target: "/api/product-segments/preview/", body: `{"conditions":[`, status: 400, code: "validation_failed", fields: []string{"definition"}},
		{name: "wrapped preview with a bad limit", method: "POST", target: "/api/product-segments/preview/", body: `{"definition":` + cond("color", "eq", `"red"`) + `,"limit":101}`, status: 400, code: "validation_failed", fields: []string{"limit"}},
		{name: "wrapped preview with a nested error", method: "POST", target: "/api/product-segments/preview/", body: `{"definition":` + cond("size", "eq", `"M"`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].field"}},
		{name: "preview too deep", method: "POST", target: "/api/product-segments/preview/", body: `{"conditions":[{"conditions":[{"conditions":[{"conditions":[{"conditions":[{"conditions":[{"field":"sku","operator":"eq","value":"a"}]}]}]}]}]}]}`, status: 400, code: "validation_failed", fields: []string{"conditions[0].conditions[0].conditions[0].conditions[0].conditions[0]"}},
		{name: "preview too large", method: "POST", target: "/api/product-segments/preview/", body: `{"conditions":[],"x":"` + strings.Repeat("x", 300<<10) + `"}`, status: 413, code: "too_large"},
		{name: "patch with a null definition", method: "PATCH", target: path, body: `{"definition":null}`, status: 400, code: "validation_failed", fields: []string{"definition"}},
		{name: "patch with a bad definition", method: "PATCH", target: path, body: `{"definition":` + cond("released", "eq", `"2024"`) + `}`, status: 400, code: "validation_failed", fields: []string{"definition.conditions[0].field"}},
		{name: "patch with an empty name", method: "PATCH", target: path, body: `{"name":""}`, status: 400, code: "validation_failed", fields: []string{"name"}},
		{name: "members with limit over 200", method: "GET", target: path + "members/?limit=201", status: 400, code: "validation_failed", fields: []string{"limit"}},
		{name: "members with limit 0", method: "GET", target: path + "members/?limit=0", status: 400, code: "validation_failed", fields: []string{"limit"}},
		{name: "members with a negative cursor", method: "GET", target: path + "members/?cursor=-1", status: 400, code: "validation_failed", fields: []string{"cursor"}},
		{name: "members with a text cursor", method: "GET", target: path + "members/?cursor=abc", status: 400, code: "validation_failed", fields: []string{"cursor"}},
		{name: "members with a float cursor", method: "GET", target: path + "members/?cursor=1.5", status: 400, code: "validation_failed", fields: []string{"cursor"}},
		{name: "id not a number", method: "GET", target: "/api/product-segments/abc/", status: 404, code: "not_found"},
		{name: "id zero", method: "POST", target: "/api/product-segments/0/compute/", status: 404, code: "not_found"},
		{name: "missing id", method: "GET", target: "/api/product-segments/999999/members/", status: 404, code: "not_found"},
		{name: "compute of a missing id", method: "POST", target: "/api/product-segments/999999/compute/", status: 404, code: "not_found"},
		{name: "no credentials", method: "GET", target: "/api/product-segments/", status: 401, code: "unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := bearer(f.A)
			if tt.code == "unauthenticated" {
				h = http.Header{}
			}
			wantError(t, jsonCall(t, ts, tt.method, tt.target, h, tt.body), tt.status, tt.code, tt.fields...)
		})
	}
	// A public key is refused; Bearer, X-API-Key and ApiKey sk_ are accepted.
	wantError(t, send(t, ts, http.MethodGet, "/api/product-segments/", hdr("Authorization", "ApiKey "+f.A.PK), nil), http.StatusForbidden, "forbidden")
	for _, h := range []http.Header{bearer(f.A), xAPIKey(f.A), hdr("Authorization", "ApiKey "+f.A.SK)} {
		ok(t, send(t, ts, http.MethodGet, "/api/product-segments/", h, nil), http.StatusOK, nil)
	}
	if calls := e.jobs.Calls(); len(calls) != 0 {
		t.Errorf("refused requests started computes: %v", calls)
	}
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &seg)
	if seg.Name != "Reds" || seg.Version != 1 || seg.Status != "draft" {
		t.Errorf("refused requests changed the segment: %+v", seg)
	}
}

// TestProductSegmentsAPIIsolation: tenant B gets 404 for A's segment on every route, and nothing
// of it changes.
func TestProductSegmentsAPIIsolation(t *testing.T) {
	e := productSegmentServer(t)
	f, ts := e.f, e.ts
	var seg prodseg.Segment
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/", bearer(f.A), `{"name":"Reds","definition":{"conditions":[{"field":"color","operator":"eq","value":"red"}]}}`), http.StatusCreated, &seg)
	if _, err := e.svc.Compute(context.Background(), f.A.T.ID, seg.ID); err != nil {
		t.Fatal(err)
	}
	before := send(t, ts, http.MethodGet, fmt.Sprintf("/api/product-segments/%d/", seg.ID), bearer(f.A), nil)
	path := fmt.Sprintf("/api/product-segments/%d/", seg.ID)
	routes := []struct{ method, target, body string }{
		{http.MethodGet, path, ""},
		{http.MethodPatch, path, `{"name":"mine"}`},
		{http.MethodPatch, path, `{"definition":{"conditions":[{"field":"color","operator":"eq","value":"blue"}]}}`},
		{http.MethodDelete, path, ""},
		{http.MethodPost, path + "compute/", ""},
		{http.MethodGet, path + "members/", ""},
		{http.MethodGet, path + "members/?cursor=0&limit=10", ""},
	}
	for _, h := range []http.Header{bearer(f.B), xAPIKey(f.B)} {
		for _, rt := range routes {
			t.Run(rt.method+" "+rt.target, func(t *testing.T) {
				wantError(t, jsonCall(t, ts, rt.method, rt.target, h, rt.body), http.StatusNotFound, "not_found")
			})
		}
	}
	var list []prodseg.Segment
	ok(t, send(t, ts, http.MethodGet, "/api/product-segments/", bearer(f.B), nil), http.StatusOK, &list)
	if len(list) != 0 {
		t.Errorf("tenant B lists %+v", list)
	}
	// B may use the same name; its preview counts its own products only.
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/", bearer(f.B), `{"name":"reds","definition":{"conditions":[{"field":"price","operator":"lte","value":2}]}}`), http.StatusCreated, nil)
	var pv struct {
		MatchedCount int64    `json:"matched_count"`
		SampleSKUs   []string `json:"sample_skus"`
		Params       []any    `json:"params"`
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", bearer(f.B), `{"conditions":[{"field":"sku","operator":"contains","value":"p"}]}`), http.StatusOK, &pv)
	if pv.MatchedCount != 12 || len(pv.SampleSKUs) != 10 || pv.Params[0] != float64(f.B.T.ID) {
		t.Errorf("tenant B preview %+v", pv)
	}
	if calls := e.jobs.Calls(); len(calls) != 0 {
		t.Errorf("another tenant's compute reached the workflow: %v", calls)
	}
	after := send(t, ts, http.MethodGet, path, bearer(f.A), nil)
	if canonJSON(t, before.Body) != canonJSON(t, after.Body) {
		t.Errorf("tenant B changed A's segment:\n %s\n %s", before.Body, after.Body)
	}
	var page membersPage
	ok(t, send(t, ts, http.MethodGet, path+"members/", bearer(f.A), nil), http.StatusOK, &page)
	if len(page.Results) != 8 {
		t.Errorf("A's members: %d", len(page.Results))
	}
}

// TestProductSegmentsAPIComputeUnavailable: when Temporal cannot be reached the request is a 503
// and the segment shows the failure instead of staying queued.
func TestProductSegmentsAPIComputeUnavailable(t *testing.T) {
	e := productSegmentServer(t)
	f, ts := e.f, e.ts
	e.jobs.err = fmt.Errorf("start product segment compute: %w: connection refused", errs.ErrUnavailable)
	var seg prodseg.Segment
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/", bearer(f.A), `{"name":"Reds","definition":{"conditions":[{"field":"color","operator":"eq","value":"red"}]}}`), http.StatusCreated, &seg)
	path := fmt.Sprintf("/api/product-segments/%d/", seg.ID)
	wantError(t, send(t, ts, http.MethodPost, path+"compute/", bearer(f.A), nil), http.StatusServiceUnavailable, "unavailable")
	ok(t, send(t, ts, http.MethodGet, path, bearer(f.A), nil), http.StatusOK, &seg)
	if seg.Status != "error" || seg.LastError == nil || *seg.LastError != "could not start the compute: the workflow service is unavailable" {
		t.Errorf("after a failed start %+v", seg)
	}
}
