package pagegen

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
)

func dresses() []Product {
	return []Product{
		{SKU: "LD-1", Name: "Linen Midi Dress", Data: map[string]any{"price": 59.0, "currency": "EUR", "material": "linen", "color": "white",
			"image_url": "https://cdn.example.com/ld-1.jpg", "description": "A breathable linen midi dress for warm days.", "tags": []any{"summer", "dress"}}},
		{SKU: "LD-2", Name: "Linen Wrap Dress", Data: map[string]any{"price": 74.5, "currency": "EUR", "material": "linen", "color": "sand", "tags": []any{"summer"}}},
		{SKU: "CD-3", Name: "Cotton Sundress", Data: map[string]any{"price": 39.0, "currency": "EUR", "material": "cotton", "color": "white", "in_stock": true}},
		{SKU: "LD-4", Name: "Linen Maxi Dress", Data: map[string]any{"price": 79.0, "currency": "EUR", "material": "linen", "color": "navy",
			"long": strings.Repeat("very long text ", 100)}},
	}
}

func localProvider(t *testing.T) ai.Provider {
	t.Helper()
	p, err := ai.New(ai.Config{Provider: ai.ProviderLocal})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// revalidate checks blocks against the registry as a page write would.
func revalidate(t *testing.T, blocks []block.Block) {
	t.Helper()
	if _, err := block.Validate("blocks", blocks); err != nil {
		t.Fatalf("blocks do not validate against the registry: %v", err)
	}
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var back []block.Block
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := block.Validate("blocks", back); err != nil {
		t.Fatalf("blocks after a JSON round trip do not validate: %v", err)
	}
}

func TestLocalCopy(t *testing.T) {
	g := New(localProvider(t))
	req := Request{Query: "linen summer dresses under 80 euros", Title: "Linen summer dresses", Products: dresses()}
	got, err := g.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	revalidate(t, got.Blocks)
	if got.Attempts != 1 {
		t.Errorf("attempts %d, want 1", got.Attempts)
	}
	if want := []string{"LD-1", "LD-2", "CD-3", "LD-4"}; !reflect.DeepEqual(got.ProductSKUs, want) {
		t.Errorf("product skus %v, want %v", got.ProductSKUs, want)
	}
	types := make([]string, len(got.Blocks))
	for i, b := range got.Blocks {
		types[i] = b.Type
	}
	if want := []string{block.Hero, block.ProductGrid, block.FeatureList, block.TextSection}; !reflect.DeepEqual(types, want) {
		t.Fatalf("block types %v, want %v", types, want)
	}
	hero := got.Blocks[0].Props
	if hero["headline"] != "Linen summer dresses" {
		t.Errorf("headline %q", hero["headline"])
	}
	if sub, _ := hero["subheadline"].(string); !strings.Contains(sub, "Linen Midi Dress") || !strings.Contains(sub, "4 products") {
		t.Errorf("subheadline %q does not come from the products", sub)
	}
	if hero["image_url"] != "https://cdn.example.com/ld-1.jpg" {
		t.Errorf("hero image %v, want the first product's image", hero["image_url"])
	}
	if _, ok := hero["cta_url"]; ok != urlAccepted("#products") {
		t.Errorf("hero cta_url present %v, the registry accepts #products: %v", ok, urlAccepted("#products"))
	}
	grid := got.Blocks[1].Props
	if !reflect.DeepEqual(grid["product_skus"], []any{"LD-1", "LD-2", "CD-3", "LD-4"}) || grid["columns"] != float64(3) {
		t.Errorf("grid %v", grid)
	}
	items, _ := got.Blocks[2].Props["items"].([]any)
	if len(items) != 4 {
		t.Fatalf("feature items %v", items)
	}
	first := items[0].(map[string]any)
	if first["title"] != "Linen Midi Dress" || first["description"] != "A breathable linen midi dress for warm days." {
		t.Errorf("first highlight %v", first)
	}
	second := items[1].(map[string]any)
	if d, _ := second["description"].(string); !strings.Contains(d, "74.50 EUR") || !strings.Contains(d, "material: linen") {
		t.Errorf("second highlight's description %q does not come from its fields", d)
	}
	body, _ := got.Blocks[3].Props["body"].(string)
	for _, want := range []string{"Material: linen, cotton", "Color: white, sand, navy", "Price: 39.00 to 79.00 EUR"} {
		if !strings.Contains(body, want) {
			t.Errorf("details %q lack %q", body, want)
		}
	}
	for _, want := range []string{"linen summer dresses under 80 euros", "Linen Midi Dress", "Prices run from 39.00 to 79.00 EUR"} {
		if !strings.Contains(got.IntroCopy, want) {
			t.Errorf("intro %q lacks %q", got.IntroCopy, want)
		}
	}
	again, err := g.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, again) {
		t.Errorf("local copy is not deterministic:\n%+v\n%+v", got, again)
	}
}

