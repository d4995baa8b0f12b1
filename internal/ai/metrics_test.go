package ai

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestOpenAIMetricsRecordEveryCall: each HTTP call of the openai provider is counted once by
// operation and outcome, with its duration; a request refused before it is sent is not a call,
// and a caller that gives up is canceled, not a provider error.
func TestOpenAIMetricsRecordEveryCall(t *testing.T) {
	fake, srv := newFakeOpenAI(t)
	fake.stream = func(map[string]any) []string {
		return []string{sseChunk(map[string]any{"content": "a "}, nil), sseChunk(map[string]any{"content": "b"}, "stop")}
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	p := newTestOpenAI(t, srv, func(c *Config) { c.Metrics = m; c.EmbedBatchSize = 2 })
	ctx := context.Background()
	msg := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}

	if _, err := p.Embed(ctx, []string{"a", "b", "c"}); err != nil { // two batches: two calls
		t.Fatal(err)
	}
	if _, err := p.Chat(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ChatStream(ctx, msg, func(StreamEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Chat(ctx, ChatRequest{}); err == nil { // refused locally: no call
		t.Fatal("an empty chat request was accepted")
	}
	stop := errors.New("client went away")
	if _, err := p.ChatStream(ctx, msg, func(StreamEvent) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("stream stopped by its callback: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Embed(cancelled, []string{"x"}); err == nil {
		t.Fatal("embed with a cancelled context succeeded")
	}
	for _, f := range []failure{
		{status: 503, body: `{"error":{"message":"overloaded"}}`},
		{status: 429, body: `{"error":{"message":"slow down"}}`},
		{status: 401, body: `{"error":{"message":"bad key"}}`},
		{status: 404, body: `{"error":{"message":"The model does not exist"}}`},
	} {
		fake.fail = &f
		if _, err := p.Chat(ctx, msg); err == nil {
			t.Fatalf("chat answered %d succeeded", f.status)
		}
	}

	for _, c := range []struct {
		op, outcome string
		want        float64
	}{
		{OpEmbed, OutcomeOK, 2},
		{OpEmbed, OutcomeCanceled, 1},
		{OpChat, OutcomeOK, 1},
		{OpChat, OutcomeUnavailable, 1},
		{OpChat, OutcomeRateLimited, 1},
		{OpChat, OutcomeUnauthorized, 1},
		{OpChat, OutcomeInvalidRequest, 1},
		{OpChatStream, OutcomeOK, 1},
		{OpChatStream, OutcomeCanceled, 1},
		{OpChatStream, OutcomeUnavailable, 0},
	} {
		var got dto.Metric
		if err := m.requests.WithLabelValues(ProviderOpenAI, c.op, c.outcome).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got.GetCounter().GetValue() != c.want {
			t.Errorf("cohort_ai_requests_total{operation=%q,outcome=%q} = %v, want %v", c.op, c.outcome, got.GetCounter().GetValue(), c.want)
		}
	}
	// One duration per call: 3 embeds, 5 chats, 2 streams.
	want := map[string]uint64{OpEmbed: 3, OpChat: 5, OpChatStream: 2}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fams {
		if f.GetName() != "cohort_ai_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			seen++
			var op string
			for _, l := range s.GetLabel() {
				if l.GetName() == "operation" {
					op = l.GetValue()
				}
			}
			if got := s.GetHistogram().GetSampleCount(); got != want[op] {
				t.Errorf("cohort_ai_request_duration_seconds{operation=%q} counted %d calls, want %d", op, got, want[op])
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d duration series, want %d", seen, len(want))
	}
}

// A provider without metrics records nothing and works.
func TestOpenAIWithoutMetrics(t *testing.T) {
	_, srv := newFakeOpenAI(t)
	p := newTestOpenAI(t, srv, nil)
	if _, err := p.Embed(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
}
