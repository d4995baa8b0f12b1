package block

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

// props is shorthand for a props object.
type props = map[string]any

// fields returns the field errors of a *errs.ValidationError, failing the test on any other error.
func fields(t *testing.T, err error) map[string]string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *errs.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T %v, want *errs.ValidationError", err, err)
	}
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("error %v does not match errs.ErrInvalid", err)
	}
	return ve.Fields
}

// assertFields checks that got has exactly the keys of want, each message containing want's text.
func assertFields(t *testing.T, got, want map[string]string) {
	t.Helper()
	var gk, wk []string
	for k := range got {
		gk = append(gk, k)
	}
	for k := range want {
		wk = append(wk, k)
	}
	slices.Sort(gk)
	slices.Sort(wk)
	if !slices.Equal(gk, wk) {
		t.Fatalf("error fields %q, want %q (errors: %v)", gk, wk, got)
	}
	for k, w := range want {
		if !strings.Contains(got[k], w) {
			t.Errorf("%s: %q, want it to contain %q", k, got[k], w)
		}
	}
}

func hero(p props) Block        { return Block{Type: "hero", Props: p} }
func grid(p props) Block        { return Block{Type: "product_grid", Props: p} }
func textSection(p props) Block { return Block{Type: "text_section", Props: p} }
func banner(p props) Block      { return Block{Type: "cta_banner", Props: p} }
func features(p props) Block    { return Block{Type: "feature_list", Props: p} }
func quote(p props) Block       { return Block{Type: "testimonial", Props: p} }

func okHero() Block { return hero(props{"headline": "Linen dresses"}) }

// heroURL is a hero whose cta_url is u.
func heroURL(u string) []Block { return []Block{hero(props{"headline": "h", "cta_url": u})} }

func skus(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = "SKU-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
	}
	return out
}

