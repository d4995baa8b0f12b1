package ai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func newTestLocal(t testing.TB) *Local {
	t.Helper()
	l, err := NewLocal(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func embedOne(t *testing.T, p Provider, text string) []float32 {
	t.Helper()
	v, err := p.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		wantName string
		wantErr  string
	}{
		{name: "default is local", cfg: Config{}, wantName: ProviderLocal},
		{name: "local, any case", cfg: Config{Provider: " Local "}, wantName: ProviderLocal},
		{name: "openai", cfg: Config{Provider: "openai", APIKey: "sk-x"}, wantName: ProviderOpenAI},
		{name: "unknown provider is named", cfg: Config{Provider: "anthropic"}, wantErr: `"anthropic"`},
		{name: "bad local dimensions", cfg: Config{Dimensions: -3}, wantErr: "dimensions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != tt.wantName {
				t.Errorf("Name() = %q, want %q", p.Name(), tt.wantName)
			}
		})
	}
}

func TestLocalDefaults(t *testing.T) {
	l := newTestLocal(t)
	if l.Name() != "local" || l.ChatModel() != "local-template" || l.EmbeddingModel() != "local-ngram-v1" || l.Dimensions() != 384 {
		t.Fatalf("defaults: %s %s %s %d", l.Name(), l.ChatModel(), l.EmbeddingModel(), l.Dimensions())
	}
	l2, _ := NewLocal(Config{ChatModel: "tmpl-2", EmbeddingModel: "ngram-2", Dimensions: 64})
	if l2.ChatModel() != "tmpl-2" || l2.EmbeddingModel() != "ngram-2" || l2.Dimensions() != 64 {
		t.Fatalf("overrides: %s %s %d", l2.ChatModel(), l2.EmbeddingModel(), l2.Dimensions())
	}
	if v := embedOne(t, l2, "kettle"); len(v) != 64 {
		t.Fatalf("len %d, want 64", len(v))
	}
}

func TestLocalEmbedSimilarityOrdering(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name                  string
		anchor, closer, other string
	}{
		{name: "word order does not matter much", anchor: "red running shoes", closer: "running shoes in red", other: "stainless steel kettle"},
		{name: "shared words beat unrelated", anchor: "waterproof hiking jacket", closer: "lightweight waterproof jacket for hiking", other: "ceramic coffee mug"},
		{name: "morphology via character trigrams", anchor: "runner", closer: "running", other: "kettle"},
		{name: "case and punctuation are ignored", anchor: "Organic Cotton T-Shirt!", closer: "organic cotton t shirt", other: "Organic Coffee Beans"},
		{name: "accented words", anchor: "crème brûlée dessert", closer: "crème brûlée", other: "garden hose"},
		{name: "non-latin scripts", anchor: "東京 ラーメン 店", closer: "東京 ラーメン", other: "大阪 寿司"},
		{name: "more overlap is closer", anchor: "black leather office chair", closer: "black leather chair", other: "black cotton socks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := embedOne(t, l, tt.anchor)
			c := Cosine(a, embedOne(t, l, tt.closer))
			o := Cosine(a, embedOne(t, l, tt.other))
			if !(c > o) {
				t.Errorf("cosine(%q, %q) = %.3f is not above cosine(%q, %q) = %.3f", tt.anchor, tt.closer, c, tt.anchor, tt.other, o)
			}
		})
	}
}

func TestLocalEmbedNormalisation(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name     string
		text     string
		wantZero bool
	}{
		{name: "empty", text: "", wantZero: true},
		{name: "whitespace", text: " \t\n ", wantZero: true},
		{name: "punctuation only", text: "?!… -- ***", wantZero: true},
		{name: "one letter", text: "a"},
		{name: "stop words only", text: "the and of"},
		{name: "emoji and words", text: "🔥 hot deals 🔥"},
		{name: "long text", text: strings.Repeat("breathable mesh upper with a cushioned sole ", 200)},
		{name: "numbers", text: "iphone 15 pro 256gb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := embedOne(t, l, tt.text)
			if len(v) != 384 {
				t.Fatalf("len %d, want 384", len(v))
			}
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("component %d is %v", i, x)
				}
			}
			n := norm(v)
			if tt.wantZero {
				if n != 0 {
					t.Errorf("norm %v, want a zero vector", n)
				}
				return
			}
			if math.Abs(n-1) > 1e-5 {
				t.Errorf("norm %v, want 1", n)
			}
			if c := Cosine(v, embedOne(t, l, tt.text)); math.Abs(float64(c)-1) > 1e-6 {
				t.Errorf("cosine with itself %v, want 1", c)
			}
		})
	}
}

