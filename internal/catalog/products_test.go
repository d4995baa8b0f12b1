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
	"github.com/cohort-dev/cohort/internal/testenv"
)

// allTypes is a schema with one field of every type.
var allTypes = []catalog.Field{
	fld("s", catalog.TypeString), fld("t", catalog.TypeText), fld("num", catalog.TypeNumber),
	fld("i", catalog.TypeInteger), fld("b", catalog.TypeBoolean), fld("d", catalog.TypeDate),
	fld("u", catalog.TypeURL), fld("img", catalog.TypeImage), fld("arr", catalog.TypeArray),
	fld("price", catalog.TypePrice),
}

func TestCreateTypedValues(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("typed")
	f.putSchema(tn, allTypes...)
	tests := []struct {
		name  string
		field string
		in    string // JSON value
		want  string // JSON value stored and returned
	}{
		{name: "string trimmed", field: "s", in: `"  Red  "`, want: `"Red"`},
		{name: "string unicode", field: "s", in: `"Grün ✓"`, want: `"Grün ✓"`},
		{name: "string of 1000 bytes", field: "s", in: `"` + strings.Repeat("s", 1000) + `"`, want: `"` + strings.Repeat("s", 1000) + `"`},
		{name: "text kept as given", field: "t", in: `"  Line one\nline two  "`, want: `"  Line one\nline two  "`},
		{name: "text of 5000 bytes", field: "t", in: `"` + strings.Repeat("t", 5000) + `"`, want: `"` + strings.Repeat("t", 5000) + `"`},
		{name: "number decimal", field: "num", in: `12.5`, want: `12.5`},
		{name: "number negative", field: "num", in: `-3`, want: `-3`},
		{name: "number exponent", field: "num", in: `1.5e3`, want: `1500`},
		{name: "integer", field: "i", in: `42`, want: `42`},
		{name: "integer written as 42.0", field: "i", in: `42.0`, want: `42`},
		{name: "integer negative", field: "i", in: `-7`, want: `-7`},
		{name: "integer 2^53-1", field: "i", in: `9007199254740991`, want: `9007199254740991`},
		{name: "boolean true", field: "b", in: `true`, want: `true`},
		{name: "boolean false", field: "b", in: `false`, want: `false`},
		{name: "date", field: "d", in: `"2024-03-01"`, want: `"2024-03-01"`},
		{name: "date leap day", field: "d", in: `"2024-02-29"`, want: `"2024-02-29"`},
		{name: "date RFC 3339 UTC", field: "d", in: `"2024-03-01T10:30:00Z"`, want: `"2024-03-01T10:30:00Z"`},
		{name: "date RFC 3339 offset kept", field: "d", in: `" 2024-03-01T10:30:00+02:00 "`, want: `"2024-03-01T10:30:00+02:00"`},
		{name: "url https", field: "u", in: `"https://shop.example.com/p/1?x=1#y"`, want: `"https://shop.example.com/p/1?x=1#y"`},
		{name: "url http trimmed", field: "u", in: `" http://example.com "`, want: `"http://example.com"`},
		{name: "image", field: "img", in: `"https://cdn.example.com/a.png"`, want: `"https://cdn.example.com/a.png"`},
		{name: "array", field: "arr", in: `["red","blue"]`, want: `["red","blue"]`},
		{name: "array trimmed, blanks dropped, order and repeats kept", field: "arr", in: `[" red ","","  ","blue","red"]`, want: `["red","blue","red"]`},
		{name: "array empty", field: "arr", in: `[]`, want: `[]`},
		{name: "price", field: "price", in: `19.99`, want: `19.99`},
		{name: "price zero", field: "price", in: `0`, want: `0`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			sku := fmt.Sprintf("T-%d", i)
			p := f.create(tn, sku, "Typed "+tt.name, `{"`+tt.field+`":`+tt.in+`}`)
			want := canon(t, `{"`+tt.field+`":`+tt.want+`}`)
			if got := testenv.AsJSON(t, p.Data); got != want {
				t.Errorf("Create returned data %s, want %s", got, want)
			}
			got, err := f.svc.Get(f.ctx, tn, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if testenv.AsJSON(t, got.Data) != want {
				t.Errorf("Get returned data %s, want %s", testenv.AsJSON(t, got.Data), want)
			}
			if s := f.storedData(tn, sku); s != want {
				t.Errorf("stored data %s, want %s", s, want)
			}
		})
	}

	// Every type in one product.
	p := f.create(tn, "ALL-1", "Everything", `{"s":"a","t":"b","num":1.25,"i":3,"b":true,"d":"2025-12-31",
		"u":"https://e.test/","img":"https://e.test/i.jpg","arr":["x"],"price":5}`)
	want := `{"arr":["x"],"b":true,"d":"2025-12-31","i":3,"img":"https://e.test/i.jpg","num":1.25,"price":5,"s":"a","t":"b","u":"https://e.test/"}`
	if got := testenv.AsJSON(t, p.Data); got != want {
		t.Errorf("all types: %s, want %s", got, want)
	}
	if p.SKU != "ALL-1" || p.Name != "Everything" || p.ID == 0 || !p.CreatedAt.Equal(clockStart) || !p.UpdatedAt.Equal(clockStart) {
		t.Errorf("product %+v", p)
	}
}

