package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// catalogServer is the real API with the catalogue routes over the fixture's database.
func catalogServer(t *testing.T) (*fixture, *httptest.Server) {
	t.Helper()
	f := newFixture(t)
	svc := catalog.NewService(f.db.Pool, time.Now)
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Catalog = &CatalogDeps{Service: svc} }))
	return f, ts
}

func xAPIKey(c tenantCreds) http.Header { return hdr("X-API-Key", c.SK) }
func bearer(c tenantCreds) http.Header  { return hdr("Authorization", "Bearer "+c.Bearer) }

// jsonCall sends a JSON body (none when body is "").
func jsonCall(t testing.TB, ts *httptest.Server, method, target string, h http.Header, body string) result {
	t.Helper()
	hh := h.Clone()
	var rd *strings.Reader
	if body != "" {
		hh.Set("Content-Type", "application/json")
		rd = strings.NewReader(body)
	}
	if rd == nil {
		return send(t, ts, method, target, hh, nil)
	}
	return send(t, ts, method, target, hh, rd)
}

// ok asserts the status and decodes the body into out (when not nil).
func ok(t testing.TB, r result, status int, out any) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
	}
}

// canonJSON re-encodes JSON with sorted keys.
func canonJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// wantError asserts the one error shape with the status, code and exactly the field keys given.
func wantError(t *testing.T, r result, status int, code string, fields ...string) ErrorDetail {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	e := errorBody(t, r)
	if e.Code != code {
		t.Errorf("code %q, want %q (message %q)", e.Code, code, e.Message)
	}
	got := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(fields)
	if !slices.Equal(got, fields) {
		t.Errorf("fields %v, want keys %v", e.Fields, fields)
	}
	return e
}

