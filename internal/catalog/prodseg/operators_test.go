package prodseg_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// operatorProducts are five products, in id order P1..P5, covering every field type with present,
// absent and differently cased values.
var operatorProducts = []string{
	`{"sku":"AB-1","name":"Red Linen Shirt","color":"red","description":"Light summer shirt, 50% linen","link":"https://shop.example/ab-1",
	  "photo":"https://img.example/ab1.png","weight":0.25,"stock":10,"active":true,"released":"2024-03-01","tags":["summer","linen"],"price":19.99}`,
	`{"sku":"ab-2x","name":"Blue Denim Jacket","color":"blue","description":"Heavy DENIM","link":"https://shop.example/AB-2",
	  "weight":1.2,"stock":0,"active":false,"released":"2023-11-15T08:30:00Z","tags":["winter"],"price":89}`,
	`{"sku":"CD-3","name":"Straße Schuh","color":"Red","description":"Ünïcode ÄPFEL shoe","stock":5,"active":true,
	  "released":"2024-03-01T23:00:00+02:00","tags":["summer","sale"],"price":49.5}`,
	`{"sku":"CD_4","name":"green hat","color":"green","weight":0.1,"tags":[],"price":0}`,
	`{"sku":"EF-5","name":"Red Linen Shirt","price":19.99,"stock":10,"active":false}`,
}

var operatorSchema = []catalog.Field{
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
}