func TestCreateWrongValues(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("wrong")
	f.putSchema(tn, allTypes...)
	tests := []struct {
		name  string
		field string
		in    string
		msg   string // substring of the field error
	}{
		{name: "string given a number", field: "s", in: `5`, msg: "must be a string (string field)"},
		{name: "string given an array", field: "s", in: `["a"]`, msg: "must be a string"},
		{name: "string too long", field: "s", in: `"` + strings.Repeat("s", 1001) + `"`, msg: "at most 1000 bytes"},
		{name: "string with NUL", field: "s", in: `"a\u0000b"`, msg: "must be text"},
		{name: "text given a boolean", field: "t", in: `true`, msg: "must be a string (text field)"},
		{name: "text too long", field: "t", in: `"` + strings.Repeat("t", 100_001) + `"`, msg: "at most 100000 bytes"},
		{name: "number given a string", field: "num", in: `"12"`, msg: "must be a number (number field)"},
		{name: "number given a boolean", field: "num", in: `false`, msg: "must be a number"},
		{name: "integer given a decimal", field: "i", in: `1.5`, msg: "must be a whole number (integer field)"},
		{name: "integer given a string", field: "i", in: `"3"`, msg: "must be a whole number"},
		{name: "integer beyond 2^53", field: "i", in: `1e16`, msg: "must be a whole number"},
		{name: "boolean given a string", field: "b", in: `"true"`, msg: "must be true or false (boolean field)"},
		{name: "boolean given 1", field: "b", in: `1`, msg: "must be true or false"},
		{name: "date month 13", field: "d", in: `"2024-13-01"`, msg: "must be a date (YYYY-MM-DD) or an RFC 3339 timestamp"},
		{name: "date February 30", field: "d", in: `"2024-02-30"`, msg: "must be a date"},
		{name: "date not leap year", field: "d", in: `"2023-02-29"`, msg: "must be a date"},
		{name: "date other format", field: "d", in: `"01/03/2024"`, msg: "must be a date"},
		{name: "date without zone", field: "d", in: `"2024-03-01T10:30:00"`, msg: "must be a date"},
		{name: "date given a number", field: "d", in: `20240301`, msg: "must be a string (date field)"},
		{name: "url ftp", field: "u", in: `"ftp://example.com/a"`, msg: "must be an absolute http(s) URL"},
		{name: "url without scheme", field: "u", in: `"example.com/a"`, msg: "absolute http(s) URL"},
		{name: "url without host", field: "u", in: `"http://"`, msg: "absolute http(s) URL"},
		{name: "url javascript", field: "u", in: `"javascript:alert(1)"`, msg: "absolute http(s) URL"},
		{name: "image relative", field: "img", in: `"/img/a.png"`, msg: "must be an absolute http(s) URL (image field)"},
		{name: "array given a string", field: "arr", in: `"red"`, msg: "must be an array of strings (array field)"},
		{name: "array of numbers", field: "arr", in: `["a",1]`, msg: "must be an array of strings"},
		{name: "array of 501", field: "arr", in: `[` + strings.TrimSuffix(strings.Repeat(`"x",`, 501), ",") + `]`, msg: "at most 500 elements"},
		{name: "array element too long", field: "arr", in: `["` + strings.Repeat("e", 1001) + `"]`, msg: "at most 1000 bytes"},
		{name: "price negative", field: "price", in: `-0.01`, msg: "must not be negative (price field)"},
		{name: "price given a string", field: "price", in: `"10"`, msg: "must be a number (price field)"},
		{name: "price given an object", field: "price", in: `{"amount":10}`, msg: "must be a number"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			p, err := f.svc.Create(f.ctx, tn, catalog.ProductInput{SKU: fmt.Sprintf("W-%d", i), Name: "Wrong",
				Data: json.RawMessage(`{"s":"fine","` + tt.field + `":` + tt.in + `}`)})
			if p != nil {
				t.Errorf("Create returned %+v", p)
			}
			testenv.WantFieldErrors(t, err, map[string]string{"data." + tt.field: tt.msg})
		})
	}
	if n := f.count("SELECT count(*) FROM products WHERE tenant_id = $1", tn); n != 0 {
		t.Errorf("%d products stored by refused creates", n)
	}
}

