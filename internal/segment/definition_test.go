package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// seedDefinition is the example of the product issue, verbatim.
const seedDefinition = `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100},{"type":"recency","event_type":"page_view","operator":"gt","window_days":30}]}`

func numv(f float64) *segment.Value { return &segment.Value{Kind: segment.KindNumber, Num: f} }
func strv(s string) *segment.Value  { return &segment.Value{Kind: segment.KindString, Str: s} }
func boolv(b bool) *segment.Value   { return &segment.Value{Kind: segment.KindBool, Bool: b} }
func listv(vs ...segment.Value) *segment.Value {
	return &segment.Value{Kind: segment.KindList, List: vs}
}

// cond wraps one condition in a top-level AND group.
func cond(c string) string { return `{"logic":"AND","conditions":[` + c + `]}` }

// nested wraps c in depth groups (the top level counting as 1).
func nested(depth int, c string) string {
	s := c
	for i := 1; i < depth; i++ {
		s = `{"logic":"OR","conditions":[` + s + `]}`
	}
	return `{"logic":"AND","conditions":[` + s + `]}`
}

// repeat joins n copies of c with commas.
func repeat(n int, c string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = c
	}
	return strings.Join(parts, ",")
}

const (
	monetaryLeaf  = `{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100}`
	frequencyLeaf = `{"type":"frequency","event_type":"page_view","operator":"gte","value":1}`
)

