package pagebuild

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
)

// chatServer is a loopback server speaking the chat-completions streaming format: each request
// is answered by the next script entry (a status, or SSE chunks), and the requests are kept.
type chatServer struct {
	mu       sync.Mutex
	script   []func(w http.ResponseWriter, req map[string]any)
	requests []map[string]any
}

func (s *chatServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(raw, &req)
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if i >= len(s.script) {
		http.Error(w, `{"error":{"message":"no more script"}}`, http.StatusInternalServerError)
		return
	}
	s.script[i](w, req)
}

// sse writes chunks as chat.completion.chunk events, flushing each, then [DONE].
func sse(chunks ...string) func(http.ResponseWriter, map[string]any) {
	return func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-test\",%s}\n\n", c)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// toolDelta is a chunk carrying a fragment of tool call idx; id and name only on the first.
func toolDelta(idx int, id, name, args string) string {
	fn := map[string]any{"arguments": args}
	tc := map[string]any{"index": idx, "function": fn}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		fn["name"] = name
	}
	raw, _ := json.Marshal(map[string]any{"tool_calls": []any{tc}})
	return fmt.Sprintf(`"choices":[{"index":0,"delta":%s,"finish_reason":null}]`, raw)
}

func finish(reason string) string {
	return fmt.Sprintf(`"choices":[{"index":0,"delta":{},"finish_reason":%q}]`, reason)
}

func contentDelta(s string) string {
	raw, _ := json.Marshal(s)
	return fmt.Sprintf(`"choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]`, raw)
}

func usage(p, c int) string {
	return fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, p, c, p+c)
}

// toolResults returns the tool messages' contents of a recorded request, by tool_call_id.
func toolResults(req map[string]any) map[string]string {
	out := map[string]string{}
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		if mm["role"] == "tool" {
			id, _ := mm["tool_call_id"].(string)
			c, _ := mm["content"].(string)
			out[id] = c
		}
	}
	return out
}

func TestOpenAIStreamedToolCalls(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	srv := &chatServer{}
	srv.script = []func(http.ResponseWriter, map[string]any){
		// The provider is rate limited once.
		func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
		},
		// Two tool calls whose arguments arrive in pieces across chunks, interleaved; the second
		// call's arguments are cut off (malformed JSON).
		sse(
			contentDelta("Adding a testimonial "),
			contentDelta("and widening the grid."),
			toolDelta(0, "call_add", ToolAddBlock, `{"type":"testi`),
			toolDelta(1, "call_upd", ToolUpdateBlock, `{"id":"g1","props":{"col`),
			toolDelta(0, "", "", `monial","props":{"quote":"Fast `),
			toolDelta(0, "", "", `shipping","author":"Jane"},"position":1}`),
			toolDelta(1, "", "", `umns":`),
			finish("tool_calls"),
			usage(100, 20),
		),
		// The model sees the refusal and sends the call again, whole.
		func(w http.ResponseWriter, req map[string]any) {
			res := toolResults(req)
			if !strings.Contains(res["call_upd"], "not a valid JSON") || !strings.Contains(res["call_add"], "added") {
				http.Error(w, fmt.Sprintf(`{"error":{"message":"unexpected tool results %v"}}`, res), http.StatusBadRequest)
				return
			}
			sse(toolDelta(0, "call_upd2", ToolUpdateBlock, `{"id":"g1","props":{"columns":4}}`), finish("tool_calls"), usage(150, 10))(w, req)
		},
		sse(contentDelta("Added Jane's testimonial "), contentDelta("and set the grid to four columns."), finish("stop"), usage(200, 12)),
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	provider, err := ai.NewOpenAI(ai.Config{Provider: ai.ProviderOpenAI, BaseURL: ts.URL + "/v1", APIKey: "sk-test", ChatModel: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	s := e.service(provider, Options{RetryBase: time.Millisecond})
	r, err := s.Begin(e.ctx, e.a, p.ID, "add a testimonial from Jane about fast shipping and make the grid four columns")
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(r, e.ctx)
	if got := types(evs); got != "thinking,thinking,thinking,block,thinking,block,text,text,done" {
		t.Fatalf("events = %s: %+v", got, evs)
	}
	if evs[3].Block.Props["author"] != "Jane" || evs[5].Block.Props["columns"] != float64(4) {
		t.Fatalf("block events = %+v, %+v", evs[3].Block, evs[5].Block)
	}
	if evs[6].Content != "Added Jane's testimonial and set the grid to four columns." {
		t.Fatalf("text = %q", evs[6].Content)
	}
	// The tools were offered in the request.
	tools, _ := srv.requests[1]["tools"].([]any)
	if len(tools) != 8 || srv.requests[1]["stream"] != true {
		t.Fatalf("request: %d tools, stream %v", len(tools), srv.requests[1]["stream"])
	}
	after, err := e.pages.GetPage(e.ctx, e.a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := render(after.Blocks); got != strings.Join([]string{h1,
		`new:testimonial{"author":"Jane","quote":"Fast shipping"}`, t1, `g1:product_grid{"columns":4,"product_skus":["SKU-1","SKU-2"]}`, q1}, " ") {
		t.Fatalf("blocks = %s", got)
	}
	builds, _ := s.List(e.ctx, e.a, p.ID)
	if b := builds[0]; b.PromptTokens != 450 || b.CompletionTokens != 42 || b.Outcome != OutcomeApplied || len(b.Operations) != 2 {
		t.Fatalf("build = %+v", b)
	}
}

func TestOpenAIFailureMidStream(t *testing.T) {
	e := newEnv(t)
	p := e.page(t, e.a, "shoes")
	down := func(w http.ResponseWriter, _ map[string]any) {
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusServiceUnavailable)
	}
	srv := &chatServer{script: []func(http.ResponseWriter, map[string]any){
		sse(toolDelta(0, "c1", ToolRemoveBlock, `{"id":"q1"}`), finish("tool_calls")),
		down, down, down,
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	provider, err := ai.NewOpenAI(ai.Config{Provider: ai.ProviderOpenAI, BaseURL: ts.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	s := e.service(provider, Options{RetryBase: time.Millisecond})
	r, err := s.Begin(e.ctx, e.a, p.ID, "remove the testimonial")
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(r, e.ctx)
	if got := types(evs); !strings.HasSuffix(got, "error,done") || !strings.Contains(evs[len(evs)-2].Content, "unavailable") {
		t.Fatalf("events = %s: %+v", got, evs)
	}
	after, _ := e.pages.GetPage(e.ctx, e.a, p.ID)
	if after.Version != p.Version {
		t.Fatalf("saved after a failure: version %d", after.Version)
	}
}