func TestCreateValidation(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("validation")
	f.putSchema(tn, catalog.Field{Name: "brand", Type: "string", Required: true}, fld("color", "string"), fld("qty", "integer"))
	tests := []struct {
		name string
		in   catalog.ProductInput
		want map[string]string
	}{
		{name: "unknown data field", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`{"brand":"b","colour":"red"}`)}, want: map[string]string{"data.colour": "not a field of the product schema"}},
		{name: "sku in data", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`{"brand":"b","sku":"B"}`)}, want: map[string]string{"data.sku": "top-level product field"}},
		{name: "name in data", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`{"brand":"b","name":"B"}`)}, want: map[string]string{"data.name": "top-level product field"}},
		{name: "required missing", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`{"color":"red"}`)}, want: map[string]string{"data.brand": "is required by the product schema"}},
		{name: "required null", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`{"brand":null}`)}, want: map[string]string{"data.brand": "is required"}},
		{name: "no data at all", in: catalog.ProductInput{SKU: "A", Name: "n"}, want: map[string]string{"data.brand": "is required"}},
		{name: "data not an object", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`["brand"]`)}, want: map[string]string{"data": "must be an object", "data.brand": "is required"}},
		{name: "data a string", in: catalog.ProductInput{SKU: "A", Name: "n", Data: json.RawMessage(`"x"`)}, want: map[string]string{"data": "must be an object", "data.brand": "is required"}},
		{name: "sku empty", in: catalog.ProductInput{SKU: "", Name: "n", Data: json.RawMessage(`{"brand":"b"}`)}, want: map[string]string{"sku": "is required"}},
		{name: "sku blank", in: catalog.ProductInput{SKU: " \t ", Name: "n", Data: json.RawMessage(`{"brand":"b"}`)}, want: map[string]string{"sku": "is required"}},
		{name: "sku too long", in: catalog.ProductInput{SKU: strings.Repeat("K", 256), Name: "n", Data: json.RawMessage(`{"brand":"b"}`)}, want: map[string]string{"sku": "at most 255 bytes"}},
		{name: "sku with a newline", in: catalog.ProductInput{SKU: "A\nB", Name: "n", Data: json.RawMessage(`{"brand":"b"}`)}, want: map[string]string{"sku": "without control characters"}},
		{name: "name empty", in: catalog.ProductInput{SKU: "A", Name: "  ", Data: json.RawMessage(`{"brand":"b"}`)}, want: map[string]string{"name": "is required"}},
		{name: "name too long", in: catalog.ProductInput{SKU: "A", Name: strings.Repeat("n", 501), Data: json.RawMessage(`{"brand":"b"}`)}, want: map[string]string{"name": "at most 500 bytes"}},
		{name: "everything wrong", in: catalog.ProductInput{Data: json.RawMessage(`{"qty":"x","zzz":1}`)},
			want: map[string]string{"sku": "required", "name": "required", "data.qty": "whole number", "data.zzz": "not a field", "data.brand": "required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			_, err := f.svc.Create(f.ctx, tn, tt.in)
			testenv.WantFieldErrors(t, err, tt.want)
		})
	}
	if n := f.count("SELECT count(*) FROM products WHERE tenant_id = $1", tn); n != 0 {
		t.Errorf("%d products stored by refused creates", n)
	}
	// Boundaries that are fine.
	p := f.create(tn, "  "+strings.Repeat("K", 255)+"  ", strings.Repeat("n", 500), `{"brand":"b"}`)
	if p.SKU != strings.Repeat("K", 255) {
		t.Errorf("SKU of 255 bytes stored as %q", p.SKU)
	}
}

// TestCreateIntegerPrecision: an integer above 2^53 cannot be held exactly in a float64; it must be
// refused (or stored exactly), not silently changed.
func TestCreateIntegerPrecision(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("precision")
	f.putSchema(tn, fld("i", "integer"))
	p, err := f.svc.Create(f.ctx, tn, catalog.ProductInput{SKU: "BIG", Name: "n", Data: json.RawMessage(`{"i":9007199254740993}`)})
	if err != nil {
		testenv.WantFieldErrors(t, err, map[string]string{"data.i": "whole number"})
		return
	}
	if got := testenv.AsJSON(t, p.Data); got != `{"i":9007199254740993}` {
		t.Errorf("integer 9007199254740993 accepted and stored as %s (BUG: silent precision loss)", got)
	}
}

