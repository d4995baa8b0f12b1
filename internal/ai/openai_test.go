package ai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testAPIKey = "sk-test-0123456789abcdef"

// fakeOpenAI is a loopback server speaking the OpenAI HTTP API: POST /v1/embeddings and
// POST /v1/chat/completions (JSON, or SSE when "stream": true). Embeddings are the local
// provider's vectors scaled by 3 (so the client must re-normalise) and returned in reverse order
// (so the client must use the index field).
type fakeOpenAI struct {
	t     *testing.T
	local *Local

	mu       sync.Mutex
	requests []recordedRequest

	// chat answers a non-streaming chat request with a response body; nil means a fixed text answer.
	chat func(body map[string]any) any
	// stream answers a streaming chat request with SSE data payloads (without "data: ").
	stream func(body map[string]any) []string
	// fail, when set, answers every request with this status, headers and body.
	fail *failure
	// delay holds every answer back (to trigger client timeouts).
	delay time.Duration
}

type failure struct {
	status int
	header map[string]string
	body   string
}

type recordedRequest struct {
	path   string
	auth   string
	accept string
	body   map[string]any
}

func newFakeOpenAI(t *testing.T) (*fakeOpenAI, *httptest.Server) {
	t.Helper()
	local, err := NewLocal(Config{Dimensions: 16})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeOpenAI{t: t, local: local}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeOpenAI) recorded() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.requests...)
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, recordedRequest{path: r.URL.Path, auth: r.Header.Get("Authorization"), accept: r.Header.Get("Accept"), body: body})
	f.mu.Unlock()

	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.fail != nil {
		for k, v := range f.fail.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(f.fail.status)
		_, _ = io.WriteString(w, f.fail.body)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+testAPIKey {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings":
		f.serveEmbeddings(w, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		if stream, _ := body["stream"].(bool); stream {
			f.serveStream(w, body)
			return
		}
		f.serveChat(w, body)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"Unknown request URL","type":"invalid_request_error"}}`)
	}
}

func (f *fakeOpenAI) serveEmbeddings(w http.ResponseWriter, body map[string]any) {
	inputs, _ := body["input"].([]any)
	texts := make([]string, len(inputs))
	for i, in := range inputs {
		s, _ := in.(string)
		if s == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"'$.input' is invalid","type":"invalid_request_error"}}`)
			return
		}
		texts[i] = s
	}
	vecs, _ := f.local.Embed(context.Background(), texts)
	if d, ok := body["dimensions"].(float64); ok && d > 0 {
		l, _ := NewLocal(Config{Dimensions: int(d)})
		vecs, _ = l.Embed(context.Background(), texts)
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]datum, 0, len(vecs))
	for i := len(vecs) - 1; i >= 0; i-- { // out of order on purpose
		scaled := make([]float32, len(vecs[i]))
		for j, x := range vecs[i] {
			scaled[j] = 3 * x
		}
		data = append(data, datum{Object: "embedding", Index: i, Embedding: scaled})
	}
	writeJSON(w, map[string]any{
		"object": "list",
		"data":   data,
		"model":  body["model"],
		"usage":  map[string]any{"prompt_tokens": len(texts), "total_tokens": len(texts)},
	})
}

func (f *fakeOpenAI) serveChat(w http.ResponseWriter, body map[string]any) {
	if f.chat != nil {
		writeJSON(w, f.chat(body))
		return
	}
	writeJSON(w, chatCompletion(body["model"], map[string]any{"role": "assistant", "content": "hello from the fake"}, "stop"))
}