func TestCatalogAPISchema(t *testing.T) {
	f, ts := catalogServer(t)
	r := send(t, ts, http.MethodGet, "/api/pim/schema/", xAPIKey(f.A), nil)
	ok(t, r, http.StatusOK, nil)
	if got := canonJSON(t, r.Body); got != `{"default_currency":"USD","default_locale":"en","fields":[]}` {
		t.Errorf("default schema %s", got)
	}
	put := `{"fields":[{"name":"color","type":"string","facet":true},{"name":"price","type":"price","label":"Preis","required":true},
		{"name":"tags","type":"array","searchable":true},{"name":"weight","type":"number","unit":"kg"}],"default_currency":"EUR","default_locale":"de-DE"}`
	want := `{"default_currency":"EUR","default_locale":"de-DE","fields":[` +
		`{"facet":true,"label":"color","name":"color","required":false,"searchable":false,"type":"string"},` +
		`{"facet":false,"label":"Preis","name":"price","required":true,"searchable":false,"type":"price"},` +
		`{"facet":false,"label":"tags","name":"tags","required":false,"searchable":true,"type":"array"},` +
		`{"facet":false,"label":"weight","name":"weight","required":false,"searchable":false,"type":"number","unit":"kg"}]}`
	r = jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", bearer(f.A), put)
	ok(t, r, http.StatusOK, nil)
	if got := canonJSON(t, r.Body); got != want {
		t.Errorf("PUT answered\n %s\nwant\n %s", got, want)
	}
	r = send(t, ts, http.MethodGet, "/api/pim/schema/", bearer(f.A), nil)
	ok(t, r, http.StatusOK, nil)
	if got := canonJSON(t, r.Body); got != want {
		t.Errorf("GET answered\n %s\nwant\n %s", got, want)
	}
	// Tenant B still has the default.
	r = send(t, ts, http.MethodGet, "/api/pim/schema/", bearer(f.B), nil)
	if got := canonJSON(t, r.Body); got != `{"default_currency":"USD","default_locale":"en","fields":[]}` {
		t.Errorf("tenant B's schema %s", got)
	}

	// A product whose color cannot become a number.
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", bearer(f.A), `{"sku":"RED-1","name":"Red","data":{"color":"red","price":1}}`), http.StatusCreated, nil)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		fields []string
	}{
		{name: "bad name and currency", body: `{"fields":[{"name":"Color","type":"string"}],"default_currency":"eur"}`, status: 400, code: "validation_failed", fields: []string{"fields[0].name", "default_currency"}},
		{name: "built-in name", body: `{"fields":[{"name":"sku","type":"string"}]}`, status: 400, code: "validation_failed", fields: []string{"fields[0].name"}},
		{name: "facet on a number", body: `{"fields":[{"name":"weight","type":"number","facet":true}]}`, status: 400, code: "validation_failed", fields: []string{"fields[0].facet"}},
		{name: "unknown type", body: `{"fields":[{"name":"weight","type":"float"}]}`, status: 400, code: "validation_failed", fields: []string{"fields[0].type"}},
		{name: "bad locale", body: `{"default_locale":"en_US"}`, status: 400, code: "validation_failed", fields: []string{"default_locale"}},
		{name: "unknown top-level field", body: `{"fieldz":[]}`, status: 400, code: "invalid_json", fields: []string{"fieldz"}},
		{name: "unknown attribute of a field", body: `{"fields":[{"name":"a","type":"string","kind":"x"}]}`, status: 400, code: "invalid_json", fields: []string{"kind"}},
		{name: "fields not a list", body: `{"fields":"color"}`, status: 400, code: "invalid_json", fields: []string{"fields"}},
		{name: "malformed JSON", body: `{"fields":[`, status: 400, code: "invalid_json"},
		{name: "no body", body: ``, status: 400, code: "invalid_json"},
		{name: "type change conflict", body: `{"fields":[{"name":"color","type":"number"},{"name":"price","type":"price"}]}`, status: 400, code: "type_change_conflict", fields: []string{"fields[0].type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", xAPIKey(f.A), tt.body)
			e := wantError(t, r, tt.status, tt.code, tt.fields...)
			if tt.code == "type_change_conflict" && e.Fields["fields[0].type"] != "1 product(s) hold values that cannot become number: RED-1" {
				t.Errorf("fields %v", e.Fields)
			}
		})
	}
	r = send(t, ts, http.MethodGet, "/api/pim/schema/", bearer(f.A), nil)
	if got := canonJSON(t, r.Body); got != want {
		t.Errorf("refused PUTs changed the schema: %s", got)
	}
}

