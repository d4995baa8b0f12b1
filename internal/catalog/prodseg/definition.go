// Package prodseg is the product segment domain: a definition language over the tenant's
// products (sku, name and the fields of the tenant's product schema), its compiler to
// parameterised Postgres SQL over the products table, and the segment records with their
// computed membership (a snapshot of product ids).
//
// A definition is a tree: a group {logic, conditions, negate} whose conditions are leaves
// {field, operator, value, negate} or nested groups (depth at most MaxDepth, at most
// MaxConditions leaves in all). Every leaf is a two-valued predicate on one product: a product
// without a value for the field does not match eq, gt, contains, in, exists...; neq, not_in and
// not_exists are the plain NOT of eq, in and exists (so they match it), and negate is plain NOT.
//
// Parse checks the structure only; Compile checks fields, operators and values against the
// tenant's schema and builds the SQL.
package prodseg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/cohort-dev/cohort/internal/deftree"
	"github.com/cohort-dev/cohort/internal/errs"
)

// Limits of the definition language.
const (
	MaxDepth       = 5        // nesting of groups, the top level counting as 1
	MaxConditions  = 50       // leaves in the whole definition
	MaxFieldName   = 64       // a field name (schema names are at most 63 bytes)
	MaxStringValue = 1000     // a string value or list element, in bytes (catalog.MaxStringLength)
	MaxInValues    = 1000     // values of an in / not_in list
	MaxDefinition  = 64 << 10 // the canonical JSON (Definition.JSON)

	maxDefinitionInput = 4 * MaxDefinition // the input, however laid out
)

// Operators.
const (
	OpEq        = "eq"
	OpNeq       = "neq"
	OpGt        = "gt"
	OpGte       = "gte"
	OpLt        = "lt"
	OpLte       = "lte"
	OpIn        = "in"
	OpNotIn     = "not_in"
	OpContains  = "contains"
	OpExists    = "exists"
	OpNotExists = "not_exists"
)

// Operators lists every operator in the order the API documents them.
var Operators = []string{OpEq, OpNeq, OpGt, OpGte, OpLt, OpLte, OpIn, OpNotIn, OpContains, OpExists, OpNotExists}

var conditionKeys = []string{"field", "operator", "value", "negate"}

// Definition is a parsed definition. Its JSON form (JSON) is canonical: what users read back.
type Definition struct {
	Logic      string `json:"logic"`
	Conditions []Node `json:"conditions"`
	Negate     bool   `json:"negate,omitempty"`
}

// Node is a nested group (Conditions set) or a condition (Field set).
type Node struct {
	// Group.
	Logic      string `json:"logic,omitempty"`
	Conditions []Node `json:"conditions,omitempty"`
	// Condition.
	Field    string `json:"field,omitempty"`
	Operator string `json:"operator,omitempty"`
	// Value is the comparison value, canonical JSON: a string, a number, a boolean, or for in and
	// not_in a list of those. Absent for exists and not_exists.
	Value  json.RawMessage `json:"value,omitempty"`
	Negate bool            `json:"negate,omitempty"`
}

// IsGroup reports whether the node is a nested group.
func (n *Node) IsGroup() bool { return n.Field == "" }

// JSON is the definition's canonical JSON.
func (d *Definition) JSON() []byte {
	b, _ := json.Marshal(d)
	return b
}

