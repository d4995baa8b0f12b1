package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/search"
)

// searchStack is a search service over a running in-process index of the fixture's database:
// one API replica's worth.
func (f *fixture) searchStack(t testing.TB, embedder search.Embedder, cfg search.Config) *search.Service {
	t.Helper()
	return f.searchStackWith(t, embedder, cfg, search.IndexConfig{})
}

func (f *fixture) searchStackWith(t testing.TB, embedder search.Embedder, cfg search.Config, icfg search.IndexConfig) *search.Service {
	t.Helper()
	ix := search.NewEmbedded(f.db.Pool, nil, time.Now, icfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ix.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("index Run: %v", err)
		}
	})
	return search.NewService(f.db.Pool, embedder, ix, time.Now, nil, cfg)
}

func (f *fixture) searchServer(t testing.TB, svc *search.Service) *httptest.Server {
	t.Helper()
	return serve(t, f.newServer(t, func(d *Deps) { d.Search = &SearchDeps{Service: svc} }))
}

func localProvider(t testing.TB) *ai.Local {
	t.Helper()
	p, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// searchCatalogue stores a small apparel catalogue for the tenant and embeds it.
func (f *fixture) searchCatalogue(t testing.TB, tenantID int64) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	cat := catalog.NewService(f.db.Pool, time.Now)
	if _, err := cat.PutSchema(ctx, tenantID, catalog.Schema{Fields: []catalog.Field{
		{Name: "material", Type: catalog.TypeString}, {Name: "color", Type: catalog.TypeString},
		{Name: "tags", Type: catalog.TypeArray}, {Name: "price", Type: catalog.TypePrice},
	}}); err != nil {
		t.Fatal(err)
	}
	sum, err := cat.Bulk(ctx, tenantID, []map[string]any{
		{"sku": "LD-1", "name": "Linen summer dress", "material": "linen", "color": "white", "tags": []any{"summer"}, "price": 79.0},
		{"sku": "LD-2", "name": "Relaxed linen dress", "material": "linen", "color": "blue", "price": 89.0},
		{"sku": "WC-1", "name": "Wool winter coat", "material": "wool", "color": "black", "tags": []any{"winter"}, "price": 199.0},
	})
	if err != nil || sum.Failed > 0 {
		t.Fatalf("bulk: %v %+v", err, sum)
	}
	if _, err := cat.DrainEmbeddings(ctx, tenantID, localProvider(t), 0); err != nil {
		t.Fatal(err)
	}
	rows, err := f.db.Pool.Query(ctx, `SELECT sku, id FROM products WHERE tenant_id = $1`, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var sku string
		var id int64
		if err := rows.Scan(&sku, &id); err != nil {
			t.Fatal(err)
		}
		out[sku] = id
	}
	rows.Close()
	return out
}