func TestParseDefinitionValid(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want *segment.Definition // nil: only parse and round trip
	}{
		{"seed example", seedDefinition, &segment.Definition{Logic: "AND", Conditions: []segment.Node{
			{Type: "monetary", EventType: "order_completed", Property: "amount", Metric: "sum", Operator: "gte", Value: numv(100)},
			{Type: "recency", EventType: "page_view", Operator: "gt", WindowDays: new(30)},
		}}},
		{"seed example with a window on the monetary condition",
			`{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100,"window_days":90},{"type":"recency","event_type":"page_view","operator":"gt","window_days":30}]}`,
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{
				{Type: "monetary", EventType: "order_completed", Property: "amount", Metric: "sum", Operator: "gte", Value: numv(100), WindowDays: new(90)},
				{Type: "recency", EventType: "page_view", Operator: "gt", WindowDays: new(30)},
			}}},
		{"logic defaults to AND", `{"conditions":[` + frequencyLeaf + `]}`, &segment.Definition{Logic: "AND", Conditions: []segment.Node{
			{Type: "frequency", EventType: "page_view", Operator: "gte", Value: numv(1)},
		}}},
		{"logic is case-insensitive", `{"logic":"or","conditions":[` + frequencyLeaf + `]}`, &segment.Definition{Logic: "OR", Conditions: []segment.Node{
			{Type: "frequency", EventType: "page_view", Operator: "gte", Value: numv(1)},
		}}},
		{"top-level negate", `{"logic":"AND","negate":true,"conditions":[` + frequencyLeaf + `]}`, &segment.Definition{Logic: "AND", Negate: true, Conditions: []segment.Node{
			{Type: "frequency", EventType: "page_view", Operator: "gte", Value: numv(1)},
		}}},
		{"whitespace around the document", " \n\t" + seedDefinition + "\n ", nil},
		{"layout does not count towards the size limit", `{"conditions":[` + frequencyLeaf + `]` + strings.Repeat(" ", 4*segment.MaxDefinition) + `}`, nil},

		// monetary: every metric and numeric operator, windows.
		{"monetary sum gt", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":0}`), nil},
		{"monetary avg gte", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"avg","operator":"gte","value":12.5}`), nil},
		{"monetary min lt negative", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"min","operator":"lt","value":-3}`), nil},
		{"monetary max lte", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"max","operator":"lte","value":1e6}`), nil},
		{"monetary count eq", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"count","operator":"eq","value":2}`), nil},
		{"monetary neq with between_days", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"neq","value":0,"between_days":[7,30]}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{
				{Type: "monetary", EventType: "o", Property: "amount", Metric: "sum", Operator: "neq", Value: numv(0), BetweenDays: []int{7, 30}},
			}}},
		{"monetary window at the limits", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":1,"window_days":3650}`), nil},
		{"between_days from today", cond(`{"type":"frequency","event_type":"o","operator":"gt","value":0,"between_days":[0,3650]}`), nil},

		// recency: every operator; window_days 0 is allowed.
		{"recency gt", cond(`{"type":"recency","event_type":"e","operator":"gt","window_days":30}`), nil},
		{"recency gte", cond(`{"type":"recency","event_type":"e","operator":"gte","window_days":30}`), nil},
		{"recency lt", cond(`{"type":"recency","event_type":"e","operator":"lt","window_days":7}`), nil},
		{"recency lte zero days", cond(`{"type":"recency","event_type":"e","operator":"lte","window_days":0}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "recency", EventType: "e", Operator: "lte", WindowDays: new(0)}}}},
		{"recency eq", cond(`{"type":"recency","event_type":"e","operator":"eq","window_days":1}`), nil},
		{"recency neq negated", cond(`{"type":"recency","event_type":"e","operator":"neq","window_days":1,"negate":true}`), nil},

		// frequency.
		{"frequency eq 0", cond(`{"type":"frequency","event_type":"order_completed","operator":"eq","value":0,"window_days":30}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{
				{Type: "frequency", EventType: "order_completed", Operator: "eq", Value: numv(0), WindowDays: new(30)},
			}}},
		{"frequency lt", cond(`{"type":"frequency","event_type":"e","operator":"lt","value":3}`), nil},
		{"frequency whole number written as a float", cond(`{"type":"frequency","event_type":"e","operator":"lte","value":3.0}`), nil},
		{"frequency neq", cond(`{"type":"frequency","event_type":"e","operator":"neq","value":1e3}`), nil},

		// trait: every operator.
		{"trait eq string", cond(`{"type":"trait","trait":"plan","operator":"eq","value":"pro"}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "trait", Trait: "plan", Operator: "eq", Value: strv("pro")}}}},
		{"trait eq number", cond(`{"type":"trait","trait":"age","operator":"eq","value":30}`), nil},
		{"trait eq boolean", cond(`{"type":"trait","trait":"vip","operator":"eq","value":true}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "trait", Trait: "vip", Operator: "eq", Value: boolv(true)}}}},
		{"trait neq", cond(`{"type":"trait","trait":"plan","operator":"neq","value":"free"}`), nil},
		{"trait contains", cond(`{"type":"trait","trait":"email","operator":"contains","value":"@example.com"}`), nil},
		{"trait starts_with", cond(`{"type":"trait","trait":"country","operator":"starts_with","value":"U"}`), nil},
		{"trait in mixed list", cond(`{"type":"trait","trait":"plan","operator":"in","value":["pro",1,true,"a b"]}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "trait", Trait: "plan", Operator: "in",
				Value: listv(*strv("pro"), *numv(1), *boolv(true), *strv("a b"))}}}},
		{"trait exists", cond(`{"type":"trait","trait":"plan","operator":"exists"}`), nil},
		{"trait not_exists", cond(`{"type":"trait","trait":"plan","operator":"not_exists"}`), nil},
		{"trait gt", cond(`{"type":"trait","trait":"age","operator":"gt","value":18}`), nil},
		{"trait lt", cond(`{"type":"trait","trait":"age","operator":"lt","value":65.5}`), nil},
		{"trait string value with quotes and unicode", cond(`{"type":"trait","trait":"name","operator":"eq","value":"O'Brien \"Ö\" \u00e9\n"}`), nil},

		// event_property: every operator.
		{"event_property eq", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"eq","value":"/pricing","window_days":7}`), nil},
		{"event_property neq", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"neq","value":"/"}`), nil},
		{"event_property contains", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"pricing"}`), nil},
		{"event_property starts_with", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"starts_with","value":"/blog"}`), nil},
		{"event_property in", cond(`{"type":"event_property","event_type":"order_completed","property":"currency","operator":"in","value":["EUR","USD"],"between_days":[1,2]}`), nil},
		{"event_property exists", cond(`{"type":"event_property","event_type":"order_completed","property":"coupon","operator":"exists"}`), nil},
		{"event_property gt", cond(`{"type":"event_property","event_type":"order_completed","property":"amount","operator":"gt","value":10}`), nil},
		{"event_property gte", cond(`{"type":"event_property","event_type":"order_completed","property":"amount","operator":"gte","value":10}`), nil},
		{"event_property lt", cond(`{"type":"event_property","event_type":"order_completed","property":"amount","operator":"lt","value":10}`), nil},
		{"event_property lte", cond(`{"type":"event_property","event_type":"order_completed","property":"amount","operator":"lte","value":10}`), nil},
		{"event_property eq boolean", cond(`{"type":"event_property","event_type":"order_completed","property":"gift","operator":"eq","value":false}`), nil},

		// in_segment and nesting.
		{"in_segment", cond(`{"type":"in_segment","segment_id":3}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "in_segment", SegmentID: 3}}}},
		{"in_segment negated", cond(`{"type":"in_segment","segment_id":9007199254740993,"negate":true}`),
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "in_segment", SegmentID: 9007199254740993, Negate: true}}}},
		{"nested negated OR group", `{"logic":"AND","conditions":[` + frequencyLeaf + `,{"logic":"OR","negate":true,"conditions":[` + monetaryLeaf + `,{"type":"trait","trait":"plan","operator":"exists"}]}]}`,
			&segment.Definition{Logic: "AND", Conditions: []segment.Node{
				{Type: "frequency", EventType: "page_view", Operator: "gte", Value: numv(1)},
				{Logic: "OR", Negate: true, Conditions: []segment.Node{
					{Type: "monetary", EventType: "order_completed", Property: "amount", Metric: "sum", Operator: "gte", Value: numv(100)},
					{Type: "trait", Trait: "plan", Operator: "exists"},
				}},
			}}},
		{"nested group without logic is AND", `{"conditions":[{"conditions":[` + frequencyLeaf + `]}]}`, &segment.Definition{Logic: "AND", Conditions: []segment.Node{
			{Logic: "AND", Conditions: []segment.Node{{Type: "frequency", EventType: "page_view", Operator: "gte", Value: numv(1)}}},
		}}},
		{"depth 5", nested(5, frequencyLeaf), nil},
		{"50 conditions at the top", `{"conditions":[` + repeat(50, frequencyLeaf) + `]}`, nil},
		{"50 conditions across groups", `{"conditions":[{"conditions":[` + repeat(25, frequencyLeaf) + `]},{"conditions":[` + repeat(25, monetaryLeaf) + `]}]}`, nil},
		{"names at the length limit", cond(`{"type":"trait","trait":"` + strings.Repeat("t", ident.MaxNameLen) + `","operator":"eq","value":"` + strings.Repeat("v", segment.MaxStringValue) + `"}`), nil},
		{"non-ASCII names", cond(`{"type":"event_property","event_type":"commande_passée","property":"montant €","operator":"gt","value":1}`), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, err := segment.ParseDefinition([]byte(tc.raw))
			if err != nil {
				t.Fatalf("ParseDefinition: %v", err)
			}
			if tc.want != nil && !reflect.DeepEqual(def, tc.want) {
				t.Fatalf("parsed\n%s\nwant\n%s", def.JSON(), tc.want.JSON())
			}
			checkRoundTrip(t, def)
		})
	}
}

