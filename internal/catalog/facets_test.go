package catalog_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// facetString renders facets as "field: value=count value=count; field: ..." in field order.
func facetString(m map[string][]catalog.FacetValue) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		vals := make([]string, len(m[n]))
		for i, v := range m[n] {
			vals[i] = fmt.Sprintf("%s=%d", v.Value, v.Count)
		}
		parts = append(parts, n+": "+strings.Join(vals, " "))
	}
	return strings.Join(parts, "; ")
}

func TestFacets(t *testing.T) {
	f := newFixture(t)
	products := []struct{ sku, data string }{
		{"P1", `{"color":"red","material":"cotton","tags":["summer","sale","summer"],"price":10,"active":true}`},
		{"P2", `{"color":"blue","material":"cotton","tags":["sale"],"price":10}`},
		{"P3", `{"color":"red","tags":["winter"," sale "]}`},
		{"P4", `{"color":"green","material":"wool","tags":[]}`},
		{"P5", `{"color":"blue"}`},
		{"P6", `{}`},
		{"P7", `{"color":"red","material":"Cotton"}`},
	}
	fields := map[string]catalog.Field{
		"color": fld("color", "string"), "material": fld("material", "string"), "tags": fld("tags", "array"),
		"price": fld("price", "price"), "active": fld("active", "boolean"), "body": fld("body", "text"),
	}
	facet := func(name string) catalog.Field { fd := fields[name]; fd.Facet = true; return fd }
	const (
		color    = "color: red=3 blue=2 green=1"
		material = "material: cotton=2 Cotton=1 wool=1"
		tags     = "tags: sale=3 summer=1 winter=1"
	)
	tests := []struct {
		name   string
		schema []catalog.Field
		want   string
	}{
		{name: "none marked: every string and array field", schema: []catalog.Field{fields["color"], fields["material"], fields["tags"], fields["price"], fields["active"], fields["body"]},
			want: color + "; " + material + "; " + tags},
		{name: "marked only", schema: []catalog.Field{facet("color"), fields["material"], fields["tags"], fields["price"]}, want: color},
		{name: "marked array only", schema: []catalog.Field{fields["color"], facet("tags")}, want: tags},
		{name: "two marked", schema: []catalog.Field{facet("material"), fields["color"], facet("tags")}, want: material + "; " + tags},
		{name: "no string or array field", schema: []catalog.Field{fields["price"], fields["active"]}, want: ""},
		{name: "no schema", want: ""},
		{name: "field nobody holds", schema: []catalog.Field{fields["color"], fld("size", "string")}, want: color + "; size: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			tn := f.tenant(tt.name)
			all := []catalog.Field{fields["color"], fields["material"], fields["tags"], fields["price"], fields["active"]}
			f.putSchema(tn, all...)
			for _, p := range products {
				f.create(tn, p.sku, "Product "+p.sku, p.data)
			}
			f.putSchema(tn, tt.schema...)
			got, err := f.svc.Facets(f.ctx, tn)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("facets map is nil")
			}
			if s := facetString(got); s != tt.want {
				t.Errorf("facets\n %s\nwant\n %s", s, tt.want)
			}
			for k, v := range got {
				if v == nil {
					t.Errorf("facet %s is nil, want an empty list", k)
				}
			}
		})
	}
}