func (f *fixture) linenSegment(t testing.TB, tenantID int64, compute bool) int64 {
	t.Helper()
	ctx := context.Background()
	svc := prodseg.NewService(f.db.Pool, catalog.NewService(f.db.Pool, time.Now), nil, time.Now)
	seg, err := svc.Create(ctx, tenantID, prodseg.CreateInput{Name: "Linen", Definition: json.RawMessage(`{"conditions":[{"field":"material","operator":"eq","value":"linen"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if compute {
		if _, err := svc.Compute(ctx, tenantID, seg.ID); err != nil {
			t.Fatal(err)
		}
	}
	return seg.ID
}

type searchBody struct {
	Query    string `json:"query"`
	Products []struct {
		ID             int64          `json:"id"`
		SKU            string         `json:"sku"`
		Name           string         `json:"name"`
		Data           map[string]any `json:"data"`
		RelevanceScore float64        `json:"relevance_score"`
	} `json:"products"`
	Filters  map[string][]string `json:"filters"`
	Metadata struct {
		MatchCount        int   `json:"match_count"`
		LatencyMS         int64 `json:"latency_ms"`
		PendingEmbeddings int64 `json:"pending_embeddings"`
	} `json:"metadata"`
}

// decodeSearch decodes a 200 body strictly: exactly the keys of searchProducts in api/openapi.yaml.
func decodeSearch(t *testing.T, r result) searchBody {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.Status, r.Body)
	}
	var out searchBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("body %s: %v", r.Body, err)
	}
	for _, key := range []string{`"query":`, `"products":`, `"filters":`, `"metadata":`, `"match_count":`, `"latency_ms":`, `"pending_embeddings":`} {
		if !bytes.Contains(r.Body, []byte(key)) {
			t.Errorf("body %s lacks %s", r.Body, key)
		}
	}
	return out
}

func queryURL(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return "/api/ai-pages/query?" + v.Encode()
}

// TestSearchQuery: GET /api/ai-pages/query through the real router: the body api/openapi.yaml
// (searchProducts) describes,
// Bearer and sk_ accepted, segment restriction, tenant isolation (another tenant's segment is a
// 404 and its products never show), and 400 for every bad parameter.
func TestSearchQuery(t *testing.T) {
	f := newFixture(t)
	aIDs := f.searchCatalogue(t, f.A.T.ID)
	bIDs := f.searchCatalogue(t, f.B.T.ID)
	segA := f.linenSegment(t, f.A.T.ID, true)
	segB := f.linenSegment(t, f.B.T.ID, true)
	ts := f.searchServer(t, f.searchStack(t, localProvider(t), search.Config{}))
	bearerA := hdr("Authorization", "Bearer "+f.A.Bearer)

	r := send(t, ts, http.MethodGet, queryURL("q", "linen summer dress", "limit", "2"), bearerA, nil)
	body := decodeSearch(t, r)
	if body.Query != "linen summer dress" || len(body.Products) != 2 || body.Products[0].SKU != "LD-1" || body.Products[1].SKU != "LD-2" {
		t.Fatalf("body %s", r.Body)
	}
	if body.Products[0].ID != aIDs["LD-1"] || body.Products[0].Name != "Linen summer dress" || body.Products[0].Data["color"] != "white" {
		t.Errorf("product %+v", body.Products[0])
	}
	if s0, s1 := body.Products[0].RelevanceScore, body.Products[1].RelevanceScore; s0 < s1 || s0 > 1 || s1 <= 0 {
		t.Errorf("scores %v, %v", s0, s1)
	}
	if want := `{"color":["blue","white"],"material":["linen"],"tags":["summer"]}`; jsonOf(body.Filters) != want {
		t.Errorf("filters %s, want %s", jsonOf(body.Filters), want)
	}
	if body.Metadata.MatchCount != 2 || body.Metadata.PendingEmbeddings != 0 {
		t.Errorf("metadata %+v", body.Metadata)
	}

	// sk_ works too; the default limit returns all three; none of B's products.
	r = send(t, ts, http.MethodGet, queryURL("q", "dress"), hdr("Authorization", "ApiKey "+f.A.SK), nil)
	body = decodeSearch(t, r)
	if len(body.Products) != 3 {
		t.Fatalf("default limit: %s", r.Body)
	}
	for _, p := range body.Products {
		if p.ID != aIDs[p.SKU] || p.ID == bIDs[p.SKU] {
			t.Fatalf("tenant A got product %d (%s)", p.ID, p.SKU)
		}
	}

	// The segment restricts; another tenant's or an unknown segment is a 404.
	body = decodeSearch(t, send(t, ts, http.MethodGet, queryURL("q", "winter coat", "segment_id", strconv.FormatInt(segA, 10)), bearerA, nil))
	if got := []string{body.Products[0].SKU, body.Products[1].SKU}; len(body.Products) != 2 || slices.Contains(got, "WC-1") {
		t.Fatalf("segment: %+v", body.Products)
	}
	for _, seg := range []int64{segB, segB + 100} {
		r := send(t, ts, http.MethodGet, queryURL("q", "coat", "segment_id", strconv.FormatInt(seg, 10)), bearerA, nil)
		if r.Status != http.StatusNotFound || errorBody(t, r).Code != "not_found" {
			t.Errorf("segment %d: %d %s", seg, r.Status, r.Body)
		}
	}

	// Authentication.
	if r := send(t, ts, http.MethodGet, queryURL("q", "dress"), nil, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("no credentials: %d", r.Status)
	}
	if r := send(t, ts, http.MethodGet, queryURL("q", "dress"), hdr("Authorization", "ApiKey "+f.A.PK), nil); r.Status != http.StatusForbidden {
		t.Errorf("pk_: %d", r.Status)
	}

	// Bad parameters: 400 naming the field.
	for _, tc := range []struct{ target, field string }{
		{"/api/ai-pages/query", "q"},
		{"/api/ai-pages/query?q=", "q"},
		{"/api/ai-pages/query?q=%20%09", "q"},
		{queryURL("q", strings.Repeat("a", search.MaxQueryChars+1)), "q"},
		{"/api/ai-pages/query?q=%FF", "q"},
		{queryURL("q", "dress", "limit", "0"), "limit"},
		{queryURL("q", "dress", "limit", "101"), "limit"},
		{queryURL("q", "dress", "limit", "-1"), "limit"},
		{queryURL("q", "dress", "limit", "abc"), "limit"},
		{queryURL("q", "dress", "limit", "2.5"), "limit"},
		{queryURL("q", "dress", "limit", "99999999999999999999"), "limit"},
		{queryURL("q", "dress", "segment_id", "abc"), "segment_id"},
		{queryURL("q", "dress", "segment_id", "0"), "segment_id"},
		{queryURL("q", "dress", "segment_id", "-4"), "segment_id"},
		{queryURL("q", "dress", "segment_id", ""), "segment_id"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, tc.target, bearerA, nil)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, body %s", r.Status, r.Body)
			}
			if e := errorBody(t, r); e.Code != "validation_failed" || e.Fields[tc.field] == "" {
				t.Errorf("error %+v, want validation_failed on %s", e, tc.field)
			}
		})
	}
	body = decodeSearch(t, send(t, ts, http.MethodGet, queryURL("q", "dress", "limit", "100"), bearerA, nil))
	if len(body.Products) != 3 {
		t.Errorf("limit 100: %d products", len(body.Products))
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSearchQueryRateLimitAcrossReplicas: two API servers with their own search services (two
// replicas) on one database share the tenant's 100 requests a minute: the 101st is a 429 with
// Retry-After on either; another tenant is not affected.
func TestSearchQueryRateLimitAcrossReplicas(t *testing.T) {
	f := newFixture(t)
	f.searchCatalogue(t, f.A.T.ID)
	one := f.searchServer(t, f.searchStack(t, localProvider(t), search.Config{}))
	two := f.searchServer(t, f.searchStack(t, localProvider(t), search.Config{}))
	bearerA := hdr("Authorization", "Bearer "+f.A.Bearer)
	target := queryURL("q", "linen dress")
	for i := range 100 {
		ts := one
		if i%2 == 1 {
			ts = two
		}
		if r := send(t, ts, http.MethodGet, target, bearerA, nil); r.Status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	for _, ts := range []*httptest.Server{one, two} {
		r := send(t, ts, http.MethodGet, target, bearerA, nil)
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("request 101: %d %s", r.Status, r.Body)
		}
		if e := errorBody(t, r); e.Code != "rate_limited" {
			t.Errorf("code %q", e.Code)
		}
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 {
			t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
		}
	}
	if r := send(t, one, http.MethodGet, target, hdr("Authorization", "Bearer "+f.B.Bearer), nil); r.Status != http.StatusOK {
		t.Errorf("tenant B: %d %s", r.Status, r.Body)
	}
}

// TestSearchQueryDeadProvider: an OpenAI-compatible provider on loopback that answers 500 makes
// the endpoint answer 503 embedding_unavailable; after 5 failures the provider is not called
// again (the breaker is open) and the answer stays 503.
func TestSearchQueryDeadProvider(t *testing.T) {
	f := newFixture(t)
	f.searchCatalogue(t, f.A.T.ID)
	var calls atomic.Int64
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"internal error","type":"server_error"}}`)
	}))
	t.Cleanup(dead.Close)
	provider, err := ai.New(ai.Config{Provider: ai.ProviderOpenAI, BaseURL: dead.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	svc := f.searchStack(t, provider, search.Config{})
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Search, d.Registry, d.Metrics = &SearchDeps{Service: svc}, reg, metrics.New(reg)
	}))
	for i := range 8 {
		r := send(t, ts, http.MethodGet, queryURL("q", "linen dress"), hdr("Authorization", "Bearer "+f.A.Bearer), nil)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d %s", i+1, r.Status, r.Body)
		}
		if e := errorBody(t, r); e.Code != search.CodeEmbeddingUnavailable || strings.Contains(e.Message, dead.URL) {
			t.Errorf("error %+v", e)
		}
	}
	if n := calls.Load(); n != search.DefaultBreakerFailures {
		t.Errorf("the provider saw %d calls, want %d (then the breaker opened)", n, search.DefaultBreakerFailures)
	}
	// Each 503 is counted by its code (the search 503 alert's series), and as a search error.
	text := scrapeMetrics(t, ts)
	if v, _ := metricValue(text, "cohort_search_unavailable_total", `reason="embedding_unavailable"`); v != 8 {
		t.Errorf("cohort_search_unavailable_total{reason=embedding_unavailable} = %v, want 8", v)
	}
	if v, _ := metricValue(text, "cohort_search_requests_total", `outcome="error"`); v != 8 {
		t.Errorf("cohort_search_requests_total{outcome=error} = %v, want 8", v)
	}
}

