package pagebuild

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/page"
)

// Operations the agent applies, as recorded in a build's operations.
const (
	OpAdd     = "add_block"
	OpUpdate  = "update_block"
	OpRemove  = "remove_block"
	OpMove    = "move_block"
	OpSetPage = "set_page"
)

// Operation is one change the agent applied to its working copy.
type Operation struct {
	Op        string         `json:"op"`
	BlockID   string         `json:"block_id,omitempty"`
	BlockType string         `json:"block_type,omitempty"`
	Position  *int           `json:"position,omitempty"` // the block's index afterwards (add, move)
	Props     map[string]any `json:"props,omitempty"`    // add: the props; update: the change
	Title     *string        `json:"title,omitempty"`
	IntroCopy *string        `json:"intro_copy,omitempty"`
}

// workingCopy is the page as the agent edits it; nothing of it is stored until the build commits.
// Every change is validated against the block registry first, so it is a valid page at all times.
type workingCopy struct {
	blocks    []block.Block
	title     string
	introCopy string
	titleSet  bool
	introSet  bool
	ops       []Operation
}

func newWorkingCopy(p *page.Page) *workingCopy {
	return &workingCopy{blocks: cloneBlocks(p.Blocks), title: p.Title, introCopy: p.IntroCopy}
}

func cloneBlocks(in []block.Block) []block.Block {
	out := make([]block.Block, len(in))
	for i, b := range in {
		out[i] = block.Block{ID: b.ID, Type: b.Type, Props: cloneProps(b.Props)}
	}
	return out
}

// cloneProps deep-copies props through JSON's shapes (maps, slices, scalars).
func cloneProps(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneProps(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case []string:
		return slices.Clone(x)
	default:
		return v
	}
}

func (w *workingCopy) index(id string) int {
	return slices.IndexFunc(w.blocks, func(b block.Block) bool { return b.ID == id })
}

// toolError is a refused tool call: its text (and field errors) go back to the model.
type toolError struct {
	msg    string
	fields errs.Fields
}

func (e *toolError) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &toolError{msg: fmt.Sprintf(format, args...)} }

// fromValidation turns a registry validation error into a refusal that names the fields.
func fromValidation(err error) error {
	var ve *errs.ValidationError
	if errors.As(err, &ve) {
		return &toolError{msg: "invalid block: " + ve.Error(), fields: ve.Fields}
	}
	return refuse("invalid block: %v", err)
}

func blockNotFound(id string) error {
	return refuse("no block has the id %q; call list_blocks for the ids", id)
}

// position resolves an optional insert position: nil is the end; negative or beyond the end is
// refused.
func position(pos *int, n int) (int, error) {
	if pos == nil {
		return n, nil
	}
	if *pos < 0 || *pos > n {
		return 0, refuse("position must be from 0 to %d", n)
	}
	return *pos, nil
}

func (w *workingCopy) add(typ string, props map[string]any, pos *int) (block.Block, error) {
	if typ == "" {
		return block.Block{}, &toolError{msg: "type is required", fields: errs.Fields{"type": "is required"}}
	}
	if len(w.blocks) >= block.MaxBlocks {
		return block.Block{}, refuse("the page has the most blocks allowed (%d); remove one first", block.MaxBlocks)
	}
	at, err := position(pos, len(w.blocks))
	if err != nil {
		return block.Block{}, err
	}
	b, err := block.ValidateOne("block", block.Block{Type: typ, Props: cloneProps(props)})
	if err != nil {
		return block.Block{}, fromValidation(err)
	}
	for w.index(b.ID) >= 0 {
		b.ID = block.NewID()
	}
	w.blocks = slices.Insert(w.blocks, at, b)
	w.ops = append(w.ops, Operation{Op: OpAdd, BlockID: b.ID, BlockType: b.Type, Position: &at, Props: cloneProps(b.Props)})
	return b, nil
}

