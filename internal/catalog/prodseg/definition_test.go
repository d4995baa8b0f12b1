package prodseg_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestProdsegParseCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "logic defaults to AND, keys in the language's order",
			in:   `{"conditions":[{"value":"red","operator":"eq","field":"color"}]}`,
			want: `{"logic":"AND","conditions":[{"field":"color","operator":"eq","value":"red"}]}`,
		},
		{
			name: "logic is case-insensitive, negate kept only when true",
			in:   `{"logic":"or","negate":true,"conditions":[{"field":"price","operator":"gt","value":10,"negate":false},{"field":"active","operator":"exists","negate":true}]}`,
			want: `{"logic":"OR","conditions":[{"field":"price","operator":"gt","value":10},{"field":"active","operator":"exists","negate":true}],"negate":true}`,
		},
		{
			name: "numbers are canonical",
			in:   `{"conditions":[{"field":"price","operator":"in","value":[1e2, 10.50, -0.0, 3]}]}`,
			want: `{"logic":"AND","conditions":[{"field":"price","operator":"in","value":[100,10.5,-0,3]}]}`,
		},
		{
			name: "nested groups get AND",
			in:   `{"conditions":[{"conditions":[{"field":"sku","operator":"contains","value":"ab"}],"negate":true}]}`,
			want: `{"logic":"AND","conditions":[{"logic":"AND","conditions":[{"field":"sku","operator":"contains","value":"ab"}],"negate":true}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, err := prodseg.Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got := string(def.JSON()); got != tt.want {
				t.Errorf("canonical\n %s\nwant\n %s", got, tt.want)
			}
			again, err := prodseg.Parse(def.JSON())
			if err != nil || !bytes.Equal(again.JSON(), def.JSON()) {
				t.Errorf("canonical JSON does not round-trip: %v %s", err, again.JSON())
			}
		})
	}
}

func TestProdsegParseErrors(t *testing.T) {
	deep := `{"field":"sku","operator":"eq","value":"a"}`
	for range 5 {
		deep = `{"conditions":[` + deep + `]}`
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = `{"field":"sku","operator":"eq","value":"a"}`
	}
	spread := make([]string, 26)
	for i := range spread {
		spread[i] = `{"conditions":[{"field":"sku","operator":"eq","value":"a"},{"field":"sku","operator":"eq","value":"b"}]}`
	}
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{name: "empty", in: ``, want: map[string]string{"definition": "is required"}},
		{name: "null", in: `null`, want: map[string]string{"definition": "is required"}},
		{name: "not an object", in: `[1]`, want: map[string]string{"definition": "must be a JSON object"}},
		{name: "trailing data", in: `{"conditions":[]} {}`, want: map[string]string{"definition": "must be a JSON object"}},
		{name: "invalid UTF-8", in: "{\"conditions\":[{\"field\":\"sku\",\"operator\":\"eq\",\"value\":\"\xff\"}]}", want: map[string]string{"definition": "UTF-8"}},
		{name: "no conditions", in: `{"logic":"AND"}`, want: map[string]string{"conditions": "is required"}},
		{name: "empty conditions", in: `{"conditions":[]}`, want: map[string]string{"conditions": "must not be empty"}},
		{name: "conditions not a list", in: `{"conditions":{}}`, want: map[string]string{"conditions": "must be an array"}},
		{name: "bad logic", in: `{"logic":"XOR","conditions":[{"field":"sku","operator":"eq","value":"a"}]}`, want: map[string]string{"logic": "AND or OR"}},
		{name: "bad negate", in: `{"negate":"yes","conditions":[{"field":"sku","operator":"eq","value":"a"}]}`, want: map[string]string{"negate": "true or false"}},
		{name: "unknown group key", in: `{"conditions":[{"field":"sku","operator":"eq","value":"a"}],"limit":3}`, want: map[string]string{"limit": "not a field of a group"}},
		{name: "unknown condition key", in: `{"conditions":[{"field":"sku","operator":"eq","value":"a","type":"trait"}]}`, want: map[string]string{"conditions[0].type": "not a field of a condition"}},
		{name: "neither condition nor group", in: `{"conditions":[{"value":1}]}`, want: map[string]string{"conditions[0]": "must be a condition"}},
		{name: "condition not an object", in: `{"conditions":[1]}`, want: map[string]string{"conditions[0]": "must be a JSON object"}},
		{name: "no field", in: `{"conditions":[{"operator":"eq","value":"a"}]}`, want: map[string]string{"conditions[0].field": "is required"}},
		{name: "empty field", in: `{"conditions":[{"field":"","operator":"eq","value":"a"}]}`, want: map[string]string{"conditions[0].field": "must not be empty"}},
		{name: "field not a string", in: `{"conditions":[{"field":3,"operator":"eq","value":"a"}]}`, want: map[string]string{"conditions[0].field": "must be a string"}},
		{name: "no operator", in: `{"conditions":[{"field":"sku","value":"a"}]}`, want: map[string]string{"conditions[0].operator": "is required"}},
		{name: "unknown operator", in: `{"conditions":[{"field":"sku","operator":"starts_with","value":"a"}]}`, want: map[string]string{"conditions[0].operator": "must be one of"}},
		{name: "no value", in: `{"conditions":[{"field":"sku","operator":"eq"}]}`, want: map[string]string{"conditions[0].value": "is required with operator eq"}},
		{name: "value with exists", in: `{"conditions":[{"field":"color","operator":"exists","value":true}]}`, want: map[string]string{"conditions[0].value": "must be omitted"}},
		{name: "null value", in: `{"conditions":[{"field":"sku","operator":"eq","value":null}]}`, want: map[string]string{"conditions[0].value": "not null"}},
		{name: "object value", in: `{"conditions":[{"field":"sku","operator":"eq","value":{}}]}`, want: map[string]string{"conditions[0].value": "not an object"}},
		{name: "list with eq", in: `{"conditions":[{"field":"tags","operator":"eq","value":["a"]}]}`, want: map[string]string{"conditions[0].value": "not a list"}},
		{name: "in without a list", in: `{"conditions":[{"field":"color","operator":"in","value":"red"}]}`, want: map[string]string{"conditions[0].value": "must be an array"}},
		{name: "not_in with an empty list", in: `{"conditions":[{"field":"color","operator":"not_in","value":[]}]}`, want: map[string]string{"conditions[0].value": "1 to 1000"}},
		{name: "in with a nested list", in: `{"conditions":[{"field":"color","operator":"in","value":["a",["b"]]}]}`, want: map[string]string{"conditions[0].value[1]": "not a list"}},
		{name: "long string", in: `{"conditions":[{"field":"name","operator":"contains","value":"` + strings.Repeat("x", 1001) + `"}]}`, want: map[string]string{"conditions[0].value": "at most 1000 bytes"}},
		{name: "NUL in a value", in: `{"conditions":[{"field":"name","operator":"eq","value":"a\u0000b"}]}`, want: map[string]string{"conditions[0].value": "NUL"}},
		{name: "NUL in an in list", in: `{"conditions":[{"field":"name","operator":"in","value":["a","\u0000"]}]}`, want: map[string]string{"conditions[0].value[1]": "NUL"}},
		{name: "control character in a field name", in: `{"conditions":[{"field":"a\u0000b","operator":"exists"}]}`, want: map[string]string{"conditions[0].field": "not a field"}},
		{name: "huge number", in: `{"conditions":[{"field":"price","operator":"gt","value":1e400}]}`, want: map[string]string{"conditions[0].value": "finite"}},
		{name: "nested path", in: `{"conditions":[{"field":"sku","operator":"eq","value":"a"},{"logic":"OR","conditions":[{"field":"sku","operator":"eq","value":"a"},{"field":"price","operator":"between","value":1}]}]}`, want: map[string]string{"conditions[1].conditions[1].operator": "must be one of"}},
		{name: "too deep", in: `{"conditions":[` + deep + `]}`, want: map[string]string{"conditions[0].conditions[0].conditions[0].conditions[0].conditions[0]": "deeper than 5"}},
		{name: "too many in one group", in: `{"conditions":[` + strings.Join(many, ",") + `]}`, want: map[string]string{"conditions": "limit is 50"}},
		{name: "too many in all", in: `{"conditions":[` + strings.Join(spread, ",") + `]}`, want: map[string]string{"conditions": "52 conditions in all"}},
		{
			name: "several problems at once",
			in:   `{"conditions":[{"field":"sku","operator":"eq"},{"field":"color","operator":"nope","value":"x"},{"operator":"eq","value":1}]}`,
			want: map[string]string{"conditions[0].value": "is required", "conditions[1].operator": "must be one of", "conditions[2].field": "is required"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, err := prodseg.Parse([]byte(tt.in))
			if def != nil {
				t.Errorf("parse returned a definition %s with the error", def.JSON())
			}
			testenv.WantFieldErrors(t, err, tt.want)
		})
	}
}

// testSchema has one field of every type.
var testSchema = &catalog.Schema{Fields: []catalog.Field{
	{Name: "color", Type: catalog.TypeString},
	{Name: "description", Type: catalog.TypeText},
	{Name: "link", Type: catalog.TypeURL},
	{Name: "photo", Type: catalog.TypeImage},
	{Name: "weight", Type: catalog.TypeNumber},
	{Name: "stock", Type: catalog.TypeInteger},
	{Name: "active", Type: catalog.TypeBoolean},
	{Name: "released", Type: catalog.TypeDate},
	{Name: "tags", Type: catalog.TypeArray},
	{Name: "price", Type: catalog.TypePrice},
}}

func cond(field, op, value string) string {
	if value == "" {
		return fmt.Sprintf(`{"conditions":[{"field":%q,"operator":%q}]}`, field, op)
	}
	return fmt.Sprintf(`{"conditions":[{"field":%q,"operator":%q,"value":%s}]}`, field, op, value)
}

// TestProdsegCompileTypeErrors: fields, operators and values are checked against the schema.
func TestProdsegCompileTypeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{name: "unknown field", in: cond("colour", "eq", `"red"`), want: map[string]string{"conditions[0].field": "not a field of the product schema (fields: sku, name, color,"}},
		{name: "gt on boolean", in: cond("active", "gt", `1`), want: map[string]string{"conditions[0].operator": "gt does not apply to active (boolean field)"}},
		{name: "contains on number", in: cond("weight", "contains", `"1"`), want: map[string]string{"conditions[0].operator": "contains does not apply to weight (number field)"}},
		{name: "contains on price", in: cond("price", "contains", `"1"`), want: map[string]string{"conditions[0].operator": "contains does not apply"}},
		{name: "lt on string", in: cond("color", "lt", `"m"`), want: map[string]string{"conditions[0].operator": "lt does not apply to color (string field)"}},
		{name: "gte on array", in: cond("tags", "gte", `"a"`), want: map[string]string{"conditions[0].operator": "gte does not apply"}},
		{name: "exists on sku", in: cond("sku", "exists", ``), want: map[string]string{"conditions[0].operator": "exists does not apply to sku (sku field)"}},
		{name: "gt on name", in: cond("name", "gt", `"a"`), want: map[string]string{"conditions[0].operator": "gt does not apply to name"}},
		{name: "string for a number", in: cond("weight", "eq", `"10"`), want: map[string]string{"conditions[0].value": "must be a number (number field)"}},
		{name: "string for a price", in: cond("price", "gt", `"10"`), want: map[string]string{"conditions[0].value": "must be a number (price field)"}},
		{name: "fraction for an integer", in: cond("stock", "eq", `1.5`), want: map[string]string{"conditions[0].value": "whole number"}},
		{name: "number for a string", in: cond("color", "eq", `5`), want: map[string]string{"conditions[0].value": "must be a string (string field)"}},
		{name: "boolean for a url", in: cond("link", "contains", `true`), want: map[string]string{"conditions[0].value": "must be a string (url field)"}},
		{name: "string for a boolean", in: cond("active", "eq", `"true"`), want: map[string]string{"conditions[0].value": "true or false"}},
		{name: "number for a sku", in: cond("sku", "eq", `12`), want: map[string]string{"conditions[0].value": "must be a string (sku field)"}},
		{name: "empty contains", in: cond("name", "contains", `""`), want: map[string]string{"conditions[0].value": "non-empty"}},
		{name: "bad date", in: cond("released", "gt", `"2024-02-30"`), want: map[string]string{"conditions[0].value": "YYYY-MM-DD"}},
		{name: "timestamp for a date", in: cond("released", "eq", `"2024-02-03T10:00:00Z"`), want: map[string]string{"conditions[0].value": "YYYY-MM-DD"}},
		{name: "number for a date", in: cond("released", "lt", `20240203`), want: map[string]string{"conditions[0].value": "must be a date"}},
		{name: "wrong element of in", in: cond("price", "in", `[1, 2, "3"]`), want: map[string]string{"conditions[0].value[2]": "must be a number (price field)"}},
		{name: "wrong element of not_in on array", in: cond("tags", "not_in", `["a", 1]`), want: map[string]string{"conditions[0].value[1]": "must be a string (array field)"}},
		{
			name: "nested paths, several errors",
			in: `{"logic":"OR","conditions":[{"field":"color","operator":"eq","value":"red"},
				{"conditions":[{"field":"tags","operator":"contains","value":"x"},{"field":"nope","operator":"eq","value":1}]},
				{"conditions":[{"conditions":[{"field":"active","operator":"lt","value":true}]}]}]}`,
			want: map[string]string{
				"conditions[1].conditions[1].field":                  "not a field",
				"conditions[2].conditions[0].conditions[0].operator": "lt does not apply",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, err := prodseg.Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			q, err := prodseg.Compile(def, testSchema, 1)
			if q != nil {
				t.Errorf("compile returned a query %q with the error", q.Where)
			}
			testenv.WantFieldErrors(t, err, tt.want)
		})
	}
}

// TestProdsegCompileSQL: the SQL text holds no user value, only placeholders, and the tenant
// filter comes first; field names are arguments too.
func TestProdsegCompileSQL(t *testing.T) {
	evil := `x'; DROP TABLE products; --`
	in := fmt.Sprintf(`{"logic":"OR","conditions":[
		{"field":"color","operator":"eq","value":%q},
		{"field":"name","operator":"contains","value":%q},
		{"field":"sku","operator":"in","value":[%q]},
		{"field":"price","operator":"gte","value":12.5},
		{"field":"released","operator":"lt","value":"2024-01-01"},
		{"conditions":[{"field":"description","operator":"contains","value":"50%%_off"}],"negate":true}]}`, evil, evil, evil)
	def, err := prodseg.Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	q, err := prodseg.Compile(def, testSchema, 42)
	if err != nil {
		t.Fatal(err)
	}
	want := `p.tenant_id = $1 AND (p.data @> $2::jsonb OR p.name_key LIKE $3 OR p.sku_key = ANY($4::text[]) OR ` +
		`(CASE WHEN jsonb_typeof(p.data -> $5) = 'number' THEN (p.data -> $5)::numeric >= $6::numeric ELSE false END) OR ` +
		`COALESCE(left(p.data ->> $7, 10) COLLATE "C" < $8, false) OR (NOT (COALESCE((p.data ->> $9) ILIKE $10, false))))`
	if q.Where != want {
		t.Errorf("where\n %s\nwant\n %s", q.Where, want)
	}
	wantArgs := []any{int64(42), `{"color":"x'; DROP TABLE products; --"}`, `%x'; drop table products; --%`, []string{`x'; drop table products; --`},
		"price", "12.5", "released", "2024-01-01", "description", `%50\%\_off%`}
	if got, w := fmt.Sprintf("%#v", q.Args), fmt.Sprintf("%#v", wantArgs); got != w {
		t.Errorf("args\n %s\nwant\n %s", got, w)
	}
	for _, word := range []string{"DROP", "color", "released", "description", "50"} {
		if strings.Contains(q.Where, word) {
			t.Errorf("SQL text holds %q: %s", word, q.Where)
		}
	}
	if !strings.HasPrefix(q.SQL(), "SELECT p.id FROM products p WHERE p.tenant_id = $1 AND ") {
		t.Errorf("SQL %s", q.SQL())
	}
}