// TestSearchQueryIndexLoadingAndBudget: while the tenant's vectors load, the endpoint answers
// 503 search_index_loading with Retry-After at once (the load goes on; the next request after it
// is a 200); a tenant whose vectors exceed the process's budget gets 503 search_index_too_large
// naming the budget (api/openapi.yaml, searchProducts).
func TestSearchQueryIndexLoadingAndBudget(t *testing.T) {
	f := newFixture(t)
	f.searchCatalogue(t, f.A.T.ID)
	ctx := context.Background()
	ts := f.searchServer(t, f.searchStack(t, localProvider(t), search.Config{}))
	lock, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck // released below
	if _, err := lock.Exec(ctx, `LOCK TABLE product_embeddings IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := send(t, ts, http.MethodGet, queryURL("q", "linen dress"), hdr("Authorization", "Bearer "+f.A.Bearer), nil)
	took := time.Since(start)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("while loading: %d %v %s, want 503 with Retry-After", r.Status, r.Header, r.Body)
	}
	if e := errorBody(t, r); e.Code != search.CodeIndexLoading {
		t.Fatalf("error %+v, want %s", e, search.CodeIndexLoading)
	}
	t.Logf("503 %s in %v", search.CodeIndexLoading, took)
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = send(t, ts, http.MethodGet, queryURL("q", "linen dress"), hdr("Authorization", "Bearer "+f.A.Bearer), nil)
		if r.Status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := decodeSearch(t, r); got.Metadata.MatchCount != 3 {
		t.Fatalf("after the load: %s", r.Body)
	}

	small := f.searchServer(t, f.searchStackWith(t, localProvider(t), search.Config{}, search.IndexConfig{MaxBytes: 1024}))
	r = send(t, small, http.MethodGet, queryURL("q", "linen dress"), hdr("Authorization", "Bearer "+f.A.Bearer), nil)
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("over the budget: %d %s", r.Status, r.Body)
	}
	if e := errorBody(t, r); e.Code != search.CodeIndexTooLarge || !strings.Contains(e.Message, "budget of 1.0 KiB (COHORT_SEARCH_MEMORY)") {
		t.Fatalf("error %+v, want %s naming the budget", e, search.CodeIndexTooLarge)
	}
}

// FuzzSearchQueryParams: no query string makes the endpoint answer 500.
func FuzzSearchQueryParams(f *testing.F) {
	fx := newFixture(f)
	fx.searchCatalogue(f, fx.A.T.ID)
	ts := fx.searchServer(f, fx.searchStack(f, localProvider(f), search.Config{RateWindow: time.Microsecond}))
	for _, seed := range []string{"q=dress", "q=", "q=%00", "q=dress&limit=1e3", "q=a&segment_id=9223372036854775807",
		"q=a&limit=20&limit=0", "q=%E2%80%8B", "segment_id=1", "q=" + strings.Repeat("%F0%9F%91%97", 400), "q=dress&segment_id=+1"} {
		f.Add(seed)
	}
	auth := "Bearer " + fx.A.Bearer
	f.Fuzz(func(t *testing.T, raw string) {
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/api/ai-pages/query", nil)
		if err != nil {
			t.Skip()
		}
		req.URL.RawQuery = raw
		req.Header.Set("Authorization", auth)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Skip() // the client refused the URL
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%q: %d %s", raw, resp.StatusCode, b)
		}
	})
}

// BenchmarkQueryEndToEnd: GET /api/ai-pages/query through the real router (authentication,
// the rate limit in Postgres, the local provider's embedding, the in-process index, the
// products, schema and counts from Postgres, JSON) over 100k products (COHORT_BENCH_PRODUCTS
// resizes) with their local-provider vectors, one request at a time over loopback HTTP. The
// rate limit's window is a microsecond so the benchmark is not refused (each request is still
// counted, as in production).
// Reports p50 and p99.
func BenchmarkQueryEndToEnd(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("COHORT_BENCH_PRODUCTS")); err == nil && v > 0 {
		n = v
	}
	f := newFixture(b)
	local := localProvider(b)
	loadBenchCatalogue(b, f, f.A.T.ID, n, local)
	svc := f.searchStack(b, local, search.Config{RateWindow: time.Microsecond})
	ts := f.searchServer(b, svc)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	queries := []string{"linen summer dress", "wool winter coat", "leather boots", "cotton t-shirt", "silk scarf",
		"cashmere sweater", "denim jacket", "suede boots", "navy linen shirt", "warm scarf for winter", "white sneakers", "red dress"}
	get := func(q string) {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+queryURL("q", q, "limit", "20"), nil)
		req.Header.Set("Authorization", "Bearer "+f.A.Bearer)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	start := time.Now()
	get(queries[0]) // loads the tenant's vectors
	b.Logf("first search (loads %d vectors): %s", n, time.Since(start))
	for _, q := range queries {
		get(q)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		get(queries[i%len(queries)])
		lat = append(lat, time.Since(t0))
		i++
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// loadBenchCatalogue writes n generated apparel products of the tenant and their local-provider
// vectors with COPY (as the embedding drain would store them: the same text, hash and model).
func loadBenchCatalogue(b *testing.B, f *fixture, tenantID int64, n int, local *ai.Local) {
	b.Helper()
	ctx := context.Background()
	sc, err := catalog.NewService(f.db.Pool, time.Now).PutSchema(ctx, tenantID, catalog.Schema{Fields: []catalog.Field{
		{Name: "category", Type: catalog.TypeString}, {Name: "material", Type: catalog.TypeString},
		{Name: "color", Type: catalog.TypeString}, {Name: "season", Type: catalog.TypeString},
		{Name: "tags", Type: catalog.TypeArray}, {Name: "price", Type: catalog.TypePrice},
	}})
	if err != nil {
		b.Fatal(err)
	}
	categories := []string{"dress", "coat", "boots", "t-shirt", "scarf", "jeans", "sweater", "shirt", "jacket", "sandals", "sneakers", "skirt"}
	materials := []string{"linen", "cotton", "silk", "wool", "cashmere", "leather", "suede", "denim"}
	colors := []string{"white", "black", "navy", "beige", "olive", "red", "blue", "grey"}
	seasons := []string{"summer", "winter", "spring", "autumn"}
	fits := []string{"classic", "relaxed", "slim", "oversized"}
	rng := rand.New(rand.NewPCG(1, 2))
	var base int64
	if err := f.db.Pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM products`).Scan(&base); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	products := make([][]any, 0, n)
	texts := make([]string, 0, n)
	for i := range n {
		c, m, col := categories[rng.IntN(len(categories))], materials[rng.IntN(len(materials))], colors[rng.IntN(len(colors))]
		s, fit := seasons[rng.IntN(len(seasons))], fits[rng.IntN(len(fits))]
		sku := fmt.Sprintf("SKU-%07d", i)
		name := fmt.Sprintf("%s %s %s %s no. %d", fit, col, m, c, i%977)
		data := map[string]any{"category": c, "material": m, "color": col, "season": s, "tags": []any{s, m, fit}, "price": float64(20 + rng.IntN(300))}
		raw, _ := json.Marshal(data)
		products = append(products, []any{base + int64(i) + 1, tenantID, sku, name, strings.ToLower(sku), strings.ToLower(name), raw})
		texts = append(texts, catalog.EmbeddingText(sc, name, data))
	}
	vecs, err := local.Embed(ctx, texts)
	if err != nil {
		b.Fatal(err)
	}
	embeddings := make([][]any, n)
	now := time.Now()
	for i, v := range vecs {
		sum := sha256.Sum256([]byte(texts[i]))
		embeddings[i] = []any{base + int64(i) + 1, tenantID, local.EmbeddingModel(), int32(len(v)), sum[:], catalog.EncodeVector(v), now}
	}
	if _, err := f.db.Pool.CopyFrom(ctx, pgx.Identifier{"products"}, []string{"id", "tenant_id", "sku", "name", "sku_key", "name_key", "data"}, pgx.CopyFromRows(products)); err != nil {
		b.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `SELECT setval('products_id_seq', (SELECT max(id) FROM products))`); err != nil {
		b.Fatal(err)
	}
	if _, err := f.db.Pool.CopyFrom(ctx, pgx.Identifier{"product_embeddings"}, []string{"product_id", "tenant_id", "model", "dims", "text_hash", "vector", "updated_at"}, pgx.CopyFromRows(embeddings)); err != nil {
		b.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `ANALYZE products; ANALYZE product_embeddings`); err != nil {
		b.Fatal(err)
	}
	b.Logf("stored %d products with vectors in %s", n, time.Since(start))
}