// Fields lists the field names the definition's conditions read, sorted and deduplicated.
func (d *Definition) Fields() []string {
	set := map[string]bool{}
	for n := range deftree.Leaves(d.Conditions, func(n *Node) ([]Node, bool) { return n.Conditions, n.IsGroup() }) {
		set[n.Field] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// definitions describes the language to deftree, which walks the groups: its limits, its leaves
// (conditions, recognised by "field" or "operator") and how its nodes are built.
var definitions = &deftree.Language[Definition, Node]{
	MaxInput:      maxDefinitionInput,
	MaxSize:       MaxDefinition,
	MaxDepth:      MaxDepth,
	MaxConditions: MaxConditions,
	Required:      "is required: {\"logic\": \"AND\", \"conditions\": [{\"field\", \"operator\", \"value\"}]}",
	LeafKeys:      []string{"field", "operator"},
	Neither:       "must be a condition (with field and operator) or a group (with conditions)",
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

// Parse decodes a definition and checks its structure: groups, logic, field names present,
// operators known, values present (or absent) and of a JSON shape the operator takes. Every
// problem is reported at its path ("conditions[2].value", "conditions[0].conditions[1].operator")
// in an *errs.ValidationError. Types are checked against the schema by Compile.
func Parse(raw []byte) (*Definition, error) { return definitions.Parse(raw) }

// parser parses conditions, adding problems to fields.
type parser struct {
	fields errs.Fields
}

func at(path, key string) string { return deftree.At(path, key) }

func (p *parser) condition(m map[string]json.RawMessage, path string, n *Node) {
	deftree.UnknownKeys(p.fields, m, path, conditionKeys, "a condition")
	n.Negate = deftree.Bool(p.fields, m, path, "negate")
	n.Field = p.fieldName(m, path)
	n.Operator = p.operator(m, path)
	n.Value = p.operand(m, path, n.Operator)
}

func (p *parser) fieldName(m map[string]json.RawMessage, path string) string {
	key := at(path, "field")
	r, ok := m["field"]
	if !ok {
		p.fields.Add(key, "is required: sku, name or a field of the product schema")
		return ""
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		p.fields.Add(key, "must be a string: sku, name or a field of the product schema")
		return ""
	}
	switch {
	case s == "":
		p.fields.Add(key, "must not be empty")
		return ""
	case len(s) > MaxFieldName || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		p.fields.Add(key, "is not a field of the product schema")
		return ""
	}
	return s
}

func (p *parser) operator(m map[string]json.RawMessage, path string) string {
	key := at(path, "operator")
	r, ok := m["operator"]
	if !ok {
		p.fields.Add(key, "is required: one of %s", strings.Join(Operators, ", "))
		return ""
	}
	var s string
	if json.Unmarshal(r, &s) != nil || !slices.Contains(Operators, s) {
		p.fields.Add(key, "must be one of %s", strings.Join(Operators, ", "))
		return ""
	}
	return s
}

// operand reads "value" as the operator needs it and returns it as canonical JSON.
func (p *parser) operand(m map[string]json.RawMessage, path, op string) json.RawMessage {
	r, ok := deftree.Value(p.fields, m, path, op, OpExists, OpNotExists)
	if !ok {
		return nil
	}
	key := at(path, "value")
	if op == OpIn || op == OpNotIn {
		var items []json.RawMessage
		if json.Unmarshal(r, &items) != nil || items == nil {
			p.fields.Add(key, "must be an array of values with operator %s", op)
			return nil
		}
		if len(items) == 0 || len(items) > MaxInValues {
			p.fields.Add(key, "must hold 1 to %d values", MaxInValues)
			return nil
		}
		out := make([]any, len(items))
		for i, it := range items {
			v, msg := scalar(it)
			if msg != "" {
				p.fields.Add(fmt.Sprintf("%s[%d]", key, i), "%s", msg)
				return nil
			}
			out[i] = v
		}
		return canonicalJSON(out)
	}
	v, msg := scalar(r)
	if msg != "" {
		p.fields.Add(key, "%s", msg)
		return nil
	}
	return canonicalJSON(v)
}

// scalar decodes a string, a finite number or a boolean (a number as float64).
func scalar(r json.RawMessage) (any, string) {
	t := bytes.TrimSpace(r)
	const want = "must be a string, a number or a boolean"
	if len(t) == 0 {
		return nil, want
	}
	switch t[0] {
	case '"':
		var s string
		if json.Unmarshal(t, &s) != nil {
			return nil, want
		}
		if len(s) > MaxStringValue {
			return nil, fmt.Sprintf("must be text of at most %d bytes", MaxStringValue)
		}
		if strings.ContainsRune(s, 0) {
			return nil, "must not contain NUL characters"
		}
		return s, ""
	case 't', 'f':
		var b bool
		if json.Unmarshal(t, &b) != nil {
			return nil, want
		}
		return b, ""
	case '[':
		return nil, "must be a single value, not a list (lists go with in and not_in)"
	case '{':
		return nil, want + ", not an object"
	case 'n':
		return nil, want + ", not null"
	}
	var num json.Number
	if json.Unmarshal(t, &num) != nil {
		return nil, want
	}
	f, err := num.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, "must be a finite number"
	}
	return f, ""
}

func canonicalJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// withPrefix re-keys the field errors of a validation error under prefix ("definition"), for
// bodies that hold the definition under that key.
func withPrefix(err error, prefix string) error {
	var ve *errs.ValidationError
	if prefix == "" || !errors.As(err, &ve) {
		return err
	}
	out := &errs.ValidationError{Code: ve.Code, Msg: ve.Msg, Fields: make(map[string]string, len(ve.Fields))}
	for k, v := range ve.Fields {
		if k == prefix {
			out.Fields[k] = v
			continue
		}
		out.Fields[prefix+"."+k] = v
	}
	return out
}
