package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// service is a search service over a running index, with the fixture's clock.
func (f *fixture) service(embedder Embedder, cfg Config) *Service {
	f.t.Helper()
	return NewService(f.db.Pool, embedder, f.index(IndexConfig{}), f.clock.Now, nil, cfg)
}

func skus(r *Result) []string {
	out := make([]string, len(r.Products))
	for i, p := range r.Products {
		out[i] = p.SKU
	}
	return out
}

// TestSearch: the closest products, best first, with their data, scores, the filters of the
// schema's string and array fields and the metadata; products not embedded yet are counted,
// not returned.
func TestSearch(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	f.bulk(a,
		product("LD-1", "Linen summer dress", "category", "dress", "material", "linen", "color", "white", "tags", []any{"summer", "linen"}, "price", 79),
		product("LD-2", "Relaxed linen dress", "category", "dress", "material", "linen", "color", "blue", "tags", []any{"summer"}, "price", 89),
		product("WC-1", "Wool winter coat", "category", "coat", "material", "wool", "color", "black", "price", 199),
		product("LB-1", "Leather boots", "category", "boots", "material", "leather", "color", "brown", "price", 149),
	)
	f.embed(a)
	svc := f.service(f.local, Config{})
	res, err := svc.Search(f.ctx, a, In{Query: "  linen summer dress ", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Query != "linen summer dress" {
		t.Errorf("query %q", res.Query)
	}
	if got := skus(res); !slices.Equal(got[:2], []string{"LD-1", "LD-2"}) || len(got) != 3 {
		t.Fatalf("products %v, want the linen dresses first, 3 in all", got)
	}
	for i, p := range res.Products {
		if p.RelevanceScore < -1 || p.RelevanceScore > 1 || (i > 0 && p.RelevanceScore > res.Products[i-1].RelevanceScore) {
			t.Errorf("scores not descending in [-1, 1]: %s", testenv.AsJSON(t, res.Products))
		}
		var data map[string]any
		if err := json.Unmarshal(p.Data, &data); err != nil || data["category"] == nil {
			t.Errorf("product %s data %s", p.SKU, p.Data)
		}
	}
	// The filters: values over the three returned products, most frequent first.
	want := map[string][]string{"category": {"dress"}, "material": {"linen"}, "color": {"blue", "white"}, "tags": {"summer", "linen"}}
	third := res.Products[2]
	var d map[string]any
	_ = json.Unmarshal(third.Data, &d)
	want["category"] = append(want["category"], d["category"].(string))
	want["material"] = append(want["material"], d["material"].(string))
	want["color"] = append(want["color"], d["color"].(string))
	slices.Sort(want["color"])
	if testenv.AsJSON(t, res.Filters) != testenv.AsJSON(t, want) {
		t.Errorf("filters %s, want %s", testenv.AsJSON(t, res.Filters), testenv.AsJSON(t, want))
	}
	if res.Metadata.MatchCount != 3 || res.Metadata.PendingEmbeddings != 0 || res.Metadata.LatencyMS < 0 {
		t.Errorf("metadata %+v", res.Metadata)
	}
	// Default limit 20; a product saved but not embedded is pending, not returned.
	var more []map[string]any
	for i := range 30 {
		more = append(more, product(fmt.Sprintf("X-%d", i), fmt.Sprintf("Cotton shirt %d", i), "material", "cotton"))
	}
	f.bulk(a, more...)
	res, err = svc.Search(f.ctx, a, In{Query: "linen dress"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Products) != 4 || res.Metadata.PendingEmbeddings != 30 {
		t.Fatalf("before embedding: %d products, metadata %+v; want 4 and 30 pending", len(res.Products), res.Metadata)
	}
	f.embed(a)
	eventually(t, "new embeddings searchable", func() bool {
		res, err = svc.Search(f.ctx, a, In{Query: "linen dress"})
		return err == nil && len(res.Products) == DefaultLimit && res.Metadata.PendingEmbeddings == 0
	})
	// A deleted product leaves at once (its vector goes with it).
	if err := f.cat.Delete(f.ctx, a, f.bulk(a)["LD-1"]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted product gone", func() bool {
		res, err = svc.Search(f.ctx, a, In{Query: "linen summer dress", Limit: 1})
		return err == nil && len(res.Products) == 1 && res.Products[0].SKU == "LD-2"
	})
	// No schema fields: no filters; no products: an empty list.
	b := f.tenant("b")
	res, err = svc.Search(f.ctx, b, In{Query: "dress"})
	if err != nil || len(res.Products) != 0 || len(res.Filters) != 0 || res.Metadata.MatchCount != 0 {
		t.Fatalf("empty tenant: %s %v", testenv.AsJSON(t, res), err)
	}
	if !strings.Contains(testenv.AsJSON(t, res), `"products":[]`) || !strings.Contains(testenv.AsJSON(t, res), `"filters":{}`) {
		t.Errorf("empty lists must encode as [] and {}: %s", testenv.AsJSON(t, res))
	}
}

// TestSearchValidation: bad input is a validation error naming the field.
func TestSearchValidation(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	svc := f.service(f.local, Config{})
	neg, zero := int64(-1), int64(0)
	for _, tc := range []struct {
		name  string
		in    In
		field string
	}{
		{"missing q", In{}, "q"},
		{"blank q", In{Query: " \t\n "}, "q"},
		{"long q", In{Query: strings.Repeat("é", MaxQueryChars+1)}, "q"},
		{"invalid utf-8", In{Query: "dress \xff"}, "q"},
		{"only punctuation", In{Query: "?! ... -- ?"}, "q"},
		{"negative limit", In{Query: "dress", Limit: -1}, "limit"},
		{"limit above max", In{Query: "dress", Limit: MaxLimit + 1}, "limit"},
		{"segment 0", In{Query: "dress", SegmentID: &zero}, "segment_id"},
		{"negative segment", In{Query: "dress", SegmentID: &neg}, "segment_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Search(f.ctx, a, tc.in)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tc.field] == "" || len(ve.Fields) != 1 {
				t.Fatalf("error %v, want a validation error of %s", err, tc.field)
			}
		})
	}
	for _, in := range []In{{Query: strings.Repeat("é", MaxQueryChars)}, {Query: "dress", Limit: MaxLimit}, {Query: "dress", Limit: 1}} {
		if _, err := svc.Search(f.ctx, a, in); err != nil {
			t.Errorf("%+v: %v", in, err)
		}
	}
}