// TestFacetsIgnoreNonStrings: numbers, booleans, nulls and objects (which only direct writes to
// the table can leave under a string or array field) are not counted; strings inside an array are.
func TestFacetsIgnoreNonStrings(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("nonstrings")
	f.putSchema(tn, fld("color", "string"), fld("tags", "array"))
	f.create(tn, "P1", "One", `{"color":"red","tags":["a"]}`)
	f.exec(`INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES
		($1, 'P2', 'Two', 'p2', 'two', '{"color":5,"tags":[1,"a",null,true,"b"]}'),
		($1, 'P3', 'Three', 'p3', 'three', '{"color":true,"tags":7}'),
		($1, 'P4', 'Four', 'p4', 'four', '{"color":{"red":1},"tags":{"a":1}}'),
		($1, 'P5', 'Five', 'p5', 'five', '{"color":null,"tags":null}')`, tn)
	got, err := f.svc.Facets(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if s := facetString(got); s != "color: red=1; tags: a=2 b=1" {
		t.Errorf("facets %s", s)
	}
}

// TestFacetsFirst1000Products: only the tenant's first 1,000 products by id are counted.
func TestFacetsFirst1000Products(t *testing.T) {
	f := newFixture(t)
	tn, other := f.tenant("thousand"), f.tenant("other")
	f.putSchema(tn, fld("color", "string"), fld("tags", "array"))
	f.putSchema(other, fld("color", "string"))
	// Another tenant's products come first by id; they must neither count nor use up the 1,000.
	f.bulk(other, `{"sku":"O-1","name":"o","color":"red"}`, `{"sku":"O-2","name":"o","color":"foreign"}`)
	var first []string
	for i := range catalog.MaxBulk {
		color := []string{"red", "blue", "green", "black"}[i%4]
		first = append(first, fmt.Sprintf(`{"sku":"F-%04d","name":"n","color":%q,"tags":["t%d"]}`, i, color, i%3))
	}
	if sum := f.bulk(tn, first...); sum.Created != catalog.MaxBulk {
		t.Fatalf("first bulk %+v", sum.Created)
	}
	sum := f.bulk(tn,
		`{"sku":"L-1","name":"late","color":"late","tags":["late"]}`,
		`{"sku":"L-2","name":"late","color":"late","tags":["late"]}`,
		`{"sku":"L-3","name":"late","color":"red","tags":["t0"]}`,
		`{"sku":"L-4","name":"late","color":"late"}`,
		`{"sku":"L-5","name":"late","color":"late"}`,
	)
	if sum.Created != 5 {
		t.Fatalf("second bulk %+v", sum)
	}
	if n := f.count(`SELECT count(*) FROM products WHERE tenant_id = $1 AND id > (SELECT max(id) FROM products WHERE tenant_id = $1 AND sku LIKE 'F-%')`, tn); n != 5 {
		t.Fatalf("%d products after the first 1,000 by id, want 5", n)
	}
	got, err := f.svc.Facets(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	if s := facetString(got); s != "color: black=250 blue=250 green=250 red=250; tags: t0=334 t1=333 t2=333" {
		t.Errorf("facets %s", s)
	}
}

// TestFacetsAtMost100Values: 150 distinct values: the 100 most frequent, ties by value.
func TestFacetsAtMost100Values(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("hundred")
	f.putSchema(tn, catalog.Field{Name: "brand", Type: "string", Facet: true}, catalog.Field{Name: "tags", Type: "array", Facet: true})
	// Value b000..b149; b000..b019 are held by 3 products each, b020..b059 by 2, the rest by 1.
	// The tags of each product repeat its brand twice, which counts once.
	var products []string
	counts := map[string]int{}
	n := 0
	for v := range 150 {
		times := 1
		switch {
		case v < 20:
			times = 3
		case v < 60:
			times = 2
		}
		val := fmt.Sprintf("b%03d", 149-v) // higher counts on the values that sort last
		for range times {
			products = append(products, fmt.Sprintf(`{"sku":"S-%d","name":"n","brand":%q,"tags":[%q,%q]}`, n, val, val, val))
			n++
		}
		counts[val] = times
	}
	if sum := f.bulk(tn, products...); sum.Created != len(products) {
		t.Fatalf("bulk created %d of %d", sum.Created, len(products))
	}
	want := make([]catalog.FacetValue, 0, len(counts))
	for v, c := range counts {
		want = append(want, catalog.FacetValue{Value: v, Count: c})
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].Count != want[j].Count {
			return want[i].Count > want[j].Count
		}
		return want[i].Value < want[j].Value
	})
	want = want[:100]
	// Spot checks of the expected list itself: b130..b149 (3), then b090..b129 (2), then b000..b039.
	if want[0].Value != "b130" || want[19].Value != "b149" || want[20] != (catalog.FacetValue{Value: "b090", Count: 2}) || want[60] != (catalog.FacetValue{Value: "b000", Count: 1}) || want[99].Value != "b039" {
		t.Fatalf("test expectation is off: %v", want)
	}
	got, err := f.svc.Facets(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"brand", "tags"} {
		if g := got[field]; testenv.AsJSON(t, g) != testenv.AsJSON(t, want) {
			t.Errorf("%s: %d values\n %v\nwant\n %v", field, len(g), g, want)
		}
	}
}