func TestCatalogAPIProducts(t *testing.T) {
	f, ts := catalogServer(t)
	a, b := xAPIKey(f.A), bearer(f.B)
	schema := `{"fields":[{"name":"color","type":"string"},{"name":"price","type":"price"},{"name":"tags","type":"array"},{"name":"active","type":"boolean"}]}`
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", a, schema), http.StatusOK, nil)
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", b, schema), http.StatusOK, nil)

	// Create.
	var p catalog.Product
	r := jsonCall(t, ts, http.MethodPost, "/api/pim/products/", a, `{"sku":" AB-1 ","name":"Red shirt","data":{"color":" red ","price":10,"tags":["x"],"active":true}}`)
	ok(t, r, http.StatusCreated, &p)
	if p.ID == 0 || p.SKU != "AB-1" || p.Name != "Red shirt" || canonJSONValue(t, p.Data) != `{"active":true,"color":"red","price":10,"tags":["x"]}` ||
		p.CreatedAt.IsZero() || !p.UpdatedAt.Equal(p.CreatedAt) {
		t.Errorf("created %+v", p)
	}
	var raw map[string]any
	_ = json.Unmarshal(r.Body, &raw)
	if keys := sortedKeys(raw); strings.Join(keys, ",") != "created_at,data,id,name,sku,updated_at" {
		t.Errorf("product keys %v", keys)
	}
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", a, `{"sku":"CD-2","name":"50% off","data":{"price":10.0,"tags":["x","y"]}}`), http.StatusCreated, nil)
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", a, `{"sku":"EF-3","name":"Blue shirt","data":{"color":"blue","price":12}}`), http.StatusCreated, nil)
	// Tenant B has a look-alike.
	var pb catalog.Product
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", b, `{"sku":"ab-1","name":"Red shirt","data":{"color":"red","price":10,"tags":["x"]}}`), http.StatusCreated, &pb)

	// Get.
	var got catalog.Product
	ok(t, send(t, ts, http.MethodGet, fmt.Sprintf("/api/pim/products/%d/", p.ID), a, nil), http.StatusOK, &got)
	if got.ID != p.ID || got.SKU != "AB-1" || canonJSONValue(t, got.Data) != canonJSONValue(t, p.Data) {
		t.Errorf("got %+v", got)
	}

	// List.
	lists := []struct {
		query string
		want  string
		total int64
	}{
		{query: "", want: "AB-1,CD-2,EF-3", total: 3},
		{query: "?q=SHIRT", want: "AB-1,EF-3", total: 2},
		{query: "?q=50%25", want: "CD-2", total: 1},
		{query: "?price=10", want: "AB-1,CD-2", total: 2},
		{query: "?tags=y", want: "CD-2", total: 1},
		{query: "?active=true&color=red", want: "AB-1", total: 1},
		{query: "?color=Red", want: "", total: 0},
		{query: "?page_size=2", want: "AB-1,CD-2", total: 3},
		{query: "?page_size=2&page=2", want: "EF-3", total: 3},
		{query: "?page_size=2&page=3", want: "", total: 3},
		{query: "?page_size=200", want: "AB-1,CD-2,EF-3", total: 3},
		{query: "?q=" + url.QueryEscape("shirt") + "&page=1", want: "AB-1,EF-3", total: 2},
	}
	for _, l := range lists {
		t.Run("list "+l.query, func(t *testing.T) {
			var page struct {
				Results    []catalog.Product `json:"results"`
				Page       int               `json:"page"`
				PageSize   int               `json:"page_size"`
				Total      int64             `json:"total"`
				TotalPages int64             `json:"total_pages"`
			}
			r := send(t, ts, http.MethodGet, "/api/pim/products/"+l.query, a, nil)
			ok(t, r, http.StatusOK, &page)
			var skus []string
			for _, p := range page.Results {
				skus = append(skus, p.SKU)
			}
			if strings.Join(skus, ",") != l.want || page.Total != l.total || page.Results == nil {
				t.Errorf("results %v total %d, want %s total %d (body %s)", skus, page.Total, l.want, l.total, r.Body)
			}
			u, _ := url.Parse(l.query)
			wantSize := 50
			if s := u.Query().Get("page_size"); s != "" {
				_, _ = fmt.Sscan(s, &wantSize)
			}
			wantPage := 1
			if s := u.Query().Get("page"); s != "" {
				_, _ = fmt.Sscan(s, &wantPage)
			}
			if page.Page != wantPage || page.PageSize != wantSize || page.TotalPages != (l.total+int64(wantSize)-1)/int64(wantSize) {
				t.Errorf("page %d size %d total_pages %d", page.Page, page.PageSize, page.TotalPages)
			}
		})
	}

	// Patch.
	var patched catalog.Product
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/pim/products/%d/", p.ID), a, `{"name":"Redder shirt","data":{"tags":null,"price":11}}`), http.StatusOK, &patched)
	if patched.Name != "Redder shirt" || patched.SKU != "AB-1" || canonJSONValue(t, patched.Data) != `{"active":true,"color":"red","price":11}` || !patched.UpdatedAt.After(p.UpdatedAt) {
		t.Errorf("patched %+v", patched)
	}
	var same catalog.Product
	ok(t, jsonCall(t, ts, http.MethodPatch, fmt.Sprintf("/api/pim/products/%d/", p.ID), a, `{"data":{"price":11}}`), http.StatusOK, &same)
	if !same.UpdatedAt.Equal(patched.UpdatedAt) {
		t.Errorf("a PATCH changing nothing moved updated_at from %s to %s", patched.UpdatedAt, same.UpdatedAt)
	}

	// Errors.
	pid := fmt.Sprintf("/api/pim/products/%d/", p.ID)
	bid := fmt.Sprintf("/api/pim/products/%d/", pb.ID)
	errorCases := []struct {
		name   string
		method string
		target string
		h      http.Header
		body   string
		status int
		code   string
		fields []string
	}{
		{name: "create duplicate sku other case", method: "POST", target: "/api/pim/products/", h: a, body: `{"sku":"ab-1","name":"x"}`, status: 409, code: "sku_exists"},
		{name: "create wrong value", method: "POST", target: "/api/pim/products/", h: a, body: `{"sku":"N-1","name":"x","data":{"price":"10"}}`, status: 400, code: "validation_failed", fields: []string{"data.price"}},
		{name: "create unknown data field", method: "POST", target: "/api/pim/products/", h: a, body: `{"sku":"N-1","name":"x","data":{"size":"M"}}`, status: 400, code: "validation_failed", fields: []string{"data.size"}},
		{name: "create without sku and name", method: "POST", target: "/api/pim/products/", h: a, body: `{"data":{}}`, status: 400, code: "validation_failed", fields: []string{"sku", "name"}},
		{name: "create unknown top-level field", method: "POST", target: "/api/pim/products/", h: a, body: `{"sku":"N-1","name":"x","color":"red"}`, status: 400, code: "invalid_json", fields: []string{"color"}},
		{name: "create sku a number", method: "POST", target: "/api/pim/products/", h: a, body: `{"sku":1,"name":"x"}`, status: 400, code: "invalid_json", fields: []string{"sku"}},
		{name: "create no body", method: "POST", target: "/api/pim/products/", h: a, status: 400, code: "invalid_json"},
		{name: "get other tenant's", method: "GET", target: bid, h: a, status: 404, code: "not_found"},
		{name: "patch other tenant's", method: "PATCH", target: bid, h: a, body: `{"name":"stolen"}`, status: 404, code: "not_found"},
		{name: "delete other tenant's", method: "DELETE", target: bid, h: a, status: 404, code: "not_found"},
		{name: "get unknown id", method: "GET", target: "/api/pim/products/999999/", h: a, status: 404, code: "not_found"},
		{name: "get non-numeric id", method: "GET", target: "/api/pim/products/abc/", h: a, status: 404, code: "not_found"},
		{name: "patch non-numeric id", method: "PATCH", target: "/api/pim/products/abc/", h: a, body: `{}`, status: 404, code: "not_found"},
		{name: "delete non-numeric id", method: "DELETE", target: "/api/pim/products/abc/", h: a, status: 404, code: "not_found"},
		{name: "get id 0", method: "GET", target: "/api/pim/products/0/", h: a, status: 404, code: "not_found"},
		{name: "get negative id", method: "GET", target: "/api/pim/products/-1/", h: a, status: 404, code: "not_found"},
		{name: "patch sku", method: "PATCH", target: pid, h: a, body: `{"sku":"NEW"}`, status: 400, code: "invalid_json", fields: []string{"sku"}},
		{name: "patch wrong value", method: "PATCH", target: pid, h: a, body: `{"data":{"active":"yes"}}`, status: 400, code: "validation_failed", fields: []string{"data.active"}},
		{name: "patch blank name", method: "PATCH", target: pid, h: a, body: `{"name":" "}`, status: 400, code: "validation_failed", fields: []string{"name"}},
		{name: "patch no body", method: "PATCH", target: pid, h: a, status: 400, code: "invalid_json"},
		{name: "list unknown filter", method: "GET", target: "/api/pim/products/?colour=red", h: a, status: 400, code: "validation_failed", fields: []string{"colour"}},
		{name: "list bad typed value", method: "GET", target: "/api/pim/products/?price=abc", h: a, status: 400, code: "validation_failed", fields: []string{"price"}},
		{name: "list page 0", method: "GET", target: "/api/pim/products/?page=0", h: a, status: 400, code: "validation_failed", fields: []string{"page"}},
		{name: "list page not a number", method: "GET", target: "/api/pim/products/?page=two", h: a, status: 400, code: "validation_failed", fields: []string{"page"}},
		{name: "list page size 201", method: "GET", target: "/api/pim/products/?page_size=201", h: a, status: 400, code: "validation_failed", fields: []string{"page_size"}},
		{name: "list page size 0", method: "GET", target: "/api/pim/products/?page_size=0", h: a, status: 400, code: "validation_failed", fields: []string{"page_size"}},
		{name: "list repeated filter", method: "GET", target: "/api/pim/products/?color=red&color=blue", h: a, status: 400, code: "validation_failed", fields: []string{"color"}},
		{name: "list repeated q", method: "GET", target: "/api/pim/products/?q=a&q=b", h: a, status: 400, code: "validation_failed", fields: []string{"q"}},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, jsonCall(t, ts, tt.method, tt.target, tt.h, tt.body), tt.status, tt.code, tt.fields...)
		})
	}
	// Tenant B's product survived A's attempts.
	var still catalog.Product
	ok(t, send(t, ts, http.MethodGet, bid, b, nil), http.StatusOK, &still)
	if still.Name != "Red shirt" {
		t.Errorf("B's product %+v", still)
	}
	// Tenant B's list holds only its own product.
	r = send(t, ts, http.MethodGet, "/api/pim/products/?q=shirt", b, nil)
	var bpage catalog.Page
	ok(t, r, http.StatusOK, &bpage)
	if len(bpage.Results) != 1 || bpage.Results[0].ID != pb.ID || bpage.Total != 1 {
		t.Errorf("tenant B's list %s", r.Body)
	}

	// Delete.
	r = send(t, ts, http.MethodDelete, pid, a, nil)
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Errorf("delete: %d %q", r.Status, r.Body)
	}
	wantError(t, send(t, ts, http.MethodGet, pid, a, nil), 404, "not_found")
	wantError(t, send(t, ts, http.MethodDelete, pid, a, nil), 404, "not_found")
}

