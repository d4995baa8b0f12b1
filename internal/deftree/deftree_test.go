package deftree_test

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/deftree"
	"github.com/cohort-dev/cohort/internal/errs"
)

// A toy language: leaves {"key": "...", "negate"?} recognised by key or alias.
type definition struct {
	Logic      string `json:"logic"`
	Conditions []node `json:"conditions"`
	Negate     bool   `json:"negate,omitempty"`
}

type node struct {
	Logic      string `json:"logic,omitempty"`
	Conditions []node `json:"conditions,omitempty"`
	Key        string `json:"key,omitempty"`
	Negate     bool   `json:"negate,omitempty"`
}

func (n *node) group() ([]node, bool) { return n.Conditions, n.Key == "" }

var toy = &deftree.Language[definition, node]{
	MaxInput:      240,
	MaxSize:       120,
	MaxDepth:      3,
	MaxConditions: 4,
	Required:      "is required: {conditions}",
	LeafKeys:      []string{"key", "alias"},
	Neither:       "must be a leaf (with key) or a group (with conditions)",
	Leaf: func(f errs.Fields, m map[string]json.RawMessage, path string, n *node) {
		deftree.UnknownKeys(f, m, path, []string{"key", "negate"}, "a leaf")
		n.Negate = deftree.Bool(f, m, path, "negate")
		if json.Unmarshal(m["key"], &n.Key) != nil || n.Key == "" {
			f.Add(deftree.At(path, "key"), "must be a non-empty string")
		}
	},
	Node: func(g deftree.Group[node]) node {
		return node{Logic: g.Logic, Conditions: g.Conditions, Negate: g.Negate}
	},
	Definition: func(g deftree.Group[node]) *definition {
		return &definition{Logic: g.Logic, Conditions: g.Conditions, Negate: g.Negate}
	},
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *definition
	}{
		{"logic defaults to AND", `{"conditions":[{"key":"a"}]}`,
			&definition{Logic: "AND", Conditions: []node{{Key: "a"}}}},
		{"logic is case-insensitive; negate true and false", ` {"logic":"or","negate":true,"conditions":[{"key":"a","negate":false},{"key":"b","negate":true}]} `,
			&definition{Logic: "OR", Negate: true, Conditions: []node{{Key: "a"}, {Key: "b", Negate: true}}}},
		{"nested groups to the depth limit", `{"conditions":[{"conditions":[{"logic":"OR","negate":true,"conditions":[{"key":"a"}]}]}]}`,
			&definition{Logic: "AND", Conditions: []node{{Logic: "AND", Conditions: []node{{Logic: "OR", Negate: true, Conditions: []node{{Key: "a"}}}}}}}},
		{"conditions up to the limit in all", `{"conditions":[{"key":"a"},{"conditions":[{"key":"b"},{"key":"c"}]},{"key":"d"}]}`,
			&definition{Logic: "AND", Conditions: []node{{Key: "a"}, {Logic: "AND", Conditions: []node{{Key: "b"}, {Key: "c"}}}, {Key: "d"}}}},
		{"layout does not count towards MaxSize", `{"conditions":[{"key":"a"}]` + strings.Repeat(" ", 150) + `}`,
			&definition{Logic: "AND", Conditions: []node{{Key: "a"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toy.Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string // every field error, exactly
	}{
		{"empty", " \n", map[string]string{"definition": "is required: {conditions}"}},
		{"null", `null`, map[string]string{"definition": "is required: {conditions}"}},
		{"input too large", `{"conditions":[{"key":"a"}]` + strings.Repeat(" ", 240) + `}`, map[string]string{"definition": "is 268 bytes; the limit is 120"}},
		{"invalid UTF-8", "{\"conditions\":[{\"key\":\"\xff\"}]}", map[string]string{"definition": "must be valid UTF-8"}},
		{"not an object", `[1]`, map[string]string{"definition": "must be a JSON object"}},
		{"not JSON", `{"conditions":`, map[string]string{"definition": "must be a JSON object"}},
		{"trailing data", `{"conditions":[{"key":"a"}]} {}`, map[string]string{"definition": "must be a JSON object"}},
		{"canonical JSON too large", `{"conditions":[{"key":"` + strings.Repeat("k", 90) + `"}]}`, map[string]string{"definition": "is 131 bytes; the limit is 120"}},

		{"bad logic", `{"logic":"XOR","conditions":[{"key":"a"}]}`, map[string]string{"logic": "must be AND or OR"}},
		{"logic not a string", `{"logic":1,"conditions":[{"key":"a"}]}`, map[string]string{"logic": "must be AND or OR"}},
		{"negate not a boolean", `{"negate":"yes","conditions":[{"key":"a"}]}`, map[string]string{"negate": "must be true or false"}},
		{"negate null", `{"negate":null,"conditions":[{"key":"a"}]}`, map[string]string{"negate": "must be true or false"}},
		{"leaf negate null", `{"conditions":[{"key":"a","negate":null}]}`, map[string]string{"conditions[0].negate": "must be true or false"}},
		{"unknown keys, in order", `{"z":1,"conditions":[{"key":"a"}],"b":2}`, map[string]string{
			"b": "is not a field of a group (allowed: logic, conditions, negate)",
			"z": "is not a field of a group (allowed: logic, conditions, negate)",
		}},
		{"unknown key made printable and short", `{"conditions":[{"key":"a"}],"` + strings.Repeat("é", 70) + "\\udc00" + `":1}`, map[string]string{
			strings.Repeat("é", 64) + "...": "is not a field of a group (allowed: logic, conditions, negate)",
		}},
		{"conditions missing", `{"logic":"AND"}`, map[string]string{"conditions": "is required"}},
		{"conditions null", `{"conditions":null}`, map[string]string{"conditions": "must be an array"}},
		{"conditions not an array", `{"conditions":{}}`, map[string]string{"conditions": "must be an array"}},
		{"conditions empty", `{"conditions":[]}`, map[string]string{"conditions": "must not be empty"}},
		{"too many in one group", `{"conditions":[{"key":"a"},{"key":"b"},{"key":"c"},{"key":"d"},{"key":"e"}]}`, map[string]string{"conditions": "has 5 items; the limit is 4"}},
		{"too many in all", `{"conditions":[{"key":"a"},{"conditions":[{"key":"b"},{"key":"c"}]},{"conditions":[{"key":"d"},{"key":"e"}]}]}`, map[string]string{"conditions": "has 5 conditions in all; the limit is 4"}},
		{"item not an object", `{"conditions":[{"key":"a"},null,2]}`, map[string]string{"conditions[1]": "must be a JSON object", "conditions[2]": "must be a JSON object"}},
		{"neither leaf nor group", `{"conditions":[{"negate":true}]}`, map[string]string{"conditions[0]": "must be a leaf (with key) or a group (with conditions)"}},
		{"any leaf key makes a leaf", `{"conditions":[{"alias":"a","conditions":[]}]}`, map[string]string{
			"conditions[0].alias":      "is not a field of a leaf (allowed: key, negate)",
			"conditions[0].conditions": "is not a field of a leaf (allowed: key, negate)",
			"conditions[0].key":        "must be a non-empty string",
		}},
		{"too deep", `{"conditions":[{"conditions":[{"conditions":[{"conditions":[{"key":"a"}]}]}]}]}`, map[string]string{
			"conditions[0].conditions[0].conditions[0]": "nests groups deeper than 3 levels",
		}},
		{"every problem at its path", `{"conditions":[{"key":""},{"logic":"x","conditions":[{"key":"a"},{"conditions":[]}]}]}`, map[string]string{
			"conditions[0].key":                      "must be a non-empty string",
			"conditions[1].logic":                    "must be AND or OR",
			"conditions[1].conditions[1].conditions": "must not be empty",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, err := toy.Parse([]byte(tt.in))
			if def != nil {
				t.Errorf("a definition %+v with the error", def)
			}
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("error %v (%T), want a validation error", err, err)
			}
			if !maps.Equal(ve.Fields, tt.want) {
				t.Errorf("fields %q\nwant   %q", ve.Fields, tt.want)
			}
		})
	}
}

func TestAt(t *testing.T) {
	for _, tt := range []struct{ path, key, want string }{
		{"", "logic", "logic"},
		{"conditions[0]", "value", "conditions[0].value"},
		{"conditions[1].conditions[0]", "negate", "conditions[1].conditions[0].negate"},
	} {
		if got := deftree.At(tt.path, tt.key); got != tt.want {
			t.Errorf("At(%q, %q) = %q, want %q", tt.path, tt.key, got, tt.want)
		}
	}
}

func TestBool(t *testing.T) {
	for _, tt := range []struct {
		name, raw string // raw "" leaves the key out
		want      bool
		err       bool
	}{
		{"absent", "", false, false},
		{"true", `true`, true, false},
		{"false", ` false `, false, false},
		{"null", `null`, false, true},
		{"string", `"true"`, false, true},
		{"number", `1`, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]json.RawMessage{}
			if tt.raw != "" {
				m["negate"] = json.RawMessage(tt.raw)
			}
			f := errs.Fields{}
			got := deftree.Bool(f, m, "conditions[0]", "negate")
			if got != tt.want || (len(f) > 0) != tt.err {
				t.Fatalf("Bool = %v, fields %v; want %v, error %v", got, f, tt.want, tt.err)
			}
			if tt.err && f["conditions[0].negate"] != "must be true or false" {
				t.Fatalf("fields %v", f)
			}
		})
	}
}