func TestSKUIdentity(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	p := f.create(a, "AB-1", "First", "")
	tests := []struct {
		name string
		sku  string
	}{
		{name: "same case", sku: "AB-1"},
		{name: "lower case", sku: "ab-1"},
		{name: "mixed case", sku: "aB-1"},
		{name: "padded", sku: "  ab-1 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			_, err := f.svc.Create(f.ctx, a, catalog.ProductInput{SKU: tt.sku, Name: "Second"})
			ce := coded(t, err, errs.ErrConflict, "sku_exists")
			if !strings.Contains(ce.Msg, strings.TrimSpace(tt.sku)) {
				t.Errorf("message %q does not name the sku", ce.Msg)
			}
		})
	}
	if n := f.count("SELECT count(*) FROM products WHERE tenant_id = $1", a); n != 1 {
		t.Errorf("tenant a has %d products, want 1", n)
	}
	got, _ := f.svc.Get(f.ctx, a, p.ID)
	if got.Name != "First" {
		t.Errorf("the first product changed: %+v", got)
	}
	// Another tenant has its own SKUs; whitespace around a SKU is not part of it.
	q := f.create(b, "  ab-1\t", "  Other tenant  ", "")
	if q.SKU != "ab-1" || q.Name != "Other tenant" {
		t.Errorf("created %q %q, want trimmed ab-1 / Other tenant", q.SKU, q.Name)
	}
}

func TestOtherTenantsProduct(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	f.putSchema(a, fld("color", "string"))
	f.putSchema(b, fld("color", "string"))
	p := f.create(a, "A-1", "Mine", `{"color":"red"}`)
	tests := []struct {
		name string
		call func() error
	}{
		{name: "get", call: func() error { _, err := f.svc.Get(f.ctx, b, p.ID); return err }},
		{name: "update", call: func() error {
			_, err := f.svc.Update(f.ctx, b, p.ID, catalog.ProductPatch{Name: new("Stolen"), Data: json.RawMessage(`{"color":"blue"}`)})
			return err
		}},
		{name: "delete", call: func() error { return f.svc.Delete(f.ctx, b, p.ID) }},
		{name: "get unknown id", call: func() error { _, err := f.svc.Get(f.ctx, a, p.ID+1000); return err }},
		{name: "update unknown id", call: func() error { _, err := f.svc.Update(f.ctx, a, p.ID+1000, catalog.ProductPatch{}); return err }},
		{name: "delete unknown id", call: func() error { return f.svc.Delete(f.ctx, a, p.ID+1000) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("error %v, want errs.ErrNotFound", err)
			}
		})
	}
	got, err := f.svc.Get(f.ctx, a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Mine" || testenv.AsJSON(t, got.Data) != `{"color":"red"}` || !got.UpdatedAt.Equal(clockStart) {
		t.Errorf("another tenant changed the product: %+v", got)
	}
}

