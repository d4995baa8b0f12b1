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
// faceted; then the import endpoints' refusals and tenant isolation.
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
	if code := s.do(t, http.MethodGet, ppath, bearer, nil, nil, &got); code != http.StatusOK || got.Status != "mapping" {
		t.Fatalf("own pending job after the other tenant's attempts: %d %s", code, got.Status)
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
