package pagebuild

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
)

// chatModel is what the agent needs of a model: one streamed completion (ai.Provider has it).
type chatModel interface {
	ChatStream(ctx context.Context, req ai.ChatRequest, fn func(ai.StreamEvent) error) (ai.ChatResponse, error)
}

// Planner is the local planner as a chat model. Each call reads the conversation the agent's
// tool loop keeps (the system prompt with the page, the user's message, the planner's earlier
// tool calls and their results) and answers with the tool calls of the next command it
// understands, followed by a list_blocks call so that the next step sees the page as it is then;
// once every command is handled it answers, without tool calls, with a summary of what it could
// not do and how many changes it made. Its state is the conversation: the ids of its tool calls
// say which command they belong to ("plan-<command>-<n>").
type Planner struct{}

var _ chatModel = Planner{}

// ChatStream answers the next step; fn gets the content and then each tool call.
func (Planner) ChatStream(ctx context.Context, req ai.ChatRequest, fn func(ai.StreamEvent) error) (ai.ChatResponse, error) {
	if err := ctx.Err(); err != nil {
		return ai.ChatResponse{}, err
	}
	resp := planStep(req.Messages)
	if err := ai.Replay(resp, fn); err != nil {
		return ai.ChatResponse{}, err
	}
	return resp, nil
}

// pageMarker precedes the page's list_blocks JSON in the system prompt.
const pageMarker = "\n\nThe page now: "

const workingOn = "Working on: "

func planID(clause int, kind string, n int) string {
	return fmt.Sprintf("plan-%d-%s-%d", clause, kind, n)
}

// parsePlanID returns the command index and kind of one of the planner's call ids.
func parsePlanID(id string) (int, string, bool) {
	parts := strings.Split(id, "-")
	if len(parts) != 4 || parts[0] != "plan" {
		return 0, "", false
	}
	k, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0, "", false
	}
	return k, parts[2], true
}

// planStep is the planner's answer to the conversation msgs.
func planStep(msgs []ai.Message) ai.ChatResponse {
	var user string
	for _, m := range msgs {
		if m.Role == ai.RoleUser {
			user = m.Content
			break
		}
	}
	clauses := splitClauses(user)
	blocks := currentBlocks(msgs)

	next := 0
	var notes []string
	if last := lastAssistant(msgs); last != nil {
		for _, tc := range last.ToolCalls {
			k, kind, ok := parsePlanID(tc.ID)
			if !ok {
				continue
			}
			next = k + 1
			if kind != "search" || k >= len(clauses) {
				continue
			}
			// The search for a grid is answered: put its products in the grid.
			calls, note := planClause(clauses[k], blocks)
			if note == "" && len(calls) == 1 && calls[0].gridSearch != "" {
				add, msg := gridAdd(calls[0], toolResult(msgs, tc.ID))
				if msg == "" {
					return step(workingOn+clauses[k], k, []ai.ToolCall{add})
				}
				notes = append(notes, msg)
			}
		}
	}
	for i := next; i < len(clauses); i++ {
		calls, note := planClause(clauses[i], blocks)
		if note != "" {
			notes = append(notes, note)
			continue
		}
		content := strings.Join(append(notes, workingOn+clauses[i]), "\n")
		if len(calls) == 1 && calls[0].gridSearch != "" {
			search := ai.ToolCall{ID: planID(i, "search", 0), Name: ToolSearchProducts,
				Arguments: argsJSON(map[string]any{"query": calls[0].gridSearch, "limit": 8})}
			return ai.ChatResponse{Content: content, ToolCalls: []ai.ToolCall{search}, FinishReason: ai.FinishToolCalls}
		}
		tcs := make([]ai.ToolCall, len(calls))
		for j, c := range calls {
			tcs[j] = c.tc
		}
		return step(content, i, tcs)
	}
	return ai.ChatResponse{Content: summary(msgs, notes), FinishReason: ai.FinishStop}
}