func TestUpdateAndDelete(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("update")
	f.putSchema(tn, catalog.Field{Name: "brand", Type: "string", Required: true}, fld("color", "string"), fld("size", "string"), fld("qty", "integer"), fld("tags", "array"))
	p := f.create(tn, "U-1", "Shirt", `{"brand":"Acme","color":"red","size":"M","qty":1}`)

	steps := []struct {
		name        string
		patch       catalog.ProductPatch
		wantName    string
		wantData    string
		wantUpdated bool              // updated_at moves to the clock's time
		wantErr     map[string]string // field errors; the product is left as it was
	}{
		{name: "merge: value replaces, null removes, absent kept", patch: catalog.ProductPatch{Data: json.RawMessage(`{"size":null,"qty":2,"tags":[" a ","b"]}`)},
			wantName: "Shirt", wantData: `{"brand":"Acme","color":"red","qty":2,"tags":["a","b"]}`, wantUpdated: true},
		{name: "rename only", patch: catalog.ProductPatch{Name: new("  Better shirt ")}, wantName: "Better shirt", wantData: `{"brand":"Acme","color":"red","qty":2,"tags":["a","b"]}`, wantUpdated: true},
		{name: "same values change nothing", patch: catalog.ProductPatch{Name: new("Better shirt"), Data: json.RawMessage(`{"qty":2.0,"color":" red ","tags":["a","b"]}`)},
			wantName: "Better shirt", wantData: `{"brand":"Acme","color":"red","qty":2,"tags":["a","b"]}`},
		{name: "empty patch changes nothing", patch: catalog.ProductPatch{}, wantName: "Better shirt", wantData: `{"brand":"Acme","color":"red","qty":2,"tags":["a","b"]}`},
		{name: "null data changes nothing", patch: catalog.ProductPatch{Data: json.RawMessage(`null`)}, wantName: "Better shirt", wantData: `{"brand":"Acme","color":"red","qty":2,"tags":["a","b"]}`},
		{name: "removing an absent field changes nothing", patch: catalog.ProductPatch{Data: json.RawMessage(`{"size":null}`)}, wantName: "Better shirt", wantData: `{"brand":"Acme","color":"red","qty":2,"tags":["a","b"]}`},
		{name: "wrong type", patch: catalog.ProductPatch{Name: new("Nope"), Data: json.RawMessage(`{"qty":"many","color":"blue"}`)}, wantErr: map[string]string{"data.qty": "whole number"}},
		{name: "unknown field", patch: catalog.ProductPatch{Data: json.RawMessage(`{"colour":"blue"}`)}, wantErr: map[string]string{"data.colour": "not a field"}},
		{name: "sku in data", patch: catalog.ProductPatch{Data: json.RawMessage(`{"sku":"X"}`)}, wantErr: map[string]string{"data.sku": "top-level"}},
		{name: "removing a required field", patch: catalog.ProductPatch{Data: json.RawMessage(`{"brand":null}`)}, wantErr: map[string]string{"data.brand": "is required"}},
		{name: "blank name", patch: catalog.ProductPatch{Name: new("   ")}, wantErr: map[string]string{"name": "is required"}},
		{name: "data not an object", patch: catalog.ProductPatch{Data: json.RawMessage(`[1]`)}, wantErr: map[string]string{"data": "must be an object"}},
		{name: "both again", patch: catalog.ProductPatch{Name: new("Shirt"), Data: json.RawMessage(`{"color":"blue"}`)},
			wantName: "Shirt", wantData: `{"brand":"Acme","color":"blue","qty":2,"tags":["a","b"]}`, wantUpdated: true},
	}
	lastUpdate := clockStart
	for _, st := range steps {
		f.clock.Advance(time.Minute)
		got, err := f.svc.Update(f.ctx, tn, p.ID, st.patch)
		if st.wantErr != nil {
			testenv.WantFieldErrors(t, err, st.wantErr)
			got, err = f.svc.Get(f.ctx, tn, p.ID)
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		} else {
			if got.Name != st.wantName || testenv.AsJSON(t, got.Data) != canon(t, st.wantData) {
				t.Errorf("%s: got %q %s, want %q %s", st.name, got.Name, testenv.AsJSON(t, got.Data), st.wantName, st.wantData)
			}
			if st.wantUpdated {
				lastUpdate = f.clock.Now()
			}
		}
		if !got.UpdatedAt.Equal(lastUpdate) || !got.CreatedAt.Equal(clockStart) || got.SKU != "U-1" || got.ID != p.ID {
			t.Errorf("%s: id %d sku %q created_at %s updated_at %s, want %d U-1 %s %s", st.name, got.ID, got.SKU, got.CreatedAt, got.UpdatedAt, p.ID, clockStart, lastUpdate)
		}
		stored, _ := f.svc.Get(f.ctx, tn, p.ID)
		if !stored.UpdatedAt.Equal(lastUpdate) {
			t.Errorf("%s: stored updated_at %s, want %s", st.name, stored.UpdatedAt, lastUpdate)
		}
	}

	if err := f.svc.Delete(f.ctx, tn, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Get(f.ctx, tn, p.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := f.svc.Delete(f.ctx, tn, p.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	// The SKU is free again.
	f.create(tn, "u-1", "Again", `{"brand":"Acme"}`)
}

// listFixture is a tenant with products for the list tests and a second tenant with look-alikes.
func listFixture(t *testing.T) (*fixture, int64) {
	f := newFixture(t)
	tn, other := f.tenant("list"), f.tenant("other")
	fields := []catalog.Field{fld("color", "string"), fld("price", "price"), fld("qty", "integer"), fld("active", "boolean"),
		fld("tags", "array"), fld("released", "date"), fld("weight", "number"), fld("notes", "text")}
	f.putSchema(tn, fields...)
	f.putSchema(other, fields...)
	f.create(tn, "P1", "Red Shirt", `{"color":"Red","price":10,"qty":1,"active":true,"tags":["red","cotton"],"released":"2024-01-01","weight":0.5}`)
	f.create(tn, "P2", "red shoe", `{"color":"red","price":11,"qty":2,"active":false,"tags":["red"]}`)
	// A price stored as 10.0 (jsonb keeps the scale) must still be the number 10.
	f.exec(`UPDATE products SET data = jsonb_set(data, '{price}', '10.0'::jsonb) WHERE tenant_id = $1 AND sku = 'P2'`, tn)
	f.create(tn, "P3", "Blue Shirt", `{"color":"Blue","price":12.5,"active":true,"tags":["blue","cotton"],"released":"2024-02-01","weight":2}`)
	f.create(tn, "P4", "50% off hat", `{"price":5}`)
	f.create(tn, "P5", "500 off cap", `{"price":5,"qty":-3}`)
	f.create(tn, "P6", "a_b widget", ``)
	f.create(tn, "P7", "axb widget", ``)
	f.create(tn, "P8", "Äpfel Tasche", `{"color":"grün"}`)
	f.create(tn, "P9", `back\slash`, ``)
	// A value that is a string "10" (written before price was a price field).
	f.exec(`INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES ($1, 'P10', 'legacy', 'p10', 'legacy', '{"price":"10","qty":"2","active":"true"}')`, tn)
	// The other tenant's products match every query below.
	f.create(other, "P1", "Red Shirt 50% a_b äpfel back\\slash", `{"color":"Red","price":10,"qty":1,"active":true,"tags":["red","cotton","blue"],"released":"2024-01-01","weight":0.5}`)
	f.create(other, "X2", "red shoe", `{"color":"red","price":10,"qty":2,"active":false,"tags":["red"],"released":"2024-02-01"}`)
	return f, tn
}

func TestListFilters(t *testing.T) {
	f, tn := listFixture(t)
	all := "P1,P2,P3,P4,P5,P6,P7,P8,P9,P10"
	tests := []struct {
		name    string
		q       string
		filters map[string]string
		want    string // SKUs in order
	}{
		{name: "everything in id order", want: all},
		{name: "q contains", q: "shirt", want: "P1,P3"},
		{name: "q case-insensitive", q: "SHIRT", want: "P1,P3"},
		{name: "q mixed case across words", q: "D sH", want: "P1,P2"},
		{name: "q percent is literal", q: "50%", want: "P4"},
		{name: "q underscore is literal", q: "a_b", want: "P6"},
		{name: "q backslash is literal", q: `k\s`, want: "P9"},
		{name: "q non-ASCII case-insensitive", q: "äpfel", want: "P8"},
		{name: "q non-ASCII upper", q: "ÄPFEL", want: "P8"},
		{name: "q no match", q: "trousers", want: ""},
		{name: "q matches name only, not sku", q: "P1", want: ""},
		{name: "price 10 matches 10 and 10.0, not \"10\"", filters: map[string]string{"price": "10"}, want: "P1,P2"},
		{name: "price 10.0", filters: map[string]string{"price": "10.0"}, want: "P1,P2"},
		{name: "price 12.5", filters: map[string]string{"price": "12.50"}, want: "P3"},
		{name: "integer", filters: map[string]string{"qty": "2"}, want: "P2"},
		{name: "integer negative", filters: map[string]string{"qty": "-3"}, want: "P5"},
		{name: "number", filters: map[string]string{"weight": "0.5"}, want: "P1"},
		{name: "boolean true", filters: map[string]string{"active": "true"}, want: "P1,P3"},
		{name: "boolean false", filters: map[string]string{"active": "false"}, want: "P2"},
		{name: "array matches any element", filters: map[string]string{"tags": "red"}, want: "P1,P2"},
		{name: "array second element", filters: map[string]string{"tags": "cotton"}, want: "P1,P3"},
		{name: "array no partial match", filters: map[string]string{"tags": "cot"}, want: ""},
		{name: "string exact", filters: map[string]string{"color": "red"}, want: "P2"},
		{name: "string case-sensitive", filters: map[string]string{"color": "Red"}, want: "P1"},
		{name: "string no partial match", filters: map[string]string{"color": "Re"}, want: ""},
		{name: "string trimmed", filters: map[string]string{"color": " Blue "}, want: "P3"},
		{name: "string unicode", filters: map[string]string{"color": "grün"}, want: "P8"},
		{name: "date", filters: map[string]string{"released": "2024-02-01"}, want: "P3"},
		{name: "several filters ANDed", filters: map[string]string{"color": "Red", "active": "true"}, want: "P1"},
		{name: "array and price ANDed", filters: map[string]string{"tags": "cotton", "price": "12.5"}, want: "P3"},
		{name: "ANDed to nothing", filters: map[string]string{"tags": "red", "active": "true", "qty": "2"}, want: ""},
		{name: "q and filter", q: "shirt", filters: map[string]string{"tags": "red"}, want: "P1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			page, err := f.svc.List(f.ctx, tn, catalog.ListQuery{Q: tt.q, Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(skus(page.Results), ","); got != tt.want {
				t.Errorf("results %s, want %s", got, tt.want)
			}
			n := int64(0)
			if tt.want != "" {
				n = int64(len(strings.Split(tt.want, ",")))
			}
			wantPages := int64(0)
			if n > 0 {
				wantPages = 1
			}
			if page.Total != n || page.TotalPages != wantPages || page.Page != 1 || page.PageSize != 50 {
				t.Errorf("page %d/%d total %d pages %d, want 1/50 total %d pages %d", page.Page, page.PageSize, page.Total, page.TotalPages, n, wantPages)
			}
		})
	}
}

func TestListRefusals(t *testing.T) {
	f, tn := listFixture(t)
	tests := []struct {
		name string
		q    catalog.ListQuery
		want map[string]string
	}{
		{name: "unknown filter", q: catalog.ListQuery{Filters: map[string]string{"colour": "red"}}, want: map[string]string{"colour": "is not a filter"}},
		{name: "built-in is no filter", q: catalog.ListQuery{Filters: map[string]string{"sku": "P1"}}, want: map[string]string{"sku": "is not a filter"}},
		{name: "price not a number", q: catalog.ListQuery{Filters: map[string]string{"price": "abc"}}, want: map[string]string{"price": "must be a number (price field)"}},
		{name: "price negative", q: catalog.ListQuery{Filters: map[string]string{"price": "-1"}}, want: map[string]string{"price": "must not be negative"}},
		{name: "price NaN", q: catalog.ListQuery{Filters: map[string]string{"price": "NaN"}}, want: map[string]string{"price": "must be a number"}},
		{name: "integer decimal", q: catalog.ListQuery{Filters: map[string]string{"qty": "1.5"}}, want: map[string]string{"qty": "whole number"}},
		{name: "boolean yes", q: catalog.ListQuery{Filters: map[string]string{"active": "yes"}}, want: map[string]string{"active": "true or false"}},
		{name: "bad date", q: catalog.ListQuery{Filters: map[string]string{"released": "yesterday"}}, want: map[string]string{"released": "must be a date"}},
		{name: "two bad filters", q: catalog.ListQuery{Filters: map[string]string{"price": "x", "nope": "1"}}, want: map[string]string{"price": "number", "nope": "not a filter"}},
		{name: "page size 201", q: catalog.ListQuery{PageSize: 201}, want: map[string]string{"page_size": "from 1 to 200"}},
		{name: "page size negative", q: catalog.ListQuery{PageSize: -1}, want: map[string]string{"page_size": "from 1 to 200"}},
		{name: "page negative", q: catalog.ListQuery{Page: -1}, want: map[string]string{"page": "positive"}},
		{name: "q too long", q: catalog.ListQuery{Q: strings.Repeat("q", 501)}, want: map[string]string{"q": "at most 500"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			page, err := f.svc.List(f.ctx, tn, tt.q)
			if page != nil {
				t.Errorf("page %+v with the error", page)
			}
			testenv.WantFieldErrors(t, err, tt.want)
		})
	}
}

func TestListPages(t *testing.T) {
	f := newFixture(t)
	tn, other := f.tenant("pages"), f.tenant("other")
	var products []string
	for i := range 123 {
		products = append(products, fmt.Sprintf(`{"sku":"S-%03d","name":"Item %d"}`, i, i))
	}
	if sum := f.bulk(tn, products...); sum.Created != 123 {
		t.Fatalf("bulk %+v", sum)
	}
	f.bulk(other, products[:60]...)
	seq := func(from, to int) string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("S-%03d", i))
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		name       string
		page, size int
		want       string
		wantPage   int
		wantSize   int
		wantPages  int64
	}{
		{name: "defaults", want: seq(0, 50), wantPage: 1, wantSize: 50, wantPages: 3},
		{name: "page 0 is the first page (the API refuses it)", page: 0, size: 0, want: seq(0, 50), wantPage: 1, wantSize: 50, wantPages: 3},
		{name: "page 2 default size", page: 2, want: seq(50, 100), wantPage: 2, wantSize: 50, wantPages: 3},
		{name: "last partial page", page: 3, want: seq(100, 123), wantPage: 3, wantSize: 50, wantPages: 3},
		{name: "beyond the end", page: 4, want: "", wantPage: 4, wantSize: 50, wantPages: 3},
		{name: "far beyond the end", page: 1 << 30, want: "", wantPage: 1 << 30, wantSize: 50, wantPages: 3},
		{name: "size 200 holds all", size: 200, want: seq(0, 123), wantPage: 1, wantSize: 200, wantPages: 1},
		{name: "size 1", page: 7, size: 1, want: seq(6, 7), wantPage: 7, wantSize: 1, wantPages: 123},
		{name: "size 41 exact", page: 3, size: 41, want: seq(82, 123), wantPage: 3, wantSize: 41, wantPages: 3},
		{name: "size 10 page 13", page: 13, size: 10, want: seq(120, 123), wantPage: 13, wantSize: 10, wantPages: 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			page, err := f.svc.List(f.ctx, tn, catalog.ListQuery{Page: tt.page, PageSize: tt.size})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(skus(page.Results), ","); got != tt.want {
				t.Errorf("results %s\nwant %s", got, tt.want)
			}
			if page.Results == nil {
				t.Error("results is nil, want an empty list")
			}
			if page.Total != 123 || page.TotalPages != tt.wantPages || page.Page != tt.wantPage || page.PageSize != tt.wantSize {
				t.Errorf("page %d size %d total %d pages %d, want %d %d 123 %d", page.Page, page.PageSize, page.Total, page.TotalPages, tt.wantPage, tt.wantSize, tt.wantPages)
			}
			for i := 1; i < len(page.Results); i++ {
				if page.Results[i].ID <= page.Results[i-1].ID {
					t.Fatalf("not in id order at %d", i)
				}
			}
		})
	}
	// A tenant with no products.
	page, err := f.svc.List(f.ctx, f.tenant("empty"), catalog.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 0 || page.TotalPages != 0 || len(page.Results) != 0 || page.Results == nil {
		t.Errorf("empty tenant page %+v", page)
	}
	if got := testenv.AsJSON(t, page); got != `{"page":1,"page_size":50,"results":[],"total":0,"total_pages":0}` {
		t.Errorf("empty page JSON %s", got)
	}
}

