// Package deftree decodes the JSON tree that Cohort's definition languages share (user segments
// in internal/segment, product segments in internal/catalog/prodseg): a group
// {logic, conditions, negate} whose conditions are leaves or nested groups.
//
// A Language holds what differs between the languages: its limits, how a leaf is recognised and
// parsed, and how its groups and definitions are built. Language.Parse does the rest: the checks
// on the input, the walk over the groups (logic, negate, conditions, depth and count limits) and
// the size of the canonical JSON. Every problem is reported at its field path
// ("conditions[1].conditions[0].value") in an *errs.ValidationError; the helpers At, Bool and
// UnknownKeys let leaf parsers report theirs the same way.
package deftree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/errs"
)

var (
	logics    = []string{"AND", "OR"}
	groupKeys = []string{"logic", "conditions", "negate"}
)

// Group is a decoded group: its logic (AND or OR, AND when absent), its conditions (leaves and
// nested groups, in order) and whether it is negated.
type Group[N any] struct {
	Logic      string
	Conditions []N
	Negate     bool
}

// Language describes one definition language to Parse. D is the definition, N a node of its tree
// (a leaf or a nested group).
type Language[D, N any] struct {
	MaxInput      int // bytes of input, however laid out
	MaxSize       int // bytes of the canonical JSON; a too-large input is told this limit too
	MaxDepth      int // nesting of groups, the top level counting as 1
	MaxConditions int // leaves in the whole definition, and items in one group

	// Required is the message for an empty or null definition.
	Required string
	// LeafKeys recognise a leaf: an item with any of these keys is a leaf; one without them but
	// with "conditions" is a nested group.
	LeafKeys []string
	// Neither is the message for an item that is neither a leaf nor a group.
	Neither string

	// Leaf parses a leaf's members into out, adding its problems to f under path.
	Leaf func(f errs.Fields, m map[string]json.RawMessage, path string, out *N)
	// Node builds the node of a nested group.
	Node func(g Group[N]) N
	// Definition builds the definition from the top group. Its canonical JSON, as encoding/json
	// writes it, is held to MaxSize.
	Definition func(g Group[N]) *D
}

// Parse decodes raw and checks its structure. A definition is returned only when there is no
// problem; otherwise the error is an *errs.ValidationError naming every problem found at its path.
func (l *Language[D, N]) Parse(raw []byte) (*D, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, errs.Invalid("definition", l.Required)
	}
	if len(raw) > l.MaxInput {
		return nil, errs.Invalid("definition", fmt.Sprintf("is %d bytes; the limit is %d", len(raw), l.MaxSize))
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD.
	if !utf8.Valid(raw) {
		return nil, errs.Invalid("definition", "must be valid UTF-8")
	}
	w := walk[D, N]{Language: l, fields: errs.Fields{}}
	var top Group[N]
	if m := object(w.fields, raw, ""); m != nil {
		top = w.group(m, "", 1)
	}
	if err := w.fields.Err(); err != nil {
		return nil, err
	}
	if w.leaves > l.MaxConditions {
		return nil, errs.Invalid("conditions", fmt.Sprintf("has %d conditions in all; the limit is %d", w.leaves, l.MaxConditions))
	}
	def := l.Definition(top)
	if js, _ := json.Marshal(def); len(js) > l.MaxSize {
		return nil, errs.Invalid("definition", fmt.Sprintf("is %d bytes; the limit is %d", len(js), l.MaxSize))
	}
	return def, nil
}

// walk is one Parse in progress.
type walk[D, N any] struct {
	*Language[D, N]
	fields errs.Fields
	leaves int
}