func TestLocalCopyEdgeCases(t *testing.T) {
	long := strings.Repeat("word ", 200)
	cases := []struct {
		name     string
		req      Request
		wantErr  error
		wantSKUs int
	}{
		{"one product without data", Request{Query: "q", Products: []Product{{SKU: "A", Name: "Alpha"}}}, nil, 1},
		{"title defaults to the query", Request{Query: "summer hats", Products: []Product{{SKU: "A", Name: "Hat"}, {SKU: "B", Name: "Cap"}}}, nil, 2},
		{"long title and query are cut", Request{Query: long, Title: long, Products: []Product{{SKU: "A", Name: long}}}, nil, 1},
		{"control characters are dropped", Request{Query: "a\x00b", Title: "t\x07", Products: []Product{{SKU: "A", Name: "N\x01"}}}, nil, 1},
		{"duplicate skus once", Request{Query: "q", Products: []Product{{SKU: "A", Name: "x"}, {SKU: "a", Name: "y"}, {SKU: "B", Name: "z"}}}, nil, 2},
		{"products beyond the limit dropped", Request{Query: "q", Products: manyProducts(150)}, nil, MaxProducts},
		{"bad image url ignored", Request{Query: "q", Products: []Product{{SKU: "A", Name: "x", Data: map[string]any{"image_url": "javascript:alert(1)"}}}}, nil, 1},
		{"no products", Request{Query: "q"}, errs.ErrInvalid, 0},
		{"no query", Request{Products: []Product{{SKU: "A"}}}, errs.ErrInvalid, 0},
		{"no sku", Request{Query: "q", Products: []Product{{Name: "x"}}}, errs.ErrInvalid, 0},
	}
	g := New(localProvider(t))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := g.Generate(context.Background(), c.req)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("error %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			revalidate(t, got.Blocks)
			if len(got.ProductSKUs) != c.wantSKUs {
				t.Errorf("%d skus, want %d", len(got.ProductSKUs), c.wantSKUs)
			}
		})
	}
}

func manyProducts(n int) []Product {
	out := make([]Product, n)
	for i := range out {
		out[i] = Product{SKU: "SKU-" + itoa(i), Name: "Product " + itoa(i), Data: map[string]any{"color": []any{"red", "blue"}[i%2]}}
	}
	return out
}

func TestCompact(t *testing.T) {
	p := Compact(Product{SKU: "A", Name: "n", Data: map[string]any{
		"text":   strings.Repeat("x", 5000),
		"nested": map[string]any{"a": 1},
		"list":   []any{"a", map[string]any{}, "", "b", 3.0},
		"empty":  "  ",
		"n":      2.5,
	}})
	if s := p.Data["text"].(string); len([]rune(s)) > maxFieldChars {
		t.Errorf("text kept %d characters", len([]rune(s)))
	}
	if _, ok := p.Data["nested"]; ok {
		t.Error("an object was kept")
	}
	if _, ok := p.Data["empty"]; ok {
		t.Error("a blank string was kept")
	}
	if !reflect.DeepEqual(p.Data["list"], []any{"a", "b", 3.0}) || p.Data["n"] != 2.5 {
		t.Errorf("data %v", p.Data)
	}
}