// TestNonASCIICaseFoldingOnCCollation: testenv's private cluster (internal/devstack initdb
// --locale=C) and any database created with LC_CTYPE=C fold only ASCII in lower(); the service
// lowers q with Go's strings.ToLower. Here the column collation is set to "C" to be such a
// database.
func TestNonASCIICaseFoldingOnCCollation(t *testing.T) {
	f := newFixture(t)
	f.exec(`ALTER TABLE products ALTER COLUMN name TYPE text COLLATE "C", ALTER COLUMN sku TYPE text COLLATE "C"`)
	tn := f.tenant("c-collation")
	f.create(tn, "P1", "Äpfel", "")
	f.create(tn, "P2", "Apfel", "")
	for _, q := range []string{"Äpfel", "äpfel", "ÄPFEL"} {
		page, err := f.svc.List(f.ctx, tn, catalog.ListQuery{Q: q})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(skus(page.Results), ","); got != "P1" {
			t.Errorf("q=%s found [%s], want [P1] (BUG: Go lowers q, Postgres lower(name) folds only ASCII under C)", q, got)
		}
	}
}

// TestListCountsFollowWrites: list totals are cached per condition and catalogue version; every
// kind of write through the service (from this process or another one) moves the version, so a
// total is never stale, while a write that bypasses the service is not seen until the next one.
func TestListCountsFollowWrites(t *testing.T) {
	f := newFixture(t)
	tn, other := f.tenant("counts"), f.tenant("other")
	f.putSchema(tn, fld("color", "string"), fld("tags", "array"))
	f.putSchema(other, fld("color", "string"))
	var products []string
	for i := range 120 {
		products = append(products, fmt.Sprintf(`{"sku":"C-%03d","name":"Linen shirt %d","color":"red"}`, i, i))
	}
	f.bulk(tn, products...)
	replica := catalog.NewService(f.db.Pool, f.clock.Now) // another API process: its own cache
	q := catalog.ListQuery{Q: "linen", Filters: map[string]string{"color": "red"}, PageSize: 50}
	total := func(svc *catalog.Service, want int64, what string) {
		t.Helper()
		for _, page := range []int{1, 2} { // full pages: the total is the count
			q := q
			q.Page = page
			p, err := svc.List(f.ctx, tn, q)
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != want || p.TotalPages != (want+49)/50 {
				t.Fatalf("%s: page %d total %d pages %d, want %d", what, page, p.Total, p.TotalPages, want)
			}
		}
	}
	total(f.svc, 120, "after bulk")
	total(replica, 120, "replica after bulk")

	// A write that bypasses the service does not move the version: the cached count stands
	// (this is what shows the count is cached), until the service writes again.
	f.exec(`INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES ($1, 'RAW', 'linen raw', 'raw', 'linen raw', '{"color":"red"}')`, tn)
	total(f.svc, 120, "after a write behind the service's back")

	p := f.create(tn, "C-NEW", "Linen dress", `{"color":"red"}`)
	total(f.svc, 122, "after create (and the raw row)")
	total(replica, 122, "replica after create")

	if _, err := f.svc.Update(f.ctx, tn, p.ID, catalog.ProductPatch{Data: json.RawMessage(`{"color":"blue"}`)}); err != nil {
		t.Fatal(err)
	}
	total(f.svc, 121, "after update out of the filter")
	total(replica, 121, "replica after update")

	if err := f.svc.Delete(f.ctx, tn, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(f.ctx, tn, p.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	f.bulk(tn, `{"sku":"C-000","name":"cotton shirt","color":"red"}`, `{"sku":"B-1","name":"linen 1","color":"red"}`, `{"sku":"B-2","name":"linen 2","color":"red"}`)
	total(f.svc, 122, "after bulk: one out of q, two new")
	total(replica, 122, "replica after bulk")

	// Another tenant's writes and lists neither see nor change this tenant's totals.
	f.create(other, "C-000", "Linen shirt", `{"color":"red"}`)
	op, err := f.svc.List(f.ctx, other, q)
	if err != nil || op.Total != 1 || len(op.Results) != 1 {
		t.Fatalf("other tenant: %+v %v", op, err)
	}
	total(f.svc, 122, "after the other tenant's write")
}