// checkRoundTrip re-parses the definition's canonical JSON: it must give the same definition and
// the same JSON again.
func checkRoundTrip(t testing.TB, def *segment.Definition) {
	t.Helper()
	js := def.JSON()
	again, err := segment.ParseDefinition(js)
	if err != nil {
		t.Fatalf("canonical JSON does not parse: %v\n%s", err, js)
	}
	if !reflect.DeepEqual(def, again) {
		t.Fatalf("round trip changed the definition:\n%#v\n%#v", def, again)
	}
	if js2 := again.JSON(); string(js2) != string(js) {
		t.Fatalf("canonical JSON is not stable:\n%s\n%s", js, js2)
	}
}

func TestParseDefinitionCanonicalJSON(t *testing.T) {
	def, err := segment.ParseDefinition([]byte(seedDefinition))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(def.JSON()); got != seedDefinition {
		t.Fatalf("JSON() = %s\nwant %s", got, seedDefinition)
	}
	// Defaults are written out; absent options are left out.
	def, err = segment.ParseDefinition([]byte(`{"conditions":[{"conditions":[{"type":"trait","trait":"plan","operator":"in","value":["a",2,false]}],"logic":"or"},{"type":"recency","event_type":"e","operator":"lte","window_days":0,"negate":false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"logic":"AND","conditions":[{"logic":"OR","conditions":[{"type":"trait","trait":"plan","operator":"in","value":["a",2,false]}]},{"type":"recency","event_type":"e","operator":"lte","window_days":0}]}`
	if got := string(def.JSON()); got != want {
		t.Fatalf("JSON() = %s\nwant %s", got, want)
	}
}

func TestParseDefinitionInvalid(t *testing.T) {
	long := strings.Repeat("n", ident.MaxNameLen+1)
	tests := []struct {
		name string
		raw  string
		// fields are the exact paths the error names; msg, when set, is a substring of the message of
		// the first one.
		fields []string
		msg    string
	}{
		// The document.
		{"empty", ``, []string{"definition"}, "is required"},
		{"blank", " \n", []string{"definition"}, "is required"},
		{"null", `null`, []string{"definition"}, "is required"},
		{"not JSON", `{"logic":`, []string{"definition"}, "must be a JSON object"},
		{"an array", `[` + frequencyLeaf + `]`, []string{"definition"}, "must be a JSON object"},
		{"a string", `"AND"`, []string{"definition"}, "must be a JSON object"},
		{"trailing data", `{"conditions":[` + frequencyLeaf + `]} {"conditions":[]}`, []string{"definition"}, "must be a JSON object"},
		{"trailing garbage", `{"conditions":[` + frequencyLeaf + `]}x`, []string{"definition"}, "must be a JSON object"},
		{"invalid UTF-8", "{\"conditions\":[{\"type\":\"trait\",\"trait\":\"plan\",\"operator\":\"eq\",\"value\":\"\xff\"}]}", []string{"definition"}, "UTF-8"},
		{"too large", string(bigInDefinition(63).JSON()), []string{"definition"}, "the limit is 65536"},
		{"far too large an input", `{"conditions":[` + frequencyLeaf + `]` + strings.Repeat(" ", 64*segment.MaxDefinition) + `}`, []string{"definition"}, "the limit is 65536"},

		// Groups.
		{"unknown top-level key", `{"logic":"AND","conditions":[` + frequencyLeaf + `],"name":"x"}`, []string{"name"}, "is not a field of a group"},
		{"missing conditions", `{"logic":"AND"}`, []string{"conditions"}, "is required"},
		{"empty conditions", `{"logic":"AND","conditions":[]}`, []string{"conditions"}, "must not be empty"},
		{"conditions not an array", `{"conditions":{"type":"recency"}}`, []string{"conditions"}, "must be an array"},
		{"conditions null", `{"conditions":null}`, []string{"conditions"}, "must be an array"},
		{"logic unknown", `{"logic":"XOR","conditions":[` + frequencyLeaf + `]}`, []string{"logic"}, "must be AND or OR"},
		{"logic not a string", `{"logic":1,"conditions":[` + frequencyLeaf + `]}`, []string{"logic"}, "must be AND or OR"},
		{"negate not a boolean", `{"negate":"yes","conditions":[` + frequencyLeaf + `]}`, []string{"negate"}, "must be true or false"},
		{"condition not an object", `{"conditions":[` + frequencyLeaf + `,1]}`, []string{"conditions[1]"}, "must be a JSON object"},
		{"condition null", `{"conditions":[null]}`, []string{"conditions[0]"}, "must be a JSON object"},
		{"neither condition nor group", `{"conditions":[{"logic":"OR"}]}`, []string{"conditions[0]"}, "must be a condition (with type) or a group (with conditions)"},
		{"unknown key of a nested group", `{"conditions":[{"conditions":[` + frequencyLeaf + `],"type_":1}]}`, []string{"conditions[0].type_"}, "is not a field of a group"},
		{"depth 6", nested(6, frequencyLeaf), []string{"conditions[0].conditions[0].conditions[0].conditions[0].conditions[0]"}, "nests groups deeper than 5 levels"},
		{"51 conditions at the top", `{"conditions":[` + repeat(51, frequencyLeaf) + `]}`, []string{"conditions"}, "has 51 items; the limit is 50"},
		{"51 conditions across groups", `{"conditions":[{"conditions":[` + repeat(26, frequencyLeaf) + `]},{"conditions":[` + repeat(25, monetaryLeaf) + `]}]}`, []string{"conditions"}, "has 51 conditions in all; the limit is 50"},

		// Condition types and keys.
		{"unknown type", cond(`{"type":"rfm","event_type":"e"}`), []string{"conditions[0].type"}, "must be one of monetary, recency"},
		{"type not a string", cond(`{"type":3}`), []string{"conditions[0].type"}, "must be a string"},
		{"unknown key of a condition", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"window":7}`), []string{"conditions[0].window"}, "is not a field of a frequency condition"},
		{"key of another condition type", cond(`{"type":"recency","event_type":"e","operator":"gt","window_days":7,"value":3}`), []string{"conditions[0].value"}, "is not a field of a recency condition"},
		{"logic on a condition", cond(`{"type":"in_segment","segment_id":1,"logic":"AND"}`), []string{"conditions[0].logic"}, "is not a field of a in_segment condition"},
		{"error deep in the tree", `{"conditions":[` + frequencyLeaf + `,{"logic":"OR","conditions":[` + frequencyLeaf + `,{"type":"trait","trait":"plan","operator":"like","value":"x"}]}]}`,
			[]string{"conditions[1].conditions[1].operator"}, "must be one of eq, neq"},
		{"every problem reported", cond(`{"type":"monetary","event_type":"","property":5,"metric":"median","operator":"gt"}`),
			[]string{"conditions[0].event_type", "conditions[0].metric", "conditions[0].property", "conditions[0].value"}, "must not be empty"},

		// Names.
		{"missing event_type", cond(`{"type":"frequency","operator":"gt","value":1}`), []string{"conditions[0].event_type"}, "is required"},
		{"event_type not a string", cond(`{"type":"frequency","event_type":["a"],"operator":"gt","value":1}`), []string{"conditions[0].event_type"}, "must be a string"},
		{"blank event_type", cond(`{"type":"frequency","event_type":"  ","operator":"gt","value":1}`), []string{"conditions[0].event_type"}, "must not be empty"},
		{"event_type too long", cond(`{"type":"frequency","event_type":"` + long + `","operator":"gt","value":1}`), []string{"conditions[0].event_type"}, "longer than 128 bytes"},
		{"NUL in event_type", cond(`{"type":"frequency","event_type":"a\u0000b","operator":"gt","value":1}`), []string{"conditions[0].event_type"}, "control characters"},
		{"newline in property", cond(`{"type":"monetary","event_type":"o","property":"a\nb","metric":"sum","operator":"gt","value":1}`), []string{"conditions[0].property"}, "control characters"},
		{"DEL in trait", cond(`{"type":"trait","trait":"a\u007f","operator":"exists"}`), []string{"conditions[0].trait"}, "control characters"},
		{"missing trait", cond(`{"type":"trait","operator":"exists"}`), []string{"conditions[0].trait"}, "is required"},
		{"missing property", cond(`{"type":"event_property","event_type":"e","operator":"exists"}`), []string{"conditions[0].property"}, "is required"},

		// Enums.
		{"missing operator", cond(`{"type":"frequency","event_type":"e","value":1}`), []string{"conditions[0].operator"}, "is required"},
		{"operator of another family", cond(`{"type":"frequency","event_type":"e","operator":"contains","value":1}`), []string{"conditions[0].operator"}, "must be one of gt, gte"},
		{"trait gte is not an operator", cond(`{"type":"trait","trait":"age","operator":"gte","value":1}`), []string{"conditions[0].operator"}, "must be one of eq, neq"},
		{"not_exists is trait-only", cond(`{"type":"event_property","event_type":"e","property":"p","operator":"not_exists"}`), []string{"conditions[0].operator"}, "must be one of eq, neq"},
		{"operator is case-sensitive", cond(`{"type":"recency","event_type":"e","operator":"GT","window_days":1}`), []string{"conditions[0].operator"}, "must be one of"},
		{"unknown metric", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"median","operator":"gt","value":1}`), []string{"conditions[0].metric"}, "must be one of sum, avg, min, max, count"},
		{"missing metric", cond(`{"type":"monetary","event_type":"o","property":"amount","operator":"gt","value":1}`), []string{"conditions[0].metric"}, "is required"},

		// Values.
		{"monetary without value", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt"}`), []string{"conditions[0].value"}, "is required"},
		{"monetary value a string", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":"abc"}`), []string{"conditions[0].value"}, "must be a number"},
		{"monetary value a numeric string", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":"100"}`), []string{"conditions[0].value"}, "must be a number"},
		{"monetary value null", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":null}`), []string{"conditions[0].value"}, "must be a number"},
		{"monetary value out of range", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":1e400}`), []string{"conditions[0].value"}, "must be a number"},
		{"frequency without value", cond(`{"type":"frequency","event_type":"e","operator":"gt"}`), []string{"conditions[0].value"}, "is required"},
		{"frequency value fractional", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1.5}`), []string{"conditions[0].value"}, "whole number of events"},
		{"frequency value negative", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":-1}`), []string{"conditions[0].value"}, "whole number of events"},
		{"frequency value huge", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1e13}`), []string{"conditions[0].value"}, "whole number of events"},
		{"frequency value a boolean", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":true}`), []string{"conditions[0].value"}, "must be a number"},
		{"trait eq without value", cond(`{"type":"trait","trait":"plan","operator":"eq"}`), []string{"conditions[0].value"}, "is required with operator eq"},
		{"trait eq null", cond(`{"type":"trait","trait":"plan","operator":"eq","value":null}`), []string{"conditions[0].value"}, "must be a string, number or boolean"},
		{"trait eq object", cond(`{"type":"trait","trait":"plan","operator":"eq","value":{"a":1}}`), []string{"conditions[0].value"}, "must be a string, number or boolean"},
		{"trait eq array", cond(`{"type":"trait","trait":"plan","operator":"eq","value":["a"]}`), []string{"conditions[0].value"}, "must be a string, number or boolean"},
		{"value with exists", cond(`{"type":"trait","trait":"plan","operator":"exists","value":true}`), []string{"conditions[0].value"}, "must be omitted with operator exists"},
		{"value with not_exists", cond(`{"type":"trait","trait":"plan","operator":"not_exists","value":null}`), []string{"conditions[0].value"}, "must be omitted with operator not_exists"},
		{"value with event_property exists", cond(`{"type":"event_property","event_type":"e","property":"p","operator":"exists","value":1}`), []string{"conditions[0].value"}, "must be omitted with operator exists"},
		{"in with empty list", cond(`{"type":"trait","trait":"plan","operator":"in","value":[]}`), []string{"conditions[0].value"}, "must hold 1 to 1000 values"},
		{"in with a scalar", cond(`{"type":"trait","trait":"plan","operator":"in","value":"pro"}`), []string{"conditions[0].value"}, "must be an array with operator in"},
		{"in with too many values", cond(`{"type":"trait","trait":"plan","operator":"in","value":[` + strings.TrimSuffix(strings.Repeat("1,", segment.MaxInValues+1), ",") + `]}`), []string{"conditions[0].value"}, "must hold 1 to 1000 values"},
		{"in with a nested list", cond(`{"type":"event_property","event_type":"e","property":"p","operator":"in","value":["a",["b"]]}`), []string{"conditions[0].value[1]"}, "must be a string, number or boolean"},
		{"in with null", cond(`{"type":"trait","trait":"plan","operator":"in","value":[null]}`), []string{"conditions[0].value[0]"}, "must be a string, number or boolean"},
		{"NUL in an in value", cond(`{"type":"trait","trait":"plan","operator":"in","value":["a","b\u0000"]}`), []string{"conditions[0].value[1]"}, "must be a string, number or boolean"},
		{"NUL in a string value", cond(`{"type":"trait","trait":"plan","operator":"eq","value":"pro\u0000"}`), []string{"conditions[0].value"}, "must be a string, number or boolean"},
		{"NUL in a contains value", cond(`{"type":"event_property","event_type":"e","property":"p","operator":"contains","value":"\u0000"}`), []string{"conditions[0].value"}, "must be a non-empty string"},
		{"string value too long", cond(`{"type":"trait","trait":"plan","operator":"eq","value":"` + strings.Repeat("v", segment.MaxStringValue+1) + `"}`), []string{"conditions[0].value"}, "at most 1024 bytes"},
		{"contains with a number", cond(`{"type":"trait","trait":"plan","operator":"contains","value":1}`), []string{"conditions[0].value"}, "must be a non-empty string with operator contains"},
		{"starts_with with an empty string", cond(`{"type":"trait","trait":"plan","operator":"starts_with","value":""}`), []string{"conditions[0].value"}, "must be a non-empty string with operator starts_with"},
		{"trait gt with a string", cond(`{"type":"trait","trait":"age","operator":"gt","value":"18"}`), []string{"conditions[0].value"}, "must be a number with operator gt"},
		{"event_property lte with a boolean", cond(`{"type":"event_property","event_type":"e","property":"p","operator":"lte","value":false}`), []string{"conditions[0].value"}, "must be a number with operator lte"},

		// Windows.
		{"window and between both set", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"window_days":7,"between_days":[7,30]}`), []string{"conditions[0].between_days"}, "cannot be combined with window_days"},
		{"window_days zero", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"window_days":0}`), []string{"conditions[0].window_days"}, "from 1 to 3650"},
		{"window_days too long", cond(`{"type":"monetary","event_type":"o","property":"amount","metric":"sum","operator":"gt","value":1,"window_days":3651}`), []string{"conditions[0].window_days"}, "from 1 to 3650"},
		{"window_days fractional", cond(`{"type":"event_property","event_type":"e","property":"p","operator":"exists","window_days":1.5}`), []string{"conditions[0].window_days"}, "whole number of days"},
		{"window_days a string", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"window_days":"30"}`), []string{"conditions[0].window_days"}, "whole number of days"},
		{"recency without window_days", cond(`{"type":"recency","event_type":"e","operator":"gt"}`), []string{"conditions[0].window_days"}, "is required"},
		{"recency window_days negative", cond(`{"type":"recency","event_type":"e","operator":"gt","window_days":-1}`), []string{"conditions[0].window_days"}, "from 0 to 3650"},
		{"recency with between_days", cond(`{"type":"recency","event_type":"e","operator":"gt","window_days":1,"between_days":[1,2]}`), []string{"conditions[0].between_days"}, "is not a field of a recency condition"},
		{"between_days in the wrong order", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":[30,7]}`), []string{"conditions[0].between_days"}, "from < to"},
		{"between_days empty range", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":[7,7]}`), []string{"conditions[0].between_days"}, "from < to"},
		{"between_days one number", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":[7]}`), []string{"conditions[0].between_days"}, "must be [from, to]"},
		{"between_days three numbers", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":[1,2,3]}`), []string{"conditions[0].between_days"}, "must be [from, to]"},
		{"between_days an object", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":{"from":1}}`), []string{"conditions[0].between_days"}, "must be [from, to]"},
		{"between_days negative", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":[-1,7]}`), []string{"conditions[0].between_days[0]"}, "from 0 to 3650"},
		{"between_days too far", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":[0,3651]}`), []string{"conditions[0].between_days[1]"}, "from 0 to 3650"},
		{"between_days strings", cond(`{"type":"frequency","event_type":"e","operator":"gt","value":1,"between_days":["1","7"]}`), []string{"conditions[0].between_days[0]"}, "whole number of days"},

		// in_segment.
		{"in_segment without id", cond(`{"type":"in_segment"}`), []string{"conditions[0].segment_id"}, "is required"},
		{"in_segment id zero", cond(`{"type":"in_segment","segment_id":0}`), []string{"conditions[0].segment_id"}, "must be a positive integer"},
		{"in_segment id negative", cond(`{"type":"in_segment","segment_id":-4}`), []string{"conditions[0].segment_id"}, "must be a positive integer"},
		{"in_segment id fractional", cond(`{"type":"in_segment","segment_id":1.5}`), []string{"conditions[0].segment_id"}, "must be a positive integer"},
		{"in_segment id a string", cond(`{"type":"in_segment","segment_id":"3"}`), []string{"conditions[0].segment_id"}, "must be a positive integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, err := segment.ParseDefinition([]byte(tc.raw))
			if err == nil {
				t.Fatalf("ParseDefinition accepted it: %s", def.JSON())
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("error %v does not match errs.ErrInvalid", err)
			}
			var ve *errs.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T is not a *errs.ValidationError", err)
			}
			got := make([]string, 0, len(ve.Fields))
			for k := range ve.Fields {
				got = append(got, k)
			}
			sort.Strings(got)
			want := append([]string(nil), tc.fields...)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("error fields %q, want %q (%v)", got, want, err)
			}
			if msg := ve.Fields[tc.fields[0]]; !strings.Contains(msg, tc.msg) {
				t.Fatalf("%s: %q does not say %q", tc.fields[0], msg, tc.msg)
			}
			for k, msg := range ve.Fields {
				if msg == "" || msg != strings.ToLower(msg[:1])+msg[1:] {
					t.Errorf("%s: message %q must start lowercase", k, msg)
				}
			}
		})
	}
}

// A definition whose JSON is at the size limit once compacted parses, however it is laid out:
// Postgres gives a stored jsonb definition back with a space after every comma and colon.
func TestParseDefinitionSizeIgnoresLayout(t *testing.T) {
	def := bigInDefinition(62)
	js := def.JSON()
	if len(js) > segment.MaxDefinition || len(js) < segment.MaxDefinition-1000 {
		t.Fatalf("test definition is %d bytes; want just under %d", len(js), segment.MaxDefinition)
	}
	var spaced strings.Builder
	inString, escaped := false, false
	for _, c := range string(js) {
		spaced.WriteRune(c)
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			spaced.WriteByte(' ')
		}
	}
	if spaced.Len() <= segment.MaxDefinition {
		t.Fatalf("spaced form is only %d bytes", spaced.Len())
	}
	again, err := segment.ParseDefinition([]byte(spaced.String()))
	if err != nil {
		t.Fatalf("spaced form of an accepted definition: %v", err)
	}
	if !reflect.DeepEqual(def, again) {
		t.Fatal("spaced form parses to another definition")
	}
	// One more byte per item takes it over the limit.
	if _, err := segment.ParseDefinition(bigInDefinition(63).JSON()); err == nil || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("definition over the limit: %v", err)
	}
}