func TestCatalogAPIBulkAndFacets(t *testing.T) {
	f, ts := catalogServer(t)
	a := xAPIKey(f.A)
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", a, `{"fields":[{"name":"color","type":"string"},{"name":"tags","type":"array"},{"name":"price","type":"price"}]}`), http.StatusOK, nil)
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", a, `{"sku":"EX-1","name":"Existing","data":{"color":"red"}}`), http.StatusCreated, nil)
	body := `{"products":[
		{"sku":"N-1","name":"New","color":"red","tags":["a","b"],"price":1},
		{"sku":"ex-1","color":"blue"},
		{"sku":"N-2","name":"Nested","data":{"color":"red","tags":["a"]}},
		{"sku":"N-3","price":"free"},
		{"sku":"n-1","name":"Again"}
	]}`
	r := jsonCall(t, ts, http.MethodPost, "/api/pim/products/bulk/", a, body)
	ok(t, r, http.StatusOK, nil)
	var sum struct {
		Created, Updated, Unchanged, Failed int
		Results                             []map[string]any
	}
	_ = json.Unmarshal(r.Body, &sum)
	if sum.Created != 2 || sum.Updated != 1 || sum.Unchanged != 0 || sum.Failed != 2 || len(sum.Results) != 5 {
		t.Fatalf("summary %s", r.Body)
	}
	wantStatus := []string{"created", "updated", "created", "failed", "failed"}
	for i, res := range sum.Results {
		if res["status"] != wantStatus[i] || res["index"] != float64(i) {
			t.Errorf("result %d %v, want %s", i, res, wantStatus[i])
		}
		_, hasID := res["id"]
		_, hasFields := res["fields"]
		_, hasError := res["error"]
		if failed := wantStatus[i] == "failed"; hasID == failed || hasFields != failed || hasError != failed {
			t.Errorf("result %d %v: id only when stored, fields and error only when failed", i, res)
		}
	}
	if fs, _ := sum.Results[3]["fields"].(map[string]any); fs["price"] != "must be a number (price field)" {
		t.Errorf("result 3 fields %v, want price", sum.Results[3]["fields"])
	}
	if fs, _ := sum.Results[4]["fields"].(map[string]any); fs["sku"] != "repeats the sku of products[0] in this call" {
		t.Errorf("result 4 fields %v, want sku", sum.Results[4]["fields"])
	}

	// Facets.
	r = send(t, ts, http.MethodGet, "/api/pim/facets/", a, nil)
	ok(t, r, http.StatusOK, nil)
	if got := canonJSON(t, r.Body); got != `{"facets":{"color":[{"count":2,"value":"red"},{"count":1,"value":"blue"}],"tags":[{"count":2,"value":"a"},{"count":1,"value":"b"}]}}` {
		t.Errorf("facets %s", got)
	}
	r = send(t, ts, http.MethodGet, "/api/pim/facets/", bearer(f.B), nil)
	ok(t, r, http.StatusOK, nil)
	if got := canonJSON(t, r.Body); got != `{"facets":{}}` {
		t.Errorf("tenant B's facets %s", got)
	}

	// Bulk errors.
	many := make([]string, catalog.MaxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"sku":"M-%d","name":"m"}`, i)
	}
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		fields []string
	}{
		{name: "1001 products", body: `{"products":[` + strings.Join(many, ",") + `]}`, status: 400, code: "batch_too_large"},
		{name: "no products key", body: `{}`, status: 400, code: "validation_failed", fields: []string{"products"}},
		{name: "products null", body: `{"products":null}`, status: 400, code: "validation_failed", fields: []string{"products"}},
		{name: "products not a list", body: `{"products":{"sku":"x"}}`, status: 400, code: "invalid_json", fields: []string{"products"}},
		{name: "a product not an object", body: `{"products":["x"]}`, status: 400, code: "invalid_json", fields: []string{"products"}},
		{name: "unknown top-level key", body: `{"products":[],"mode":"upsert"}`, status: 400, code: "invalid_json", fields: []string{"mode"}},
		{name: "no body", body: ``, status: 400, code: "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := wantError(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/bulk/", a, tt.body), tt.status, tt.code, tt.fields...)
			if tt.code == "batch_too_large" && !strings.Contains(e.Message, "1001") {
				t.Errorf("message %q", e.Message)
			}
		})
	}
	var n int64
	if err := f.db.Pool.QueryRow(t.Context(), "SELECT count(*) FROM products WHERE tenant_id = $1 AND sku LIKE 'M-%'", f.A.T.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d products of refused bulks stored (%v)", n, err)
	}
	// An empty list is fine.
	r = jsonCall(t, ts, http.MethodPost, "/api/pim/products/bulk/", a, `{"products":[]}`)
	ok(t, r, http.StatusOK, nil)
	if got := canonJSON(t, r.Body); got != `{"created":0,"failed":0,"results":[],"unchanged":0,"updated":0}` {
		t.Errorf("empty bulk %s", got)
	}
}

// TestCatalogAPIBodyLimit: a create body over 512 KB is 413 too_large.
func TestCatalogAPIBodyLimit(t *testing.T) {
	f, ts := catalogServer(t)
	big := `{"sku":"BIG","name":"` + strings.Repeat("n", 600<<10) + `"}`
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/api/pim/products/", bytes.NewReader([]byte(big)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", f.A.SK)
	req.Header.Set("Content-Type", "application/json")
	wantError(t, sendReq(t, ts, req), http.StatusRequestEntityTooLarge, "too_large")
	// Under the limit the body is read and validated (the name is too long).
	mid := `{"sku":"MID","name":"` + strings.Repeat("n", 100<<10) + `"}`
	wantError(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", xAPIKey(f.A), mid), 400, "validation_failed", "name")
}

// TestCatalogAPIAuth: every catalogue endpoint takes a Bearer token or a secret key (X-API-Key or
// Authorization: ApiKey); a session token or a public key is 403, nothing is 401.
func TestCatalogAPIAuth(t *testing.T) {
	f, ts := catalogServer(t)
	admin := bearer(f.A)
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", admin, `{"fields":[{"name":"color","type":"string"}]}`), http.StatusOK, nil)
	creds := []struct {
		name   string
		h      http.Header
		status int // 0: accepted
		code   string
	}{
		{name: "X-API-Key sk", h: xAPIKey(f.A)},
		{name: "Authorization ApiKey sk", h: hdr("Authorization", "ApiKey "+f.A.SK)},
		{name: "Bearer", h: bearer(f.A)},
		{name: "session token", h: hdr("Authorization", "Bearer "+f.A.Session), status: 403, code: "forbidden"},
		{name: "public key", h: hdr("Authorization", "ApiKey "+f.A.PK), status: 403, code: "forbidden"},
		{name: "pk in X-API-Key", h: hdr("X-API-Key", f.A.PK), status: 403, code: "forbidden"},
		{name: "none", h: http.Header{}, status: 401, code: "unauthenticated"},
		{name: "garbage X-API-Key", h: hdr("X-API-Key", "sk_nope"), status: 401, code: "unauthenticated"},
	}
	for i, c := range creds {
		t.Run(c.name, func(t *testing.T) {
			// A product of this credential's own to read, change and delete.
			var p catalog.Product
			ok(t, jsonCall(t, ts, http.MethodPost, "/api/pim/products/", admin, fmt.Sprintf(`{"sku":"OWN-%d","name":"own"}`, i)), http.StatusCreated, &p)
			pid := fmt.Sprintf("/api/pim/products/%d/", p.ID)
			calls := []struct {
				method, target, body string
				status               int
			}{
				{"GET", "/api/pim/schema/", "", 200},
				{"PUT", "/api/pim/schema/", `{"fields":[{"name":"color","type":"string"}]}`, 200},
				{"GET", "/api/pim/products/?color=red", "", 200},
				{"POST", "/api/pim/products/", fmt.Sprintf(`{"sku":"C-%d","name":"c","data":{"color":"red"}}`, i), 201},
				{"POST", "/api/pim/products/bulk/", fmt.Sprintf(`{"products":[{"sku":"B-%d","name":"b"}]}`, i), 200},
				{"GET", pid, "", 200},
				{"PATCH", pid, `{"name":"changed"}`, 200},
				{"GET", "/api/pim/facets/", "", 200},
				{"DELETE", pid, "", 204},
			}
			for _, call := range calls {
				r := jsonCall(t, ts, call.method, call.target, c.h, call.body)
				if c.status == 0 {
					if r.Status != call.status {
						t.Errorf("%s %s: %d %s, want %d", call.method, call.target, r.Status, r.Body, call.status)
					}
					continue
				}
				if r.Status != c.status {
					t.Errorf("%s %s: %d %s, want %d", call.method, call.target, r.Status, r.Body, c.status)
					continue
				}
				if e := errorBody(t, r); e.Code != c.code {
					t.Errorf("%s %s: code %q, want %q", call.method, call.target, e.Code, c.code)
				}
			}
			if c.status != 0 {
				// Nothing was written.
				var n int64
				if err := f.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM products WHERE tenant_id = $1 AND (sku = $2 OR sku = $3 OR (id = $4 AND name <> 'own'))`,
					f.A.T.ID, fmt.Sprintf("C-%d", i), fmt.Sprintf("B-%d", i), p.ID).Scan(&n); err != nil || n != 0 {
					t.Errorf("a refused credential wrote %d products (%v)", n, err)
				}
				ok(t, send(t, ts, http.MethodGet, pid, admin, nil), http.StatusOK, nil)
			}
		})
	}
}

// TestCatalogAPIWithoutDeps: without CatalogDeps the routes do not exist.
func TestCatalogAPIWithoutDeps(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t))
	wantError(t, send(t, ts, http.MethodGet, "/api/pim/schema/", bearer(f.A), nil), http.StatusNotFound, "not_found")
}

func canonJSONValue(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return canonJSON(t, b)
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