// TestProdsegOperators evaluates every operator on every field kind against real products, by
// preview (count and sample) and by compute (the stored members), with a second tenant holding
// copies of the same products that must never be counted.
func TestProdsegOperators(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("ops-a"), f.tenant("ops-b")
	for _, tenant := range []int64{a, b} {
		f.putSchema(tenant, operatorSchema...)
		f.bulk(tenant, operatorProducts...)
	}
	all := []string{"AB-1", "ab-2x", "CD-3", "CD_4", "EF-5"}
	// p picks products by number (1-based), in id order.
	p := func(ns ...int) []string {
		out := []string{}
		for _, n := range ns {
			out = append(out, all[n-1])
		}
		return out
	}
	tests := []struct {
		name string
		def  string
		want []string
	}{
		// string
		{name: "string eq is case-sensitive", def: cond("color", "eq", `"red"`), want: p(1)},
		{name: "string neq includes products without the field", def: cond("color", "neq", `"red"`), want: p(2, 3, 4, 5)},
		{name: "string in", def: cond("color", "in", `["red","green"]`), want: p(1, 4)},
		{name: "string not_in includes products without the field", def: cond("color", "not_in", `["red","green"]`), want: p(2, 3, 5)},
		{name: "string contains ignores case", def: cond("color", "contains", `"RE"`), want: p(1, 3, 4)},
		{name: "string exists", def: cond("color", "exists", ``), want: p(1, 2, 3, 4)},
		{name: "string not_exists", def: cond("color", "not_exists", ``), want: p(5)},
		// text
		{name: "text contains", def: cond("description", "contains", `"linen"`), want: p(1)},
		{name: "text contains ignores ASCII case", def: cond("description", "contains", `"denim"`), want: p(2)},
		{name: "text contains takes % literally", def: cond("description", "contains", `"0% l"`), want: p(1)},
		{name: "text contains takes _ literally", def: cond("description", "contains", `"summer_shirt"`), want: p()},
		{name: "text contains non-ASCII", def: cond("description", "contains", `"ÄPFEL SHOE"`), want: p(3)},
		{name: "text eq is exact", def: cond("description", "eq", `"Heavy DENIM"`), want: p(2)},
		{name: "text eq differs in case", def: cond("description", "eq", `"heavy denim"`), want: p()},
		// url, image
		{name: "url contains ignores case", def: cond("link", "contains", `"ab-2"`), want: p(2)},
		{name: "url eq", def: cond("link", "eq", `"https://shop.example/ab-1"`), want: p(1)},
		{name: "url not_exists", def: cond("link", "not_exists", ``), want: p(3, 4, 5)},
		{name: "image exists", def: cond("photo", "exists", ``), want: p(1)},
		{name: "image in", def: cond("photo", "in", `["https://img.example/ab1.png","https://x.example/"]`), want: p(1)},
		// number
		{name: "number gt", def: cond("weight", "gt", `0.25`), want: p(2)},
		{name: "number gte", def: cond("weight", "gte", `0.25`), want: p(1, 2)},
		{name: "number lt", def: cond("weight", "lt", `0.25`), want: p(4)},
		{name: "number lte", def: cond("weight", "lte", `0.25`), want: p(1, 4)},
		{name: "number eq", def: cond("weight", "eq", `1.2`), want: p(2)},
		{name: "number neq includes products without the field", def: cond("weight", "neq", `1.2`), want: p(1, 3, 4, 5)},
		{name: "number in", def: cond("weight", "in", `[0.1, 0.25]`), want: p(1, 4)},
		{name: "number not_in", def: cond("weight", "not_in", `[0.1, 0.25]`), want: p(2, 3, 5)},
		{name: "number gt negative", def: cond("weight", "gt", `-1e3`), want: p(1, 2, 4)},
		// integer
		{name: "integer eq", def: cond("stock", "eq", `10`), want: p(1, 5)},
		{name: "integer eq written as a float", def: cond("stock", "eq", `10.0`), want: p(1, 5)},
		{name: "integer gt", def: cond("stock", "gt", `0`), want: p(1, 3, 5)},
		{name: "integer lte", def: cond("stock", "lte", `5`), want: p(2, 3)},
		{name: "integer in", def: cond("stock", "in", `[0, 5]`), want: p(2, 3)},
		{name: "integer not_exists", def: cond("stock", "not_exists", ``), want: p(4)},
		// price
		{name: "price lt", def: cond("price", "lt", `20`), want: p(1, 4, 5)},
		{name: "price eq decimal", def: cond("price", "eq", `19.99`), want: p(1, 5)},
		{name: "price gte", def: cond("price", "gte", `49.5`), want: p(2, 3)},
		{name: "price eq zero", def: cond("price", "eq", `0`), want: p(4)},
		{name: "price in", def: cond("price", "in", `[89, 49.50]`), want: p(2, 3)},
		{name: "price lt tiny", def: cond("price", "lt", `0.000001`), want: p(4)},
		// boolean
		{name: "boolean eq true", def: cond("active", "eq", `true`), want: p(1, 3)},
		{name: "boolean eq false", def: cond("active", "eq", `false`), want: p(2, 5)},
		{name: "boolean neq includes products without the field", def: cond("active", "neq", `true`), want: p(2, 4, 5)},
		{name: "boolean in", def: cond("active", "in", `[true, false]`), want: p(1, 2, 3, 5)},
		{name: "boolean not_exists", def: cond("active", "not_exists", ``), want: p(4)},
		// date: the calendar date as written, timestamps by their date part
		{name: "date eq matches timestamps of the day", def: cond("released", "eq", `"2024-03-01"`), want: p(1, 3)},
		{name: "date gt", def: cond("released", "gt", `"2024-01-01"`), want: p(1, 3)},
		{name: "date lt", def: cond("released", "lt", `"2024-01-01"`), want: p(2)},
		{name: "date gte", def: cond("released", "gte", `"2023-11-15"`), want: p(1, 2, 3)},
		{name: "date lte", def: cond("released", "lte", `"2023-11-15"`), want: p(2)},
		{name: "date in", def: cond("released", "in", `["2023-11-15","2020-01-01"]`), want: p(2)},
		{name: "date not_in", def: cond("released", "not_in", `["2023-11-15"]`), want: p(1, 3, 4, 5)},
		{name: "date neq includes products without the field", def: cond("released", "neq", `"2024-03-01"`), want: p(2, 4, 5)},
		{name: "date exists", def: cond("released", "exists", ``), want: p(1, 2, 3)},
		// array: eq and contains mean "has the element" (exact), as the list filter tags=red
		{name: "array eq has element", def: cond("tags", "eq", `"summer"`), want: p(1, 3)},
		{name: "array contains has element", def: cond("tags", "contains", `"summer"`), want: p(1, 3)},
		{name: "array contains is exact", def: cond("tags", "contains", `"Summer"`), want: p()},
		{name: "array neq", def: cond("tags", "neq", `"summer"`), want: p(2, 4, 5)},
		{name: "array in has any", def: cond("tags", "in", `["sale","winter"]`), want: p(2, 3)},
		{name: "array not_in has none", def: cond("tags", "not_in", `["sale","winter"]`), want: p(1, 4, 5)},
		{name: "array exists counts an empty list", def: cond("tags", "exists", ``), want: p(1, 2, 3, 4)},
		{name: "array not_exists", def: cond("tags", "not_exists", ``), want: p(5)},
		// sku: case-insensitive, as SKU identity is
		{name: "sku eq ignores case", def: cond("sku", "eq", `"ab-1"`), want: p(1)},
		{name: "sku eq upper", def: cond("sku", "eq", `"AB-2X"`), want: p(2)},
		{name: "sku neq", def: cond("sku", "neq", `"ab-1"`), want: p(2, 3, 4, 5)},
		{name: "sku in", def: cond("sku", "in", `["ab-1","cd-3","zz"]`), want: p(1, 3)},
		{name: "sku not_in", def: cond("sku", "not_in", `["ab-1","cd-3"]`), want: p(2, 4, 5)},
		{name: "sku contains", def: cond("sku", "contains", `"AB"`), want: p(1, 2)},
		{name: "sku contains takes _ literally", def: cond("sku", "contains", `"_"`), want: p(4)},
		// name: exact eq, case-insensitive contains
		{name: "name eq", def: cond("name", "eq", `"Red Linen Shirt"`), want: p(1, 5)},
		{name: "name eq is case-sensitive", def: cond("name", "eq", `"red linen shirt"`), want: p()},
		{name: "name neq", def: cond("name", "neq", `"Red Linen Shirt"`), want: p(2, 3, 4)},
		{name: "name in", def: cond("name", "in", `["green hat","Blue Denim Jacket"]`), want: p(2, 4)},
		{name: "name not_in", def: cond("name", "not_in", `["green hat"]`), want: p(1, 2, 3, 5)},
		{name: "name contains ignores case", def: cond("name", "contains", `"LINEN"`), want: p(1, 5)},
		{name: "name contains folds Unicode", def: cond("name", "contains", `"STRAßE"`), want: p(3)},
		// groups and negation
		{name: "AND", def: `{"logic":"AND","conditions":[{"field":"color","operator":"eq","value":"red"},{"field":"price","operator":"lt","value":20}]}`, want: p(1)},
		{name: "OR", def: `{"logic":"OR","conditions":[{"field":"color","operator":"eq","value":"green"},{"field":"tags","operator":"contains","value":"sale"}]}`, want: p(3, 4)},
		{name: "negated top level", def: `{"negate":true,"conditions":[{"field":"color","operator":"eq","value":"red"}]}`, want: p(2, 3, 4, 5)},
		{name: "negated leaf includes products without the field", def: `{"conditions":[{"field":"weight","operator":"gt","value":0.2,"negate":true}]}`, want: p(3, 4, 5)},
		{
			name: "nested group with a negated leaf",
			def: `{"conditions":[{"field":"price","operator":"lt","value":50},
				{"logic":"OR","conditions":[{"field":"active","operator":"eq","value":true},{"field":"stock","operator":"exists","negate":true}]}]}`,
			want: p(1, 3, 4),
		},
		{
			name: "negated nested OR",
			def:  `{"conditions":[{"negate":true,"logic":"OR","conditions":[{"field":"sku","operator":"contains","value":"cd"},{"field":"tags","operator":"eq","value":"winter"}]}]}`,
			want: p(1, 5),
		},
		{name: "nothing matches", def: cond("color", "eq", `"purple"`), want: p()},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			pv := f.preview(a, tt.def)
			if pv.MatchedCount != int64(len(tt.want)) || !slices.Equal(pv.SampleSKUs, tt.want) {
				t.Errorf("preview: %d %v, want %d %v\nsql %s\nparams %v", pv.MatchedCount, pv.SampleSKUs, len(tt.want), tt.want, pv.SQL, pv.Params)
			}
			if pv.Params[0] != a {
				t.Errorf("params[0] = %v, want the tenant %d", pv.Params[0], a)
			}
			seg := f.create(a, fmt.Sprintf("ops %d", i), tt.def)
			res, err := f.svc.Compute(f.ctx, a, seg.ID)
			if err != nil {
				t.Fatalf("compute: %v", err)
			}
			if res.Matched != int64(len(tt.want)) || res.Added != res.Matched || res.Removed != 0 || res.Version != 1 || res.Stale {
				t.Errorf("compute %+v, want %d matched and added", res, len(tt.want))
			}
			members, _ := f.memberSKUs(a, seg.ID, 2)
			if !slices.Equal(members, tt.want) && !(len(members) == 0 && len(tt.want) == 0) {
				t.Errorf("members %v, want %v", members, tt.want)
			}
		})
	}
	// Tenant B's copies never counted: each of A's segments holds only A's products.
	if n := f.count(`SELECT count(*) FROM product_segment_members m JOIN products p ON p.id = m.product_id WHERE m.tenant_id = $1 AND p.tenant_id <> $1`, a); n != 0 {
		t.Errorf("%d members of tenant %d are another tenant's products", n, a)
	}
	if n := f.count(`SELECT count(*) FROM product_segment_members WHERE tenant_id = $1`, b); n != 0 {
		t.Errorf("tenant %d has %d members without segments", b, n)
	}
	// And B's preview sees B's products only.
	if pv := f.preview(b, cond("sku", "contains", `"-"`)); pv.MatchedCount != 4 || strings.Join(pv.SampleSKUs, ",") != "AB-1,ab-2x,CD-3,EF-5" {
		t.Errorf("tenant B preview %d %v", pv.MatchedCount, pv.SampleSKUs)
	}
}