func TestLocalEmbedDeterministic(t *testing.T) {
	texts := productTexts(200)
	a, err := newTestLocal(t).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh instance, texts embedded one at a time and concurrently, must give identical bits.
	l := newTestLocal(t)
	var wg sync.WaitGroup
	b := make([][]float32, len(texts))
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := l.Embed(context.Background(), []string{texts[i]})
			if err != nil {
				t.Error(err)
				return
			}
			b[i] = v[0]
		}()
	}
	wg.Wait()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("embeddings differ between runs")
	}
	// Pinned values guard against accidental changes to the algorithm: vectors stored under the
	// model name local-ngram-v1 must stay comparable with new ones. Change the model name (and
	// these numbers) when the algorithm changes on purpose.
	v := embedOne(t, l, "red running shoes")
	maxI := 0
	for i := range v {
		if math.Abs(float64(v[i])) > math.Abs(float64(v[maxI])) {
			maxI = i
		}
	}
	got := fmt.Sprintf("%.5f %.5f %d %.5f",
		Cosine(v, embedOne(t, l, "running shoes in red")), Cosine(v, embedOne(t, l, "stainless steel kettle")), maxI, v[maxI])
	if want := "0.93340 -0.05926 122 -0.42419"; got != want {
		t.Errorf("pinned values changed: got %s, want %s", got, want)
	}
	t.Logf("pinned: %s", got)
}

func TestLocalEmbedCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newTestLocal(t).Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func chat(t *testing.T, p Provider, req ChatRequest) ChatResponse {
	t.Helper()
	resp, err := p.Chat(context.Background(), req)
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	return resp
}

func user(s string) []Message { return []Message{{Role: RoleUser, Content: s}} }

func TestLocalChatCopy(t *testing.T) {
	l := newTestLocal(t)
	productPrompt := "Write an intro for the search query: running shoes\nProducts:\n- Nike Pegasus 40 — $120, responsive\n- Adidas Ultraboost (black)\n- Asics Gel-Kayano 30: stable\n- Hoka Clifton 9"
	tests := []struct {
		name      string
		messages  []Message
		maxTokens int
		contains  []string
		excludes  []string
		finish    string
		maxWords  int
	}{
		{
			name:     "intro for a query",
			messages: user("Write a short intro for a landing page about summer linen dresses."),
			contains: []string{"summer linen dresses"}, excludes: []string{"landing page"},
		},
		{
			name:     "intro for listed products",
			messages: user(productPrompt),
			contains: []string{"running shoes", "Nike Pegasus 40"}, excludes: []string{"$120", "Products:"},
		},
		{
			name:     "quoted query",
			messages: user(`Intro copy for "Waterproof Hiking Boots" please`),
			contains: []string{"Waterproof Hiking Boots"},
		},
		{
			name:     "products as JSON",
			messages: user(`Describe these products for the "gift ideas" page: [{"title":"Scented Candle"},{"title":"Wool Scarf"}]`),
			contains: []string{"gift ideas", "Scented Candle"},
		},
		{
			name:     "headline",
			messages: user("Give me a headline for 'winter coats'"),
			contains: []string{"Winter Coats"}, maxWords: 6,
		},
		{
			name:     "meta description within SEO length",
			messages: user("SEO meta description for outdoor furniture in 25 words"),
			contains: []string{"outdoor furniture"}, excludes: []string{"25"}, maxWords: 25,
		},
		{
			name:     "instructions in the system prompt, subject in the user message",
			messages: []Message{{Role: RoleSystem, Content: "You write landing page intros."}, {Role: RoleUser, Content: "query: trail running"}},
			contains: []string{"trail running"},
		},
		{
			name:     "system instructions are not mistaken for the subject",
			messages: []Message{{Role: RoleSystem, Content: "You write landing page intros."}, {Role: RoleUser, Content: "- Linen Shirt\n- Linen Trousers"}},
			contains: []string{"Linen Shirt"}, excludes: []string{"intros"},
		},
		{
			name:      "max tokens truncates",
			messages:  user(productPrompt),
			maxTokens: 5,
			finish:    FinishLength, maxWords: 5,
		},
		{
			name:     "small talk gets a helpful answer",
			messages: user("hello"),
			contains: []string{"local assistant"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ChatRequest{Messages: tt.messages, MaxTokens: tt.maxTokens}
			resp := chat(t, l, req)
			if resp.Content == "" || len(resp.ToolCalls) != 0 {
				t.Fatalf("response %+v, want text only", resp)
			}
			for _, s := range tt.contains {
				if !strings.Contains(resp.Content, s) {
					t.Errorf("%q does not contain %q", resp.Content, s)
				}
			}
			for _, s := range tt.excludes {
				if strings.Contains(resp.Content, s) {
					t.Errorf("%q contains %q", resp.Content, s)
				}
			}
			want := tt.finish
			if want == "" {
				want = FinishStop
			}
			if resp.FinishReason != want {
				t.Errorf("finish %q, want %q", resp.FinishReason, want)
			}
			if tt.maxWords > 0 && len(strings.Fields(resp.Content)) > tt.maxWords {
				t.Errorf("%d words, want at most %d: %q", len(strings.Fields(resp.Content)), tt.maxWords, resp.Content)
			}
			if resp.Usage.PromptTokens <= 0 || resp.Usage.CompletionTokens <= 0 {
				t.Errorf("usage %+v", resp.Usage)
			}
			if again := chat(t, l, req); !reflect.DeepEqual(again, resp) {
				t.Errorf("not deterministic:\n%+v\n%+v", resp, again)
			}
		})
	}
}

