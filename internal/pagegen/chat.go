package pagegen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
)

// Sizes of the chat exchange.
const (
	chatMaxTokens = 4000
	// maxAnswerEcho bounds the previous answer repeated to the model with its problems.
	maxAnswerEcho = 16000
	// maxProblemsInError bounds the problems quoted in ErrInvalidOutput's text (a page's
	// last_error holds it).
	maxProblemsInError = 1500
)

// chatCopy asks the chat model for the copy, feeding each answer's problems back, and returns the
// first valid answer.
func (g *Generator) chatCopy(ctx context.Context, req Request) (Copy, error) {
	system, err := SystemPrompt()
	if err != nil {
		return Copy{}, err
	}
	user, err := userPrompt(req)
	if err != nil {
		return Copy{}, err
	}
	msgs := []ai.Message{{Role: ai.RoleSystem, Content: system}, {Role: ai.RoleUser, Content: user}}
	var last string
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		// Streamed: the provider's deadline (OPENAI_TIMEOUT) then bounds each silence, not the
		// whole answer, so a long page that keeps coming is not cut off and paid for again.
		resp, err := g.provider.ChatStream(ctx, ai.ChatRequest{Messages: msgs, JSONMode: true, MaxTokens: chatMaxTokens},
			func(ai.StreamEvent) error { return nil })
		if err != nil {
			return Copy{}, fmt.Errorf("page copy: %w", err)
		}
		out, err := parseAnswer(req, resp)
		if err == nil {
			out.Attempts = attempt
			return out, nil
		}
		last = problems(err)
		answer := resp.Content
		if strings.TrimSpace(answer) == "" {
			answer = "(empty)"
		}
		msgs = append(msgs,
			ai.Message{Role: ai.RoleAssistant, Content: clip(answer, maxAnswerEcho)},
			ai.Message{Role: ai.RoleUser, Content: "Your answer cannot be used. Its problems, one per line as \"path: problem\":\n" +
				last + "\nAnswer again with the whole corrected JSON object {\"intro_copy\": ..., \"blocks\": [...]}, nothing else."},
		)
	}
	return Copy{}, fmt.Errorf("%w in %d attempts; the last answer's problems: %s", ErrInvalidOutput, MaxAttempts,
		clip(strings.ReplaceAll(last, "\n", "; "), maxProblemsInError))
}

// answer is the JSON object the model is asked for.
type answer struct {
	IntroCopy *string       `json:"intro_copy"`
	Blocks    []block.Block `json:"blocks"`
}

// parseAnswer decodes and checks one answer; errors are *errs.ValidationError, fed back.
func parseAnswer(req Request, resp ai.ChatResponse) (Copy, error) {
	content := stripFence(resp.Content)
	if content == "" {
		return Copy{}, invalidField("answer", "is empty: answer with one JSON object {\"intro_copy\": ..., \"blocks\": [...]}")
	}
	var a answer
	dec := json.NewDecoder(strings.NewReader(content))
	if err := dec.Decode(&a); err != nil {
		msg := "is not a JSON object {\"intro_copy\": string, \"blocks\": [{\"type\", \"props\"}]}: " + err.Error()
		if resp.FinishReason == ai.FinishLength {
			msg += " (the answer was cut off at the length limit: write shorter copy)"
		}
		return Copy{}, invalidField("answer", msg)
	}
	if dec.More() {
		return Copy{}, invalidField("answer", "must be one JSON object and nothing else")
	}
	intro := ""
	if a.IntroCopy != nil {
		intro = *a.IntroCopy
	}
	return check(req, intro, a.Blocks)
}

// stripFence removes a Markdown code fence around the answer, which some models add even in
// JSON mode.
func stripFence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimPrefix(s, "```")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:] // the fence's language tag
	}
	s = strings.TrimSpace(s)
	return strings.TrimSpace(strings.TrimSuffix(s, "```"))
}

// registryEntry is a block type as the prompt shows it.
type registryEntry struct {
	Type        string                `json:"type"`
	Description string                `json:"description"`
	Props       map[string]block.Prop `json:"props"`
}

// SystemPrompt is the chat model's instructions, with the block registry (every type, its
// description and its props schema) as JSON.
func SystemPrompt() (string, error) {
	entries := block.Registry()
	reg := make([]registryEntry, len(entries))
	for i, e := range entries {
		reg[i] = registryEntry{Type: e.Type, Description: e.Description, Props: e.PropsSchema}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(reg); err != nil {
		return "", fmt.Errorf("encode block registry: %w", err)
	}
	return `You write the landing page of an online shop for a shopper's search query, from the products the shop's catalogue search found for it.

Answer with one JSON object and nothing else, of this form:
{"intro_copy": "two to four sentences that introduce the page", "blocks": [{"type": "hero", "props": {"headline": "..."}}, ...]}

Rules:
- Every block's type and props come from the block registry below: use only its types and props, give every required prop, and give each prop the type the registry says ("integer": a whole number, "array": a JSON array, items of an array of objects with the fields listed under "items"). Respect max_length, min_items, max_items and enum. Leave optional props out rather than sending null or empty values.
- Start with a hero block. Include a product_grid whose product_skus are SKUs of the products given, each at most once, best match first; use no other SKUs. Add the other blocks that fit the products (text_section, feature_list, cta_banner, testimonial), but never invent testimonials, prices or facts: write only from the query and the products' fields.
- Props with format "url" are absolute http or https URLs or paths on the shop's site starting with "/"; never "#..." or "javascript:". Use only image URLs that appear in the products' fields.
- Do not give block ids; the server assigns them.

Block registry (JSON):
` + b.String(), nil
}

// userPrompt names the query, the title and the found products.
func userPrompt(req Request) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req.Products); err != nil {
		return "", fmt.Errorf("encode products: %w", err)
	}
	return "Search query: " + req.Query + "\nPage title: " + req.Title +
		"\nProducts found, best match first (JSON):\n" + b.String(), nil
}
