// Package openaifake is an OpenAI-compatible server for end-to-end tests whose processes call
// a real provider over HTTP (COHORT_AI_PROVIDER=openai, OPENAI_BASE_URL=<its URL>/v1): GET
// /v1/models; embeddings are the local provider's vectors of the requested size; a chat
// completion (streamed or not) is the page copy the local provider would write for the products
// in pagegen's user prompt, answered after CopyDelay. Down makes it answer 503 to everything, as
// a provider in an outage does. It counts the page copies in flight, finished and cut off (the
// caller went away).
package openaifake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/pagegen"
)

// Server is an http.Handler; its zero value is ready to serve.
type Server struct {
	Down      atomic.Bool  // answer 503 to every request
	CopyDelay atomic.Int64 // nanoseconds before a chat completion is answered
	InFlight  atomic.Int64 // chat completions being answered
	Finished  atomic.Int64 // chat completions answered
	CutOff    atomic.Int64 // chat completions whose caller went away first

	mu   sync.Mutex
	vecs map[int]*ai.Local
}

func (p *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	if p.Down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error"}}`)
		return
	}
	var body struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
		Stream     bool     `json:"stream"`
		Messages   []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(raw, &body)
	switch r.URL.Path {
	case "/v1/models":
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	case "/v1/embeddings":
		p.mu.Lock()
		if p.vecs == nil {
			p.vecs = map[int]*ai.Local{}
		}
		local := p.vecs[body.Dimensions]
		if local == nil {
			local, _ = ai.NewLocal(ai.Config{Dimensions: body.Dimensions})
			p.vecs[body.Dimensions] = local
		}
		p.mu.Unlock()
		vecs, _ := local.Embed(r.Context(), body.Input)
		data := make([]map[string]any, len(vecs))
		for i, v := range vecs {
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": body.Model,
			"usage": map[string]int{"prompt_tokens": len(vecs), "total_tokens": len(vecs)}})
	case "/v1/chat/completions":
		var req pagegen.Request
		for _, m := range body.Messages {
			if m.Role != ai.RoleUser || !strings.HasPrefix(m.Content, "Search query: ") {
				continue
			}
			head, products, _ := strings.Cut(m.Content, "(JSON):\n")
			for line := range strings.SplitSeq(head, "\n") {
				if v, ok := strings.CutPrefix(line, "Search query: "); ok {
					req.Query = v
				} else if v, ok := strings.CutPrefix(line, "Page title: "); ok {
					req.Title = v
				}
			}
			_ = json.Unmarshal([]byte(products), &req.Products)
			break
		}
		c, err := pagegen.New(nil).Generate(r.Context(), req)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error())
			return
		}
		content, _ := json.Marshal(map[string]any{"intro_copy": c.IntroCopy, "blocks": c.Blocks})
		p.InFlight.Add(1)
		defer p.InFlight.Add(-1)
		select {
		case <-time.After(time.Duration(p.CopyDelay.Load())):
		case <-r.Context().Done():
			p.CutOff.Add(1)
			return
		}
		usage := map[string]int{"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}
		if !body.Stream {
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": body.Model,
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": string(content)}, "finish_reason": "stop"}},
				"usage":   usage})
			p.Finished.Add(1)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []map[string]any{
			{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": string(content)}}}},
			{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}},
			{"choices": []any{}, "usage": usage},
		} {
			chunk["id"], chunk["object"], chunk["created"], chunk["model"] = "chatcmpl-1", "chat.completion.chunk", 1700000000, body.Model
			raw, _ := json.Marshal(chunk)
			_, _ = fmt.Fprintf(w, "data: %s\n\n", raw)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		p.Finished.Add(1)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"Unknown request URL","type":"invalid_request_error"}}`)
	}
}