// step answers with the command's calls and a list_blocks call after them.
func step(content string, clause int, tcs []ai.ToolCall) ai.ChatResponse {
	out := make([]ai.ToolCall, 0, len(tcs)+1)
	for j, tc := range tcs {
		tc.ID = planID(clause, "call", j)
		out = append(out, tc)
	}
	out = append(out, ai.ToolCall{ID: planID(clause, "list", len(tcs)), Name: ToolListBlocks, Arguments: "{}"})
	return ai.ChatResponse{Content: content, ToolCalls: out, FinishReason: ai.FinishToolCalls}
}

func lastAssistant(msgs []ai.Message) *ai.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == ai.RoleAssistant {
			return &msgs[i]
		}
	}
	return nil
}

func toolResult(msgs []ai.Message, id string) string {
	for _, m := range msgs {
		if m.Role == ai.RoleTool && m.ToolCallID == id {
			return m.Content
		}
	}
	return ""
}

// currentBlocks is the page as the last list_blocks result shows it, else as the system prompt
// does.
func currentBlocks(msgs []ai.Message) []block.Block {
	raw := ""
	for _, m := range msgs {
		switch {
		case m.Role == ai.RoleSystem:
			if _, after, ok := strings.Cut(m.Content, pageMarker); ok {
				raw = after
			}
		case m.Role == ai.RoleTool && m.Name == ToolListBlocks:
			raw = m.Content
		}
	}
	var page struct {
		Blocks []block.Block `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(raw), &page); err != nil {
		return nil
	}
	return page.Blocks
}

// refusalOf is the error of a refused call's result, "" for a result that is not a refusal.
func refusalOf(result string) string {
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(result), &body) != nil {
		return ""
	}
	return body.Error
}

// changeTools are the tools that change the page.
var changeTools = map[string]bool{ToolAddBlock: true, ToolUpdateBlock: true, ToolRemoveBlock: true, ToolMoveBlock: true, ToolSetPage: true}

// summary is the closing answer: in order, the commands not understood, the calls refused (a
// refusal is said, never passed over), then how many changes were made.
func summary(msgs []ai.Message, trailing []string) string {
	var lines []string
	done := 0
	for _, m := range msgs {
		switch m.Role {
		case ai.RoleAssistant:
			for line := range strings.SplitSeq(m.Content, "\n") {
				if line != "" && !strings.HasPrefix(line, workingOn) {
					lines = append(lines, line)
				}
			}
		case ai.RoleTool:
			if !changeTools[m.Name] {
				continue
			}
			if e := refusalOf(m.Content); e != "" {
				lines = append(lines, "I could not do that: "+e)
			} else {
				done++
			}
		}
	}
	lines = append(lines, trailing...)
	if done > 0 {
		lines = append(lines, fmt.Sprintf("Done: %d change%s.", done, plural(done)))
	}
	if len(lines) == 0 {
		return "I found no command in your message."
	}
	return strings.Join(lines, "\n")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// gridAdd plans adding a grid of the products a search found; msg says why not when it cannot.
func gridAdd(lc localCall, result string) (tc ai.ToolCall, msg string) {
	if e := refusalOf(result); e != "" {
		return ai.ToolCall{}, "I could not search the products: " + e
	}
	var out struct {
		Products []struct {
			SKU string `json:"sku"`
		} `json:"products"`
	}
	if err := json.Unmarshal([]byte(result), &out); err != nil || len(out.Products) == 0 {
		return ai.ToolCall{}, fmt.Sprintf("No products match %q.", lc.gridSearch)
	}
	skus := make([]any, len(out.Products))
	for i, p := range out.Products {
		skus[i] = p.SKU
	}
	args := map[string]any{"type": block.ProductGrid, "props": map[string]any{"product_skus": skus}}
	if lc.gridPos != nil {
		args["position"] = *lc.gridPos
	}
	return ai.ToolCall{Name: ToolAddBlock, Arguments: argsJSON(args)}, ""
}