func TestProdsegDefinitionFields(t *testing.T) {
	def, err := prodseg.Parse([]byte(`{"conditions":[{"field":"price","operator":"gt","value":1},{"conditions":[{"field":"color","operator":"exists"},{"field":"price","operator":"lt","value":9}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := def.Fields(); !slices.Equal(got, []string{"color", "price"}) {
		t.Errorf("fields %v", got)
	}
}

// FuzzProdsegParse: Parse never panics; what it accepts has a canonical JSON that parses to
// itself, and Compile never panics on it either.
func FuzzProdsegParse(f *testing.F) {
	for _, s := range []string{
		`{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`,
		`{"logic":"OR","negate":true,"conditions":[{"field":"price","operator":"in","value":[1,2.5]},{"conditions":[{"field":"tags","operator":"contains","value":"x"}]}]}`,
		`{"conditions":[{"field":"released","operator":"gte","value":"2024-01-01"},{"field":"active","operator":"not_exists"}]}`,
		`{"conditions":[{"field":"stock","operator":"eq","value":1e308}]}`,
		`{"conditions":[{"field":"sku","operator":"not_in","value":["a",true,3]}]}`,
		`{"conditions":[{"conditions":[{"conditions":[]}]}]}`,
		`[]`, `null`, `{}`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		def, err := prodseg.Parse(raw)
		if err != nil {
			validation(t, err)
			return
		}
		canonical := def.JSON()
		again, err := prodseg.Parse(canonical)
		if err != nil {
			t.Fatalf("canonical %s does not parse: %v", canonical, err)
		}
		if !bytes.Equal(again.JSON(), canonical) {
			t.Fatalf("canonical JSON is not stable:\n %s\n %s", canonical, again.JSON())
		}
		var v any
		if err := json.Unmarshal(canonical, &v); err != nil {
			t.Fatalf("canonical is not JSON: %v", err)
		}
		if _, err := prodseg.Compile(def, testSchema, 1); err != nil {
			validation(t, err)
		}
	})
}
