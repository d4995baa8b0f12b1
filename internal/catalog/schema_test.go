package catalog_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestSchemaOfNewTenant(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("fresh")
	sc, err := f.svc.Schema(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Fields == nil || len(sc.Fields) != 0 || sc.DefaultCurrency != "USD" || sc.DefaultLocale != "en" {
		t.Fatalf("schema of a new tenant %+v, want no fields, USD, en", sc)
	}
	// The API shows an empty list, not null.
	if got, want := testenv.AsJSON(t, sc), `{"default_currency":"USD","default_locale":"en","fields":[]}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
	if n := f.count("SELECT count(*) FROM product_schemas WHERE tenant_id = $1", tn); n != 0 {
		t.Errorf("reading the schema stored %d rows", n)
	}
}

func TestPutSchemaValidation(t *testing.T) {
	f := newFixture(t)
	many := make([]catalog.Field, catalog.MaxFields+1)
	for i := range many {
		many[i] = fld(fmt.Sprintf("f%d", i), catalog.TypeString)
	}
	maxed := many[:catalog.MaxFields]
	tests := []struct {
		name string
		in   catalog.Schema
		want map[string]string // field errors (key -> message substring); nil: valid
	}{
		{name: "uppercase name", in: catalog.Schema{Fields: []catalog.Field{fld("Color", "string")}}, want: map[string]string{"fields[0].name": "snake_case"}},
		{name: "leading digit", in: catalog.Schema{Fields: []catalog.Field{fld("1color", "string")}}, want: map[string]string{"fields[0].name": "snake_case"}},
		{name: "leading underscore", in: catalog.Schema{Fields: []catalog.Field{fld("_color", "string")}}, want: map[string]string{"fields[0].name": "snake_case"}},
		{name: "hyphen", in: catalog.Schema{Fields: []catalog.Field{fld("col-or", "string")}}, want: map[string]string{"fields[0].name": "snake_case"}},
		{name: "space inside", in: catalog.Schema{Fields: []catalog.Field{fld("col or", "string")}}, want: map[string]string{"fields[0].name": "snake_case"}},
		{name: "empty name", in: catalog.Schema{Fields: []catalog.Field{fld("", "string")}}, want: map[string]string{"fields[0].name": "snake_case"}},
		{name: "64 chars", in: catalog.Schema{Fields: []catalog.Field{fld("a"+strings.Repeat("b", 63), "string")}}, want: map[string]string{"fields[0].name": "at most 63"}},
		{name: "63 chars is fine", in: catalog.Schema{Fields: []catalog.Field{fld("a"+strings.Repeat("b", 62), "string")}}},
		{name: "sku is built in", in: catalog.Schema{Fields: []catalog.Field{fld("color", "string"), fld("sku", "string")}}, want: map[string]string{"fields[1].name": "built in"}},
		{name: "name is built in", in: catalog.Schema{Fields: []catalog.Field{fld("name", "text")}}, want: map[string]string{"fields[0].name": "built in"}},
		{name: "duplicate", in: catalog.Schema{Fields: []catalog.Field{fld("color", "string"), fld("size", "string"), fld("color", "array")}}, want: map[string]string{"fields[2].name": `repeats fields[0].name "color"`}},
		{name: "duplicate after trimming", in: catalog.Schema{Fields: []catalog.Field{fld("color", "string"), fld(" color ", "string")}}, want: map[string]string{"fields[1].name": "repeats fields[0]"}},
		{name: "unknown type", in: catalog.Schema{Fields: []catalog.Field{fld("color", "money")}}, want: map[string]string{"fields[0].type": "must be one of string, text, number"}},
		{name: "missing type", in: catalog.Schema{Fields: []catalog.Field{fld("color", "")}}, want: map[string]string{"fields[0].type": "must be one of"}},
		{name: "type is case-sensitive", in: catalog.Schema{Fields: []catalog.Field{fld("color", "String")}}, want: map[string]string{"fields[0].type": "must be one of"}},
		{name: "facet on number", in: catalog.Schema{Fields: []catalog.Field{{Name: "weight", Type: "number", Facet: true}}}, want: map[string]string{"fields[0].facet": "string and array"}},
		{name: "facet on text", in: catalog.Schema{Fields: []catalog.Field{{Name: "body", Type: "text", Facet: true}}}, want: map[string]string{"fields[0].facet": "string and array"}},
		{name: "facet on boolean", in: catalog.Schema{Fields: []catalog.Field{fld("a", "string"), {Name: "active", Type: "boolean", Facet: true}}}, want: map[string]string{"fields[1].facet": "string and array"}},
		{name: "facet on string and array", in: catalog.Schema{Fields: []catalog.Field{{Name: "color", Type: "string", Facet: true}, {Name: "tags", Type: "array", Facet: true}}}},
		{name: "currency lowercase", in: catalog.Schema{DefaultCurrency: "eur"}, want: map[string]string{"default_currency": "ISO 4217"}},
		{name: "currency four letters", in: catalog.Schema{DefaultCurrency: "EURO"}, want: map[string]string{"default_currency": "ISO 4217"}},
		{name: "currency two letters", in: catalog.Schema{DefaultCurrency: "EU"}, want: map[string]string{"default_currency": "ISO 4217"}},
		{name: "currency EUR", in: catalog.Schema{DefaultCurrency: "EUR"}},
		{name: "locale uppercase", in: catalog.Schema{DefaultLocale: "EN"}, want: map[string]string{"default_locale": "locale"}},
		{name: "locale underscore", in: catalog.Schema{DefaultLocale: "en_US"}, want: map[string]string{"default_locale": "locale"}},
		{name: "locale lowercase region", in: catalog.Schema{DefaultLocale: "de-de"}, want: map[string]string{"default_locale": "locale"}},
		{name: "locale word", in: catalog.Schema{DefaultLocale: "english"}, want: map[string]string{"default_locale": "locale"}},
		{name: "locale de-DE", in: catalog.Schema{DefaultLocale: "de-DE"}},
		{name: "locale es-419", in: catalog.Schema{DefaultLocale: "es-419"}},
		{name: "label too long", in: catalog.Schema{Fields: []catalog.Field{{Name: "color", Type: "string", Label: strings.Repeat("l", 201)}}}, want: map[string]string{"fields[0].label": "at most 200"}},
		{name: "unit too long", in: catalog.Schema{Fields: []catalog.Field{{Name: "weight", Type: "number", Unit: strings.Repeat("g", 21)}}}, want: map[string]string{"fields[0].unit": "at most 20"}},
		{name: "200 fields", in: catalog.Schema{Fields: maxed}},
		{name: "201 fields", in: catalog.Schema{Fields: many}, want: map[string]string{"fields": "at most 200"}},
		{name: "several problems at once", in: catalog.Schema{Fields: []catalog.Field{fld("Bad", "string"), fld("ok", "nope"), {Name: "n", Type: "integer", Facet: true}}, DefaultCurrency: "usd", DefaultLocale: "xx_YY"},
			want: map[string]string{"fields[0].name": "snake_case", "fields[1].type": "must be one of", "fields[2].facet": "string and array", "default_currency": "ISO 4217", "default_locale": "locale"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			tn := f.tenant(tt.name)
			// A schema is in place; a refused PUT must leave it as it was.
			before := f.putSchema(tn, catalog.Field{Name: "keep", Type: "string"})
			out, err := f.svc.PutSchema(f.ctx, tn, tt.in)
			after, gerr := f.svc.Schema(f.ctx, tn)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatalf("PutSchema: %v", err)
				}
				if testenv.AsJSON(t, after) != testenv.AsJSON(t, out) {
					t.Errorf("stored %s, returned %s", testenv.AsJSON(t, after), testenv.AsJSON(t, out))
				}
				return
			}
			testenv.WantFieldErrors(t, err, tt.want)
			if out != nil {
				t.Errorf("PutSchema returned %+v with the error", out)
			}
			if testenv.AsJSON(t, after) != testenv.AsJSON(t, before) {
				t.Errorf("refused PUT changed the schema to %s (was %s)", testenv.AsJSON(t, after), testenv.AsJSON(t, before))
			}
		})
	}
}

func TestPutSchemaStoresAndDefaults(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("store")
	in := catalog.Schema{
		Fields: []catalog.Field{
			{Name: " color ", Type: "string", Facet: true},
			{Name: "weight", Label: "  Weight  ", Type: "number", Unit: "kg", Required: true},
			{Name: "tags", Label: "", Type: "array", Facet: true, Searchable: true},
			{Name: "description", Label: "Beschreibung", Type: "text", Searchable: true},
		},
		DefaultCurrency: "EUR",
		DefaultLocale:   "de-DE",
	}
	out, err := f.svc.PutSchema(f.ctx, tn, in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"default_currency":"EUR","default_locale":"de-DE","fields":[` +
		`{"facet":true,"label":"color","name":"color","required":false,"searchable":false,"type":"string"},` +
		`{"facet":false,"label":"Weight","name":"weight","required":true,"searchable":false,"type":"number","unit":"kg"},` +
		`{"facet":true,"label":"tags","name":"tags","required":false,"searchable":true,"type":"array"},` +
		`{"facet":false,"label":"Beschreibung","name":"description","required":false,"searchable":true,"type":"text"}]}`
	if got := testenv.AsJSON(t, out); got != want {
		t.Errorf("PUT returned\n %s\nwant\n %s", got, want)
	}
	got, err := f.svc.Schema(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.AsJSON(t, got) != want {
		t.Errorf("GET returned\n %s\nwant\n %s", testenv.AsJSON(t, got), want)
	}

	// Empty currency and locale fall back to the defaults; the fields list can be emptied.
	out, err = f.svc.PutSchema(f.ctx, tn, catalog.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.AsJSON(t, out); got != `{"default_currency":"USD","default_locale":"en","fields":[]}` {
		t.Errorf("empty PUT returned %s", got)
	}
	if got, _ := f.svc.Schema(f.ctx, tn); testenv.AsJSON(t, got) != testenv.AsJSON(t, out) {
		t.Errorf("GET after empty PUT %s", testenv.AsJSON(t, got))
	}
	// Another tenant still has the default.
	other := f.tenant("other")
	if got, _ := f.svc.Schema(f.ctx, other); testenv.AsJSON(t, got) != `{"default_currency":"USD","default_locale":"en","fields":[]}` {
		t.Errorf("another tenant's schema %s", testenv.AsJSON(t, got))
	}
}

// TestSchemaTypeChanges: a field changes type (or comes into the schema) over existing values.
func TestSchemaTypeChanges(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("x", catalog.MaxStringLength+1)
	type value struct {
		sku  string
		json string // the stored value
	}
	tests := []struct {
		name   string
		from   string // "" : values are written under a field, which is then removed
		to     string
		values []value
		want   map[string]string // sku -> value after (refused: the values as they were)
		bad    []string          // offending SKUs when refused, in id order
	}{
		{name: "integer to number", from: "integer", to: "number", values: []value{{"A", `3`}, {"B", `-7`}}, want: map[string]string{"A": `3`, "B": `-7`}},
		{name: "number to integer whole values", from: "number", to: "integer", values: []value{{"A", `4`}, {"B", `0`}}, want: map[string]string{"A": `4`, "B": `0`}},
		{name: "number to integer refused for 12.5", from: "number", to: "integer", values: []value{{"A", `4`}, {"B", `12.5`}}, bad: []string{"B"}},
		{name: "string 12.5 to number", from: "string", to: "number", values: []value{{"A", `"12.5"`}, {"B", `" 7 "`}, {"C", `"-3"`}}, want: map[string]string{"A": `12.5`, "B": `7`, "C": `-3`}},
		{name: "string abc to number refused", from: "string", to: "number", values: []value{{"OK-1", `"12"`}, {"BAD-1", `"abc"`}, {"BAD-2", `"12 kg"`}}, bad: []string{"BAD-1", "BAD-2"}},
		{name: "string NaN to number refused", from: "string", to: "number", values: []value{{"A", `"NaN"`}, {"B", `"Inf"`}}, bad: []string{"A", "B"}},
		{name: "string to price refuses negative", from: "string", to: "price", values: []value{{"A", `"9.99"`}, {"B", `"-1"`}}, bad: []string{"B"}},
		{name: "string to integer", from: "string", to: "integer", values: []value{{"A", `"42"`}}, want: map[string]string{"A": `42`}},
		{name: "string 4.5 to integer refused", from: "string", to: "integer", values: []value{{"A", `"4.5"`}}, bad: []string{"A"}},
		{name: "number to string", from: "number", to: "string", values: []value{{"A", `12.5`}, {"B", `3`}}, want: map[string]string{"A": `"12.5"`, "B": `"3"`}},
		{name: "integer to text", from: "integer", to: "text", values: []value{{"A", `1000000`}}, want: map[string]string{"A": `"1000000"`}},
		{name: "boolean to string", from: "boolean", to: "string", values: []value{{"A", `true`}, {"B", `false`}}, want: map[string]string{"A": `"true"`, "B": `"false"`}},
		{name: "string to boolean", from: "string", to: "boolean", values: []value{{"A", `"true"`}, {"B", `"false"`}}, want: map[string]string{"A": `true`, "B": `false`}},
		{name: "string yes to boolean refused", from: "string", to: "boolean", values: []value{{"A", `"true"`}, {"B", `"yes"`}}, bad: []string{"B"}},
		{name: "number to boolean refused", from: "number", to: "boolean", values: []value{{"A", `1`}}, bad: []string{"A"}},
		{name: "array to string", from: "array", to: "string", values: []value{{"A", `["a","b"]`}, {"B", `[]`}}, want: map[string]string{"A": `"a|b"`, "B": `""`}},
		{name: "string to array", from: "string", to: "array", values: []value{{"A", `"red"`}}, want: map[string]string{"A": `["red"]`}},
		{name: "string to date", from: "string", to: "date", values: []value{{"A", `"2024-03-01"`}}, want: map[string]string{"A": `"2024-03-01"`}},
		{name: "string to date refused", from: "string", to: "date", values: []value{{"A", `"2024-03-01"`}, {"B", `"March 1"`}}, bad: []string{"B"}},
		{name: "string to url refused", from: "string", to: "url", values: []value{{"A", `"https://x.test/a"`}, {"B", `"x.test/a"`}}, bad: []string{"B"}},
		{name: "long text to string refused", from: "text", to: "string", values: []value{{"A", `"short"`}, {"B", `"` + long + `"`}}, bad: []string{"B"}},
		{name: "url to image", from: "url", to: "image", values: []value{{"A", `"https://x.test/a.png"`}}, want: map[string]string{"A": `"https://x.test/a.png"`}},
		{name: "price to number", from: "price", to: "number", values: []value{{"A", `19.99`}}, want: map[string]string{"A": `19.99`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			tn := f.tenant(tt.name)
			f.putSchema(tn, fld("other", "string"), fld("v", tt.from))
			for _, v := range tt.values {
				f.create(tn, v.sku, "Product "+v.sku, `{"other":"o","v":`+v.json+`}`)
			}
			before := map[string]string{}
			for _, v := range tt.values {
				before[v.sku] = f.storedData(tn, v.sku)
			}
			// The type change is at index 1 of the new fields list.
			_, err := f.svc.PutSchema(f.ctx, tn, catalog.Schema{Fields: []catalog.Field{fld("other", "string"), fld("v", tt.to)}})
			sc, gerr := f.svc.Schema(f.ctx, tn)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tt.bad == nil {
				if err != nil {
					t.Fatalf("PutSchema %s -> %s: %v", tt.from, tt.to, err)
				}
				if sc.Fields[1].Type != tt.to {
					t.Errorf("stored type %q, want %q", sc.Fields[1].Type, tt.to)
				}
				for sku, want := range tt.want {
					if got, w := f.storedData(tn, sku), canon(t, `{"other":"o","v":`+want+`}`); got != w {
						t.Errorf("%s data after the change %s, want %s", sku, got, w)
					}
				}
				return
			}
			ve := validation(t, err)
			if ve.Code != "type_change_conflict" {
				t.Errorf("code %q, want type_change_conflict", ve.Code)
			}
			msg, ok := ve.Fields["fields[1].type"]
			if !ok || len(ve.Fields) != 1 {
				t.Fatalf("fields %v, want only fields[1].type", ve.Fields)
			}
			wantMsg := fmt.Sprintf("%d product(s) hold values that cannot become %s: %s", len(tt.bad), tt.to, strings.Join(tt.bad, ", "))
			if msg != wantMsg {
				t.Errorf("fields[1].type = %q, want %q", msg, wantMsg)
			}
			if sc.Fields[1].Type != tt.from {
				t.Errorf("refused change stored type %q, want %q kept", sc.Fields[1].Type, tt.from)
			}
			for sku, b := range before {
				if got := f.storedData(tn, sku); got != b {
					t.Errorf("refused change altered %s: %s, was %s", sku, got, b)
				}
			}
		})
	}
}

// TestTypeChangeRefusedRollsBack: a convertible change earlier in the same PUT is not applied
// when a later field is refused.
func TestTypeChangeRefusedRollsBack(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("rollback")
	f.putSchema(tn, fld("a", "string"), fld("b", "string"))
	f.create(tn, "P-1", "One", `{"a":"12.5","b":"abc"}`)
	f.create(tn, "P-2", "Two", `{"a":"3","b":"4"}`)
	before := testenv.AsJSON(t, must(f.svc.Schema(f.ctx, tn)))
	_, err := f.svc.PutSchema(f.ctx, tn, catalog.Schema{Fields: []catalog.Field{fld("a", "number"), fld("b", "number"), fld("c", "string")}, DefaultCurrency: "EUR"})
	ve := validation(t, err)
	if ve.Code != "type_change_conflict" || ve.Fields["fields[1].type"] != "1 product(s) hold values that cannot become number: P-1" {
		t.Fatalf("error %+v", ve)
	}
	if !strings.Contains(ve.Msg, "1 product(s) hold b values that are not number") {
		t.Errorf("message %q", ve.Msg)
	}
	if got := testenv.AsJSON(t, must(f.svc.Schema(f.ctx, tn))); got != before {
		t.Errorf("schema after a refused PUT %s, want %s", got, before)
	}
	if got := f.storedData(tn, "P-1"); got != `{"a":"12.5","b":"abc"}` {
		t.Errorf("P-1 data %s: the conversion of a was not rolled back", got)
	}
	if got := f.storedData(tn, "P-2"); got != `{"a":"3","b":"4"}` {
		t.Errorf("P-2 data %s", got)
	}
}

// TestTypeChangeIsPerTenant: one tenant's type change neither converts nor is refused by another
// tenant's values.
func TestTypeChangeIsPerTenant(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	f.putSchema(a, fld("v", "string"))
	f.putSchema(b, fld("v", "string"))
	f.create(a, "P-1", "n", `{"v":"12.5"}`)
	f.create(b, "P-1", "n", `{"v":"12.5"}`)
	f.create(b, "P-2", "n", `{"v":"abc"}`)
	f.putSchema(a, fld("v", "number"))
	if got := f.storedData(a, "P-1"); got != `{"v":12.5}` {
		t.Errorf("tenant a's P-1 %s", got)
	}
	if got := f.storedData(b, "P-1"); got != `{"v":"12.5"}` {
		t.Errorf("tenant b's P-1 %s: converted by tenant a's change", got)
	}
	if sc := must(f.svc.Schema(f.ctx, b)); sc.Fields[0].Type != "string" {
		t.Errorf("tenant b's schema %+v", sc)
	}
}

// TestTypeChangeListsAtMost20SKUs: 23 offending products: the first 20 by id, then "and 3 more".
func TestTypeChangeListsAtMost20SKUs(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("offending")
	f.putSchema(tn, fld("size", "string"))
	var products []string
	var want []string
	for i := range 25 {
		v := `"L"`
		if i%12 == 5 { // 5 and 17 convert
			v = `"40"`
		}
		products = append(products, fmt.Sprintf(`{"sku":"S-%02d","name":"n","size":%s}`, i, v))
		if v == `"L"` && len(want) < 20 {
			want = append(want, fmt.Sprintf("S-%02d", i))
		}
	}
	if sum := f.bulk(tn, products...); sum.Created != 25 {
		t.Fatalf("bulk %+v", sum)
	}
	_, err := f.svc.PutSchema(f.ctx, tn, catalog.Schema{Fields: []catalog.Field{fld("size", "integer")}})
	ve := validation(t, err)
	wantMsg := "23 product(s) hold values that cannot become integer: " + strings.Join(want, ", ") + " and 3 more"
	if ve.Code != "type_change_conflict" || ve.Fields["fields[0].type"] != wantMsg {
		t.Errorf("error code %q fields %v, want fields[0].type %q", ve.Code, ve.Fields, wantMsg)
	}
	if got := f.storedData(tn, "S-05"); got != `{"size":"40"}` {
		t.Errorf("S-05 %s: changed although the PUT was refused", got)
	}

	// Exactly 20 offending products: no "more".
	tn2 := f.tenant("twenty")
	f.putSchema(tn2, fld("size", "string"))
	products = products[:0]
	want = want[:0]
	for i := range 20 {
		products = append(products, fmt.Sprintf(`{"sku":"T-%02d","name":"n","size":"L"}`, i))
		want = append(want, fmt.Sprintf("T-%02d", i))
	}
	f.bulk(tn2, products...)
	_, err = f.svc.PutSchema(f.ctx, tn2, catalog.Schema{Fields: []catalog.Field{fld("size", "integer")}})
	if got := validation(t, err).Fields["fields[0].type"]; got != "20 product(s) hold values that cannot become integer: "+strings.Join(want, ", ") {
		t.Errorf("fields[0].type = %q", got)
	}
}

// TestRemovedFieldKeepsValues: values of a removed field stay in data, are no filter and no
// facet, and are checked again when the field comes back.
func TestRemovedFieldKeepsValues(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("removed")
	f.putSchema(tn, fld("color", "string"), fld("size", "string"))
	p := f.create(tn, "P-1", "Shirt", `{"color":"red","size":"M"}`)
	f.create(tn, "P-2", "Other shirt", `{"size":"L"}`)

	f.putSchema(tn, fld("size", "string"))
	got, err := f.svc.Get(f.ctx, tn, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.AsJSON(t, got.Data) != `{"color":"red","size":"M"}` {
		t.Errorf("data after removing color %s, want the value kept", testenv.AsJSON(t, got.Data))
	}
	_, err = f.svc.List(f.ctx, tn, catalog.ListQuery{Filters: map[string]string{"color": "red"}})
	testenv.WantFieldErrors(t, err, map[string]string{"color": "is not a filter"})
	facets, err := f.svc.Facets(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := facets["color"]; ok {
		t.Errorf("facets %v count a removed field", facets)
	}
	// Writes cannot set it either.
	_, err = f.svc.Create(f.ctx, tn, catalog.ProductInput{SKU: "P-3", Name: "x", Data: json.RawMessage(`{"color":"blue"}`)})
	testenv.WantFieldErrors(t, err, map[string]string{"data.color": "not a field of the product schema"})
	// A PATCH of another field keeps the hidden value.
	if _, err := f.svc.Update(f.ctx, tn, p.ID, catalog.ProductPatch{Data: json.RawMessage(`{"size":"S"}`)}); err != nil {
		t.Fatal(err)
	}
	if got := f.storedData(tn, "P-1"); got != `{"color":"red","size":"S"}` {
		t.Errorf("data after a PATCH %s", got)
	}

	// Re-adding it with a type its values do not fit is refused, naming the product.
	_, err = f.svc.PutSchema(f.ctx, tn, catalog.Schema{Fields: []catalog.Field{fld("size", "string"), fld("color", "number")}})
	ve := validation(t, err)
	if ve.Code != "type_change_conflict" || ve.Fields["fields[1].type"] != "1 product(s) hold values that cannot become number: P-1" {
		t.Errorf("re-adding color as number: %+v", ve)
	}
	// Re-adding it as an array converts the value; it is a filter again.
	f.putSchema(tn, fld("size", "string"), fld("color", "array"))
	if got := f.storedData(tn, "P-1"); got != `{"color":["red"],"size":"S"}` {
		t.Errorf("data after re-adding color as array %s", got)
	}
	page, err := f.svc.List(f.ctx, tn, catalog.ListQuery{Filters: map[string]string{"color": "red"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := skus(page.Results); strings.Join(got, ",") != "P-1" || page.Total != 1 {
		t.Errorf("color=red after re-adding: %v total %d", got, page.Total)
	}
}

// TestSchemaChangeThenWrites: required applies to writes from then on; values of a field whose
// type did not change are not checked again.
func TestSchemaChangeThenWrites(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("required")
	f.putSchema(tn, fld("brand", "string"))
	p := f.create(tn, "P-1", "No brand", ``)
	f.putSchema(tn, catalog.Field{Name: "brand", Type: "string", Required: true})
	_, err := f.svc.Create(f.ctx, tn, catalog.ProductInput{SKU: "P-2", Name: "x"})
	testenv.WantFieldErrors(t, err, map[string]string{"data.brand": "required"})
	// The existing product stays readable and its name can change.
	if _, err := f.svc.Update(f.ctx, tn, p.ID, catalog.ProductPatch{Name: new("Renamed")}); err != nil {
		t.Errorf("rename a product lacking a newly required field: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSchemaChangeConcurrentWrites: product writes racing a type change never leave a value of the
// old type behind: a write either happens before the change (and is converted) or is checked
// against the new type. The race is forced: the test holds the tenant's schema lock while the
// write and the change queue up behind it in a chosen order, then lets them go.
func TestSchemaChangeConcurrentWrites(t *testing.T) {
	writes := []struct {
		name  string
		write func(f *fixture, tn int64, sku string) error
	}{
		{"create", func(f *fixture, tn int64, sku string) error {
			_, err := f.svc.Create(f.ctx, tn, catalog.ProductInput{SKU: sku, Name: "n", Data: json.RawMessage(`{"v":"12"}`)})
			return err
		}},
		{"bulk", func(f *fixture, tn int64, sku string) error {
			sum, err := f.svc.Bulk(f.ctx, tn, []map[string]any{{"sku": sku, "name": "n", "v": "12"}})
			if err == nil && sum.Failed == 1 {
				if sum.Results[0].Fields["v"] != "" {
					return fmt.Errorf("%w: %s", errs.ErrInvalid, sum.Results[0].Fields["v"])
				}
				return fmt.Errorf("bulk failed for another reason: %+v", sum.Results[0])
			}
			return err
		}},
		{"update", func(f *fixture, tn int64, sku string) error { // of the product the subtest created
			var id int64
			if err := f.db.Pool.QueryRow(f.ctx, "SELECT id FROM products WHERE tenant_id = $1 AND sku = $2", tn, sku).Scan(&id); err != nil {
				return err
			}
			_, err := f.svc.Update(f.ctx, tn, id, catalog.ProductPatch{Data: json.RawMessage(`{"v":"12"}`)})
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name+" queued before the change is converted", func(t *testing.T) {
			f := newFixture(t).with(t)
			tn := f.tenant("race-before")
			f.putSchema(tn, fld("v", "string"))
			if w.name == "update" {
				f.create(tn, "W", "n", "")
			}
			werr, serr := f.raceSchemaChange(tn, false, func() error { return w.write(f, tn, "W") })
			if werr != nil || serr != nil {
				t.Fatalf("write %v, schema change %v: want both to succeed", werr, serr)
			}
			if got := f.count(`SELECT count(*) FROM products WHERE tenant_id = $1 AND data -> 'v' = '12'::jsonb`, tn); got != 1 {
				t.Fatalf("%d products hold v = 12 (a number), want the written product converted", got)
			}
		})
		t.Run(w.name+" queued after the change is checked against the new type", func(t *testing.T) {
			f := newFixture(t).with(t)
			tn := f.tenant("race-after")
			f.putSchema(tn, fld("v", "string"))
			if w.name == "update" {
				f.create(tn, "W", "n", "")
			}
			werr, serr := f.raceSchemaChange(tn, true, func() error { return w.write(f, tn, "W") })
			if serr != nil {
				t.Fatalf("schema change: %v", serr)
			}
			if !errors.Is(werr, errs.ErrInvalid) {
				t.Fatalf("write after the change to number: %v, want it refused (a string is not a number)", werr)
			}
			if n := f.count(`SELECT count(*) FROM products WHERE tenant_id = $1 AND data ? 'v'`, tn); n != 0 {
				t.Errorf("%d products hold a v after a refused write", n)
			}
		})
	}
}

// raceSchemaChange holds the tenant's schema lock, starts the write, or the change to
// {v: number} when changeFirst, waits until it waits on the lock, starts the other, waits until
// both wait, then releases the lock and returns their errors.
func (f *fixture) raceSchemaChange(tn int64, changeFirst bool, write func() error) (writeErr, changeErr error) {
	f.t.Helper()
	change := func() error {
		_, err := f.svc.PutSchema(f.ctx, tn, catalog.Schema{Fields: []catalog.Field{fld("v", "number")}})
		return err
	}
	first, next, firstName, nextName := write, change, "write", "schema change"
	if changeFirst {
		first, next, firstName, nextName = change, write, "schema change", "write"
	}
	key, err := store.LockKey(store.LockCatalogSchema, tn)
	if err != nil {
		f.t.Fatal(err)
	}
	hold, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(f.ctx) }()
	if _, err := hold.Exec(f.ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
		f.t.Fatal(err)
	}
	errc := [2]chan error{make(chan error, 1), make(chan error, 1)}
	go func() { errc[0] <- first() }()
	f.waitAdvisoryWaiters(1, firstName)
	go func() { errc[1] <- next() }()
	f.waitAdvisoryWaiters(2, nextName)
	if err := hold.Rollback(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	firstErr, nextErr := <-errc[0], <-errc[1]
	if changeFirst {
		return nextErr, firstErr
	}
	return firstErr, nextErr
}

// waitAdvisoryWaiters waits until n sessions of the test's database wait on an advisory lock.
func (f *fixture) waitAdvisoryWaiters(n int64, what string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := f.count(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d sessions wait on the schema lock after 30s, want %d (%s)", got, n, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
