// Package segment is Cohort's segment domain: the definition language, its compiler to the
// warehouse dialects (Postgres, BigQuery), the segment records with their version history, the
// computed membership (loaded as a diff of entered and exited users), member pages, the
// membership cache and exports.
//
// A definition is a tree: a group {logic, conditions, negate} whose conditions are leaves or
// nested groups (depth at most MaxDepth, at most MaxConditions leaves in all). Every leaf is a
// two-valued predicate on one user, so negate is plain NOT: "did not spend over 100 in the last 7
// days" includes users who never ordered.
package segment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/deftree"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
)

// Limits of the definition language.
const (
	MaxDepth       = 5        // nesting of groups, the top level counting as 1
	MaxConditions  = 50       // leaves in the whole definition
	MaxStringValue = 1024     // a string value
	MaxInValues    = 1000     // values of an "in" list
	MaxWindowDays  = 3650     // ten years
	MaxDefinition  = 64 << 10 // the canonical JSON (Definition.JSON)

	maxDefinitionInput = 64 * MaxDefinition // the input, however laid out
)

// Condition types.
const (
	TypeMonetary      = "monetary"
	TypeRecency       = "recency"
	TypeFrequency     = "frequency"
	TypeTrait         = "trait"
	TypeEventProperty = "event_property"
	TypeInSegment     = "in_segment"
)

// Definition is a validated segment definition. Its JSON form is what users send and read back.
type Definition struct {
	Logic      string `json:"logic"`
	Conditions []Node `json:"conditions"`
	Negate     bool   `json:"negate,omitempty"`
}

// Node is a nested group (Logic set) or a condition (Type set).
type Node struct {
	// Group.
	Logic      string `json:"logic,omitempty"`
	Conditions []Node `json:"conditions,omitempty"`
	// Condition.
	Type        string `json:"type,omitempty"`
	EventType   string `json:"event_type,omitempty"`
	Property    string `json:"property,omitempty"`
	Trait       string `json:"trait,omitempty"`
	Metric      string `json:"metric,omitempty"`
	Operator    string `json:"operator,omitempty"`
	Value       *Value `json:"value,omitempty"`
	WindowDays  *int   `json:"window_days,omitempty"`
	BetweenDays []int  `json:"between_days,omitempty"`
	SegmentID   int64  `json:"segment_id,omitempty"`
	Negate      bool   `json:"negate,omitempty"`
}

// IsGroup reports whether the node is a nested group.
func (n *Node) IsGroup() bool { return n.Type == "" }

// Value is a condition's comparison value: a number, a string, a boolean or a list of those.
type Value struct {
	Kind ValueKind
	Num  float64
	Str  string
	Bool bool
	List []Value
}

// ValueKind is the JSON type of a Value.
type ValueKind int

const (
	KindNumber ValueKind = iota + 1
	KindString
	KindBool
	KindList
)

func (k ValueKind) String() string {
	switch k {
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindBool:
		return "boolean"
	case KindList:
		return "array"
	}
	return "unknown"
}

// MarshalJSON writes the value in its JSON type.
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.Kind {
	case KindNumber:
		return json.Marshal(v.Num)
	case KindString:
		return json.Marshal(v.Str)
	case KindBool:
		return json.Marshal(v.Bool)
	case KindList:
		if v.List == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(v.List)
	}
	return []byte("null"), nil
}

// Text is the value as the warehouse compares it as text.
func (v Value) Text() string {
	switch v.Kind {
	case KindNumber:
		return formatNumber(v.Num)
	case KindBool:
		if v.Bool {
			return "true"
		}
		return "false"
	}
	return v.Str
}