func TestLocalChatTemplatesVary(t *testing.T) {
	l := newTestLocal(t)
	seen := map[string]bool{}
	for _, q := range []string{"red shoes", "blue kettles", "garden chairs", "desk lamps", "yoga mats", "rain jackets", "coffee beans", "wool socks"} {
		resp := chat(t, l, ChatRequest{Messages: user("Write an intro for " + q)})
		seen[strings.ReplaceAll(resp.Content, q, "{q}")] = true
	}
	if len(seen) < 2 {
		t.Fatalf("all 8 intros used the same template: %v", seen)
	}
}

func TestLocalChatJSONMode(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name     string
		messages []Message
		wantKeys []string
		check    func(t *testing.T, obj map[string]any)
	}{
		{
			name:     "no shape requested",
			messages: user("Write an intro for red running shoes"),
			wantKeys: []string{"intro", "title"},
		},
		{
			name: "shape from a JSON example in the system prompt",
			messages: []Message{
				{Role: RoleSystem, Content: `Reply with JSON exactly like {"headline": "...", "intro": "...", "keywords": ["..."], "slug": "", "cta": "...", "meta_description": "...", "seo": {"title": "..."}, "count": 3}`},
				{Role: RoleUser, Content: "query: running shoes\nProducts:\n- Nike Pegasus 40\n- Adidas Ultraboost"},
			},
			wantKeys: []string{"count", "cta", "headline", "intro", "keywords", "meta_description", "seo", "slug"},
			check: func(t *testing.T, obj map[string]any) {
				if obj["slug"] != "running-shoes" {
					t.Errorf("slug %v", obj["slug"])
				}
				if kw, ok := obj["keywords"].([]any); !ok || len(kw) == 0 {
					t.Errorf("keywords %v", obj["keywords"])
				}
				if !strings.Contains(obj["intro"].(string), "Nike Pegasus 40") {
					t.Errorf("intro %v", obj["intro"])
				}
				if _, ok := obj["seo"].(map[string]any)["title"].(string); !ok {
					t.Errorf("seo %v", obj["seo"])
				}
				if obj["count"] != 3.0 {
					t.Errorf("count %v", obj["count"])
				}
				if m := obj["meta_description"].(string); len([]rune(m)) > 155 {
					t.Errorf("meta description %d runes", len([]rune(m)))
				}
			},
		},
		{
			name:     "shape from a list of keys",
			messages: user("Return JSON with keys headline, tagline and intro for winter coats."),
			wantKeys: []string{"headline", "intro", "tagline"},
		},
		{
			name:     "small talk",
			messages: user("hi"),
			wantKeys: []string{"message"},
		},
		{
			name: "after a tool result",
			messages: []Message{
				{Role: RoleUser, Content: "find red shoes"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "search_products", Arguments: `{"query":"red shoes"}`}}},
				{Role: RoleTool, ToolCallID: "c1", Content: `[{"title":"Red Runner"}]`},
			},
			wantKeys: []string{"summary"},
		},
		{
			name:     "quotes and newlines in the input",
			messages: user("Write an intro for \"men's \\\"best\\\" boots\"\n- Boot \"One\"\n- Boot\tTwo"),
			wantKeys: []string{"intro", "title"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := chat(t, l, ChatRequest{Messages: tt.messages, JSONMode: true, MaxTokens: 3})
			var obj map[string]any
			if err := json.Unmarshal([]byte(resp.Content), &obj); err != nil {
				t.Fatalf("content is not a JSON object: %v\n%s", err, resp.Content)
			}
			var keys []string
			for k := range obj {
				keys = append(keys, k)
			}
			if fmt.Sprint(sortedKeys(obj)) != fmt.Sprint(tt.wantKeys) {
				t.Errorf("keys %v, want %v (%s)", sortedKeys(obj), tt.wantKeys, resp.Content)
			}
			if tt.check != nil {
				tt.check(t, obj)
			}
		})
	}
}

