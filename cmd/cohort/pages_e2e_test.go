package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/block"
)

// TestAIPagesEndToEnd walks the AI landing pages through the dev stack as a user would, over HTTP:
// products -> embeddings -> semantic search (scores descending, filters, segment restriction) ->
// AIQuery -> page generated ready with blocks valid against the registry -> published -> a public
// read counts the view and records GPTBot -> regenerate makes a new version -> restore the old
// one -> the builder agent adds a block over SSE -> bulk generation with one failing query (its
// product segment deleted) ends partial_failure with that page's error.
func TestAIPagesEndToEnd(t *testing.T) {
	s := startDev(t)
	key := map[string]string{"X-API-Key": s.secret}
	auth := "ApiKey " + s.secret

	if code := s.do(t, http.MethodPut, "/api/pim/schema/", "", []byte(`{"fields":[
		{"name":"category","type":"string","searchable":true},{"name":"material","type":"string","searchable":true},
		{"name":"season","type":"string","searchable":true},{"name":"price","type":"price"},{"name":"tags","type":"array"}]}`), key, nil); code != http.StatusOK {
		t.Fatalf("schema: %d", code)
	}
	type item struct{ category, material, season string }
	kinds := []item{{"dress", "linen", "summer"}, {"coat", "wool", "winter"}, {"boots", "leather", "autumn"}, {"t-shirt", "cotton", "summer"}}
	colours := []string{"white", "navy", "sand", "olive", "black"}
	var products []string
	for _, k := range kinds {
		for i, c := range colours {
			name := fmt.Sprintf("%s %s %s %s", strings.ToUpper(c[:1])+c[1:], k.material, k.season, k.category)
			products = append(products, fmt.Sprintf(`{"sku":"%s-%s-%d","name":%q,"category":%q,"material":%q,"season":%q,"price":%d,"tags":[%q,%q]}`,
				k.material, k.category, i, name, k.category, k.material, k.season, 40+10*i, k.season, c))
		}
	}
	var sum struct{ Created int }
	if code := s.do(t, http.MethodPost, "/api/pim/products/bulk/", "", []byte(`{"products":[`+strings.Join(products, ",")+`]}`), key, &sum); code != http.StatusOK || sum.Created != len(products) {
		t.Fatalf("bulk: %d %+v", code, sum)
	}

	type searchResult struct {
		Products []struct {
			SKU            string          `json:"sku"`
			Name           string          `json:"name"`
			Data           json.RawMessage `json:"data"`
			RelevanceScore float64         `json:"relevance_score"`
		} `json:"products"`
		Filters  map[string][]string `json:"filters"`
		Metadata struct {
			MatchCount        int   `json:"match_count"`
			PendingEmbeddings int64 `json:"pending_embeddings"`
		} `json:"metadata"`
	}
	search := func(q string, extra string) searchResult {
		t.Helper()
		var r searchResult
		if code := s.do(t, http.MethodGet, "/api/ai-pages/query?q="+url.QueryEscape(q)+extra, auth, nil, nil, &r); code != http.StatusOK {
			t.Fatalf("search %q: %d", q, code)
		}
		return r
	}
	// Products are embedded by the worker after the save.
	var r searchResult
	eventually(t, "every product embedded", func() bool {
		r = search("linen summer dress", "&limit=10")
		return r.Metadata.PendingEmbeddings == 0 && r.Metadata.MatchCount == 10
	})
	for i, p := range r.Products {
		if i > 0 && p.RelevanceScore > r.Products[i-1].RelevanceScore {
			t.Fatalf("scores not descending at %d: %+v", i, r.Products)
		}
	}
	for _, p := range r.Products[:5] {
		if !strings.HasPrefix(p.SKU, "linen-dress-") {
			t.Fatalf("the five linen dresses do not lead: %+v", r.Products)
		}
	}
	if len(r.Filters["material"]) == 0 || len(r.Filters["season"]) == 0 {
		t.Fatalf("filters: %+v", r.Filters)
	}

	// A product segment restricts the search (and later an AIQuery).
	segment := func(name, material string) int64 {
		t.Helper()
		var seg struct {
			ID int64 `json:"id"`
		}
		body := fmt.Sprintf(`{"name":%q,"definition":{"conditions":[{"field":"material","operator":"eq","value":%q}]}}`, name, material)
		if code := s.do(t, http.MethodPost, "/api/product-segments/", auth, []byte(body), nil, &seg); code != http.StatusCreated {
			t.Fatalf("create segment %s: %d", name, code)
		}
		path := fmt.Sprintf("/api/product-segments/%d/", seg.ID)
		if code := s.do(t, http.MethodPost, path+"compute/", auth, nil, nil, nil); code/100 != 2 {
			t.Fatalf("compute %s: %d", name, code)
		}
		eventually(t, name+" computed", func() bool {
			var got struct {
				Status        string `json:"status"`
				ComputedCount int    `json:"computed_count"`
			}
			s.do(t, http.MethodGet, path, auth, nil, nil, &got)
			return got.Status == "ready" && got.ComputedCount == len(colours)
		})
		return seg.ID
	}
	wool := segment("Wool", "wool")
	r = search("linen summer dress", fmt.Sprintf("&segment_id=%d", wool))
	if len(r.Products) != len(colours) {
		t.Fatalf("segment restriction: %+v", r.Products)
	}
	for _, p := range r.Products {
		if !strings.HasPrefix(p.SKU, "wool-coat-") {
			t.Fatalf("a product outside the segment: %+v", p)
		}
	}

	// An AIQuery and its page, generated by the worker.
	var q struct {
		ID int64 `json:"id"`
	}
	if code := s.do(t, http.MethodPost, "/api/ai-pages/queries/", auth, []byte(`{"text":"linen summer dresses"}`), nil, &q); code != http.StatusCreated {
		t.Fatalf("create query: %d", code)
	}
	type pageBody struct {
		ID            int64            `json:"id"`
		Slug          string           `json:"slug"`
		Status        string           `json:"status"`
		LastError     *string          `json:"last_error"`
		Published     bool             `json:"published"`
		IntroCopy     string           `json:"intro_copy"`
		ProductSKUs   []string         `json:"product_skus"`
		Blocks        []block.Block    `json:"blocks"`
		ViewCount     int64            `json:"view_count"`
		LastAICrawlAt *time.Time       `json:"last_ai_crawl_at"`
		AICrawls      map[string]int64 `json:"ai_crawls"`
		Version       int              `json:"version"`
	}
	var pg pageBody
	if code := s.do(t, http.MethodPost, "/api/ai-pages/pages/", auth, []byte(fmt.Sprintf(`{"query":%d}`, q.ID)), nil, &pg); code != http.StatusCreated {
		t.Fatalf("create page: %d", code)
	}
	if pg.Slug != "linen-summer-dresses" || pg.Published {
		t.Fatalf("created page: %+v", pg)
	}
	pagePath := fmt.Sprintf("/api/ai-pages/pages/%d/", pg.ID)
	waitVersion := func(n int) pageBody {
		t.Helper()
		var got pageBody
		eventually(t, fmt.Sprintf("page version %d ready", n), func() bool {
			got = pageBody{}
			s.do(t, http.MethodGet, pagePath, auth, nil, nil, &got)
			if got.Status == "error" {
				t.Fatalf("generation failed: %v", *got.LastError)
			}
			return got.Status == "ready" && got.Version >= n
		})
		return got
	}
	v1 := waitVersion(1)
	if _, err := block.Validate("blocks", v1.Blocks); err != nil || len(v1.Blocks) < 2 {
		t.Fatalf("generated blocks invalid (%v): %+v", err, v1.Blocks)
	}
	if v1.IntroCopy == "" || len(v1.ProductSKUs) == 0 || !strings.HasPrefix(v1.ProductSKUs[0], "linen-dress-") {
		t.Fatalf("generated page: %+v", v1)
	}

	// Published, then read in public by an AI crawler.
	if code := s.do(t, http.MethodPatch, pagePath, auth, []byte(`{"published":true}`), nil, nil); code != http.StatusOK {
		t.Fatalf("publish: %d", code)
	}
	publicPath := "/api/ai-pages/public/pages/" + s.slug + "/" + pg.Slug + "/"
	var pub struct {
		IntroCopy   string   `json:"intro_copy"`
		ProductSKUs []string `json:"product_skus"`
		Blocks      []block.Block
		Products    []struct {
			SKU  string `json:"sku"`
			Name string `json:"name"`
		} `json:"products"`
	}
	gptbot := map[string]string{"User-Agent": "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot"}
	if code := s.do(t, http.MethodGet, publicPath, "", nil, gptbot, &pub); code != http.StatusOK || pub.IntroCopy == "" || len(pub.Products) != len(pub.ProductSKUs) {
		t.Fatalf("public read: %d %+v", code, pub)
	}
	eventually(t, "the view and the crawl stored", func() bool {
		var got pageBody
		s.do(t, http.MethodGet, pagePath, auth, nil, nil, &got)
		return got.ViewCount == 1 && got.LastAICrawlAt != nil && got.AICrawls["GPTBot"] == 1
	})

	// Regenerate: a new version; restore the first.
	if code := s.do(t, http.MethodPost, pagePath+"regenerate/", auth, nil, nil, nil); code != http.StatusAccepted {
		t.Fatalf("regenerate: %d", code)
	}
	v2 := waitVersion(2)
	var restored pageBody
	if code := s.do(t, http.MethodPost, pagePath+"versions/1/restore/", auth, nil, nil, &restored); code != http.StatusOK || restored.Version != v2.Version+1 {
		t.Fatalf("restore: %d %+v", code, restored)
	}
	a, _ := json.Marshal(v1.Blocks)
	b, _ := json.Marshal(restored.Blocks)
	if string(a) != string(b) {
		t.Fatalf("restored blocks differ from version 1:\n%s\n%s", a, b)
	}

	// The builder agent (local provider) edits the page by message over SSE: one version more.
	req, err := http.NewRequest(http.MethodPost, s.base+pagePath+"build/", strings.NewReader(`{"message":"add a testimonial from Jane about fast shipping"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		!strings.Contains(string(stream), `"type":"block"`) || !strings.HasSuffix(strings.TrimSpace(string(stream)), `data: {"type":"done"}`) {
		t.Fatalf("build: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), stream)
	}
	var built pageBody
	s.do(t, http.MethodGet, pagePath, auth, nil, nil, &built)
	if built.Version != restored.Version+1 || built.Blocks[len(built.Blocks)-1].Type != block.Testimonial {
		t.Fatalf("after the build: version %d, blocks %+v", built.Version, built.Blocks)
	}

	// Bulk: one query per kind; the boots query's segment is deleted before the job runs.
	leather := segment("Leather", "leather")
	for _, body := range []string{`{"text":"wool winter coats"}`, fmt.Sprintf(`{"text":"leather boots","product_segment_id":%d}`, leather)} {
		if code := s.do(t, http.MethodPost, "/api/ai-pages/queries/", auth, []byte(body), nil, nil); code != http.StatusCreated {
			t.Fatalf("create query %s: %d", body, code)
		}
	}
	if code := s.do(t, http.MethodDelete, fmt.Sprintf("/api/product-segments/%d/", leather), auth, nil, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete segment: %d", code)
	}
	var started struct {
		JobID  int64  `json:"job_id"`
		Status string `json:"status"`
	}
	if code := s.do(t, http.MethodPost, "/api/ai-pages/pages/bulk-generate/", auth, nil, nil, &started); code != http.StatusAccepted || started.Status != "queued" {
		t.Fatalf("bulk-generate: %d %+v", code, started)
	}
	var job struct {
		Status    string `json:"status"`
		Total     int    `json:"total"`
		Completed int    `json:"completed"`
		Failed    int    `json:"failed"`
		Pages     []struct {
			Slug   string  `json:"slug"`
			Status string  `json:"status"`
			Error  *string `json:"error"`
		} `json:"pages"`
	}
	eventually(t, "the bulk job finished", func() bool {
		s.do(t, http.MethodGet, fmt.Sprintf("/api/ai-pages/jobs/%d/", started.JobID), auth, nil, nil, &job)
		return job.Status == "complete" || job.Status == "partial_failure"
	})
	if job.Status != "partial_failure" || job.Total != 3 || job.Completed != 2 || job.Failed != 1 {
		t.Fatalf("bulk job: %+v", job)
	}
	for _, p := range job.Pages {
		failed := p.Slug == "leather-boots"
		if failed != (p.Status == "error") || failed != (p.Error != nil && *p.Error != "") {
			t.Fatalf("bulk page %+v", p)
		}
	}
}