func TestValue(t *testing.T) {
	for _, tt := range []struct {
		name, op, raw string // raw "" leaves "value" out
		want          string
		ok            bool
		msg           string
	}{
		{"no operator", "", `1`, "", false, ""},
		{"no operator, no value", "", "", "", false, ""},
		{"valueless operator without a value", "exists", "", "", false, ""},
		{"valueless operator with a value", "not_exists", `null`, "", false, "must be omitted with operator not_exists"},
		{"operator without a value", "eq", "", "", false, "is required with operator eq"},
		{"operator with a value", "eq", `"x"`, `"x"`, true, ""},
		{"operator with null", "in", `null`, `null`, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]json.RawMessage{}
			if tt.raw != "" {
				m["value"] = json.RawMessage(tt.raw)
			}
			f := errs.Fields{}
			r, ok := deftree.Value(f, m, "conditions[2]", tt.op, "exists", "not_exists")
			if string(r) != tt.want || ok != tt.ok || f["conditions[2].value"] != tt.msg || len(f) > 1 {
				t.Fatalf("Value = %s, %v, fields %v; want %s, %v, %q", r, ok, f, tt.want, tt.ok, tt.msg)
			}
		})
	}
}

func TestLeaves(t *testing.T) {
	tree := []node{
		{Key: "a"},
		{Conditions: []node{{Key: "b"}, {Conditions: []node{{Key: "c"}}}, {Key: "d"}}},
		{Conditions: nil}, // an empty group has no leaves
		{Key: "e"},
	}
	var got []string
	for n := range deftree.Leaves(tree, (*node).group) {
		got = append(got, n.Key)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("leaves %v, want %v", got, want)
	}
	got = got[:0]
	for n := range deftree.Leaves(tree, (*node).group) {
		if got = append(got, n.Key); n.Key == "c" {
			break
		}
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("leaves up to the break %v, want %v", got, want)
	}
	// The yielded pointers are into the tree.
	for n := range deftree.Leaves(tree, (*node).group) {
		n.Negate = true
	}
	if !tree[1].Conditions[1].Conditions[0].Negate {
		t.Fatal("a leaf was yielded as a copy")
	}
}