var pageTools = []Tool{
	searchTool,
	{
		Name:        "save_page",
		Description: "Save the landing page with a title and a publication status",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"title":     map[string]any{"type": "string"},
				"status":    map[string]any{"type": "string", "enum": []any{"draft", "published"}},
				"featured":  map[string]any{"type": "boolean"},
				"max_price": map[string]any{"type": "number"},
				"tags":      map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			},
			"required": []any{"title", "status"},
		},
	},
	{
		Name:        "getWeather",
		Description: "Current weather for a city",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "units": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}, "default": "celsius"}},
			"required":   []any{"city"},
		},
	},
	{Name: "list_segments", Description: "List the tenant's audience segments"},
	{
		Name:        "set_discount",
		Description: "Set a discount for a customer tier",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]map[string]any{
				"tier":    {"type": "string", "enum": []string{"standard", "vip"}},
				"percent": {"type": "integer", "minimum": 0, "maximum": 100},
			},
			"required": []string{"tier", "percent"},
		},
	},
}

func TestLocalToolCalls(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name     string
		message  string
		wantTool string // "" means a text answer
		wantArgs string
	}{
		{name: "search by verb synonym, number to integer", message: "Please find 5 red running shoes for men", wantTool: "search_products", wantArgs: `{"limit":5,"query":"red running shoes for men"}`},
		{name: "explicit key value pairs, clamped to maximum", message: `search products query: "trail shoes", limit=100`, wantTool: "search_products", wantArgs: `{"limit":50,"query":"trail shoes"}`},
		{name: "quoted text fills the required string", message: `Search for 'wool socks' please`, wantTool: "search_products", wantArgs: `{"query":"wool socks"}`},
		{name: "number next to the parameter name wins", message: "search 2024 catalogue for lamps, limit 7", wantTool: "search_products", wantArgs: `{"limit":7,"query":"2024 catalogue for lamps"}`},
		{name: "enum from the message, required title from a pair", message: "save the page as published with title: Summer Sale", wantTool: "save_page", wantArgs: `{"status":"published","title":"Summer Sale"}`},
		{name: "enum fallback, boolean, number and array pairs", message: `save page title="Gift Guide"; featured: yes; max_price: 49.90; tags: gifts, winter, sale`, wantTool: "save_page", wantArgs: `{"featured":true,"max_price":49.9,"status":"draft","tags":["gifts","winter","sale"],"title":"Gift Guide"}`},
		{name: "camelCase tool name and defaults", message: "what's the weather in city: Lisbon?", wantTool: "getWeather", wantArgs: `{"city":"Lisbon","units":"celsius"}`},
		{name: "tool without parameters", message: "list all segments", wantTool: "list_segments", wantArgs: `{}`},
		{name: "schema written with Go types", message: "set the discount for VIP customers to 150 percent", wantTool: "set_discount", wantArgs: `{"percent":100,"tier":"vip"}`},
		{name: "nothing matches: text answer", message: "tell me a joke", wantTool: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ChatRequest{Messages: user(tt.message), Tools: pageTools}
			resp := chat(t, l, req)
			if tt.wantTool == "" {
				if len(resp.ToolCalls) != 0 || resp.Content == "" || resp.FinishReason != FinishStop {
					t.Fatalf("response %+v, want a text answer", resp)
				}
				return
			}
			if len(resp.ToolCalls) != 1 {
				t.Fatalf("response %+v, want one tool call", resp)
			}
			tc := resp.ToolCalls[0]
			if tc.Name != tt.wantTool {
				t.Errorf("tool %q, want %q", tc.Name, tt.wantTool)
			}
			if !json.Valid([]byte(tc.Arguments)) {
				t.Fatalf("arguments are not JSON: %s", tc.Arguments)
			}
			if tc.Arguments != tt.wantArgs {
				t.Errorf("arguments %s, want %s", tc.Arguments, tt.wantArgs)
			}
			if !strings.HasPrefix(tc.ID, "call_") || resp.FinishReason != FinishToolCalls {
				t.Errorf("id %q finish %q", tc.ID, resp.FinishReason)
			}
			if again := chat(t, l, req); !reflect.DeepEqual(again, resp) {
				t.Errorf("not deterministic:\n%+v\n%+v", resp, again)
			}
		})
	}
}

