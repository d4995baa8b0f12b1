// Package aitest is the one scripted ai.Provider for tests: its chat model answers each call
// with the next step of a script, records the requests, and can hold a step until the test
// releases it. It does not embed (tests that embed use ai.NewLocal, or an HTTP fake of the
// OpenAI API so the real client runs).
package aitest

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/cohort-dev/cohort/internal/ai"
)

// Step is one answer of the script: Err when set, else Response. A step with Gate waits until
// the gate is closed (or the request's context ends) before it answers; Started, when set, is
// closed as the step's call arrives, so a test can act while the model is "thinking".
type Step struct {
	Response ai.ChatResponse
	Err      error
	Gate     chan struct{}
	Started  chan struct{}
}

// Hold is a step that answers only when the request's context ends; started is closed when its
// call arrives.
func Hold(started chan struct{}) Step { return Step{Gate: make(chan struct{}), Started: started} }

// Provider is a scripted chat model. Its zero value answers every call with After.
type Provider struct {
	// ProviderName is what Name reports (default "openai", so code that branches on the local
	// provider takes its model path).
	ProviderName string
	// After answers the calls beyond the script (default: content "Done.").
	After *Step

	mu    sync.Mutex
	steps []Step
	n     int
	reqs  []ai.ChatRequest
}

var _ ai.Provider = (*Provider)(nil)

// New returns a provider that answers with steps in order.
func New(steps ...Step) *Provider { return &Provider{steps: steps} }

// Answers returns a script of plain responses.
func Answers(rs ...ai.ChatResponse) []Step {
	out := make([]Step, len(rs))
	for i, r := range rs {
		out[i] = Step{Response: r}
	}
	return out
}

// Content is a step answering with text.
func Content(s string) Step {
	return Step{Response: ai.ChatResponse{Content: s, FinishReason: ai.FinishStop}}
}

// Fail is a step failing with err.
func Fail(err error) Step { return Step{Err: err} }

// Gated returns a copy of the steps, each waiting for its own gate, and the gates in order.
func Gated(steps ...Step) ([]Step, []chan struct{}) {
	gates := make([]chan struct{}, len(steps))
	out := slices.Clone(steps)
	for i := range out {
		gates[i] = make(chan struct{})
		out[i].Gate = gates[i]
	}
	return out, gates
}

// Requests returns the chat requests received so far, in order.
func (p *Provider) Requests() []ai.ChatRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// Calls is how many chat calls were made.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

func (p *Provider) Name() string {
	if p.ProviderName == "" {
		return ai.ProviderOpenAI
	}
	return p.ProviderName
}
func (p *Provider) ChatModel() string      { return "scripted" }
func (p *Provider) EmbeddingModel() string { return "scripted" }
func (p *Provider) Dimensions() int        { return 1 }

// Embed fails: the scripted provider has no embeddings.
func (p *Provider) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("aitest: the scripted provider does not embed")
}

// Chat answers with the next step.
func (p *Provider) Chat(ctx context.Context, req ai.ChatRequest) (ai.ChatResponse, error) {
	return p.ChatStream(ctx, req, nil)
}

// ChatStream answers with the next step; fn, when given, gets the content as one delta and then
// each tool call.
func (p *Provider) ChatStream(ctx context.Context, req ai.ChatRequest, fn func(ai.StreamEvent) error) (ai.ChatResponse, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	var st Step
	switch {
	case p.n < len(p.steps):
		st = p.steps[p.n]
		p.n++
	case p.After != nil:
		st = *p.After
	default:
		st = Content("Done.")
	}
	if st.Started != nil {
		select {
		case <-st.Started:
		default:
			close(st.Started)
		}
	}
	p.mu.Unlock()
	if st.Gate != nil {
		select {
		case <-st.Gate:
		case <-ctx.Done():
			return ai.ChatResponse{}, ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return ai.ChatResponse{}, err
	}
	if st.Err != nil {
		return ai.ChatResponse{}, st.Err
	}
	resp := st.Response
	resp.ToolCalls = slices.Clone(resp.ToolCalls)
	if err := ai.Replay(resp, fn); err != nil {
		return ai.ChatResponse{}, err
	}
	return resp, nil
}