func featureItems(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"title": "feature"}
	}
	return out
}

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name   string
		blocks []Block
		want   map[string]string // nil: valid
	}{
		// Valid pages.
		{"no blocks", []Block{}, nil},
		{"nil list", nil, nil},
		{"hero minimal", []Block{okHero()}, nil},
		{"hero full", []Block{hero(props{"headline": "h", "subheadline": "s", "cta_label": "Shop", "cta_url": "https://shop.example/sale?x=1#top", "image_url": "/img/a.jpg"})}, nil},
		{"hero empty optional strings", []Block{hero(props{"headline": "h", "subheadline": "", "cta_label": ""})}, nil},
		{"product_grid minimal", []Block{grid(props{"product_skus": []any{"A-1"}})}, nil},
		{"product_grid columns float64", []Block{grid(props{"product_skus": []any{"A-1", "B-1"}, "columns": 6.0})}, nil},
		{"product_grid columns json.Number", []Block{grid(props{"product_skus": []any{"A"}, "columns": json.Number("1")})}, nil},
		{"product_grid columns json.Number 2.0", []Block{grid(props{"product_skus": []any{"A"}, "columns": json.Number("2.0")})}, nil},
		{"product_grid columns int", []Block{grid(props{"product_skus": []string{"A"}, "columns": 4})}, nil},
		{"product_grid hundred skus", []Block{grid(props{"product_skus": skus(100)})}, nil},
		{"product_grid sku of max bytes", []Block{grid(props{"product_skus": []any{long(255)}})}, nil},
		{"text_section", []Block{textSection(props{"heading": "H", "body": "line one\nline two\ttabbed", "align": "center"})}, nil},
		{"text_section body of max length in runes", []Block{textSection(props{"body": strings.Repeat("é", 10000)})}, nil},
		{"cta_banner", []Block{banner(props{"headline": "h", "body": "b", "cta_label": "Go", "cta_url": "/checkout"})}, nil},
		{"feature_list", []Block{features(props{"heading": "Why", "items": []any{map[string]any{"title": "Soft"}, map[string]any{"title": "Cool", "description": "Breathes"}}})}, nil},
		{"feature_list twelve items", []Block{features(props{"items": featureItems(12)})}, nil},
		{"feature_list items as []map", []Block{features(props{"items": []map[string]any{{"title": "t"}}})}, nil},
		{"testimonial", []Block{quote(props{"quote": "Love it", "author": "Ana", "role": "Buyer", "avatar_url": "https://cdn.example/a.png"})}, nil},
		{"ids given", []Block{{ID: "hero-1", Type: "hero", Props: props{"headline": "h"}}, {ID: "A_b-9", Type: "hero", Props: props{"headline": "h"}}}, nil},
		{"id of max length", []Block{{ID: long(64), Type: "hero", Props: props{"headline": "h"}}}, nil},
		{"hundred blocks", slices.Repeat([]Block{okHero()}, 100), nil},
		{"emoji with joiners", []Block{hero(props{"headline": "👩‍👩‍👧 family \u200d"})}, nil},
		{"url upper-case scheme", heroURL("HTTPS://Shop.Example/x"), nil},
		{"url http with port", heroURL("http://127.0.0.1:8080/p"), nil},
		{"url ipv6 host", heroURL("https://[::1]/p"), nil},
		{"url non-ascii", heroURL("https://例え.jp/パス"), nil},
		{"url root path", heroURL("/"), nil},
		{"url path with query", heroURL("/c/dresses?sort=price&max=80"), nil},
		{"url max length", heroURL("https://a.example/" + long(2048-len("https://a.example/"))), nil},

		// Block type and id.
		{"unknown type", []Block{{Type: "carousel", Props: props{}}}, map[string]string{"blocks[0].type": "must be one of hero, product_grid, text_section, cta_banner, feature_list, testimonial"}},
		{"type case matters", []Block{{Type: "Hero", Props: props{"headline": "h"}}}, map[string]string{"blocks[0].type": "must be one of"}},
		{"missing type", []Block{{Props: props{"headline": "h"}}}, map[string]string{"blocks[0].type": "is required"}},
		{"id with a space", []Block{{ID: "a b", Type: "hero", Props: props{"headline": "h"}}}, map[string]string{"blocks[0].id": "must be 1 to 64 letters, digits, _ or -"}},
		{"id too long", []Block{{ID: long(65), Type: "hero", Props: props{"headline": "h"}}}, map[string]string{"blocks[0].id": "must be 1 to 64"}},
		{"id non-ascii", []Block{{ID: "héro", Type: "hero", Props: props{"headline": "h"}}}, map[string]string{"blocks[0].id": "must be 1 to 64"}},
		{"duplicate id", []Block{{ID: "x", Type: "hero", Props: props{"headline": "h"}}, okHero(), {ID: "x", Type: "hero", Props: props{"headline": "h"}}}, map[string]string{"blocks[2].id": `repeats the id of blocks[0]: "x"`}},
		{"too many blocks", slices.Repeat([]Block{okHero()}, 101), map[string]string{"blocks": "must have at most 100 blocks"}},

		// Props: unknown, required, types.
		{"unknown prop", []Block{hero(props{"headline": "h", "color": "red"})}, map[string]string{"blocks[0].props.color": "is not a prop of hero (cta_label, cta_url, headline, image_url, subheadline)"}},
		{"missing required prop", []Block{hero(props{"subheadline": "s"})}, map[string]string{"blocks[0].props.headline": "is required"}},
		{"nil props", []Block{{Type: "testimonial"}}, map[string]string{"blocks[0].props.quote": "is required", "blocks[0].props.author": "is required"}},
		{"string prop given a number", []Block{hero(props{"headline": 5.0})}, map[string]string{"blocks[0].props.headline": "must be a string"}},
		{"string prop given null", []Block{hero(props{"headline": "h", "subheadline": nil})}, map[string]string{"blocks[0].props.subheadline": "must be a string, not null"}},
		{"string prop given an object", []Block{hero(props{"headline": map[string]any{"text": "h"}})}, map[string]string{"blocks[0].props.headline": "must be a string"}},
		{"required string empty", []Block{hero(props{"headline": ""})}, map[string]string{"blocks[0].props.headline": "must not be empty"}},
		{"required string blank", []Block{hero(props{"headline": " \n\t "})}, map[string]string{"blocks[0].props.headline": "must not be empty"}},
		{"headline too long", []Block{hero(props{"headline": long(201)})}, map[string]string{"blocks[0].props.headline": "must be at most 200 characters"}},
		{"body too long", []Block{textSection(props{"body": long(10001)})}, map[string]string{"blocks[0].props.body": "must be at most 10000 characters"}},
		{"invalid utf-8", []Block{hero(props{"headline": "bad \xff byte"})}, map[string]string{"blocks[0].props.headline": "must be valid UTF-8"}},
		{"nul byte", []Block{hero(props{"headline": "a\x00b"})}, map[string]string{"blocks[0].props.headline": "must not contain control characters other than line feeds and tabs"}},
		{"carriage return", []Block{textSection(props{"body": "a\r\nb"})}, map[string]string{"blocks[0].props.body": "must not contain control characters"}},
		{"C1 control", []Block{textSection(props{"body": "a\u0085b"})}, map[string]string{"blocks[0].props.body": "must not contain control characters"}},
		{"DEL", []Block{quote(props{"quote": "q\x7f", "author": "a"})}, map[string]string{"blocks[0].props.quote": "must not contain control characters"}},
		{"enum value unknown", []Block{textSection(props{"body": "b", "align": "justify"})}, map[string]string{"blocks[0].props.align": "must be one of left, center, right"}},
		{"enum value empty", []Block{textSection(props{"body": "b", "align": ""})}, map[string]string{"blocks[0].props.align": "must be one of left, center, right"}},
		{"enum value case", []Block{textSection(props{"body": "b", "align": "Left"})}, map[string]string{"blocks[0].props.align": "must be one of"}},

		// Integers.
		{"integer with a fraction", []Block{grid(props{"product_skus": []any{"A"}, "columns": 3.5})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}},
		{"integer json.Number fraction", []Block{grid(props{"product_skus": []any{"A"}, "columns": json.Number("3.5")})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}},
		{"integer json.Number huge", []Block{grid(props{"product_skus": []any{"A"}, "columns": json.Number("1e400")})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}},
		{"integer json.Number not a number", []Block{grid(props{"product_skus": []any{"A"}, "columns": json.Number("three")})}, map[string]string{"blocks[0].props.columns": "must be an integer"}},
		{"integer below range", []Block{grid(props{"product_skus": []any{"A"}, "columns": 0.0})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}},
		{"integer above range", []Block{grid(props{"product_skus": []any{"A"}, "columns": 7})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}},
		{"integer given a string", []Block{grid(props{"product_skus": []any{"A"}, "columns": "3"})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}},
		{"integer given a bool", []Block{grid(props{"product_skus": []any{"A"}, "columns": true})}, map[string]string{"blocks[0].props.columns": "must be an integer"}},
		{"integer NaN", []Block{grid(props{"product_skus": []any{"A"}, "columns": math.NaN()})}, map[string]string{"blocks[0].props.columns": "must be an integer"}},
		{"integer infinity", []Block{grid(props{"product_skus": []any{"A"}, "columns": math.Inf(1)})}, map[string]string{"blocks[0].props.columns": "must be an integer"}},
		{"integer null", []Block{grid(props{"product_skus": []any{"A"}, "columns": nil})}, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6, not null"}},

		// Arrays of strings.
		{"product_skus missing", []Block{grid(props{"columns": 3.0})}, map[string]string{"blocks[0].props.product_skus": "is required"}},
		{"product_skus a string", []Block{grid(props{"product_skus": "A,B"})}, map[string]string{"blocks[0].props.product_skus": "must be an array of strings"}},
		{"product_skus empty", []Block{grid(props{"product_skus": []any{}})}, map[string]string{"blocks[0].props.product_skus": "must have 1 to 100 items"}},
		{"product_skus too many", []Block{grid(props{"product_skus": skus(101)})}, map[string]string{"blocks[0].props.product_skus": "must have 1 to 100 items"}},
		{"product_skus element a number", []Block{grid(props{"product_skus": []any{"A", 2.0}})}, map[string]string{"blocks[0].props.product_skus[1]": "must be a string"}},
		{"product_skus element null", []Block{grid(props{"product_skus": []any{nil}})}, map[string]string{"blocks[0].props.product_skus[0]": "must be a string"}},
		{"product_skus element empty", []Block{grid(props{"product_skus": []any{"A", ""}})}, map[string]string{"blocks[0].props.product_skus[1]": "must not be empty"}},
		{"product_skus element too long", []Block{grid(props{"product_skus": []any{long(256)}})}, map[string]string{"blocks[0].props.product_skus[0]": "must be at most 255 bytes"}},
		{"product_skus element control", []Block{grid(props{"product_skus": []any{"A\nB"}})}, map[string]string{"blocks[0].props.product_skus[0]": "must not contain control characters"}},
		{"product_skus element invalid utf-8", []Block{grid(props{"product_skus": []any{"A\xc3"}})}, map[string]string{"blocks[0].props.product_skus[0]": "must be valid UTF-8"}},
		{"product_skus repeated", []Block{grid(props{"product_skus": []any{"A", "B", "A"}})}, map[string]string{"blocks[0].props.product_skus[2]": `repeats blocks[0].props.product_skus[0] (ignoring case): "A"`}},
		{"product_skus repeated in another case", []Block{grid(props{"product_skus": []any{"Äb-1", "äB-1"}})}, map[string]string{"blocks[0].props.product_skus[1]": `repeats blocks[0].props.product_skus[0] (ignoring case): "äB-1"`}},

		// Arrays of objects.
		{"items missing", []Block{features(props{"heading": "h"})}, map[string]string{"blocks[0].props.items": "is required"}},
		{"items empty", []Block{features(props{"items": []any{}})}, map[string]string{"blocks[0].props.items": "must have 1 to 12 items"}},
		{"items too many", []Block{features(props{"items": featureItems(13)})}, map[string]string{"blocks[0].props.items": "must have 1 to 12 items"}},
		{"items an object", []Block{features(props{"items": map[string]any{"title": "t"}})}, map[string]string{"blocks[0].props.items": "must be an array of objects"}},
		{"item a string", []Block{features(props{"items": []any{map[string]any{"title": "t"}, "Soft"}})}, map[string]string{"blocks[0].props.items[1]": "must be an object with description, title"}},
		{"item without title", []Block{features(props{"items": []any{map[string]any{"title": "t"}, map[string]any{"description": "d"}}})}, map[string]string{"blocks[0].props.items[1].title": "is required"}},
		{"item unknown field", []Block{features(props{"items": []any{map[string]any{"title": "t", "icon": "star"}}})}, map[string]string{"blocks[0].props.items[0].icon": "is not a field of an item (description, title)"}},
		{"item title wrong type", []Block{features(props{"items": []any{map[string]any{"title": true}}})}, map[string]string{"blocks[0].props.items[0].title": "must be a string"}},
		{"item description too long", []Block{features(props{"items": []any{map[string]any{"title": "t", "description": long(1001)}}})}, map[string]string{"blocks[0].props.items[0].description": "must be at most 1000 characters"}},

		// URLs.
		{"url javascript", heroURL("javascript:alert(1)"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url javascript upper-case", heroURL("JavaScript:alert(1)"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url data", heroURL("data:text/html,<script>alert(1)</script>"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url ftp", heroURL("ftp://files.example/a"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url mailto", heroURL("mailto:a@example.com"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url protocol-relative", heroURL("//evil.example/x"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url backslash host", heroURL("/\\evil.example"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace, control characters or backslashes"}},
		{"url relative without slash", heroURL("sale/linen"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url fragment only", heroURL("#top"), nil},
		{"url bare hash", heroURL("#"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url without host", heroURL("https://"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url opaque", heroURL("https:shop.example"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url port only", heroURL("http://:80/"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url user info", heroURL("https://shop.example@evil.example/"), map[string]string{"blocks[0].props.cta_url": "must not contain a user name or password"}},
		{"url leading space", heroURL(" https://shop.example/"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace"}},
		{"url inner space", heroURL("https://shop.example/a b"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace"}},
		{"url tab in scheme", heroURL("java\tscript:alert(1)"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace"}},
		{"url newline", heroURL("/a\nb"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace"}},
		{"url no-break space", heroURL("https://shop.example/\u00a0"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace"}},
		{"url zero-width space", heroURL("https://shop.example/\u200b"), map[string]string{"blocks[0].props.cta_url": "must not contain whitespace"}},
		{"url bad escape", heroURL("/a%zz"), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url empty", heroURL(""), map[string]string{"blocks[0].props.cta_url": urlRule}},
		{"url too long", heroURL("https://a.example/" + long(2049-len("https://a.example/"))), map[string]string{"blocks[0].props.cta_url": "must be at most 2048 bytes"}},
		{"url invalid utf-8", heroURL("https://a.example/\xff"), map[string]string{"blocks[0].props.cta_url": "must be valid UTF-8"}},
		{"image_url javascript", []Block{hero(props{"headline": "h", "image_url": "javascript:x"})}, map[string]string{"blocks[0].props.image_url": urlRule}},
		{"avatar_url data", []Block{quote(props{"quote": "q", "author": "a", "avatar_url": "data:image/png;base64,AAAA"})}, map[string]string{"blocks[0].props.avatar_url": urlRule}},
		{"cta_banner without url", []Block{banner(props{"headline": "h", "cta_label": "Go"})}, map[string]string{"blocks[0].props.cta_url": "is required"}},

		// Several errors at once, each under its own block.
		{"errors collected across blocks", []Block{
			{Type: "slider"},
			okHero(),
			hero(props{"headline": 1.0}),
			features(props{"items": []any{map[string]any{"title": "a"}, map[string]any{}}}),
		}, map[string]string{
			"blocks[0].type":                 "must be one of",
			"blocks[2].props.headline":       "must be a string",
			"blocks[3].props.items[1].title": "is required",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Validate("blocks", tc.blocks)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if len(out) != len(tc.blocks) {
					t.Fatalf("%d blocks out of %d", len(out), len(tc.blocks))
				}
				return
			}
			if out != nil {
				t.Errorf("Validate returned blocks with an error: %v", out)
			}
			assertFields(t, fields(t, err), tc.want)
		})
	}
}

// TestValidateErrorCap: a page with many errors reports a bounded, stable set of them.
func TestValidateErrorCap(t *testing.T) {
	blocks := make([]Block, 100)
	for i := range blocks {
		blocks[i] = hero(props{"headline": 1.0, "color": "red"})
	}
	_, err1 := Validate("blocks", blocks)
	_, err2 := Validate("blocks", blocks)
	f1, f2 := fields(t, err1), fields(t, err2)
	if len(f1) != maxErrors {
		t.Fatalf("%d field errors, want %d", len(f1), maxErrors)
	}
	if !reflect.DeepEqual(f1, f2) {
		t.Fatal("two runs reported different errors")
	}
	if _, ok := f1["blocks[0].props.color"]; !ok {
		t.Fatalf("the first block's errors are not among those kept: %v", f1)
	}
	if !strings.Contains(err1.Error(), "only the first 50 errors are listed") {
		t.Errorf("message %q does not say errors were left out", err1.Error())
	}
}

func TestValidateAssignsIDs(t *testing.T) {
	in := []Block{{ID: "keep", Type: "hero", Props: props{"headline": "h"}}, okHero(), okHero()}
	out, err := Validate("blocks", in)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].ID != "keep" {
		t.Errorf("given id changed to %q", out[0].ID)
	}
	if !idRE.MatchString(out[1].ID) || !idRE.MatchString(out[2].ID) || out[1].ID == out[2].ID {
		t.Errorf("assigned ids %q, %q", out[1].ID, out[2].ID)
	}
	if in[1].ID != "" {
		t.Error("Validate changed its input")
	}
	// Validating the result again keeps every id.
	again, err := Validate("blocks", out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, out) {
		t.Errorf("second Validate changed the blocks:\n%v\n%v", out, again)
	}
}

// TestValidateNormalises: the result has JSON shapes, is a deep copy and gets no defaults.
func TestValidateNormalises(t *testing.T) {
	items := []any{map[string]any{"title": "a"}}
	skuList := []string{"A", "B"}
	in := []Block{
		{ID: "g", Type: "product_grid", Props: props{"product_skus": skuList, "columns": 4}},
		{ID: "g2", Type: "product_grid", Props: props{"product_skus": []any{"C"}, "columns": json.Number("2.0")}},
		{ID: "g3", Type: "product_grid", Props: props{"product_skus": []any{"D"}}},
		{ID: "f", Type: "feature_list", Props: props{"items": items}},
		{ID: "t", Type: "text_section", Props: props{"body": "b"}},
	}
	out, err := Validate("blocks", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{ID: "g", Type: "product_grid", Props: props{"product_skus": []any{"A", "B"}, "columns": 4.0}},
		{ID: "g2", Type: "product_grid", Props: props{"product_skus": []any{"C"}, "columns": 2.0}},
		{ID: "g3", Type: "product_grid", Props: props{"product_skus": []any{"D"}}},
		{ID: "f", Type: "feature_list", Props: props{"items": []any{map[string]any{"title": "a"}}}},
		{ID: "t", Type: "text_section", Props: props{"body": "b"}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("Validate:\n got %#v\nwant %#v", out, want)
	}
	// Deep copy: changing the result leaves the input alone, and the other way round.
	out[3].Props["items"].([]any)[0].(map[string]any)["title"] = "changed"
	out[0].Props["product_skus"].([]any)[0] = "changed"
	if items[0].(map[string]any)["title"] != "a" || skuList[0] != "A" {
		t.Fatal("the result shares values with the input")
	}
	// The result survives a JSON round trip unchanged.
	out, _ = Validate("blocks", in)
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var decoded []Block
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decoded, out) {
		t.Fatalf("JSON round trip changed the blocks:\n%#v\n%#v", out, decoded)
	}
}

func TestValidateOne(t *testing.T) {
	cases := []struct {
		name string
		path string
		b    Block
		want map[string]string
	}{
		{"valid", "blocks[3]", okHero(), nil},
		{"missing prop under a path", "blocks[3]", hero(props{}), map[string]string{"blocks[3].props.headline": "is required"}},
		{"missing prop without a path", "", hero(props{}), map[string]string{"props.headline": "is required"}},
		{"unknown type", "block", Block{Type: "x"}, map[string]string{"block.type": "must be one of"}},
		{"unknown type without a path", "", Block{Type: "x"}, map[string]string{"type": "must be one of"}},
		{"bad id", "blocks[1]", Block{ID: "a/b", Type: "hero", Props: props{"headline": "h"}}, map[string]string{"blocks[1].id": "must be 1 to 64"}},
		{"bad id and props", "blocks[1]", Block{ID: "a/b", Type: "hero", Props: props{"x": 1.0}}, map[string]string{"blocks[1].id": "must be 1 to 64", "blocks[1].props.x": "is not a prop of hero", "blocks[1].props.headline": "is required"}},
		{"nested item", "blocks[3]", features(props{"items": []any{map[string]any{"title": "a"}, map[string]any{"title": ""}}}), map[string]string{"blocks[3].props.items[1].title": "must not be empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ValidateOne(tc.path, tc.b)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !idRE.MatchString(out.ID) {
					t.Errorf("id %q", out.ID)
				}
				return
			}
			assertFields(t, fields(t, err), tc.want)
		})
	}
	out, err := ValidateOne("b", Block{ID: "mine", Type: "hero", Props: props{"headline": "h"}})
	if err != nil || out.ID != "mine" {
		t.Fatalf("ValidateOne kept id %q: %v", out.ID, err)
	}
}

func TestValidateProps(t *testing.T) {
	cases := []struct {
		name  string
		path  string
		typ   string
		props map[string]any
		want  map[string]string
	}{
		{"valid", "blocks[2].props", "hero", props{"headline": "h"}, nil},
		{"missing under a path", "blocks[2].props", "hero", props{}, map[string]string{"blocks[2].props.headline": "is required"}},
		{"missing without a path", "", "hero", nil, map[string]string{"headline": "is required"}},
		{"unknown prop", "props", "cta_banner", props{"headline": "h", "cta_label": "l", "cta_url": "/x", "image_url": "/i"}, map[string]string{"props.image_url": "is not a prop of cta_banner (body, cta_label, cta_url, headline)"}},
		{"item path", "p", "feature_list", props{"items": []any{map[string]any{"title": 1.0}}}, map[string]string{"p.items[0].title": "must be a string"}},
		{"unknown type under a path", "blocks[2].props", "nope", props{}, map[string]string{"blocks[2].props": "must be one of"}},
		{"unknown type without a path", "", "nope", props{}, map[string]string{"type": "must be one of"}},
		{"empty type", "", "", props{}, map[string]string{"type": "is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateProps(tc.path, tc.typ, tc.props)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			assertFields(t, fields(t, err), tc.want)
		})
	}
}

func TestParseBlocks(t *testing.T) {
	hundredAndOne := "[" + strings.TrimSuffix(strings.Repeat(`{"type":"hero","props":{"headline":"h"}},`, 101), ",") + "]"
	cases := []struct {
		name     string
		raw      string
		want     map[string]string // nil: parses
		wantCode string            // "" means the default code
	}{
		{"empty array", `[]`, nil, ""},
		{"blocks", ` [{"id":"a","type":"hero","props":{"headline":"h"}}, {"type":"product_grid","props":{"product_skus":["A"],"columns":3}}] `, nil, ""},
		{"props missing", `[{"type":"hero"}]`, nil, ""},
		{"empty id", `[{"id":"","type":"hero","props":{}}]`, nil, ""},
		{"empty input", ``, map[string]string{"blocks": "is required"}, ""},
		{"whitespace only", " \n", map[string]string{"blocks": "is required"}, ""},
		{"null", `null`, map[string]string{"blocks": "must be an array of blocks, not null"}, ""},
		{"object", `{"type":"hero"}`, map[string]string{"blocks": "must be an array of blocks"}, ""},
		{"string", `"hero"`, map[string]string{"blocks": "must be an array of blocks"}, ""},
		{"number", `1`, map[string]string{"blocks": "must be an array of blocks"}, ""},
		{"element a number", `[1]`, map[string]string{"blocks[0]": "must be a block object"}, ""},
		{"element null", `[{"type":"hero","props":{"headline":"h"}}, null]`, map[string]string{"blocks[1]": "must be a block object, not null"}, ""},
		{"element an array", `[[]]`, map[string]string{"blocks[0]": "must be a block object"}, ""},
		{"unknown block key", `[{"type":"hero","props":{"headline":"h"},"color":"red"}]`, map[string]string{"blocks[0].color": "is not a field of a block (id, type, props)"}, ""},
		{"id a number", `[{"id":5,"type":"hero","props":{}}]`, map[string]string{"blocks[0].id": "must be a string"}, ""},
		{"id null", `[{"id":null,"type":"hero","props":{}}]`, map[string]string{"blocks[0].id": "must be a string"}, ""},
		{"type null", `[{"type":null}]`, map[string]string{"blocks[0].type": "must be a string"}, ""},
		{"type an object", `[{"type":{"name":"hero"}}]`, map[string]string{"blocks[0].type": "must be a string"}, ""},
		{"props null", `[{"type":"hero","props":null}]`, map[string]string{"blocks[0].props": "must be an object, not null"}, ""},
		{"props an array", `[{"type":"hero","props":[]}]`, map[string]string{"blocks[0].props": "must be an object"}, ""},
		{"props a string", `[{"type":"hero","props":"headline"}]`, map[string]string{"blocks[0].props": "must be an object"}, ""},
		{"several shape errors", `[{"type":1}, {"type":"hero","x":1,"props":[]}]`, map[string]string{"blocks[0].type": "must be a string", "blocks[1].x": "is not a field", "blocks[1].props": "must be an object"}, ""},
		{"too many blocks", hundredAndOne, map[string]string{"blocks": "must have at most 100 blocks"}, ""},
		{"truncated", `[{"type":"hero"`, map[string]string{"blocks": "is not valid JSON"}, "invalid_json"},
		{"unclosed array", `[`, map[string]string{"blocks": "is not valid JSON"}, "invalid_json"},
		{"syntax error", `[{"type":hero}]`, map[string]string{"blocks": "is not valid JSON"}, "invalid_json"},
		{"trailing comma", `[{"type":"hero"},]`, map[string]string{"blocks": "is not valid JSON"}, "invalid_json"},
		{"data after the array", `[] []`, map[string]string{"blocks": "must be one JSON array"}, "invalid_json"},
		{"garbage after the array", `[]x`, map[string]string{"blocks": "must be one JSON array"}, "invalid_json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseBlocks([]byte(tc.raw))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if out == nil {
					t.Fatal("nil blocks for a valid array")
				}
				return
			}
			assertFields(t, fields(t, err), tc.want)
			var ve *errs.ValidationError
			errors.As(err, &ve)
			if ve.Code != tc.wantCode {
				t.Errorf("code %q, want %q", ve.Code, tc.wantCode)
			}
		})
	}
}

// TestParseThenValidate: numbers stay exact through ParseBlocks and come out of Validate as
// float64; a missing props object reads as empty.
func TestParseThenValidate(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want map[string]string
		cols any // the normalised columns of the first block, when valid
	}{
		{"integral float", `[{"type":"product_grid","props":{"product_skus":["A"],"columns":3.0}}]`, nil, 3.0},
		{"exponent", `[{"type":"product_grid","props":{"product_skus":["A"],"columns":2e0}}]`, nil, 2.0},
		{"fraction", `[{"type":"product_grid","props":{"product_skus":["A"],"columns":3.5}}]`, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}, nil},
		{"beyond float64", `[{"type":"product_grid","props":{"product_skus":["A"],"columns":1e400}}]`, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}, nil},
		{"beyond int64", `[{"type":"product_grid","props":{"product_skus":["A"],"columns":99999999999999999999}}]`, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}, nil},
		{"negative zero", `[{"type":"product_grid","props":{"product_skus":["A"],"columns":-0}}]`, map[string]string{"blocks[0].props.columns": "must be an integer from 1 to 6"}, nil},
		{"props missing", `[{"type":"hero"}]`, map[string]string{"blocks[0].props.headline": "is required"}, nil},
		{"brief example", `[{"type":"hero","props":{"headline":"h"}},{"id":"dup","type":"hero","props":{"headline":"h"}},{"type":"hero","props":{}},{"id":"dup","type":"feature_list","props":{"items":[{"title":"a"},{"title":"b","x":1}]}}]`,
			map[string]string{"blocks[2].props.headline": "is required", "blocks[3].id": "repeats the id of blocks[1]", "blocks[3].props.items[1].x": "is not a field of an item"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blocks, err := ParseBlocks([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Validate("blocks", blocks)
			if tc.want != nil {
				assertFields(t, fields(t, err), tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out[0].Props["columns"]; got != tc.cols {
				t.Errorf("columns %#v, want %#v", got, tc.cols)
			}
		})
	}
}

func TestParseBlocksAtPath(t *testing.T) {
	_, err := ParseBlocksAt("template.blocks", []byte(`[{"type":"hero","extra":1}]`))
	assertFields(t, fields(t, err), map[string]string{"template.blocks[0].extra": "is not a field of a block"})
	_, err = ParseBlocksAt("", []byte(`null`))
	assertFields(t, fields(t, err), map[string]string{"blocks": "not null"})
}

func TestValidateEmptyPath(t *testing.T) {
	_, err := Validate("", []Block{okHero(), {Type: "x"}})
	assertFields(t, fields(t, err), map[string]string{"blocks[1].type": "must be one of"})
	_, err = Validate("", slices.Repeat([]Block{okHero()}, 101))
	assertFields(t, fields(t, err), map[string]string{"blocks": "at most 100"})
	_, err = Validate("page.blocks", []Block{{ID: "a"}, {ID: "a", Type: "hero", Props: props{"headline": "h"}}})
	assertFields(t, fields(t, err), map[string]string{"page.blocks[0].type": "is required", "page.blocks[1].id": "repeats the id of page.blocks[0]"})
}