func TestLocalToolResultTerminates(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name     string
		result   string
		contains []string
	}{
		{name: "array of products", result: `[{"title":"Red Runner"},{"title":"Crimson Sprint"},{"name":"Scarlet Trail"},{"title":"Ruby Road"}]`, contains: []string{"search_products", "4 results", `"Red Runner"`, `"Scarlet Trail"`}},
		{name: "object with items", result: `{"items":[{"title":"Red Runner"}],"total":1}`, contains: []string{"1 result", `"Red Runner"`}},
		{name: "object with fields", result: `{"id":42,"slug":"red-shoes","status":"draft"}`, contains: []string{"id 42", "slug red-shoes", "status draft"}},
		{name: "error", result: `{"error":"catalogue is empty"}`, contains: []string{"error", "catalogue is empty"}},
		{name: "plain text", result: "ok, saved", contains: []string{"ok, saved"}},
		{name: "empty", result: "", contains: []string{"no output"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := user("find 4 red shoes")
			first := chat(t, l, ChatRequest{Messages: msgs, Tools: pageTools})
			if len(first.ToolCalls) != 1 {
				t.Fatalf("first turn %+v, want a tool call", first)
			}
			msgs = append(msgs,
				Message{Role: RoleAssistant, ToolCalls: first.ToolCalls},
				Message{Role: RoleTool, ToolCallID: first.ToolCalls[0].ID, Content: tt.result},
			)
			second := chat(t, l, ChatRequest{Messages: msgs, Tools: pageTools})
			if len(second.ToolCalls) != 0 || second.FinishReason != FinishStop {
				t.Fatalf("second turn %+v, want text and no tool call", second)
			}
			for _, s := range tt.contains {
				if !strings.Contains(second.Content, s) {
					t.Errorf("%q does not contain %q", second.Content, s)
				}
			}
		})
	}
}

