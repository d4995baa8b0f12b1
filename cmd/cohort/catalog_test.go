package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// importJob is GET /api/pim/import/{id}/.
type importJob struct {
	JobID            int64               `json:"job_id"`
	Status           string              `json:"status"`
	Headers          []string            `json:"headers"`
	RowsEstimated    int64               `json:"rows_estimated"`
	SuggestedSchema  []map[string]any    `json:"suggested_schema"`
	SuggestedMapping map[string]*string  `json:"suggested_mapping"`
	SampleRows       []map[string]string `json:"sample_rows"`
	TotalRows        int64               `json:"total_rows"`
	ProcessedRows    int64               `json:"processed_rows"`
	Created          int64               `json:"created"`
	Updated          int64               `json:"updated"`
	SkippedRows      int64               `json:"skipped_rows"`
	FailedRows       int64               `json:"failed_rows"`
	Errors           []struct {
		Row     int    `json:"row"`
		Message string `json:"message"`
	} `json:"errors"`
	Error      string     `json:"error"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// upload posts data as the multipart field "file" (or field) and decodes the answer into out.
func (s *devStack) upload(t *testing.T, authz, field, filename string, data io.Reader, out any) int {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile(field, filename)
		if err == nil {
			_, err = io.Copy(fw, data)
		}
		if err == nil {
			err = mw.Close()
		}
		_ = pw.CloseWithError(err)
	}()
	req, err := http.NewRequest(http.MethodPost, s.base+"/api/pim/import/csv/", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", authz)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("upload: %d %s: %v", resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "catalog", "csvimport", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCatalogImportEndToEnd: upload a Shopify export -> suggested mapping -> confirm -> the
// import workflow runs on the embedded Temporal -> poll to done -> products listed, filtered and
// faceted, and embedded -> a product segment previewed, computed and read by cursor; then the
// import endpoints' refusals and tenant isolation of import jobs and product segments.
func TestCatalogImportEndToEnd(t *testing.T) {
	s := startDev(t)
	key := map[string]string{"X-API-Key": s.secret}
	bearer := "Bearer " + s.token

	var job importJob
	if code := s.upload(t, bearer, "file", "products_export.csv", bytes.NewReader(fixture(t, "shopify_products.csv")), &job); code != http.StatusCreated {
		t.Fatalf("upload: %d %+v", code, job)
	}
	if job.Status != "mapping" || job.JobID == 0 || len(job.Headers) != 33 || len(job.SampleRows) == 0 {
		t.Fatalf("upload answer: %+v", job)
	}
	if m := job.SuggestedMapping["Variant SKU"]; m == nil || *m != "sku" {
		t.Fatalf("Variant SKU -> %v", m)
	}
	if m := job.SuggestedMapping["Title"]; m == nil || *m != "name" {
		t.Fatalf("Title -> %v", m)
	}
	// Mark vendor as a facet, as a merchant would on the mapping screen.
	for _, f := range job.SuggestedSchema {
		if f["name"] == "vendor" {
			f["facet"] = true
		}
	}
	var got importJob
	path := fmt.Sprintf("/api/pim/import/%d/", job.JobID)
	if code := s.do(t, http.MethodGet, path, "", nil, key, &got); code != http.StatusOK || got.Status != "mapping" {
		t.Fatalf("GET job: %d %+v", code, got)
	}
	confirm, _ := json.Marshal(map[string]any{"mapping": job.SuggestedMapping, "schema": job.SuggestedSchema, "default_currency": "EUR"})
	if code := s.do(t, http.MethodPost, path+"confirm/", bearer, confirm, nil, &got); code != http.StatusOK || got.Status != "importing" {
		t.Fatalf("confirm: %d %+v", code, got)
	}
	eventually(t, "the import to finish", func() bool {
		s.do(t, http.MethodGet, path, bearer, nil, nil, &got)
		return got.Status == "done" || got.Status == "failed"
	})
	if got.Status != "done" || got.FailedRows != 0 || got.Created != 15 || got.FinishedAt == nil || got.TotalRows != got.ProcessedRows {
		t.Fatalf("job after import: %+v", got)
	}
	// Every imported product gets its embedding from the worker (local provider), batched.
	eventually(t, "the imported products' embeddings", func() bool {
		return countRows(t, s.dbURL, `SELECT count(*) FROM product_embeddings WHERE tenant_id = $1 AND model = 'local-ngram-v1'`, s.tenantID) == 15 &&
			countRows(t, s.dbURL, `SELECT count(*) FROM product_embedding_queue WHERE tenant_id = $1`, s.tenantID) == 0
	})
	var e apiError
	if code := s.do(t, http.MethodPost, path+"confirm/", bearer, confirm, nil, &e); code != http.StatusBadRequest || e.Error.Code != "job_not_in_mapping" {
		t.Fatalf("confirm a done job: %d %+v", code, e)
	}

	var page struct {
		Results []struct {
			SKU  string         `json:"sku"`
			Name string         `json:"name"`
			Data map[string]any `json:"data"`
		} `json:"results"`
		Total int `json:"total"`
	}
	if code := s.do(t, http.MethodGet, "/api/pim/products/?page_size=200", bearer, nil, nil, &page); code != http.StatusOK || page.Total != 15 {
		t.Fatalf("list: %d total %d", code, page.Total)
	}
	if code := s.do(t, http.MethodGet, "/api/pim/products/?vendor=Alpenpfad&q=trail", "", nil, key, &page); code != http.StatusOK || page.Total != 3 {
		t.Fatalf("filter vendor=Alpenpfad&q=trail: %d total %d %+v", code, page.Total, page.Results)
	}
	for _, p := range page.Results {
		if p.Name != "Trail Runner 2" {
			t.Fatalf("filtered product %+v", p)
		}
	}
	var facets struct {
		Facets map[string][]struct {
			Value string `json:"value"`
			Count int    `json:"count"`
		} `json:"facets"`
	}
	if code := s.do(t, http.MethodGet, "/api/pim/facets/", bearer, nil, nil, &facets); code != http.StatusOK {
		t.Fatalf("facets: %d", code)
	}
	counts := map[string]int{}
	for _, v := range facets.Facets["vendor"] {
		counts[v.Value] = v.Count
	}
	if counts["Alpenpfad"] != 5 || counts["Nordwind Apparel"] != 8 || counts["Nordwind"] != 2 {
		t.Fatalf("vendor facet %v", facets.Facets["vendor"])
	}

	// Product segment over the imported catalogue: preview, compute, members by cursor.
	var nordwind struct {
		Results []struct {
			ID   int64          `json:"id"`
			SKU  string         `json:"sku"`
			Data map[string]any `json:"data"`
		} `json:"results"`
	}
	s.do(t, http.MethodGet, "/api/pim/products/?vendor=Nordwind+Apparel&page_size=200", bearer, nil, nil, &nordwind)
	want := map[string]bool{}
	for _, p := range nordwind.Results {
		if price, _ := p.Data["variant_price"].(float64); price >= 25 {
			want[p.SKU] = true
		}
	}
	if len(want) == 0 || len(want) == len(nordwind.Results) {
		t.Fatalf("fixture: %d of %d Nordwind Apparel products at >= 25", len(want), len(nordwind.Results))
	}
	def := map[string]any{"logic": "AND", "conditions": []any{
		map[string]any{"field": "vendor", "operator": "eq", "value": "Nordwind Apparel"},
		map[string]any{"logic": "OR", "conditions": []any{
			map[string]any{"field": "variant_price", "operator": "gte", "value": 25},
			map[string]any{"field": "name", "operator": "contains", "value": "NO SUCH NAME"},
		}},
	}}
	defJSON, _ := json.Marshal(def)
	var preview struct {
		MatchedCount int      `json:"matched_count"`
		SampleSKUs   []string `json:"sample_skus"`
		SQL          string   `json:"sql"`
	}
	if code := s.do(t, http.MethodPost, "/api/product-segments/preview/", bearer, defJSON, nil, &preview); code != http.StatusOK ||
		preview.MatchedCount != len(want) || len(preview.SampleSKUs) != len(want) || preview.SQL == "" {
		t.Fatalf("preview: %d %+v, want %d matches", code, preview, len(want))
	}
	for _, sku := range preview.SampleSKUs {
		if !want[sku] {
			t.Fatalf("preview sample %s is not a match", sku)
		}
	}
	type productSegment struct {
		ID             int64      `json:"id"`
		Name           string     `json:"name"`
		Status         string     `json:"status"`
		ComputedCount  *int64     `json:"computed_count"`
		LastComputedAt *time.Time `json:"last_computed_at"`
		LastError      *string    `json:"last_error"`
	}
	var seg productSegment
	create, _ := json.Marshal(map[string]any{"name": "Nordwind over 25", "description": "premium tees", "definition": def})
	if code := s.do(t, http.MethodPost, "/api/product-segments/", "", create, key, &seg); code != http.StatusCreated || seg.ID == 0 || seg.LastComputedAt != nil {
		t.Fatalf("create product segment: %d %+v", code, seg)
	}
	segPath := fmt.Sprintf("/api/product-segments/%d/", seg.ID)
	var queued struct {
		Status    string `json:"status"`
		SegmentID int64  `json:"segment_id"`
	}
	if code := s.do(t, http.MethodPost, segPath+"compute/", bearer, nil, nil, &queued); code != http.StatusOK || queued.Status != "queued" || queued.SegmentID != seg.ID {
		t.Fatalf("compute: %d %+v", code, queued)
	}
	eventually(t, "the product segment compute", func() bool {
		s.do(t, http.MethodGet, segPath, bearer, nil, nil, &seg)
		if seg.Status == "error" {
			t.Fatalf("compute failed: %v", *seg.LastError)
		}
		return seg.LastComputedAt != nil
	})
	if seg.ComputedCount == nil || *seg.ComputedCount != int64(len(want)) || seg.Status != "ready" {
		t.Fatalf("computed segment %+v, want %d members", seg, len(want))
	}
	seen := map[string]bool{}
	cursor := "0"
	for pages := 0; ; pages++ {
		var members struct {
			Results []struct {
				ID   int64          `json:"id"`
				SKU  string         `json:"sku"`
				Name string         `json:"name"`
				Data map[string]any `json:"data"`
			} `json:"results"`
			NextCursor *int64 `json:"next_cursor"`
		}
		if code := s.do(t, http.MethodGet, segPath+"members/?limit=2&cursor="+cursor, bearer, nil, nil, &members); code != http.StatusOK || pages > 10 {
			t.Fatalf("members: %d after %d pages", code, pages)
		}
		for _, m := range members.Results {
			if m.Name == "" || m.Data["vendor"] != "Nordwind Apparel" || seen[m.SKU] {
				t.Fatalf("member %+v (repeated: %v)", m, seen[m.SKU])
			}
			seen[m.SKU] = true
		}
		if members.NextCursor == nil {
			break
		}
		cursor = fmt.Sprint(*members.NextCursor)
	}
	if len(seen) != len(want) {
		t.Fatalf("members %v, want %v", seen, want)
	}

	// Refusals: no file, not multipart, not a CSV, an unknown job.
	if code := s.upload(t, bearer, "attachment", "x.csv", bytes.NewReader([]byte("sku\n1\n")), &e); code != http.StatusBadRequest || e.Error.Fields["file"] == "" {
		t.Fatalf("upload without a file field: %d %+v", code, e)
	}
	if code := s.do(t, http.MethodPost, "/api/pim/import/csv/", bearer, []byte(`{"file":"x"}`), nil, &e); code != http.StatusBadRequest || e.Error.Code != "invalid_content_type" {
		t.Fatalf("JSON upload: %d %+v", code, e)
	}
	if code := s.upload(t, bearer, "file", "x.csv", bytes.NewReader([]byte{0xFF, 0xFE, 0x41, 0}), &e); code != http.StatusBadRequest || e.Error.Code != "bad_csv" {
		t.Fatalf("UTF-16 upload: %d %+v", code, e)
	}
	if code := s.do(t, http.MethodGet, "/api/pim/import/999999/", bearer, nil, nil, &e); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d", code)
	}

	// Another tenant sees none of it.
	otherKey, otherToken := s.otherTenant(t, "other-shop")
	var pending importJob
	if code := s.upload(t, bearer, "file", "bom.csv", bytes.NewReader(fixture(t, "bom.csv")), &pending); code != http.StatusCreated {
		t.Fatalf("upload: %d", code)
	}
	ppath := fmt.Sprintf("/api/pim/import/%d/", pending.JobID)
	for _, auth := range []struct{ authz, key string }{{authz: "Bearer " + otherToken}, {key: otherKey}} {
		h := map[string]string{}
		if auth.key != "" {
			h["X-API-Key"] = auth.key
		}
		for _, p := range []string{path, ppath} {
			if code := s.do(t, http.MethodGet, p, auth.authz, nil, h, &e); code != http.StatusNotFound {
				t.Fatalf("other tenant GET %s: %d", p, code)
			}
			if code := s.do(t, http.MethodPost, p+"confirm/", auth.authz, confirm, h, &e); code != http.StatusNotFound {
				t.Fatalf("other tenant confirm %s: %d", p, code)
			}
		}
	}
	if code := s.do(t, http.MethodGet, ppath, bearer, nil, nil, &job); code != http.StatusOK || job.Status != "mapping" {
		t.Fatalf("own pending job after the other tenant's attempts: %d %s", code, job.Status)
	}
	otherBearer := "Bearer " + otherToken
	for _, r := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodGet, segPath, nil},
		{http.MethodPatch, segPath, []byte(`{"name":"mine now"}`)},
		{http.MethodPost, segPath + "compute/", nil},
		{http.MethodGet, segPath + "members/", nil},
		{http.MethodDelete, segPath, nil},
	} {
		if code := s.do(t, r.method, r.path, otherBearer, r.body, nil, &e); code != http.StatusNotFound {
			t.Fatalf("other tenant %s %s: %d", r.method, r.path, code)
		}
	}
	var list []productSegment
	if code := s.do(t, http.MethodGet, "/api/product-segments/", otherBearer, nil, nil, &list); code != http.StatusOK || len(list) != 0 {
		t.Fatalf("other tenant's product segments: %d %v", code, list)
	}
	// The other tenant's schema has no vendor field: its preview of the same definition is a 400.
	e = apiError{}
	if code := s.do(t, http.MethodPost, "/api/product-segments/preview/", otherBearer, defJSON, nil, &e); code != http.StatusBadRequest || e.Error.Fields["conditions[0].field"] == "" {
		t.Fatalf("other tenant's preview: %d %+v", code, e)
	}
	if code := s.do(t, http.MethodGet, segPath, bearer, nil, nil, &seg); code != http.StatusOK || seg.Name != "Nordwind over 25" {
		t.Fatalf("own segment after the other tenant's attempts: %d %+v", code, seg)
	}
	if code := s.do(t, http.MethodGet, "/api/pim/products/", "Bearer "+otherToken, nil, nil, &page); code != http.StatusOK || page.Total != 0 {
		t.Fatalf("other tenant's products: %d total %d", code, page.Total)
	}
}

// TestCatalogImportTooLarge: a file over 200 MB is refused with 413 and leaves no job.
func TestCatalogImportTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MB")
	}
	s := startDev(t)
	var e apiError
	data := io.MultiReader(bytes.NewReader([]byte("sku,name\n")), io.LimitReader(zeroCSV{}, 200<<20))
	if code := s.upload(t, "Bearer "+s.token, "file", "huge.csv", data, &e); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("200 MB + header: %d %+v", code, e)
	}
}

// zeroCSV is an endless run of "a,b\n" rows.
type zeroCSV struct{}

func (zeroCSV) Read(p []byte) (int, error) {
	const row = "a,b\n"
	for i := range p {
		p[i] = row[i%len(row)]
	}
	return len(p), nil
}