func (f *fakeOpenAI) serveStream(w http.ResponseWriter, body map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, chunk := range f.stream(body) {
		_, _ = fmt.Fprintf(w, "data: %s\n\n", chunk)
		if fl != nil {
			fl.Flush()
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func chatCompletion(model any, message map[string]any, finish string) map[string]any {
	return map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
	}
}

func newTestOpenAI(t *testing.T, srv *httptest.Server, mutate func(*Config)) *OpenAI {
	t.Helper()
	cfg := Config{Provider: ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: testAPIKey, HTTPClient: srv.Client()}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func productTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("product %d: %s %s in %s", i, adjectives[i%len(adjectives)], nouns[(i/3)%len(nouns)], colours[(i/7)%len(colours)])
	}
	return out
}

var (
	adjectives = []string{"lightweight", "waterproof", "organic cotton", "stainless steel", "handmade", "vintage", "ergonomic"}
	nouns      = []string{"running shoes", "rain jacket", "t-shirt", "kettle", "desk lamp", "backpack", "sofa", "headphones"}
	colours    = []string{"red", "navy blue", "forest green", "black", "white"}
)

func TestOpenAIEmbed(t *testing.T) {
	tests := []struct {
		name          string
		texts         []string
		cfg           func(*Config)
		wantBatches   []int
		wantDimsParam float64 // 0: not sent
		wantDims      int
		wantModel     string
	}{
		{name: "no texts, no request", texts: nil, wantBatches: nil, wantDims: 1536, wantModel: DefaultOpenAIEmbeddingModel},
		{name: "one batch", texts: productTexts(3), wantBatches: []int{3}, wantDims: 16, wantModel: DefaultOpenAIEmbeddingModel},
		{name: "600 texts in batches of 256", texts: productTexts(600), wantBatches: []int{256, 256, 88}, wantDims: 16, wantModel: DefaultOpenAIEmbeddingModel},
		{
			name: "custom batch size, model and dimensions", texts: productTexts(10),
			cfg: func(c *Config) {
				c.EmbedBatchSize = 4
				c.EmbeddingModel = "my-embedder"
				c.Dimensions = 32
			},
			wantBatches: []int{4, 4, 2}, wantDimsParam: 32, wantDims: 32, wantModel: "my-embedder",
		},
		{
			name: "empty texts are not sent and give zero vectors", texts: []string{"red shoes", "", "   ", "blue kettle"},
			wantBatches: []int{2}, wantDims: 16, wantModel: DefaultOpenAIEmbeddingModel,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, srv := newFakeOpenAI(t)
			p := newTestOpenAI(t, srv, tt.cfg)
			got, err := p.Embed(context.Background(), tt.texts)
			if err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if len(got) != len(tt.texts) {
				t.Fatalf("got %d vectors for %d texts", len(got), len(tt.texts))
			}
			reqs := fake.recorded()
			var batches []int
			for _, r := range reqs {
				if r.path != "/v1/embeddings" {
					t.Errorf("path %q, want /v1/embeddings", r.path)
				}
				if r.auth != "Bearer "+testAPIKey {
					t.Errorf("Authorization %q", r.auth)
				}
				if r.body["model"] != tt.wantModel {
					t.Errorf("model %v, want %s", r.body["model"], tt.wantModel)
				}
				d, sent := r.body["dimensions"].(float64)
				if tt.wantDimsParam == 0 && sent {
					t.Errorf("dimensions %v sent, want none", d)
				}
				if tt.wantDimsParam != 0 && d != tt.wantDimsParam {
					t.Errorf("dimensions %v, want %v", d, tt.wantDimsParam)
				}
				in, _ := r.body["input"].([]any)
				batches = append(batches, len(in))
			}
			if fmt.Sprint(batches) != fmt.Sprint(tt.wantBatches) {
				t.Errorf("batches %v, want %v", batches, tt.wantBatches)
			}
			// Order is preserved (the fake answers in reverse) and vectors are re-normalised: each
			// must equal the local embedding of the same text.
			ref, _ := NewLocal(Config{Dimensions: tt.wantDims})
			want, _ := ref.Embed(context.Background(), tt.texts)
			for i, v := range got {
				if len(v) != tt.wantDims {
					t.Fatalf("vector %d has %d dims, want %d", i, len(v), tt.wantDims)
				}
				if strings.TrimSpace(tt.texts[i]) == "" {
					if norm(v) != 0 {
						t.Errorf("vector %d for empty text has norm %v, want 0", i, norm(v))
					}
					continue
				}
				if n := norm(v); math.Abs(n-1) > 1e-5 {
					t.Errorf("vector %d norm %v, want 1", i, n)
				}
				if c := Cosine(v, want[i]); c < 0.9999 {
					t.Errorf("vector %d is not the embedding of %q (cosine %v): order lost?", i, tt.texts[i], c)
				}
			}
			if p.Dimensions() != tt.wantDims {
				t.Errorf("Dimensions() = %d, want %d", p.Dimensions(), tt.wantDims)
			}
		})
	}
}

