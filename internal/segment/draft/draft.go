// Package draft turns a marketer's free-text audience description ("spent over 100 on orders in
// the last 30 days") into a segment definition JSON object.
//
// Three pieces live here:
//
//   - Messages / Request build the LLM prompt: the exact definition shape, worked examples, the
//     tenant's vocabulary (Hints) and, on a retry, the validator's complaint about the last answer.
//   - Extract pulls the definition object out of whatever the model answered (bare JSON, a fenced
//     block, JSON inside prose, a {"definition": {...}} wrapper).
//   - Rules is a deterministic rule-based drafter for simple English, used instead of a model when
//     the provider is the local one (cohort dev, tests): no network, same input, same output.
//
// Draft ties them together. Nothing here validates the definition's semantics: the caller runs the
// segment compiler on the result and retries (passing the compiler's error back as previousError).
package draft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cohort-dev/cohort/internal/ai"
)

// Hints give the model the tenant's vocabulary.
type Hints struct {
	EventTypes []string            // the tenant's event types seen in the warehouse, most frequent first (may be empty)
	Properties map[string][]string // event type -> numeric/string payload keys seen (may be empty)
	Traits     []string            // profile trait keys seen (may be empty)
}

// Prompt size limits: the vocabulary is cut to keep the prompt small; the previous error is cut
// because it may echo a whole (long) invalid answer.
const (
	maxPromptEventTypes = 60
	maxPromptProperties = 25
	maxPromptTraits     = 80
	maxPreviousError    = 2000
	maxPromptDesc       = 8000
)

// systemPrompt is the fixed part of the system message. The examples are checked against Rules
// by the tests, so the prompt and the local drafter agree on what the words mean.
const systemPrompt = `You translate a marketer's plain-English audience description into a Cohort segment definition.

Answer with ONE JSON object and nothing else: no prose, no markdown fences, no comments. The object is the definition itself; do not wrap it in another key.

# Definition shape
Root and groups: {"logic":"AND"|"OR","conditions":[ <condition or group>, ... ]}
A group may also carry "negate":true, which means NOT (the whole group).

Conditions (each has a "type"):
- monetary: {"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum"|"avg"|"min"|"max"|"count","operator":"gt"|"gte"|"lt"|"lte"|"eq"|"neq","value":100}
  optional "window_days":30 OR "between_days":[7,30]; optional "negate":true.
  Aggregates the numeric property of the user's events: sum = total spend, avg = average order value, max = their largest single order.
- recency: {"type":"recency","event_type":"order_completed","operator":"gt"|"gte"|"lt"|"lte"|"eq"|"neq","window_days":30}
  Compares the days since the user's latest such event with window_days. "gt" 30 = has not done it for over 30 days (lapsed); "lte" 7 = did it within the last 7 days. No "value".
- frequency: {"type":"frequency","event_type":"page_view","operator":"gte","value":5}
  Counts the user's events (value is a whole number); optional "window_days" OR "between_days". "Never did X" is operator "eq" with value 0 and no window.
- trait: {"type":"trait","trait":"plan","operator":"eq"|"neq"|"contains"|"starts_with"|"in"|"exists"|"not_exists"|"gt"|"lt","value":"pro"}
  A profile attribute. Omit "value" for exists / not_exists; "value" is an array for "in".
- event_property: {"type":"event_property","event_type":"page_view","property":"path","operator":"eq"|"neq"|"contains"|"starts_with"|"in"|"exists"|"gt"|"gte"|"lt"|"lte","value":"/pricing"}
  The user had at least one such event whose property matches; optional "window_days" OR "between_days".
- in_segment: {"type":"in_segment","segment_id":12}

# Rules
- Use only the keys shown above; unknown keys are rejected. Operators must be one of those listed for the type.
- window_days counts back from now: 30 = the last 30 days. between_days [7,30] = from 30 days ago until 7 days ago (smaller number first). Never set both.
- Days: a week = 7, a month = 30, a quarter = 90, a year = 365. Numbers are plain JSON numbers: no currency signs, units or thousands separators.
- "over"/"more than"/"above" = gt, "at least" = gte, "under"/"less than"/"below" = lt, "at most"/"up to" = lte, "exactly" = eq.
- To exclude something, put it in a group with "negate":true (a monetary condition may instead carry "negate":true itself).
- Clauses joined by "and"/"but" go under "AND"; alternatives joined by "or" go under "OR" (nest a group when both occur).
- event_type, property and trait names are identifiers: letters, digits, _ . - : (at most 128 characters).
- Prefer the tenant's event types, properties and traits listed below when one fits the description. Otherwise use these names: order_completed (property amount), page_view (property path), product_viewed, add_to_cart, signup.
- At most 50 conditions and at most 5 levels of nesting.
- When the description is ambiguous, choose the most common marketing interpretation; do not ask questions.

# Examples
Description: spent over 100 in the last 30 days but not in the last 7 days
` + example1 + `

Description: on the pro plan and viewed the pricing page in the last 14 days
` + example2 + `

Description: haven't ordered in over 60 days and are from Germany, or never ordered
` + example3

