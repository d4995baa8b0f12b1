package pagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
)

const systemPrompt = `You edit one landing page made of blocks, by calling tools. The page's current blocks are below; address blocks by their ids.
Make only the changes the user asks for. Use add_block, update_block (partial props), remove_block, move_block and set_page; use search_products to find SKUs for a product_grid.
A call that is refused returns an error: fix the arguments and try again, or explain why you cannot.
When you are done, answer with a short message saying what you changed, without calling tools.`

// runModel is the tool-calling loop over the chat model: each step streams one completion; its
// tool calls are applied to the working copy in order and their results go back to the model,
// until it answers without tools or the step or token budget is spent.
func (r *Run) runModel(ctx context.Context, send func(Event)) error {
	snapshot := r.call(ctx, ai.ToolCall{Name: ToolListBlocks})
	msgs := []ai.Message{
		{Role: ai.RoleSystem, Content: systemPrompt + pageMarker + snapshot.result},
		{Role: ai.RoleUser, Content: r.message},
	}
	ts := tools()
	for step := 0; step < r.s.opts.MaxSteps; step++ {
		if r.prompt+r.complete >= r.s.opts.MaxTokens {
			send(Event{Type: EventText, Content: "I stopped here: this build used its token budget."})
			return nil
		}
		resp, err := r.chat(ctx, ai.ChatRequest{Messages: msgs, Tools: ts, MaxTokens: r.s.opts.StepTokens}, send)
		if err != nil {
			return err
		}
		r.prompt += resp.Usage.PromptTokens
		r.complete += resp.Usage.CompletionTokens
		content := strings.TrimSpace(resp.Content)
		if len(resp.ToolCalls) == 0 {
			if content == "" {
				content = "Done."
			}
			send(Event{Type: EventText, Content: content})
			return nil
		}
		if content != "" {
			send(Event{Type: EventThinking, Content: content})
		}
		calls := make([]ai.ToolCall, len(resp.ToolCalls))
		for i, tc := range resp.ToolCalls {
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", step, i)
			}
			if tc.Name == "" {
				tc.Name = "unknown"
			}
			calls[i] = tc
		}
		msgs = append(msgs, ai.Message{Role: ai.RoleAssistant, Content: resp.Content, ToolCalls: calls})
		for _, tc := range calls {
			if err := ctx.Err(); err != nil {
				return err
			}
			a := r.call(ctx, tc)
			if a.err != nil {
				send(Event{Type: EventThinking, Content: fmt.Sprintf("The %s call was refused: %s", tc.Name, a.err.Error())})
			}
			for _, e := range a.events {
				send(e)
			}
			msgs = append(msgs, ai.Message{Role: ai.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: a.result})
		}
	}
	send(Event{Type: EventText, Content: fmt.Sprintf("I stopped after %d steps; the changes so far are kept.", r.s.opts.MaxSteps)})
	return nil
}

// chat runs one streamed completion, retrying the provider's rate limits and outages with
// backoff. Tool calls are applied once the completion is complete, so a retried attempt never
// applies a call twice.
func (r *Run) chat(ctx context.Context, req ai.ChatRequest, send func(Event)) (ai.ChatResponse, error) {
	var last error
	wait := r.s.opts.RetryBase
	for attempt := 1; attempt <= r.s.opts.Attempts; attempt++ {
		resp, err := r.s.model.ChatStream(ctx, req, func(ai.StreamEvent) error { return ctx.Err() })
		if err == nil {
			return resp, nil
		}
		last = err
		if ctx.Err() != nil || !(errors.Is(err, ai.ErrRateLimited) || errors.Is(err, ai.ErrUnavailable)) || attempt == r.s.opts.Attempts {
			break
		}
		d := wait
		var pe *ai.ProviderError
		if errors.As(err, &pe) && pe.RetryAfter > 0 {
			d = pe.RetryAfter
		}
		d = min(d, r.s.opts.RetryMax)
		send(Event{Type: EventThinking, Content: fmt.Sprintf("The AI provider is busy; trying again (attempt %d of %d).", attempt+1, r.s.opts.Attempts)})
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ai.ChatResponse{}, ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
	return ai.ChatResponse{}, last
}

// argsJSON encodes tool arguments (for the local planner).
func argsJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(raw)
}