// TestLocalAgentLoop runs the loop a page agent would: it must end with text within a few turns.
func TestLocalAgentLoop(t *testing.T) {
	l := newTestLocal(t)
	msgs := []Message{
		{Role: RoleSystem, Content: "You build landing pages. Use the tools."},
		{Role: RoleUser, Content: "Build a page for 'linen dresses'"},
	}
	tools := []Tool{searchTool, pageTools[1]}
	for turn := 0; turn < 5; turn++ {
		resp := chat(t, l, ChatRequest{Messages: msgs, Tools: tools})
		if len(resp.ToolCalls) == 0 {
			if resp.Content == "" {
				t.Fatal("final answer is empty")
			}
			return
		}
		msgs = append(msgs, Message{Role: RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			msgs = append(msgs, Message{Role: RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: `{"ok":true}`})
		}
	}
	t.Fatal("agent loop did not terminate within 5 turns")
}

func TestLocalChatStream(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name string
		req  ChatRequest
	}{
		{name: "text", req: ChatRequest{Messages: user("Write an intro for 'red running shoes'")}},
		{name: "json", req: ChatRequest{Messages: user("Write an intro for 'red running shoes'"), JSONMode: true}},
		{name: "tool call", req: ChatRequest{Messages: user("find red shoes"), Tools: pageTools}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				content strings.Builder
				deltas  int
				calls   []ToolCall
			)
			resp, err := l.ChatStream(context.Background(), tt.req, func(ev StreamEvent) error {
				if ev.ToolCall != nil {
					calls = append(calls, *ev.ToolCall)
					return nil
				}
				if strings.Count(strings.TrimSpace(ev.ContentDelta), " ") > 0 {
					t.Errorf("delta %q is more than one word", ev.ContentDelta)
				}
				deltas++
				content.WriteString(ev.ContentDelta)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := chat(t, l, tt.req)
			if !reflect.DeepEqual(resp, want) {
				t.Errorf("stream result %+v differs from Chat %+v", resp, want)
			}
			if content.String() != resp.Content {
				t.Errorf("deltas assemble to %q, want %q", content.String(), resp.Content)
			}
			if resp.Content != "" && deltas < 2 && len(strings.Fields(resp.Content)) > 1 {
				t.Errorf("%d deltas for %d words", deltas, len(strings.Fields(resp.Content)))
			}
			if !reflect.DeepEqual(calls, resp.ToolCalls) {
				t.Errorf("streamed calls %+v, want %+v", calls, resp.ToolCalls)
			}
		})
	}
	t.Run("callback error stops the stream", func(t *testing.T) {
		stop := errors.New("stop")
		n := 0
		_, err := l.ChatStream(context.Background(), tests[0].req, func(StreamEvent) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("err %v after %d events", err, n)
		}
	})
}

func TestLocalRejectsInvalidRequests(t *testing.T) {
	l := newTestLocal(t)
	tests := []struct {
		name string
		req  ChatRequest
	}{
		{name: "no messages", req: ChatRequest{}},
		{name: "unknown role", req: ChatRequest{Messages: []Message{{Role: "robot", Content: "x"}}}},
		{name: "orphan tool message", req: ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x"}, {Role: RoleTool, ToolCallID: "c9", Content: "{}"}}}},
		{name: "duplicate tools", req: ChatRequest{Messages: user("x"), Tools: []Tool{{Name: "a"}, {Name: "a"}}}},
		{name: "negative max tokens", req: ChatRequest{Messages: user("x"), MaxTokens: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Chat(context.Background(), tt.req)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("err %v, want ErrInvalidRequest", err)
			}
		})
	}
}

// BenchmarkLocalEmbed embeds 64 product texts per call, the size of a catalogue import batch.
func BenchmarkLocalEmbed(b *testing.B) {
	l := newTestLocal(b)
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = productTexts(64)[i] + " — breathable, durable and made to last, with free returns within 30 days"
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzLocalChat: any input gives an answer without panicking; JSON mode content and tool
// arguments are always valid JSON.
func FuzzLocalChat(f *testing.F) {
	for _, s := range []string{
		"Please find 5 red running shoes for men",
		`save page title="Gift Guide"; featured: yes; max_price: 49.90; tags: gifts, winter`,
		"Write an intro for 'x'\n- a — b\n- c (d)\n{\"title\": 1}",
		`Return JSON like {"a": [1, {"b": null}], "c": {"d": "e"}} with keys x, y and z`,
		"query: \"unterminated\nlimit=-3.5e9 city: 東京",
		"",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	l := newTestLocal(f)
	f.Fuzz(func(t *testing.T, msg string, jsonMode bool) {
		if strings.TrimSpace(msg) == "" {
			return
		}
		req := ChatRequest{Messages: []Message{{Role: RoleSystem, Content: msg}, {Role: RoleUser, Content: msg}}, Tools: pageTools, JSONMode: jsonMode}
		resp, err := l.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range resp.ToolCalls {
			if !json.Valid([]byte(tc.Arguments)) {
				t.Fatalf("arguments %q are not JSON", tc.Arguments)
			}
		}
		req.Tools = nil
		resp, err = l.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if jsonMode && !json.Valid([]byte(resp.Content)) {
			t.Fatalf("content %q is not JSON", resp.Content)
		}
		if _, err := l.Embed(context.Background(), []string{msg}); err != nil {
			t.Fatal(err)
		}
	})
}
