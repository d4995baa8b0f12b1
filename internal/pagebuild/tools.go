package pagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/search"
)

// Tool names the agent offers the model.
const (
	ToolListBlocks     = "list_blocks"
	ToolGetBlock       = "get_block"
	ToolAddBlock       = "add_block"
	ToolUpdateBlock    = "update_block"
	ToolRemoveBlock    = "remove_block"
	ToolMoveBlock      = "move_block"
	ToolSetPage        = "set_page"
	ToolSearchProducts = "search_products"
)

// maxSearchLimit bounds search_products' limit.
const maxSearchLimit = 24

func obj(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// tools are the agent's tools, in the shape both providers send.
func tools() []ai.Tool {
	types := block.Types()
	idProp := map[string]any{"type": "string", "description": "The block's id, as list_blocks shows it."}
	return []ai.Tool{
		{Name: ToolListBlocks, Description: "List the page's blocks in order: index, id, type and props, and the page's title and intro_copy.", Parameters: obj(map[string]any{})},
		{Name: ToolGetBlock, Description: "Read one block by id.", Parameters: obj(map[string]any{"id": idProp}, "id")},
		{Name: ToolAddBlock, Description: "Add a block of a registered type with its props at a position (0 is the top; omitted: the end). Block types and props: " + registrySummary(),
			Parameters: obj(map[string]any{
				"type":     map[string]any{"type": "string", "enum": types},
				"props":    map[string]any{"type": "object", "description": "The block's props, as its type's schema says."},
				"position": map[string]any{"type": "integer", "minimum": 0, "description": "Index the block takes; omitted: the end."},
			}, "type", "props")},
		{Name: ToolUpdateBlock, Description: "Change some props of a block: the props given replace those of the block, the others stay; null removes an optional prop.",
			Parameters: obj(map[string]any{"id": idProp, "props": map[string]any{"type": "object"}}, "id", "props")},
		{Name: ToolRemoveBlock, Description: "Remove a block.", Parameters: obj(map[string]any{"id": idProp}, "id")},
		{Name: ToolMoveBlock, Description: "Move a block to an index (0 is the top).", Parameters: obj(map[string]any{
			"id": idProp, "position": map[string]any{"type": "integer", "minimum": 0}}, "id", "position")},
		{Name: ToolSetPage, Description: "Set the page's title and/or intro_copy.", Parameters: obj(map[string]any{
			"title": map[string]any{"type": "string"}, "intro_copy": map[string]any{"type": "string"}})},
		{Name: ToolSearchProducts, Description: "Search the tenant's catalogue semantically; returns SKUs and names to put in a product_grid's product_skus.",
			Parameters: obj(map[string]any{"query": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxSearchLimit}}, "query")},
	}
}

