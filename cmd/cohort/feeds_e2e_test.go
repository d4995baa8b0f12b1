package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFeedsEndToEnd syncs a Google Merchant RSS feed served from loopback through the dev stack
// (API, embedded Temporal, worker) as a user would: create the feed -> POST .../sync/ (202
// queued) -> the FeedSync workflow imports the items (synced, counts on the feed) -> the products
// are in the catalogue with converted values and get embedded (semantic search finds them) -> a
// second sync leaves them unchanged -> a feed on a link-local address (cloud metadata) is refused
// even with private networks allowed, its error on the feed and no product touched.
func TestFeedsEndToEnd(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "internal", "feed", "testdata", "merchant_rss.xml"))
	if err != nil {
		t.Fatal(err)
	}
	feedSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = w.Write(doc)
	}))
	defer feedSrv.Close()
	s := startDevWith(t, map[string]string{"COHORT_ALLOW_PRIVATE_NETWORKS": "true"}, nil)
	auth := "ApiKey " + s.secret

	if code := s.do(t, http.MethodPut, "/api/pim/schema/", auth, []byte(`{"fields":[
		{"name":"description","type":"text","searchable":true},{"name":"price","type":"price"},
		{"name":"availability","type":"string","facet":true},{"name":"brand","type":"string","facet":true,"searchable":true},
		{"name":"image_link","type":"image"}]}`), nil, nil); code != http.StatusOK {
		t.Fatalf("schema: %d", code)
	}
	type feedBody struct {
		ID           int64             `json:"id"`
		Status       string            `json:"status"`
		LastError    *string           `json:"last_error"`
		LastSyncedAt *string           `json:"last_synced_at"`
		FieldMap     map[string]string `json:"field_map"`
		Counts       struct{ Total, Created, Updated, Unchanged, Failed int }
		FailedItems  []struct {
			Position int    `json:"position"`
			Reason   string `json:"reason"`
		} `json:"failed_items"`
	}
	var f feedBody
	body := fmt.Sprintf(`{"name":"Nordhaven","url":%q,"format":"xml","field_map":{"g:id":"sku","g:title":"name",
		"g:description":"description","g:price":"price","g:availability":"availability","g:brand":"brand","g:image_link":"image_link"}}`,
		feedSrv.URL+"/google.xml")
	if code := s.do(t, http.MethodPost, "/api/ai-pages/feeds/", auth, []byte(body), nil, &f); code != http.StatusCreated || f.Status != "idle" {
		t.Fatalf("create feed: %d %+v", code, f)
	}
	path := fmt.Sprintf("/api/ai-pages/feeds/%d/", f.ID)
	syncAndWait := func(want string) feedBody {
		t.Helper()
		var queued struct{ Status string }
		if code := s.do(t, http.MethodPost, path+"sync/", auth, nil, nil, &queued); code != http.StatusAccepted || queued.Status != "queued" {
			t.Fatalf("sync: %d %+v", code, queued)
		}
		var got feedBody
		eventually(t, "the feed "+want, func() bool {
			got = feedBody{}
			s.do(t, http.MethodGet, path, auth, nil, nil, &got)
			return got.Status == want
		})
		return got
	}
	got := syncAndWait("synced")
	if got.Counts.Total != 3 || got.Counts.Created != 3 || got.Counts.Failed != 0 || got.LastSyncedAt == nil || got.LastError != nil {
		t.Fatalf("after sync %+v", got)
	}
	var page struct {
		Results []struct {
			SKU  string         `json:"sku"`
			Name string         `json:"name"`
			Data map[string]any `json:"data"`
		} `json:"results"`
		Total int `json:"total"`
	}
	if code := s.do(t, http.MethodGet, "/api/pim/products/?page_size=50", auth, nil, nil, &page); code != http.StatusOK || page.Total != 3 {
		t.Fatalf("products: %d %+v", code, page)
	}
	for _, p := range page.Results {
		if p.SKU == "NH-BOOT-0077" && (p.Data["price"] != 1189.5 || p.Data["availability"] != "out of stock") {
			t.Errorf("converted values %+v", p)
		}
	}
	var found struct {
		Products []struct {
			SKU string `json:"sku"`
		} `json:"products"`
		Metadata struct {
			PendingEmbeddings int64 `json:"pending_embeddings"`
		} `json:"metadata"`
	}
	eventually(t, "the feed's products embedded", func() bool {
		found.Products = nil
		s.do(t, http.MethodGet, "/api/ai-pages/query?limit=1&q="+url.QueryEscape("insulated parka with down fill"), auth, nil, nil, &found)
		return found.Metadata.PendingEmbeddings == 0 && len(found.Products) == 1
	})
	if found.Products[0].SKU != "NH-JKT-0142" {
		t.Errorf("search found %+v", found.Products)
	}

	if again := syncAndWait("synced"); again.Counts.Unchanged != 3 || again.Counts.Created != 0 {
		t.Errorf("second sync %+v", again.Counts)
	}

	var meta feedBody
	if code := s.do(t, http.MethodPost, "/api/ai-pages/feeds/", auth, []byte(`{"name":"Metadata","url":"http://169.254.169.254/latest/feed.json","format":"json"}`), nil, &meta); code != http.StatusCreated {
		t.Fatalf("create link-local feed: %d", code)
	}
	path = fmt.Sprintf("/api/ai-pages/feeds/%d/", meta.ID)
	refused := syncAndWait("error")
	if refused.LastError == nil || !strings.Contains(*refused.LastError, "not allowed") || refused.Counts.Total != 0 {
		t.Errorf("link-local feed %+v", refused)
	}
	if code := s.do(t, http.MethodGet, "/api/pim/products/?page_size=50", auth, nil, nil, &page); code != http.StatusOK || page.Total != 3 {
		t.Errorf("products after the refused feed: %d total %d", code, page.Total)
	}
}