// A definition is stored as jsonb and parsed again by every compute: what Postgres gives back
// (spaces after commas and colons, numbers written out in full, no escapes) parses to the same
// definition.
func TestDefinitionJSONBRoundTrip(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	huge := make([]segment.Value, segment.MaxInValues)
	for i := range huge {
		huge[i] = *numv(1e300)
		if i%2 == 1 {
			huge[i] = *numv(-5e-324)
		}
	}
	defs := map[string]*segment.Definition{
		"1000-item in-list just under the limit": bigInDefinition(62),
		"huge and tiny numbers": {Logic: "OR", Conditions: []segment.Node{
			{Type: "trait", Trait: "n", Operator: "in", Value: listv(huge...)},
			{Type: "monetary", EventType: "o", Property: "p", Metric: "sum", Operator: "gt", Value: numv(1.7976931348623157e308)},
			{Type: "event_property", EventType: "o", Property: "p", Operator: "lt", Value: numv(0.1)},
		}},
		"escaped characters": {Logic: "AND", Conditions: []segment.Node{
			{Type: "trait", Trait: "<b>&amp;", Operator: "eq", Value: strv(strings.Repeat("<\u2028\\\"'\t>", 100))},
		}},
	}
	for name, raw := range goldenDefinitions(t) {
		def, err := segment.ParseDefinition(raw)
		if err != nil {
			t.Fatal(err)
		}
		defs["golden "+name] = def
	}
	for name, def := range defs {
		t.Run(name, func(t *testing.T) {
			if _, err := segment.ParseDefinition(def.JSON()); err != nil {
				t.Fatalf("canonical JSON: %v", err)
			}
			var stored string
			if err := pool.QueryRow(context.Background(), `SELECT ($1::text)::jsonb::text`, string(def.JSON())).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			again, err := segment.ParseDefinition([]byte(stored))
			if err != nil {
				t.Fatalf("jsonb text of %d bytes: %v", len(stored), err)
			}
			if !reflect.DeepEqual(def, again) {
				t.Fatalf("jsonb round trip changed the definition:\n%s\n%s", def.JSON(), again.JSON())
			}
		})
	}
}