// registrySummary describes each block type's props in one line for the model.
func registrySummary() string {
	var b strings.Builder
	for _, e := range block.Registry() {
		fmt.Fprintf(&b, "%s {", e.Type)
		first := true
		for _, name := range sortedKeys(e.PropsSchema) {
			p := e.PropsSchema[name]
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteString(name)
			b.WriteString(": ")
			b.WriteString(p.Type)
			if p.Type == block.TypeArray && len(p.Items) > 0 {
				b.WriteString(" of {")
				b.WriteString(strings.Join(sortedKeys(p.Items), ", "))
				b.WriteString("}")
			}
			if len(p.Enum) > 0 {
				b.WriteString(" (" + strings.Join(p.Enum, "|") + ")")
			}
			if p.Required {
				b.WriteString(" required")
			}
		}
		b.WriteString("}; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Searcher finds catalogue products for search_products (search.Service).
type Searcher interface {
	Search(ctx context.Context, tenantID int64, in search.In) (*search.Result, error)
}

// applied is what one tool call did: its result for the model, and the events it causes.
type applied struct {
	result string // JSON for the model
	events []Event
	err    error // the refusal, also in result
}

// call runs one tool call on the working copy. It never panics on any arguments: a call that
// cannot be applied changes nothing and its error is the result.
func (r *Run) call(ctx context.Context, tc ai.ToolCall) (out applied) {
	defer func() {
		if p := recover(); p != nil {
			out = refusal(refuse("the call could not be applied"))
		}
	}()
	w := r.wc
	switch tc.Name {
	case ToolListBlocks:
		var a struct{}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		type item struct {
			Index int            `json:"index"`
			ID    string         `json:"id"`
			Type  string         `json:"type"`
			Props map[string]any `json:"props"`
		}
		items := make([]item, len(w.blocks))
		for i, b := range w.blocks {
			items[i] = item{i, b.ID, b.Type, b.Props}
		}
		return ok(map[string]any{"title": w.title, "intro_copy": w.introCopy, "blocks": items})
	case ToolGetBlock:
		var a struct {
			ID string `json:"id"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		i := w.index(a.ID)
		if i < 0 {
			return refusal(blockNotFound(a.ID))
		}
		return ok(map[string]any{"index": i, "block": w.blocks[i]})
	case ToolAddBlock:
		var a struct {
			Type     string         `json:"type"`
			Props    map[string]any `json:"props"`
			Position *int           `json:"position"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		b, err := w.add(a.Type, jsonProps(a.Props), a.Position)
		if err != nil {
			return refusal(err)
		}
		return okEvents(map[string]any{"added": b, "index": w.index(b.ID)}, blockEvent(b))
	case ToolUpdateBlock:
		var a struct {
			ID    string         `json:"id"`
			Props map[string]any `json:"props"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		b, err := w.update(a.ID, jsonProps(a.Props))
		if err != nil {
			return refusal(err)
		}
		return okEvents(map[string]any{"updated": b}, blockEvent(b))
	case ToolRemoveBlock:
		var a struct {
			ID string `json:"id"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		b, err := w.remove(a.ID)
		if err != nil {
			return refusal(err)
		}
		return okEvents(map[string]any{"removed": b.ID}, Event{Type: EventText, Content: fmt.Sprintf("Removed the %s block %s.", label(b.Type), b.ID)})
	case ToolMoveBlock:
		var a struct {
			ID       string `json:"id"`
			Position *int   `json:"position"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		b, err := w.move(a.ID, a.Position)
		if err != nil {
			return refusal(err)
		}
		return okEvents(map[string]any{"moved": b.ID, "index": *a.Position}, blockEvent(b))
	case ToolSetPage:
		var a struct {
			Title     *string `json:"title"`
			IntroCopy *string `json:"intro_copy"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		if err := w.setPage(a.Title, a.IntroCopy); err != nil {
			return refusal(err)
		}
		var parts []string
		if a.Title != nil {
			parts = append(parts, fmt.Sprintf("the title to %q", w.title))
		}
		if a.IntroCopy != nil {
			parts = append(parts, "the intro copy")
		}
		return okEvents(map[string]any{"title": w.title, "intro_copy": w.introCopy}, Event{Type: EventText, Content: "Set " + strings.Join(parts, " and ") + "."})
	case ToolSearchProducts:
		var a struct {
			Query string `json:"query"`
			Limit int    `json:"limit"`
		}
		if err := decodeArgs(tc.Arguments, &a); err != nil {
			return refusal(err)
		}
		return r.searchProducts(ctx, a.Query, a.Limit)
	default:
		return refusal(refuse("there is no tool %q; the tools are %s", tc.Name, strings.Join(toolNames(), ", ")))
	}
}

func (r *Run) searchProducts(ctx context.Context, query string, limit int) applied {
	query = strings.TrimSpace(query)
	if query == "" {
		return refusal(refuse("query is required"))
	}
	if limit <= 0 {
		limit = 8
	}
	if limit > maxSearchLimit {
		return refusal(refuse("limit must be from 1 to %d", maxSearchLimit))
	}
	if r.s.search == nil {
		return refusal(refuse("product search is not available here"))
	}
	res, err := r.s.search.Search(ctx, r.tenantID, search.In{Query: query, Limit: limit})
	if err != nil {
		if ctx.Err() != nil {
			return refusal(refuse("the search was cancelled"))
		}
		return refusal(refuse("the search failed: %v", err))
	}
	type hit struct {
		SKU   string  `json:"sku"`
		Name  string  `json:"name"`
		Score float64 `json:"relevance_score"`
	}
	hits := make([]hit, 0, len(res.Products))
	for _, p := range res.Products {
		hits = append(hits, hit{p.SKU, p.Name, p.RelevanceScore})
	}
	return ok(map[string]any{"products": hits})
}

func toolNames() []string {
	ts := tools()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func label(typ string) string {
	if e, ok := block.Lookup(typ); ok {
		return strings.ToLower(e.Label)
	}
	return typ
}

func blockEvent(b block.Block) Event {
	bb := block.Block{ID: b.ID, Type: b.Type, Props: cloneProps(b.Props)}
	return Event{Type: EventBlock, Block: &bb}
}

func ok(v any) applied {
	raw, err := json.Marshal(v)
	if err != nil {
		return refusal(refuse("the result could not be encoded"))
	}
	return applied{result: string(raw)}
}

func okEvents(v any, evs ...Event) applied {
	a := ok(v)
	if a.err == nil {
		a.events = evs
	}
	return a
}

func refusal(err error) applied {
	body := map[string]any{"error": err.Error()}
	var te *toolError
	if errors.As(err, &te) && len(te.fields) > 0 {
		body["fields"] = te.fields
	}
	raw, _ := json.Marshal(body) // strings and string lists always encode
	return applied{result: string(raw), err: err}
}