// fakeChat is a loopback OpenAI-compatible chat completions server answering from a script.
type fakeChat struct {
	mu       sync.Mutex
	answers  []string // content of each answer in turn; the last one repeats
	status   int      // non-zero: every request gets this HTTP status
	requests []chatRequest
}

type chatRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Stream bool `json:"stream"`
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	n := len(f.requests)
	status := f.status
	answer := f.answers[min(n, len(f.answers))-1]
	f.mu.Unlock()
	if req.Stream && status == 0 {
		// The answer in three content deltas, then the finish and the usage chunk.
		w.Header().Set("Content-Type", "text/event-stream")
		third := len(answer) / 3
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-test",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		}
		for _, part := range []string{answer[:third], answer[third : 2*third], answer[2*third:]} {
			chunk(map[string]any{"content": part}, nil)
		}
		chunk(map[string]any{}, "stop")
		_, _ = w.Write([]byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}` + "\n\ndata: [DONE]\n\n"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "slow down", "type": "rate_limit"}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
	})
}

func (f *fakeChat) recorded() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.requests...)
}

func openAIProvider(t *testing.T, f *fakeChat) ai.Provider {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	p, err := ai.New(ai.Config{Provider: ai.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "sk-test", ChatModel: "gpt-test", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const validAnswer = `{"intro_copy": "Linen dresses for warm days.", "blocks": [
	{"type": "hero", "props": {"headline": "Linen summer dresses", "cta_label": "Shop now", "cta_url": "/collections/linen"}},
	{"type": "product_grid", "props": {"product_skus": ["ld-1", "LD-2"], "columns": 2}},
	{"type": "feature_list", "props": {"heading": "Why linen", "items": [{"title": "Breathable", "description": "Cool on hot days."}]}}
]}`

// invalidAnswer lacks the hero's headline and puts a string where columns wants an integer.
const invalidAnswer = `{"intro_copy": "Linen dresses.", "blocks": [
	{"type": "hero", "props": {"subheadline": "no headline here"}},
	{"type": "product_grid", "props": {"product_skus": ["LD-1"], "columns": "three"}}
]}`

func TestChatCopyRetriesWithTheErrorFedBack(t *testing.T) {
	f := &fakeChat{answers: []string{invalidAnswer, validAnswer}}
	g := New(openAIProvider(t, f))
	got, err := g.Generate(context.Background(), Request{Query: "linen summer dress", Products: dresses()})
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 2 {
		t.Errorf("attempts %d, want 2", got.Attempts)
	}
	revalidate(t, got.Blocks)
	if got.IntroCopy != "Linen dresses for warm days." || len(got.Blocks) != 3 {
		t.Errorf("copy %+v", got)
	}
	if skus := got.Blocks[1].Props["product_skus"]; !reflect.DeepEqual(skus, []any{"LD-1", "LD-2"}) {
		t.Errorf("grid skus %v, want the catalogue's spelling", skus)
	}
	for _, b := range got.Blocks {
		if block.CheckID(b.ID) != "" {
			t.Errorf("block without a valid id: %+v", b)
		}
	}
	reqs := f.recorded()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	if !reqs[0].Stream || !reqs[1].Stream {
		t.Errorf("page copy was not streamed (so OPENAI_TIMEOUT would cap the whole answer)")
	}
	first := reqs[0]
	if first.ResponseFormat == nil || first.ResponseFormat.Type != "json_object" {
		t.Errorf("first request is not in JSON mode: %+v", first.ResponseFormat)
	}
	sys := first.Messages[0].Content
	for _, typ := range block.Types() {
		if !strings.Contains(sys, `"type":"`+typ+`"`) {
			t.Errorf("system prompt lacks the registry's %s", typ)
		}
	}
	if !strings.Contains(sys, `"product_skus"`) || !strings.Contains(first.Messages[1].Content, `"sku":"LD-1"`) {
		t.Error("prompt lacks the props schema or the products")
	}
	second := reqs[1].Messages
	if len(second) != 4 || second[2].Role != "assistant" || second[2].Content != invalidAnswer || second[3].Role != "user" {
		t.Fatalf("second request does not carry the invalid answer and the problems: %+v", second)
	}
	for _, want := range []string{"blocks[0].props.headline: is required", "blocks[1].props.columns: must be"} {
		if !strings.Contains(second[3].Content, want) {
			t.Errorf("feedback %q lacks %q", second[3].Content, want)
		}
	}
}

func TestChatCopyFailsAfterThreeInvalidAnswers(t *testing.T) {
	cases := []struct {
		name, answer, wantProblem string
	}{
		{"invalid blocks", invalidAnswer, "blocks[0].props.headline: is required"},
		{"unknown sku", strings.Replace(validAnswer, `"LD-2"`, `"NOPE-9"`, 1), `blocks[1].props.product_skus[1]: "NOPE-9" is not one of the found products`},
		{"not json", "Here is your page: a hero and a grid.", "answer: is not a JSON object"},
		{"no product grid", `{"intro_copy": "x", "blocks": [{"type": "hero", "props": {"headline": "h"}}]}`, "blocks: must include a product_grid"},
		{"no intro", `{"blocks": [{"type": "hero", "props": {"headline": "h"}}, {"type": "product_grid", "props": {"product_skus": ["LD-1"]}}]}`, "intro_copy: is required"},
		{"unknown type", `{"intro_copy": "x", "blocks": [{"type": "hero", "props": {"headline": "h"}}, {"type": "product_grid", "props": {"product_skus": ["LD-1"]}}, {"type": "video", "props": {}}]}`, "blocks[2].type: must be one of"},
		{"javascript link", strings.Replace(validAnswer, "/collections/linen", "javascript:alert(1)", 1), "blocks[0].props.cta_url"},
		{"two objects", validAnswer + validAnswer, "answer: must be one JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeChat{answers: []string{c.answer}}
			g := New(openAIProvider(t, f))
			got, err := g.Generate(context.Background(), Request{Query: "linen summer dress", Products: dresses()})
			if !errors.Is(err, ErrInvalidOutput) {
				t.Fatalf("error %v (copy %+v), want ErrInvalidOutput", err, got)
			}
			if !strings.Contains(err.Error(), c.wantProblem) || !strings.Contains(err.Error(), "3 attempts") {
				t.Errorf("error %q lacks %q", err, c.wantProblem)
			}
			if n := len(f.recorded()); n != MaxAttempts {
				t.Errorf("%d chat requests, want %d", n, MaxAttempts)
			}
			if got.Blocks != nil || got.IntroCopy != "" {
				t.Errorf("an invalid answer came back: %+v", got)
			}
		})
	}
}

func TestChatCopyFencedAnswer(t *testing.T) {
	f := &fakeChat{answers: []string{"```json\n" + validAnswer + "\n```"}}
	got, err := New(openAIProvider(t, f)).Generate(context.Background(), Request{Query: "linen", Products: dresses()})
	if err != nil || got.Attempts != 1 {
		t.Fatalf("copy %+v, error %v", got, err)
	}
}

func TestChatCopyProviderErrors(t *testing.T) {
	cases := []struct {
		status int
		want   error
	}{
		{http.StatusTooManyRequests, ai.ErrRateLimited},
		{http.StatusBadGateway, ai.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			f := &fakeChat{answers: []string{validAnswer}, status: c.status}
			_, err := New(openAIProvider(t, f)).Generate(context.Background(), Request{Query: "linen", Products: dresses()})
			if !errors.Is(err, c.want) || errors.Is(err, ErrInvalidOutput) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
		})
	}
}

func TestSystemPromptCarriesTheRegistry(t *testing.T) {
	sys, err := SystemPrompt()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range block.Registry() {
		for name := range e.PropsSchema {
			if !strings.Contains(sys, `"`+name+`"`) {
				t.Errorf("prompt lacks prop %s of %s", name, e.Type)
			}
		}
	}
}