// The prompt's worked examples (descriptions and answers), kept in sync with Rules by the tests.
const (
	example1Desc = "spent over 100 in the last 30 days but not in the last 7 days"
	example1     = `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":100,"window_days":30},{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":100,"window_days":7,"negate":true}]}`
	example2Desc = "on the pro plan and viewed the pricing page in the last 14 days"
	example2     = `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"pro"},{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"/pricing","window_days":14}]}`
	example3Desc = "haven't ordered in over 60 days and are from Germany, or never ordered"
	example3     = `{"logic":"OR","conditions":[{"logic":"AND","conditions":[{"type":"recency","event_type":"order_completed","operator":"gt","window_days":60},{"type":"trait","trait":"country","operator":"eq","value":"Germany"}]},{"type":"frequency","event_type":"order_completed","operator":"eq","value":0}]}`
)

// Messages builds the chat request for the LLM: the system prompt (definition shape, rules,
// examples, tenant vocabulary), the description as a user message and, when previousError is not
// empty, a second user message asking to correct the previous answer.
func Messages(description string, h Hints, previousError string) []ai.Message {
	msgs := []ai.Message{
		{Role: ai.RoleSystem, Content: systemPrompt + "\n\n" + vocabularyText(h)},
		{Role: ai.RoleUser, Content: "Description: " + oneLine(truncate(strings.TrimSpace(description), maxPromptDesc))},
	}
	if pe := strings.TrimSpace(previousError); pe != "" {
		msgs = append(msgs, ai.Message{
			Role:    ai.RoleUser,
			Content: "Your previous answer was invalid: " + truncate(pe, maxPreviousError) + "; answer again with a corrected JSON object only.",
		})
	}
	return msgs
}

// Request wraps Messages into a chat request in JSON mode with temperature 0.
func Request(description string, h Hints, previousError string) ai.ChatRequest {
	return ai.ChatRequest{
		Messages:    Messages(description, h, previousError),
		Temperature: 0,
		JSONMode:    true,
	}
}

// Draft drafts a definition for description. With the local provider it runs Rules (no Chat
// call; previousError is ignored since the rules are deterministic); otherwise it asks the provider's chat model and extracts the JSON object from the answer.
// It neither validates the definition's semantics nor retries: the caller does both.
func Draft(ctx context.Context, p ai.Provider, description string, h Hints, previousError string) (json.RawMessage, error) {
	if p == nil {
		return nil, errors.New("draft segment: no ai provider")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("draft segment: %w", err)
	}
	if p.Name() == ai.ProviderLocal {
		return Rules(description, h)
	}
	resp, err := p.Chat(ctx, Request(description, h, previousError))
	if err != nil {
		return nil, fmt.Errorf("draft segment: %w", err)
	}
	def, err := Extract(resp.Content)
	if err != nil && resp.FinishReason == ai.FinishLength {
		return nil, fmt.Errorf("%w (the answer was cut off at the token limit)", err)
	}
	return def, err
}

// vocabularyText renders the tenant's vocabulary for the system prompt. Only names that are valid
// identifiers are listed (the names come from tenant data and must not smuggle text into the prompt).
func vocabularyText(h Hints) string {
	v := newVocab(h)
	var b strings.Builder
	b.WriteString("# Tenant vocabulary\n")
	if len(v.events) == 0 {
		b.WriteString("Event types: none seen yet; use the default names.\n")
	} else {
		events := v.events[:min(len(v.events), maxPromptEventTypes)]
		b.WriteString("Event types (most frequent first): ")
		b.WriteString(strings.Join(events, ", "))
		b.WriteString("\n")
		var props []string
		for _, e := range events {
			if ps := v.props[e]; len(ps) > 0 {
				props = append(props, "- "+e+": "+strings.Join(ps[:min(len(ps), maxPromptProperties)], ", "))
			}
		}
		if len(props) > 0 {
			b.WriteString("Event properties:\n")
			b.WriteString(strings.Join(props, "\n"))
			b.WriteString("\n")
		}
	}
	if len(v.traits) == 0 {
		b.WriteString("Profile traits: none seen yet; use plain snake_case names (plan, country, email).\n")
	} else {
		b.WriteString("Profile traits: ")
		b.WriteString(strings.Join(v.traits[:min(len(v.traits), maxPromptTraits)], ", "))
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// oneLine keeps the description on one line so it cannot fake prompt structure.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