// update merges patch into the block's props: a key with a value sets it, a key with null removes
// it (an optional prop falls back to its default).
func (w *workingCopy) update(id string, patch map[string]any) (block.Block, error) {
	i := w.index(id)
	if i < 0 {
		return block.Block{}, blockNotFound(id)
	}
	if len(patch) == 0 {
		return block.Block{}, refuse("props must name at least one prop to change")
	}
	merged := cloneProps(w.blocks[i].Props)
	for k, v := range patch {
		if v == nil {
			delete(merged, k)
			continue
		}
		merged[k] = cloneValue(v)
	}
	b, err := block.ValidateOne("block", block.Block{ID: id, Type: w.blocks[i].Type, Props: merged})
	if err != nil {
		return block.Block{}, fromValidation(err)
	}
	w.blocks[i] = b
	w.ops = append(w.ops, Operation{Op: OpUpdate, BlockID: id, BlockType: b.Type, Props: cloneProps(patch)})
	return b, nil
}

func (w *workingCopy) remove(id string) (block.Block, error) {
	i := w.index(id)
	if i < 0 {
		return block.Block{}, blockNotFound(id)
	}
	b := w.blocks[i]
	w.blocks = slices.Delete(w.blocks, i, i+1)
	w.ops = append(w.ops, Operation{Op: OpRemove, BlockID: id, BlockType: b.Type})
	return b, nil
}

func (w *workingCopy) move(id string, pos *int) (block.Block, error) {
	i := w.index(id)
	if i < 0 {
		return block.Block{}, blockNotFound(id)
	}
	if pos == nil {
		return block.Block{}, &toolError{msg: "position is required", fields: errs.Fields{"position": "is required"}}
	}
	if *pos < 0 || *pos >= len(w.blocks) {
		return block.Block{}, refuse("position must be from 0 to %d", len(w.blocks)-1)
	}
	b := w.blocks[i]
	w.blocks = slices.Delete(w.blocks, i, i+1)
	w.blocks = slices.Insert(w.blocks, *pos, b)
	at := *pos
	w.ops = append(w.ops, Operation{Op: OpMove, BlockID: id, BlockType: b.Type, Position: &at})
	return b, nil
}

func (w *workingCopy) setPage(title, intro *string) error {
	if title == nil && intro == nil {
		return refuse("set at least one of title and intro_copy")
	}
	f := errs.Fields{}
	if title != nil {
		t := strings.TrimSpace(*title)
		switch {
		case t == "":
			f.Add("title", "must not be empty")
		case !utf8.ValidString(t) || strings.ContainsFunc(t, unicode.IsControl):
			f.Add("title", "must be one line of text")
		case utf8.RuneCountInString(t) > page.MaxTitleLength:
			f.Add("title", "must be at most %d characters", page.MaxTitleLength)
		}
		title = &t
	}
	if intro != nil {
		switch {
		case !utf8.ValidString(*intro) || strings.ContainsRune(*intro, 0):
			f.Add("intro_copy", "must be valid UTF-8 text")
		case utf8.RuneCountInString(*intro) > page.MaxIntroCopyLength:
			f.Add("intro_copy", "must be at most %d characters", page.MaxIntroCopyLength)
		}
	}
	if len(f) > 0 {
		return &toolError{msg: "invalid page fields", fields: f}
	}
	op := Operation{Op: OpSetPage}
	if title != nil {
		w.title, w.titleSet = *title, true
		op.Title = title
	}
	if intro != nil {
		w.introCopy, w.introSet = *intro, true
		op.IntroCopy = intro
	}
	w.ops = append(w.ops, op)
	return nil
}

// decodeArgs decodes a tool call's JSON arguments into v, refusing unknown fields and trailing
// data; an empty string is an empty object.
func decodeArgs(raw string, v any) error {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return refuse("the arguments are not a valid JSON object for this tool: %v", err)
	}
	if dec.More() {
		return refuse("the arguments must be one JSON object")
	}
	return nil
}

// jsonProps converts json.Number values (from decodeArgs) to float64, as block props hold them.
func jsonProps(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		return jsonProps(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	default:
		return v
	}
}

// sameBlocks reports whether two block lists are equal (ids, types and props).
func sameBlocks(a, b []block.Block) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