// group decodes the members m of the group at path, depth levels down (the top level is 1).
func (w *walk[D, N]) group(m map[string]json.RawMessage, path string, depth int) Group[N] {
	UnknownKeys(w.fields, m, path, groupKeys, "a group")
	g := Group[N]{Logic: "AND"}
	if lr, ok := m["logic"]; ok {
		var s string
		if json.Unmarshal(lr, &s) != nil || !slices.Contains(logics, strings.ToUpper(s)) {
			w.fields.Add(At(path, "logic"), "must be AND or OR")
		} else {
			g.Logic = strings.ToUpper(s)
		}
	}
	g.Negate = Bool(w.fields, m, path, "negate")
	key := At(path, "conditions")
	cr, ok := m["conditions"]
	if !ok {
		w.fields.Add(key, "is required")
		return g
	}
	var items []json.RawMessage
	if json.Unmarshal(cr, &items) != nil || items == nil {
		w.fields.Add(key, "must be an array")
		return g
	}
	if len(items) == 0 {
		w.fields.Add(key, "must not be empty")
		return g
	}
	if len(items) > w.MaxConditions {
		w.fields.Add(key, "has %d items; the limit is %d", len(items), w.MaxConditions)
		return g
	}
	g.Conditions = make([]N, len(items))
	for i, item := range items {
		ipath := fmt.Sprintf("%s[%d]", key, i)
		im := object(w.fields, item, ipath)
		switch {
		case im == nil:
		case slices.ContainsFunc(w.LeafKeys, func(k string) bool { return has(im, k) }):
			w.leaves++
			w.Leaf(w.fields, im, ipath, &g.Conditions[i])
		case !has(im, "conditions"):
			w.fields.Add(ipath, "%s", w.Neither)
		case depth+1 > w.MaxDepth:
			w.fields.Add(ipath, "nests groups deeper than %d levels", w.MaxDepth)
		default:
			g.Conditions[i] = w.Node(w.group(im, ipath, depth+1))
		}
	}
	return g
}

// Leaves yields the leaves of a tree of nodes, depth first. group gives a node's conditions and
// whether it is a group.
func Leaves[N any](nodes []N, group func(n *N) ([]N, bool)) iter.Seq[*N] {
	return func(yield func(*N) bool) { leaves(nodes, group, yield) }
}

func leaves[N any](nodes []N, group func(n *N) ([]N, bool), yield func(*N) bool) bool {
	for i := range nodes {
		if sub, ok := group(&nodes[i]); ok {
			if !leaves(sub, group, yield) {
				return false
			}
		} else if !yield(&nodes[i]) {
			return false
		}
	}
	return true
}

func has(m map[string]json.RawMessage, key string) bool {
	_, ok := m[key]
	return ok
}

// At is the path of key under path: At("", "logic") is "logic", At("conditions[0]", "value") is
// "conditions[0].value".
func At(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object decodes one JSON object, keeping its members raw; nothing may follow it. On failure it
// adds "must be a JSON object" at path ("definition" at the top) and returns nil.
func object(f errs.Fields, raw []byte, path string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	err := dec.Decode(&m)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data")
		}
	}
	if err != nil || m == nil {
		name := path
		if name == "" {
			name = "definition"
		}
		f.Add(name, "must be a JSON object")
		return nil
	}
	return m
}

// UnknownKeys adds an error for each member of m, the object at path, whose key is not in allowed
// ("is not a field of <what> (allowed: ...)"), in key order.
func UnknownKeys(f errs.Fields, m map[string]json.RawMessage, path string, allowed []string, what string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(allowed, k) {
			f.Add(At(path, safeKey(k)), "is not a field of %s (allowed: %s)", what, strings.Join(allowed, ", "))
		}
	}
}

// safeKey keeps user-sent key names printable and short in error paths.
func safeKey(k string) string {
	k = strings.ToValidUTF8(k, "?")
	if utf8.RuneCountInString(k) > 64 {
		k = string([]rune(k)[:64]) + "..."
	}
	return k
}

// Value reads the value m["value"] of the leaf at path for operator op: operators in valueless
// take none ("must be omitted with operator exists"), the others need one ("is required with
// operator eq"). ok reports whether there is a value to check; it is false without an operator
// (whose own problem is reported where it is read).
func Value(f errs.Fields, m map[string]json.RawMessage, path, op string, valueless ...string) (r json.RawMessage, ok bool) {
	r, has := m["value"]
	switch {
	case op == "":
	case slices.Contains(valueless, op):
		if has {
			f.Add(At(path, "value"), "must be omitted with operator %s", op)
		}
	case !has:
		f.Add(At(path, "value"), "is required with operator %s", op)
	default:
		return r, true
	}
	return nil, false
}

// Bool reads the optional boolean m[key] of the object at path: false when absent; true or false,
// not null, when present.
func Bool(f errs.Fields, m map[string]json.RawMessage, path, key string) bool {
	r, ok := m[key]
	if !ok {
		return false
	}
	var b bool
	if json.Unmarshal(r, &b) != nil || bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
		f.Add(At(path, key), "must be true or false")
	}
	return b
}