func formatNumber(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// Operators.
var (
	numericOps   = []string{"gt", "gte", "lt", "lte", "eq", "neq"}
	traitOps     = []string{"eq", "neq", "contains", "starts_with", "in", "exists", "not_exists", "gt", "lt"}
	propertyOps  = []string{"eq", "neq", "contains", "starts_with", "in", "exists", "gt", "gte", "lt", "lte"}
	metrics      = []string{"sum", "avg", "min", "max", "count"}
	conditionKey = map[string][]string{
		TypeMonetary:      {"type", "event_type", "property", "metric", "operator", "value", "window_days", "between_days", "negate"},
		TypeRecency:       {"type", "event_type", "operator", "window_days", "negate"},
		TypeFrequency:     {"type", "event_type", "operator", "value", "window_days", "between_days", "negate"},
		TypeTrait:         {"type", "trait", "operator", "value", "negate"},
		TypeEventProperty: {"type", "event_type", "property", "operator", "value", "window_days", "between_days", "negate"},
		TypeInSegment:     {"type", "segment_id", "negate"},
	}
)

// definitions describes the language to deftree, which walks the groups: its limits, its leaves
// (conditions, recognised by their "type") and how its nodes are built.
var definitions = &deftree.Language[Definition, Node]{
	MaxInput:      maxDefinitionInput,
	MaxSize:       MaxDefinition,
	MaxDepth:      MaxDepth,
	MaxConditions: MaxConditions,
	Required:      "is required",
	LeafKeys:      []string{"type"},
	Neither:       "must be a condition (with type) or a group (with conditions)",
	Leaf: func(f errs.Fields, m map[string]json.RawMessage, path string, n *Node) {
		(&parser{fields: f}).condition(m, path, n)
	},
	Node: func(g deftree.Group[Node]) Node {
		return Node{Logic: g.Logic, Conditions: g.Conditions, Negate: g.Negate}
	},
	Definition: func(g deftree.Group[Node]) *Definition {
		return &Definition{Logic: g.Logic, Conditions: g.Conditions, Negate: g.Negate}
	},
}

// ParseDefinition decodes and validates a definition. Every problem is reported at its path
// ("conditions[2].value", "conditions[0].conditions[1].operator") in an *errs.ValidationError.
//
// MaxDefinition bounds the canonical JSON, not the input's layout: Postgres gives a stored
// definition back with a space after every comma and colon and its numbers in full (1e300 as 301
// digits), and it must still parse. The input itself is only bounded loosely.
func ParseDefinition(raw []byte) (*Definition, error) { return definitions.Parse(raw) }

// JSON is the definition's canonical JSON.
func (d *Definition) JSON() []byte {
	b, _ := json.Marshal(d)
	return b
}

// SegmentRefs lists the segment ids in_segment conditions refer to, sorted and deduplicated.
func (d *Definition) SegmentRefs() []int64 {
	seen := map[int64]bool{}
	for n := range d.leaves() {
		if n.Type == TypeInSegment {
			seen[n.SegmentID] = true
		}
	}
	out := slices.AppendSeq(make([]int64, 0, len(seen)), maps.Keys(seen)) // empty, not nil
	slices.Sort(out)
	return out
}

// EventTypes lists the event types the definition's conditions read, sorted.
func (d *Definition) EventTypes() []string {
	set := map[string]bool{}
	for n := range d.leaves() {
		if n.EventType != "" {
			set[n.EventType] = true
		}
	}
	out := slices.AppendSeq(make([]string, 0, len(set)), maps.Keys(set)) // empty, not nil
	slices.Sort(out)
	return out
}

// leaves yields the conditions (leaves) of the tree, depth first.
func (d *Definition) leaves() iter.Seq[*Node] {
	return deftree.Leaves(d.Conditions, func(n *Node) ([]Node, bool) { return n.Conditions, n.IsGroup() })
}

// parser parses conditions (and lookalike definitions), adding problems to fields.
type parser struct {
	fields errs.Fields
}

func at(path, key string) string { return deftree.At(path, key) }

func (p *parser) unknownKeys(m map[string]json.RawMessage, path string, allowed []string, what string) {
	deftree.UnknownKeys(p.fields, m, path, allowed, what)
}

func (p *parser) str(m map[string]json.RawMessage, path, key string, required bool) string {
	r, ok := m[key]
	if !ok {
		if required {
			p.fields.Add(at(path, key), "is required")
		}
		return ""
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		p.fields.Add(at(path, key), "must be a string")
		return ""
	}
	return s
}

func (p *parser) name(m map[string]json.RawMessage, path, key string) string {
	s := p.str(m, path, key, true)
	if _, ok := m[key]; !ok || p.fields[at(path, key)] != "" {
		return s
	}
	switch {
	case strings.TrimSpace(s) == "":
		p.fields.Add(at(path, key), "must not be empty")
	case len(s) > ident.MaxNameLen:
		p.fields.Add(at(path, key), "is longer than %d bytes", ident.MaxNameLen)
	case !utf8.ValidString(s):
		p.fields.Add(at(path, key), "must be valid UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		p.fields.Add(at(path, key), "must not contain control characters")
	}
	return s
}

func (p *parser) enum(m map[string]json.RawMessage, path, key string, allowed []string) string {
	s := p.str(m, path, key, true)
	if p.fields[at(path, key)] != "" {
		return ""
	}
	if !slices.Contains(allowed, s) {
		p.fields.Add(at(path, key), "must be one of %s", strings.Join(allowed, ", "))
		return ""
	}
	return s
}

func (p *parser) condition(m map[string]json.RawMessage, path string, n *Node) {
	typ := p.str(m, path, "type", true)
	keys, ok := conditionKey[typ]
	if !ok {
		if p.fields[at(path, "type")] == "" {
			p.fields.Add(at(path, "type"), "must be one of monetary, recency, frequency, trait, event_property, in_segment")
		}
		return
	}
	n.Type = typ
	p.unknownKeys(m, path, keys, "a "+typ+" condition")
	n.Negate = deftree.Bool(p.fields, m, path, "negate")
	switch typ {
	case TypeMonetary:
		n.EventType = p.name(m, path, "event_type")
		n.Property = p.name(m, path, "property")
		n.Metric = p.enum(m, path, "metric", metrics)
		n.Operator = p.enum(m, path, "operator", numericOps)
		n.Value = p.number(m, path, false)
		p.window(m, path, n, false)
	case TypeRecency:
		n.EventType = p.name(m, path, "event_type")
		n.Operator = p.enum(m, path, "operator", numericOps)
		p.window(m, path, n, true)
	case TypeFrequency:
		n.EventType = p.name(m, path, "event_type")
		n.Operator = p.enum(m, path, "operator", numericOps)
		n.Value = p.number(m, path, true)
		p.window(m, path, n, false)
	case TypeTrait:
		n.Trait = p.name(m, path, "trait")
		n.Operator = p.enum(m, path, "operator", traitOps)
		n.Value = p.operand(m, path, n.Operator)
	case TypeEventProperty:
		n.EventType = p.name(m, path, "event_type")
		n.Property = p.name(m, path, "property")
		n.Operator = p.enum(m, path, "operator", propertyOps)
		n.Value = p.operand(m, path, n.Operator)
		p.window(m, path, n, false)
	case TypeInSegment:
		r, ok := m["segment_id"]
		if !ok {
			p.fields.Add(at(path, "segment_id"), "is required")
			return
		}
		var id int64
		if json.Unmarshal(r, &id) != nil || id <= 0 {
			p.fields.Add(at(path, "segment_id"), "must be a positive integer")
			return
		}
		n.SegmentID = id
	}
}

// number reads "value" as a finite number; integer also requires a whole, non-negative count.
func (p *parser) number(m map[string]json.RawMessage, path string, integer bool) *Value {
	r, ok := m["value"]
	if !ok {
		p.fields.Add(at(path, "value"), "is required")
		return nil
	}
	f, ok := finite(r)
	if !ok {
		p.fields.Add(at(path, "value"), "must be a number")
		return nil
	}
	if integer && (f < 0 || f != math.Trunc(f) || f > 1e12) {
		p.fields.Add(at(path, "value"), "must be a whole number of events, 0 or more")
		return nil
	}
	return &Value{Kind: KindNumber, Num: f}
}

func finite(r json.RawMessage) (float64, bool) {
	// encoding/json decodes a string holding a number ("100") into a json.Number: a string is not
	// a number here.
	if t := bytes.TrimSpace(r); len(t) > 0 && t[0] == '"' {
		return 0, false
	}
	var num json.Number
	if json.Unmarshal(r, &num) != nil {
		return 0, false
	}
	f, err := num.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func scalar(r json.RawMessage) (Value, bool) {
	t := bytes.TrimSpace(r)
	if len(t) == 0 {
		return Value{}, false
	}
	switch t[0] {
	case '"':
		var s string
		if json.Unmarshal(t, &s) != nil || len(s) > MaxStringValue || !validText(s) {
			return Value{}, false
		}
		return Value{Kind: KindString, Str: s}, true
	case 't', 'f':
		var b bool
		if json.Unmarshal(t, &b) != nil {
			return Value{}, false
		}
		return Value{Kind: KindBool, Bool: b}, true
	}
	f, ok := finite(t)
	if !ok {
		return Value{}, false
	}
	return Value{Kind: KindNumber, Num: f}, true
}

// operand reads "value" as the operator needs it.
func (p *parser) operand(m map[string]json.RawMessage, path, op string) *Value {
	r, ok := deftree.Value(p.fields, m, path, op, "exists", "not_exists")
	if !ok {
		return nil
	}
	key := at(path, "value")
	switch op {
	case "in":
		var items []json.RawMessage
		if json.Unmarshal(r, &items) != nil {
			p.fields.Add(key, "must be an array with operator in")
			return nil
		}
		if len(items) == 0 || len(items) > MaxInValues {
			p.fields.Add(key, "must hold 1 to %d values", MaxInValues)
			return nil
		}
		v := &Value{Kind: KindList, List: make([]Value, 0, len(items))}
		for i, it := range items {
			s, ok := scalar(it)
			if !ok {
				p.fields.Add(fmt.Sprintf("%s[%d]", key, i), "must be a string, number or boolean (strings at most %d bytes)", MaxStringValue)
				return nil
			}
			v.List = append(v.List, s)
		}
		return v
	case "contains", "starts_with":
		v, ok := scalar(r)
		if !ok || v.Kind != KindString || v.Str == "" {
			p.fields.Add(key, "must be a non-empty string with operator %s (at most %d bytes)", op, MaxStringValue)
			return nil
		}
		return &v
	case "gt", "gte", "lt", "lte":
		f, ok := finite(r)
		if !ok {
			p.fields.Add(key, "must be a number with operator %s", op)
			return nil
		}
		return &Value{Kind: KindNumber, Num: f}
	}
	v, ok := scalar(r)
	if !ok {
		p.fields.Add(key, "must be a string, number or boolean (strings at most %d bytes)", MaxStringValue)
		return nil
	}
	return &v
}

// window reads window_days / between_days. For recency, window_days is the required comparison
// value (0 allowed); elsewhere the window is optional and at least 1 day.
func (p *parser) window(m map[string]json.RawMessage, path string, n *Node, recency bool) {
	wr, hasW := m["window_days"]
	br, hasB := m["between_days"]
	if hasW && hasB {
		p.fields.Add(at(path, "between_days"), "cannot be combined with window_days")
		return
	}
	if recency && !hasW {
		p.fields.Add(at(path, "window_days"), "is required")
		return
	}
	min := 1
	if recency {
		min = 0
	}
	if hasW {
		var d int
		f, ok := finite(wr)
		if !ok || f != math.Trunc(f) || f < float64(min) || f > MaxWindowDays {
			p.fields.Add(at(path, "window_days"), "must be a whole number of days from %d to %d", min, MaxWindowDays)
			return
		}
		d = int(f)
		n.WindowDays = &d
	}
	if hasB {
		var pair []json.RawMessage
		if json.Unmarshal(br, &pair) != nil || len(pair) != 2 {
			p.fields.Add(at(path, "between_days"), "must be [from, to]: from days ago back to to days ago, e.g. [7, 30]")
			return
		}
		var ds [2]int
		for i, r := range pair {
			f, ok := finite(r)
			if !ok || f != math.Trunc(f) || f < 0 || f > MaxWindowDays {
				p.fields.Add(fmt.Sprintf("%s[%d]", at(path, "between_days"), i), "must be a whole number of days from 0 to %d", MaxWindowDays)
				return
			}
			ds[i] = int(f)
		}
		if ds[0] >= ds[1] {
			p.fields.Add(at(path, "between_days"), "must be [from, to] with from < to (days ago), e.g. [7, 30]")
			return
		}
		n.BetweenDays = ds[:]
	}
}
