package ai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// slowStream answers a streaming chat with chunks spaced by gap (after a first wait of gap),
// then the usage chunk.
func slowStream(t *testing.T, chunks int, gap time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		for i := range chunks {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			_, _ = fmt.Fprintf(w, "data: %s\n\n", sseChunk(map[string]any{"content": fmt.Sprintf("w%d ", i)}, nil))
			fl.Flush()
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", sseChunk(map[string]any{}, "stop"))
		_, _ = fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":5,"total_tokens":16}}`+"\n\n")
		_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	})
}

// TestOpenAIStreamIdleDeadline: OPENAI_TIMEOUT covers a stream only while it is silent: a stream
// that keeps talking runs past it, one that goes quiet for longer fails as unavailable.
func TestOpenAIStreamIdleDeadline(t *testing.T) {
	req := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}
	t.Run("talking stream outlives the timeout", func(t *testing.T) {
		srv := newLoopback(t, slowStream(t, 6, 60*time.Millisecond)) // 360 ms in all, 60 ms gaps
		p := newTestOpenAI(t, srv, func(c *Config) { c.Timeout = 200 * time.Millisecond })
		start := time.Now()
		resp, err := p.ChatStream(context.Background(), req, nil)
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if el := time.Since(start); el < 300*time.Millisecond {
			t.Fatalf("the stream took %s, want longer than the timeout for the test to mean anything", el)
		}
		if resp.Content != "w0 w1 w2 w3 w4 w5 " || resp.Usage != (Usage{PromptTokens: 11, CompletionTokens: 5}) {
			t.Fatalf("got %+v", resp)
		}
	})
	t.Run("silent stream fails", func(t *testing.T) {
		srv := newLoopback(t, slowStream(t, 3, 400*time.Millisecond))
		p := newTestOpenAI(t, srv, func(c *Config) { c.Timeout = 150 * time.Millisecond })
		_, err := p.ChatStream(context.Background(), req, nil)
		var pe *ProviderError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &pe) || pe.Message != "the stream was silent for 150ms" {
			t.Fatalf("got %v, want unavailable: silent", err)
		}
	})
}

// TestOpenAIChatBreaker: consecutive unavailable chat calls open the breaker, which then answers
// at once without calling the provider, lets one probe through after the cool-down and closes
// on its success; a refused request (400) counts as the provider being up.
func TestOpenAIChatBreaker(t *testing.T) {
	var (
		mu     sync.Mutex
		status = http.StatusBadGateway
		calls  int
	)
	srv := newLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if status != http.StatusOK {
			w.WriteHeader(status)
			_, _ = fmt.Fprint(w, `{"error":{"message":"boom","type":"server_error"}}`)
			return
		}
		writeJSON(w, chatCompletion("m", map[string]any{"role": "assistant", "content": "ok"}, "stop"))
	}))
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := newTestOpenAI(t, srv, func(c *Config) { c.BreakerFailures = 3; c.BreakerCooldown = time.Minute; c.Now = clock })
	req := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}
	chat := func() error { _, err := p.Chat(context.Background(), req); return err }
	callsNow := func() int { mu.Lock(); defer mu.Unlock(); return calls }

	for range 2 {
		_ = chat()
	}
	mu.Lock()
	status = http.StatusBadRequest // the provider is up: the count starts again
	mu.Unlock()
	if err := chat(); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got %v, want invalid request", err)
	}
	mu.Lock()
	status = http.StatusBadGateway
	mu.Unlock()
	for range 3 {
		if err := chat(); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v", err)
		}
	}
	before := callsNow()
	err := chat()
	var pe *ProviderError
	if !errors.As(err, &pe) || !errors.Is(err, ErrUnavailable) || pe.StatusCode != 0 || callsNow() != before {
		t.Fatalf("open breaker: got %v after %d calls (before %d), want a refusal without a call", err, callsNow(), before)
	}
	if _, err := p.ChatStream(context.Background(), req, nil); !errors.Is(err, ErrUnavailable) || callsNow() != before {
		t.Fatalf("open breaker, stream: got %v", err)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	status = http.StatusOK
	mu.Unlock()
	if err := chat(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := chat(); err != nil || callsNow() != before+2 {
		t.Fatalf("closed again: %v, %d calls", err, callsNow())
	}
}

type recordingMeter struct {
	mu    sync.Mutex
	calls []Call
}

func (m *recordingMeter) Record(_ context.Context, c Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
}

// TestMeteredReportsProviderUsage: the metering hook sees the provider's usage fields of chats,
// streams and embeddings (summed over batches), attributed to the context's tenant and
// operation; a call without one is "other".
func TestMeteredReportsProviderUsage(t *testing.T) {
	fake, srv := newFakeOpenAI(t)
	fake.stream = func(map[string]any) []string {
		return []string{sseChunk(map[string]any{"content": "hi"}, "stop"),
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`}
	}
	meter := &recordingMeter{}
	p := NewMetered(newTestOpenAI(t, srv, func(c *Config) { c.EmbedBatchSize = 2 }), meter)
	req := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}
	ctx := WithSpend(context.Background(), 7, OpBuild)
	if _, err := p.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ChatStream(WithSpend(ctx, 7, OpPageCopy), req, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Embed(WithSpend(ctx, 7, OpProductEmbed), []string{"a", "b", "c", " "}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Embed(context.Background(), []string{"q"}); err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Spend: Spend{7, OpBuild}, Kind: KindChat, Model: DefaultOpenAIChatModel, PromptTokens: 42, CompletionTokens: 7},
		{Spend: Spend{7, OpPageCopy}, Kind: KindChat, Model: DefaultOpenAIChatModel, PromptTokens: 30, CompletionTokens: 12},
		// two batches (2 + 1 texts; the blank one is not sent): the fake reports a token a text
		{Spend: Spend{7, OpProductEmbed}, Kind: KindEmbed, Model: DefaultOpenAIEmbeddingModel, PromptTokens: 3},
		{Spend: Spend{0, OpOther}, Kind: KindEmbed, Model: DefaultOpenAIEmbeddingModel, PromptTokens: 1},
	}
	if fmt.Sprint(meter.calls) != fmt.Sprint(want) {
		t.Fatalf("metered\n%v\nwant\n%v", meter.calls, want)
	}
}

func newLoopback(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