// zeroEmbedder is a provider that finds nothing to embed in any text.
type zeroEmbedder struct{ dims int }

func (z zeroEmbedder) EmbeddingModel() string { return "zero" }
func (z zeroEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, z.dims)
	}
	return out, nil
}

// TestSearchQueryWithoutWords: a query the provider embeds to a zero vector (it would be similar
// to nothing) is a validation error of q that says so, not an empty result.
func TestSearchQueryWithoutWords(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	_, err := f.service(zeroEmbedder{dims: 8}, Config{}).Search(f.ctx, a, In{Query: "the of and"})
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || ve.Fields["q"] != EmbedsToNothingMessage {
		t.Fatalf("error %v, want q: %s", err, EmbedsToNothingMessage)
	}
	for text, want := range map[string]bool{"?!": false, " -- ... ": false, "€ %": false, "dress": true, "été": true, "42": true, "the": true} {
		if HasWords(text) != want {
			t.Errorf("HasWords(%q) = %v, want %v", text, !want, want)
		}
	}
}

// TestBacklog: the products a search could match and the state of their embeddings: embedded,
// queued (waited for), refused by the provider (not waited for), within a segment when set.
func TestBacklog(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	f.apparelSchema(a)
	f.bulk(a,
		product("LD-1", "Linen summer dress", "material", "linen"),
		product("LS-1", "Linen shirt", "material", "linen"),
		product("WC-1", "Wool coat", "material", "wool"),
	)
	svc := f.service(f.local, Config{})
	got, err := svc.Backlog(f.ctx, a, nil)
	if want := (Backlog{Products: 3, Queued: 3}); err != nil || got != want {
		t.Fatalf("all queued: %+v %v, want %+v", got, err, want)
	}
	f.embed(a)
	// Two more products: one queued, one the provider refused once.
	more := f.bulk(a, product("LT-1", "Linen trousers", "material", "linen"), product("WS-1", "Wool scarf", "material", "wool"))
	if _, err := f.db.Pool.Exec(f.ctx, `UPDATE product_embedding_queue SET attempts = 1, last_error = 'refused', available_at = now() + interval '1 minute'
		WHERE tenant_id = $1 AND product_id = $2`, a, more["WS-1"]); err != nil {
		t.Fatal(err)
	}
	got, err = svc.Backlog(f.ctx, a, nil)
	if want := (Backlog{Products: 5, Embedded: 3, Queued: 1, Refused: 1}); err != nil || got != want {
		t.Fatalf("catalogue: %+v %v, want %+v", got, err, want)
	}
	seg, err := f.segs.Create(f.ctx, a, prodseg.CreateInput{Name: "Linen", Definition: json.RawMessage(`{"conditions":[{"field":"material","operator":"eq","value":"linen"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.segs.Compute(f.ctx, a, seg.ID); err != nil {
		t.Fatal(err)
	}
	got, err = svc.Backlog(f.ctx, a, &seg.ID)
	if want := (Backlog{Products: 3, Embedded: 2, Queued: 1}); err != nil || got != want {
		t.Fatalf("segment: %+v %v, want %+v", got, err, want)
	}
	if _, err := svc.Backlog(f.ctx, b, &seg.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("another tenant's segment: %v, want not found", err)
	}
	if got, err := svc.Backlog(f.ctx, b, nil); err != nil || got != (Backlog{}) {
		t.Errorf("empty tenant: %+v %v", got, err)
	}
}

// TestSearchSegmentAndTenants: segment_id restricts to the segment's computed members (and
// follows recomputes); an unknown segment, or another tenant's, is not found; one tenant never
// sees another's products.
func TestSearchSegmentAndTenants(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	catalogue := []map[string]any{
		product("LD-1", "Linen summer dress", "material", "linen", "category", "dress"),
		product("CD-1", "Cotton summer dress", "material", "cotton", "category", "dress"),
		product("LS-1", "Linen shirt", "material", "linen", "category", "shirt"),
		product("WC-1", "Wool coat", "material", "wool", "category", "coat"),
	}
	segOf := map[int64]int64{}
	idsOf := map[int64]map[string]int64{}
	for _, tn := range []int64{a, b} {
		f.apparelSchema(tn)
		idsOf[tn] = f.bulk(tn, catalogue...)
		f.embed(tn)
		seg, err := f.segs.Create(f.ctx, tn, prodseg.CreateInput{Name: "Linen", Definition: json.RawMessage(`{"conditions":[{"field":"material","operator":"eq","value":"linen"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		segOf[tn] = seg.ID
	}
	svc := f.service(f.local, Config{})
	search := func(tn int64, seg *int64) ([]string, error) {
		res, err := svc.Search(f.ctx, tn, In{Query: "summer dress", SegmentID: seg})
		if err != nil {
			return nil, err
		}
		for _, p := range res.Products {
			if p.ID != idsOf[tn][p.SKU] {
				t.Fatalf("tenant %d got product %d (%s), not its own", tn, p.ID, p.SKU)
			}
		}
		return skus(res), nil
	}
	segA := segOf[a]
	if got, err := search(a, &segA); err != nil || len(got) != 0 {
		t.Fatalf("before the first compute: %v %v, want none", got, err)
	}
	if _, err := f.segs.Compute(f.ctx, a, segA); err != nil {
		t.Fatal(err)
	}
	if got, err := search(a, &segA); err != nil || !slices.Equal(got, []string{"LD-1", "LS-1"}) {
		t.Fatalf("segment: %v %v, want the linen products", got, err)
	}
	if got, err := search(a, nil); err != nil || len(got) != 4 || got[0] != "LD-1" {
		t.Fatalf("no segment: %v %v", got, err)
	}
	// A recompute after a product change moves the members (the member cache follows).
	if _, err := f.cat.Bulk(f.ctx, a, []map[string]any{product("CD-1", "Cotton summer dress", "material", "linen", "category", "dress")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.segs.Compute(f.ctx, a, segA); err != nil {
		t.Fatal(err)
	}
	if got, err := search(a, &segA); err != nil || len(got) != 3 || !slices.Contains(got, "CD-1") {
		t.Fatalf("after the recompute: %v %v", got, err)
	}
	// Another tenant's segment and an unknown one: 404.
	segB := segOf[b]
	unknown := segB + 1000
	for _, seg := range []*int64{&segB, &unknown} {
		if _, err := search(a, seg); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("segment %d: %v, want not found", *seg, err)
		}
	}
	if got, err := search(b, &segB); err != nil || len(got) != 0 {
		t.Errorf("b's own uncomputed segment: %v %v", got, err)
	}
}

// TestQueryRateLimit: Query allows 100 searches per tenant in any minute, counted in Postgres
// across two service instances (two API replicas); the 101st is refused with the wait, also
// after the clock passes a minute boundary; another tenant has its own count; Search is not
// limited.
func TestQueryRateLimit(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	f.apparelSchema(a)
	f.bulk(a, product("LD-1", "Linen dress"))
	f.embed(a)
	one, two := f.service(f.local, Config{}), f.service(f.local, Config{})
	in := In{Query: "linen dress"}
	// 12:00:30, then a request every 100 ms: the 100th at 12:00:39.9.
	for i := range 100 {
		svc := one
		if i%2 == 1 {
			svc = two
		}
		if _, err := svc.Query(f.ctx, a, in); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		f.clock.Advance(100 * time.Millisecond)
	}
	wantWait := func(svc *Service, want time.Duration) {
		t.Helper()
		_, err := svc.Query(f.ctx, a, in)
		var rl *errs.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("error %v, want rate limited", err)
		}
		if rl.RetryAfter != want {
			t.Fatalf("retry after %s, want %s", rl.RetryAfter, want)
		}
	}
	// 12:00:40: the first request (12:00:30) leaves the window at 12:01:30.
	wantWait(one, 50*time.Second)
	wantWait(two, 50*time.Second)
	f.clock.Advance(25 * time.Second) // 12:01:05, past the minute boundary
	wantWait(two, 25*time.Second)
	if _, err := one.Query(f.ctx, b, in); err != nil {
		t.Fatalf("tenant b: %v", err)
	}
	if _, err := one.Search(f.ctx, a, in); err != nil {
		t.Fatalf("Search is not rate limited: %v", err)
	}
	f.clock.Advance(25 * time.Second) // 12:01:30: the first request is a minute old
	if _, err := two.Query(f.ctx, a, in); err != nil {
		t.Fatalf("at 12:01:30: %v", err)
	}
	wantWait(one, 100*time.Millisecond) // the second request (12:00:30.1) is next to leave
	if n := testCount(t, f, `SELECT count(*) FROM api_rate_limits WHERE tenant_id = $1 AND bucket = $2`, a, RateBucket); n != 1 {
		t.Errorf("%d rate limit rows, want 1", n)
	}
}

// openAIFake is a loopback OpenAI-compatible embeddings server: it fails (status) or answers
// with a vector, and counts the calls.
type openAIFake struct {
	srv    *httptest.Server
	calls  atomic.Int64
	status atomic.Int64 // 0: answer
	delay  atomic.Int64 // nanoseconds before answering
	dims   int
}

func newOpenAIFake(t *testing.T, dims int) *openAIFake {
	o := &openAIFake{dims: dims}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		if d := o.delay.Load(); d > 0 {
			select {
			case <-time.After(time.Duration(d)):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if s := o.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			_, _ = io.WriteString(w, `{"error":{"message":"the server had an error","type":"server_error"}}`)
			return
		}
		vec := make([]float32, o.dims)
		vec[0] = 1
		_ = json.NewEncoder(w).Encode(map[string]any{
			"object": "list", "model": "text-embedding-3-small",
			"data":  []any{map[string]any{"object": "embedding", "index": 0, "embedding": vec}},
			"usage": map[string]any{"prompt_tokens": 2, "total_tokens": 2},
		})
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *openAIFake) provider(t *testing.T) ai.Provider {
	p, err := ai.New(ai.Config{Provider: ai.ProviderOpenAI, BaseURL: o.srv.URL + "/v1", APIKey: "sk-test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantUnavailable(t *testing.T, err error) {
	t.Helper()
	var ce *errs.CodedError
	if !errors.As(err, &ce) || ce.Code != CodeEmbeddingUnavailable || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("error %v, want %s (unavailable)", err, CodeEmbeddingUnavailable)
	}
	if errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("error %v matches ErrInvalid: the provider's kind leaked", err)
	}
}

// TestSearchDeadProvider: a provider answering 500 makes searches fail as unavailable; after 5
// consecutive failures the breaker opens and the provider sees no call for the cool-down, then
// one probe; a healthy provider closes it again. A provider slower than the timeout fails fast.
func TestSearchDeadProvider(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	f.bulk(a, product("LD-1", "Linen dress"))
	f.embed(a)
	fake := newOpenAIFake(t, 384)
	fake.status.Store(http.StatusInternalServerError)
	svc := f.service(fake.provider(t), Config{BreakerFailures: 5, BreakerCooldown: 30 * time.Second})
	in := In{Query: "linen dress"}
	for i := range 5 {
		_, err := svc.Search(f.ctx, a, in)
		wantUnavailable(t, err)
		if n := fake.calls.Load(); n != int64(i+1) {
			t.Fatalf("failure %d: %d provider calls", i+1, n)
		}
	}
	for range 10 {
		_, err := svc.Search(f.ctx, a, in)
		wantUnavailable(t, err)
	}
	if n := fake.calls.Load(); n != 5 {
		t.Fatalf("%d provider calls while the breaker is open, want 5", n)
	}
	f.clock.Advance(29 * time.Second)
	_, err := svc.Search(f.ctx, a, in)
	wantUnavailable(t, err)
	f.clock.Advance(time.Second)
	_, err = svc.Search(f.ctx, a, in) // the probe, failing: open again
	wantUnavailable(t, err)
	_, err = svc.Search(f.ctx, a, in)
	wantUnavailable(t, err)
	if n := fake.calls.Load(); n != 6 {
		t.Fatalf("%d provider calls, want 6 (one probe)", n)
	}
	fake.status.Store(0)
	f.clock.Advance(30 * time.Second)
	for i := range 3 {
		res, err := svc.Search(f.ctx, a, in)
		if err != nil {
			t.Fatalf("healthy again, search %d: %v", i, err)
		}
		// The stored vectors are the local model's: none of the provider's model yet.
		if len(res.Products) != 0 || res.Metadata.PendingEmbeddings != 1 {
			t.Fatalf("other model: %s", testenv.AsJSON(t, res))
		}
	}
	if n := fake.calls.Load(); n != 9 {
		t.Fatalf("%d provider calls, want 9", n)
	}

	// Timeout.
	fake.delay.Store(int64(5 * time.Second))
	slow := f.service(fake.provider(t), Config{EmbedTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err = slow.Search(f.ctx, a, in)
	wantUnavailable(t, err)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timed out after %s", d)
	}
	// A caller that gives up is not the provider's failure.
	ctx, cancel := context.WithTimeout(f.ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := slow.Search(ctx, a, in); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled caller: %v", err)
	}
}

// precisionAt is the share of the first n results that are relevant (of n, or of all relevant
// ones when there are fewer).
func precisionAt(n int, got []string, relevant func(sku string) bool, total int) float64 {
	hits := 0
	for _, s := range got[:min(n, len(got))] {
		if relevant(s) {
			hits++
		}
	}
	return float64(hits) / float64(min(n, total))
}

// TestRelevanceLocalProvider: a few hundred real-looking products (category x material x colour,
// with seasons, fits, prices and descriptions) embedded with the local provider, and labelled
// queries. It reports precision@10 per query and the mean, requires every linen dress to rank
// above every wool coat for "linen summer dress" (and similar pairs), and a floor on the mean.
func TestRelevanceLocalProvider(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	type item struct{ sku, category, material, color string }
	var items []item
	var products []map[string]any
	kinds := []struct {
		category, plural string
		materials        []string
		price            float64
	}{
		{"dress", "dresses", []string{"linen", "cotton", "silk"}, 79},
		{"coat", "coats", []string{"wool", "cashmere"}, 249},
		{"boots", "boots", []string{"leather", "suede"}, 169},
		{"t-shirt", "t-shirts", []string{"cotton", "linen"}, 25},
		{"scarf", "scarves", []string{"silk", "wool", "cashmere"}, 45},
		{"jeans", "jeans", []string{"denim"}, 89},
		{"sweater", "sweaters", []string{"wool", "cashmere", "cotton"}, 99},
		{"shirt", "shirts", []string{"linen", "cotton", "denim"}, 59},
		{"jacket", "jackets", []string{"leather", "denim", "wool"}, 199},
		{"sandals", "sandals", []string{"leather"}, 69},
	}
	seasonOf := map[string]string{"linen": "summer", "cotton": "summer", "silk": "spring", "wool": "winter", "cashmere": "winter",
		"leather": "autumn", "suede": "autumn", "denim": "spring"}
	colors := []string{"white", "black", "navy", "beige", "olive", "red"}
	fits := []string{"classic", "relaxed"}
	for _, k := range kinds {
		for _, m := range k.materials {
			for ci, c := range colors {
				for fi, fit := range fits {
					sku := fmt.Sprintf("%s-%s-%s-%s", strings.ToUpper(k.category[:2]), strings.ToUpper(m[:3]), strings.ToUpper(c[:2]), fit[:1])
					name := fmt.Sprintf("%s %s %s %s", strings.ToUpper(fit[:1])+fit[1:], c, m, k.category)
					season := seasonOf[m]
					desc := fmt.Sprintf("A %s-fit %s cut from %s %s, made for %s days. Pairs well with the rest of our %s collection.",
						fit, k.category, c, m, season, season)
					items = append(items, item{sku, k.category, m, c})
					products = append(products, product(sku, name, "category", k.category, "material", m, "color", c,
						"season", season, "tags", []any{season, m, fit}, "description", desc, "price", k.price+float64(ci*5+fi*3)))
				}
			}
		}
	}
	f.bulk(a, products...)
	f.embed(a)
	svc := f.service(f.local, Config{})
	attr := map[string]item{}
	for _, it := range items {
		attr[it.sku] = it
	}
	is := func(category, material string) func(string) bool {
		return func(sku string) bool {
			it := attr[sku]
			return it.category == category && (material == "" || it.material == material)
		}
	}
	queries := []struct {
		q        string
		relevant func(string) bool
	}{
		{"linen summer dress", is("dress", "linen")},
		{"wool winter coat", is("coat", "wool")},
		{"leather boots", is("boots", "leather")},
		{"cotton t-shirt", is("t-shirt", "cotton")},
		{"silk scarf", is("scarf", "silk")},
		{"cashmere sweater", is("sweater", "cashmere")},
		{"denim jacket", is("jacket", "denim")},
		{"suede boots", is("boots", "suede")},
		{"linen shirt for summer", is("shirt", "linen")},
		{"warm cashmere scarf", is("scarf", "cashmere")},
		{"leather sandals", is("sandals", "leather")},
		{"jeans", is("jeans", "")},
	}
	var sum float64
	for _, q := range queries {
		res, err := svc.Search(f.ctx, a, In{Query: q.q, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, it := range items {
			if q.relevant(it.sku) {
				total++
			}
		}
		p := precisionAt(10, skus(res), q.relevant, total)
		sum += p
		t.Logf("precision@10 %.2f  %-24q top 3: %v", p, q.q, skus(res)[:3])
	}
	mean := sum / float64(len(queries))
	t.Logf("mean precision@10 over %d queries, %d products, local provider: %.3f", len(queries), len(items), mean)
	if mean < 0.8 {
		t.Errorf("mean precision@10 %.3f, want at least 0.8", mean)
	}
	// Whole rankings: every product of the first kind above every one of the second.
	for _, pair := range []struct {
		q            string
		above, below func(string) bool
	}{
		{"linen summer dress", is("dress", "linen"), is("coat", "wool")},
		{"wool winter coat", is("coat", "wool"), is("dress", "linen")},
		{"leather boots", is("boots", "leather"), is("t-shirt", "cotton")},
		{"silk scarf", is("scarf", "silk"), is("jeans", "")},
	} {
		res, err := svc.Search(f.ctx, a, In{Query: pair.q, Limit: MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		got := skus(res)
		lastAbove, firstBelow := -1, math.MaxInt
		for i, s := range got {
			if pair.above(s) {
				lastAbove = i
			}
			if pair.below(s) && i < firstBelow {
				firstBelow = i
			}
		}
		if lastAbove < 0 || lastAbove > firstBelow {
			t.Errorf("%q: the last relevant product ranks %d, an unrelated one %d", pair.q, lastAbove, firstBelow)
		}
	}
}

// TestQueryAnswersWhileLoadingSearchWaits: while the tenant's vectors load, the HTTP endpoint's
// Query answers 503 search_index_loading at once and Search (page generation's) waits for the
// load and returns the products.
func TestQueryAnswersWhileLoadingSearchWaits(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	f.bulk(a, product("LD-1", "Linen dress"), product("WC-1", "Wool coat"))
	f.embed(a)
	svc := f.service(f.local, Config{})
	lock, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background()) //nolint:errcheck // released below
	if _, err := lock.Exec(f.ctx, `LOCK TABLE product_embeddings IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	in := In{Query: "linen dress"}
	_, err = svc.Query(f.ctx, a, in)
	var coded *errs.CodedError
	if !errors.As(err, &coded) || coded.Code != CodeIndexLoading || coded.RetryAfter <= 0 {
		t.Fatalf("Query while loading: %v, want %s", err, CodeIndexLoading)
	}
	got := make(chan *Result, 1)
	go func() {
		res, err := svc.Search(f.ctx, a, in)
		if err != nil {
			t.Errorf("Search: %v", err)
		}
		got <- res
	}()
	select {
	case res := <-got:
		t.Fatalf("Search returned %v before the load could finish", res)
	case <-time.After(200 * time.Millisecond):
	}
	if err := lock.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-got; res == nil || len(res.Products) != 2 || res.Products[0].SKU != "LD-1" {
		t.Fatalf("Search after the load: %+v", res)
	}
}