func TestOpenAIEmbedLearnsUnknownModelDims(t *testing.T) {
	_, srv := newFakeOpenAI(t)
	p := newTestOpenAI(t, srv, func(c *Config) { c.EmbeddingModel = "nomic-embed-text" })
	if d := p.Dimensions(); d != 0 {
		t.Fatalf("Dimensions() before any call = %d, want 0", d)
	}
	if _, err := p.Embed(context.Background(), []string{"hello"}); err != nil {
		t.Fatal(err)
	}
	if d := p.Dimensions(); d != 16 {
		t.Fatalf("Dimensions() after a call = %d, want 16", d)
	}
}

var searchTool = Tool{
	Name:        "search_products",
	Description: "Semantic search over the tenant's product catalogue",
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"query": map[string]any{"type": "string", "description": "what to look for"},
			"limit": map[string]any{"type": "integer", "minimum": 1.0, "maximum": 50.0},
		},
		"required": []any{"query"},
	},
}

func TestOpenAIChat(t *testing.T) {
	history := []Message{
		{Role: RoleSystem, Content: "You build landing pages."},
		{Role: RoleUser, Content: "Build a page for red running shoes", Name: "alice"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "search_products", Arguments: `{"query":"red running shoes"}`}}},
		{Role: RoleTool, ToolCallID: "call_1", Name: "search_products", Content: `[{"title":"Red Runner"}]`},
	}
	tests := []struct {
		name      string
		cfg       func(*Config)
		req       ChatRequest
		answer    func(body map[string]any) any
		check     func(t *testing.T, body map[string]any)
		want      ChatResponse
		wantModel string
	}{
		{
			name:      "plain text",
			req:       ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}, Temperature: 0.2, MaxTokens: 100},
			wantModel: DefaultOpenAIChatModel,
			check: func(t *testing.T, body map[string]any) {
				if body["max_tokens"] != 100.0 {
					t.Errorf("max_tokens %v", body["max_tokens"])
				}
				if math.Abs(body["temperature"].(float64)-0.2) > 1e-6 {
					t.Errorf("temperature %v", body["temperature"])
				}
				if _, ok := body["tools"]; ok {
					t.Errorf("tools sent without tools")
				}
				if body["stream"] != false {
					t.Errorf("stream %v", body["stream"])
				}
			},
			want: ChatResponse{Content: "hello from the fake", FinishReason: "stop", Usage: Usage{PromptTokens: 42, CompletionTokens: 7}},
		},
		{
			name:      "tool calls round trip",
			cfg:       func(c *Config) { c.ChatModel = "my-chat-model" },
			req:       ChatRequest{Messages: history[:2], Tools: []Tool{searchTool}},
			wantModel: "my-chat-model",
			check: func(t *testing.T, body map[string]any) {
				tools := body["tools"].([]any)
				tool := tools[0].(map[string]any)
				if tool["type"] != "function" {
					t.Errorf("tool type %v", tool["type"])
				}
				fn := tool["function"].(map[string]any)
				if fn["name"] != "search_products" || fn["description"] != searchTool.Description {
					t.Errorf("function %v", fn)
				}
				params := fn["parameters"].(map[string]any)
				if params["required"].([]any)[0] != "query" {
					t.Errorf("parameters %v", params)
				}
				msgs := body["messages"].([]any)
				if msgs[1].(map[string]any)["name"] != "alice" {
					t.Errorf("user name lost: %v", msgs[1])
				}
			},
			answer: func(body map[string]any) any {
				return chatCompletion(body["model"], map[string]any{
					"role": "assistant", "content": nil,
					"tool_calls": []any{
						map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "search_products", "arguments": `{"query":"red running shoes","limit":5}`}},
						map[string]any{"id": "call_b", "type": "function", "function": map[string]any{"name": "search_products", "arguments": `{"query":"trail shoes"}`}},
					},
				}, "tool_calls")
			},
			want: ChatResponse{
				ToolCalls: []ToolCall{
					{ID: "call_a", Name: "search_products", Arguments: `{"query":"red running shoes","limit":5}`},
					{ID: "call_b", Name: "search_products", Arguments: `{"query":"trail shoes"}`},
				},
				FinishReason: "tool_calls", Usage: Usage{PromptTokens: 42, CompletionTokens: 7},
			},
		},
		{
			name:      "tool results are sent back",
			req:       ChatRequest{Messages: history, Tools: []Tool{searchTool}},
			wantModel: DefaultOpenAIChatModel,
			check: func(t *testing.T, body map[string]any) {
				msgs := body["messages"].([]any)
				asst := msgs[2].(map[string]any)
				tc := asst["tool_calls"].([]any)[0].(map[string]any)
				if tc["id"] != "call_1" || tc["type"] != "function" || tc["function"].(map[string]any)["arguments"] != `{"query":"red running shoes"}` {
					t.Errorf("assistant tool call %v", tc)
				}
				tool := msgs[3].(map[string]any)
				if tool["role"] != "tool" || tool["tool_call_id"] != "call_1" || tool["content"] != `[{"title":"Red Runner"}]` {
					t.Errorf("tool message %v", tool)
				}
				if _, ok := tool["name"]; ok {
					t.Errorf("tool message carries a name: %v", tool)
				}
			},
			want: ChatResponse{Content: "hello from the fake", FinishReason: "stop", Usage: Usage{PromptTokens: 42, CompletionTokens: 7}},
		},
		{
			name:      "json mode adds a json instruction when no message mentions it",
			req:       ChatRequest{Messages: []Message{{Role: RoleUser, Content: "headline for shoes"}}, JSONMode: true},
			wantModel: DefaultOpenAIChatModel,
			check: func(t *testing.T, body map[string]any) {
				rf := body["response_format"].(map[string]any)
				if rf["type"] != "json_object" {
					t.Errorf("response_format %v", rf)
				}
				msgs := body["messages"].([]any)
				if len(msgs) != 2 || !strings.Contains(strings.ToLower(msgs[0].(map[string]any)["content"].(string)), "json") {
					t.Errorf("messages %v", msgs)
				}
			},
			answer: func(body map[string]any) any {
				return chatCompletion(body["model"], map[string]any{"role": "assistant", "content": `{"headline":"Shoes"}`}, "stop")
			},
			want: ChatResponse{Content: `{"headline":"Shoes"}`, FinishReason: "stop", Usage: Usage{PromptTokens: 42, CompletionTokens: 7}},
		},
		{
			name:      "json mode keeps messages that mention JSON",
			req:       ChatRequest{Messages: []Message{{Role: RoleUser, Content: "Return JSON with a headline"}}, JSONMode: true},
			wantModel: DefaultOpenAIChatModel,
			check: func(t *testing.T, body map[string]any) {
				if msgs := body["messages"].([]any); len(msgs) != 1 {
					t.Errorf("messages %v", msgs)
				}
			},
			want: ChatResponse{Content: "hello from the fake", FinishReason: "stop", Usage: Usage{PromptTokens: 42, CompletionTokens: 7}},
		},
		{
			name:      "reasoning models get max_completion_tokens and no temperature",
			cfg:       func(c *Config) { c.ChatModel = "o3-mini" },
			req:       ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}, Temperature: 0.7, MaxTokens: 64},
			wantModel: "o3-mini",
			check: func(t *testing.T, body map[string]any) {
				if body["max_completion_tokens"] != 64.0 {
					t.Errorf("max_completion_tokens %v", body["max_completion_tokens"])
				}
				if _, ok := body["max_tokens"]; ok {
					t.Errorf("max_tokens sent")
				}
				if _, ok := body["temperature"]; ok {
					t.Errorf("temperature sent")
				}
			},
			want: ChatResponse{Content: "hello from the fake", FinishReason: "stop", Usage: Usage{PromptTokens: 42, CompletionTokens: 7}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, srv := newFakeOpenAI(t)
			fake.chat = tt.answer
			p := newTestOpenAI(t, srv, tt.cfg)
			got, err := p.Chat(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			reqs := fake.recorded()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.path != "/v1/chat/completions" || r.auth != "Bearer "+testAPIKey {
				t.Errorf("path %q auth %q", r.path, r.auth)
			}
			if r.body["model"] != tt.wantModel {
				t.Errorf("model %v, want %s", r.body["model"], tt.wantModel)
			}
			if tt.check != nil {
				tt.check(t, r.body)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("response\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func sseChunk(delta map[string]any, finish any) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
	return string(b)
}

func toolFrag(index int, id, name, args string) map[string]any {
	frag := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		frag["id"] = id
		frag["type"] = "function"
		frag["function"].(map[string]any)["name"] = name
	}
	return map[string]any{"tool_calls": []any{frag}}
}

func TestOpenAIChatStream(t *testing.T) {
	usage := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`
	tests := []struct {
		name       string
		chunks     []string
		wantDeltas []string
		want       ChatResponse
	}{
		{
			name: "content deltas",
			chunks: []string{
				sseChunk(map[string]any{"role": "assistant", "content": ""}, nil),
				sseChunk(map[string]any{"content": "Discover "}, nil),
				sseChunk(map[string]any{"content": "red "}, nil),
				sseChunk(map[string]any{"content": "shoes."}, nil),
				sseChunk(map[string]any{}, "stop"),
				usage,
			},
			wantDeltas: []string{"Discover ", "red ", "shoes."},
			want:       ChatResponse{Content: "Discover red shoes.", FinishReason: "stop", Usage: Usage{PromptTokens: 30, CompletionTokens: 12}},
		},
		{
			name: "tool call fragments assembled by index",
			chunks: []string{
				sseChunk(map[string]any{"role": "assistant", "content": "Searching."}, nil),
				sseChunk(toolFrag(0, "call_a", "search_products", ""), nil),
				sseChunk(toolFrag(0, "", "", `{"que`), nil),
				sseChunk(toolFrag(0, "", "", `ry":"red`), nil),
				sseChunk(toolFrag(1, "call_b", "save_page", `{"title":`), nil),
				sseChunk(toolFrag(0, "", "", ` shoes"}`), nil),
				sseChunk(toolFrag(1, "", "", `"Red"}`), nil),
				sseChunk(map[string]any{}, "tool_calls"),
				usage,
			},
			wantDeltas: []string{"Searching."},
			want: ChatResponse{
				Content: "Searching.",
				ToolCalls: []ToolCall{
					{ID: "call_a", Name: "search_products", Arguments: `{"query":"red shoes"}`},
					{ID: "call_b", Name: "save_page", Arguments: `{"title":"Red"}`},
				},
				FinishReason: "tool_calls", Usage: Usage{PromptTokens: 30, CompletionTokens: 12},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, srv := newFakeOpenAI(t)
			fake.stream = func(map[string]any) []string { return tt.chunks }
			p := newTestOpenAI(t, srv, nil)
			var (
				deltas []string
				calls  []ToolCall
			)
			got, err := p.ChatStream(context.Background(), ChatRequest{
				Messages: []Message{{Role: RoleUser, Content: "red shoes page"}},
				Tools:    []Tool{searchTool},
			}, func(ev StreamEvent) error {
				if ev.ToolCall != nil {
					calls = append(calls, *ev.ToolCall)
				} else {
					if len(calls) > 0 {
						t.Errorf("content delta %q after a tool call", ev.ContentDelta)
					}
					deltas = append(deltas, ev.ContentDelta)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("ChatStream: %v", err)
			}
			r := fake.recorded()[0]
			if r.body["stream"] != true {
				t.Errorf("stream %v, want true", r.body["stream"])
			}
			if so, _ := r.body["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("stream_options %v", r.body["stream_options"])
			}
			if r.accept != "text/event-stream" {
				t.Errorf("Accept %q", r.accept)
			}
			if fmt.Sprint(deltas) != fmt.Sprint(tt.wantDeltas) {
				t.Errorf("deltas %q, want %q", deltas, tt.wantDeltas)
			}
			if fmt.Sprintf("%+v", calls) != fmt.Sprintf("%+v", tt.want.ToolCalls) {
				t.Errorf("streamed tool calls %+v, want %+v", calls, tt.want.ToolCalls)
			}
			for _, c := range calls {
				if !json.Valid([]byte(c.Arguments)) {
					t.Errorf("arguments %q are not valid JSON", c.Arguments)
				}
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("response\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestOpenAIChatStreamCallbackErrorStops(t *testing.T) {
	fake, srv := newFakeOpenAI(t)
	fake.stream = func(map[string]any) []string {
		return []string{sseChunk(map[string]any{"content": "a "}, nil), sseChunk(map[string]any{"content": "b"}, "stop")}
	}
	p := newTestOpenAI(t, srv, nil)
	stop := errors.New("client went away")
	n := 0
	_, err := p.ChatStream(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x"}}}, func(StreamEvent) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("err %v after %d events, want the callback's error after 1", err, n)
	}
}

type callFunc func(ctx context.Context, p *OpenAI) error

var ops = map[string]callFunc{
	"embed": func(ctx context.Context, p *OpenAI) error {
		_, err := p.Embed(ctx, []string{"red shoes"})
		return err
	},
	"chat": func(ctx context.Context, p *OpenAI) error {
		_, err := p.Chat(ctx, ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
		return err
	},
	"chat stream": func(ctx context.Context, p *OpenAI) error {
		_, err := p.ChatStream(ctx, ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, func(StreamEvent) error { return nil })
		return err
	},
}

func TestOpenAIErrorMapping(t *testing.T) {
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return "http://" + addr + "/v1"
	}()
	tests := []struct {
		name           string
		fail           *failure
		delay          time.Duration
		baseURL        string
		apiKey         string
		wantKind       error
		notKind        error
		wantStatus     int
		wantMessage    string
		wantRetryAfter time.Duration
		wantCause      error
	}{
		{
			name: "429 rate limited keeps the server's message and Retry-After",
			fail: &failure{status: 429, header: map[string]string{"Retry-After": "7"},
				body: `{"error":{"message":"Rate limit reached for gpt-4o-mini on requests per min","type":"requests","code":"rate_limit_exceeded"}}`},
			wantKind: ErrRateLimited, wantStatus: 429, wantMessage: "Rate limit reached for gpt-4o-mini on requests per min", wantRetryAfter: 7 * time.Second,
		},
		{
			name:     "429 with retry-after-ms",
			fail:     &failure{status: 429, header: map[string]string{"Retry-After-Ms": "1500"}, body: `{"error":{"message":"slow down"}}`},
			wantKind: ErrRateLimited, wantStatus: 429, wantMessage: "slow down", wantRetryAfter: 1500 * time.Millisecond,
		},
		{
			name:     "500 unavailable",
			fail:     &failure{status: 500, body: `{"error":{"message":"The server had an error while processing your request","type":"server_error"}}`},
			wantKind: ErrUnavailable, wantStatus: 500, wantMessage: "The server had an error",
		},
		{
			name:     "503 with a non-JSON body",
			fail:     &failure{status: 503, body: "<html>upstream connect error</html>"},
			wantKind: ErrUnavailable, wantStatus: 503, wantMessage: "upstream connect error",
		},
		{
			name:     "401 unauthorized is its own kind",
			apiKey:   "sk-wrong-key-abcdef",
			wantKind: ErrUnauthorized, notKind: ErrUnavailable, wantStatus: 401, wantMessage: "Incorrect API key",
		},
		{
			name:     "403 unauthorized",
			fail:     &failure{status: 403, body: `{"error":{"message":"Project does not have access to model","type":"invalid_request_error"}}`},
			wantKind: ErrUnauthorized, notKind: ErrUnavailable, wantStatus: 403,
		},
		{
			name:     "400 invalid request",
			fail:     &failure{status: 400, body: `{"error":{"message":"Invalid 'messages[0].content'","type":"invalid_request_error","param":"messages"}}`},
			wantKind: ErrInvalidRequest, notKind: ErrUnavailable, wantStatus: 400, wantMessage: "Invalid 'messages[0].content'",
		},
		{
			name:     "404 unknown model",
			fail:     &failure{status: 404, body: `{"error":{"message":"The model 'nope' does not exist","type":"invalid_request_error","code":"model_not_found"}}`},
			wantKind: ErrInvalidRequest, wantStatus: 404, wantMessage: "does not exist",
		},
		{
			name:     "422 unprocessable",
			fail:     &failure{status: 422, body: `{"error":{"message":"input too long"}}`},
			wantKind: ErrInvalidRequest, wantStatus: 422, wantMessage: "input too long",
		},
		{
			name:     "the api key never appears in errors",
			fail:     &failure{status: 401, body: `{"error":{"message":"Incorrect API key provided: ` + testAPIKey + `"}}`},
			wantKind: ErrUnauthorized, wantStatus: 401, wantMessage: "[redacted]",
		},
		{
			name:     "connection refused",
			baseURL:  refused,
			wantKind: ErrUnavailable,
		},
		{
			name:      "timeout",
			delay:     2 * time.Second,
			wantKind:  ErrUnavailable,
			wantCause: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		for opName, op := range ops {
			t.Run(tt.name+"/"+opName, func(t *testing.T) {
				fake, srv := newFakeOpenAI(t)
				fake.fail = tt.fail
				fake.delay = tt.delay
				p := newTestOpenAI(t, srv, func(c *Config) {
					if tt.baseURL != "" {
						c.BaseURL = tt.baseURL
					}
					if tt.apiKey != "" {
						c.APIKey = tt.apiKey
					}
					c.Timeout = 200 * time.Millisecond
				})
				err := op(context.Background(), p)
				if !errors.Is(err, tt.wantKind) {
					t.Fatalf("err %v, want kind %v", err, tt.wantKind)
				}
				if tt.notKind != nil && errors.Is(err, tt.notKind) {
					t.Errorf("err %v also matches %v", err, tt.notKind)
				}
				var pe *ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("err %T is not a *ProviderError", err)
				}
				if pe.StatusCode != tt.wantStatus {
					t.Errorf("status %d, want %d", pe.StatusCode, tt.wantStatus)
				}
				if !strings.Contains(pe.Message, tt.wantMessage) || !strings.Contains(err.Error(), tt.wantMessage) {
					t.Errorf("message %q / error %q, want it to contain %q", pe.Message, err, tt.wantMessage)
				}
				if pe.RetryAfter != tt.wantRetryAfter {
					t.Errorf("RetryAfter %s, want %s", pe.RetryAfter, tt.wantRetryAfter)
				}
				if tt.wantCause != nil && !errors.Is(err, tt.wantCause) {
					t.Errorf("err %v does not match cause %v", err, tt.wantCause)
				}
				for _, key := range []string{testAPIKey, "sk-wrong-key-abcdef"} {
					if strings.Contains(err.Error(), key) {
						t.Errorf("error text contains the API key: %v", err)
					}
				}
			})
		}
	}
}

func TestOpenAIStreamErrorEvent(t *testing.T) {
	fake, srv := newFakeOpenAI(t)
	fake.stream = func(map[string]any) []string {
		return []string{
			sseChunk(map[string]any{"content": "partial "}, nil),
			`{"error":{"message":"The server had an error while processing your request","type":"server_error"}}`,
		}
	}
	p := newTestOpenAI(t, srv, nil)
	_, err := p.ChatStream(context.Background(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x"}}}, func(StreamEvent) error { return nil })
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "server had an error") {
		t.Fatalf("err %v, want ErrUnavailable with the server's message", err)
	}
}

func TestOpenAICallerCancellationIsNotUnavailable(t *testing.T) {
	for opName, op := range ops {
		t.Run(opName, func(t *testing.T) {
			fake, srv := newFakeOpenAI(t)
			fake.delay = 2 * time.Second
			p := newTestOpenAI(t, srv, nil)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			err := op(ctx, p)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("err %v matches ErrUnavailable", err)
			}
		})
	}
}

func TestOpenAIRejectsInvalidRequestsLocally(t *testing.T) {
	tests := []struct {
		name string
		req  ChatRequest
	}{
		{name: "no messages", req: ChatRequest{}},
		{name: "unknown role", req: ChatRequest{Messages: []Message{{Role: "robot", Content: "x"}}}},
		{name: "tool message without a call", req: ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x"}, {Role: RoleTool, ToolCallID: "nope", Content: "{}"}}}},
		{name: "bad tool name", req: ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x"}}, Tools: []Tool{{Name: "has spaces"}}}},
		{name: "temperature out of range", req: ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x"}}, Temperature: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, srv := newFakeOpenAI(t)
			p := newTestOpenAI(t, srv, nil)
			if _, err := p.Chat(context.Background(), tt.req); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("Chat err %v, want ErrInvalidRequest", err)
			}
			if _, err := p.ChatStream(context.Background(), tt.req, func(StreamEvent) error { return nil }); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("ChatStream err %v, want ErrInvalidRequest", err)
			}
			if n := len(fake.recorded()); n != 0 {
				t.Errorf("%d requests sent, want 0", n)
			}
		})
	}
}

func TestNewOpenAIConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "defaults", cfg: Config{}},
		{name: "trailing slash", cfg: Config{BaseURL: "http://127.0.0.1:11434/v1/"}},
		{name: "not a url", cfg: Config{BaseURL: "localhost:8080"}, wantErr: true},
		{name: "negative dimensions", cfg: Config{Dimensions: -1}, wantErr: true},
		{name: "negative batch", cfg: Config{EmbedBatchSize: -5}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewOpenAI(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (p.ChatModel() != DefaultOpenAIChatModel || p.EmbeddingModel() != DefaultOpenAIEmbeddingModel || p.Name() != ProviderOpenAI) {
				t.Errorf("defaults: %s %s %s", p.Name(), p.ChatModel(), p.EmbeddingModel())
			}
		})
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestOpenAIEmbedMalformedResponse(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{name: "fewer vectors than inputs", body: `{"object":"list","data":[{"index":0,"embedding":[1,0]}]}`},
		{name: "duplicate index", body: `{"object":"list","data":[{"index":0,"embedding":[1,0]},{"index":0,"embedding":[0,1]}]}`},
		{name: "index out of range", body: `{"object":"list","data":[{"index":0,"embedding":[1,0]},{"index":5,"embedding":[0,1]}]}`},
		{name: "mixed dimensions", body: `{"object":"list","data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[0,1,0]}]}`},
		{name: "empty vector", body: `{"object":"list","data":[{"index":0,"embedding":[]},{"index":1,"embedding":[0,1]}]}`},
		{name: "not json", body: `<html>hello</html>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			p := newTestOpenAI(t, srv, nil)
			_, err := p.Embed(context.Background(), []string{"a", "b"})
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err %v, want ErrUnavailable", err)
			}
		})
	}
}