// bigInDefinition is a trait in-list of 1000 strings of n bytes.
func bigInDefinition(n int) *segment.Definition {
	list := make([]segment.Value, segment.MaxInValues)
	for i := range list {
		s := fmt.Sprintf("%0*d", n, i)
		list[i] = *strv(s)
	}
	return &segment.Definition{Logic: "AND", Conditions: []segment.Node{{Type: "trait", Trait: "email", Operator: "in", Value: listv(list...)}}}
}

func TestDefinitionRefsAndEventTypes(t *testing.T) {
	def, err := segment.ParseDefinition([]byte(`{"logic":"OR","conditions":[
		{"type":"in_segment","segment_id":9},
		{"type":"frequency","event_type":"page_view","operator":"gt","value":1},
		{"conditions":[{"type":"in_segment","segment_id":3,"negate":true},{"type":"trait","trait":"plan","operator":"exists"},
			{"conditions":[{"type":"in_segment","segment_id":9},{"type":"recency","event_type":"a_signup","operator":"gt","window_days":1},
				{"type":"event_property","event_type":"page_view","property":"path","operator":"exists"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := def.SegmentRefs(); !reflect.DeepEqual(got, []int64{3, 9}) {
		t.Errorf("SegmentRefs = %v", got)
	}
	if got := def.EventTypes(); !reflect.DeepEqual(got, []string{"a_signup", "page_view"}) {
		t.Errorf("EventTypes = %v", got)
	}
	def, err = segment.ParseDefinition([]byte(cond(`{"type":"trait","trait":"plan","operator":"exists"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := def.SegmentRefs(); len(got) != 0 || got == nil {
		t.Errorf("SegmentRefs of a definition without in_segment = %#v, want an empty list", got)
	}
}

func TestValueJSON(t *testing.T) {
	tests := []struct {
		v    segment.Value
		json string
		text string
	}{
		{*numv(100), `100`, "100"},
		{*numv(12.5), `12.5`, "12.5"},
		{*numv(-0.001), `-0.001`, "-0.001"},
		{*numv(1e21), `1e+21`, "1e+21"},
		{*strv(`a"b`), `"a\"b"`, `a"b`},
		{*boolv(false), `false`, "false"},
		{*listv(*strv("a"), *numv(2)), `["a",2]`, ""},
		{segment.Value{Kind: segment.KindList}, `[]`, ""},
		{segment.Value{}, `null`, ""},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.json {
			t.Errorf("json of %#v = %s, want %s", tc.v, b, tc.json)
		}
		if tc.v.Kind != segment.KindList && tc.v.Kind != 0 && tc.v.Text() != tc.text {
			t.Errorf("text of %#v = %q, want %q", tc.v, tc.v.Text(), tc.text)
		}
	}
}
