package block

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"testing"
)

func TestRegistryOrderAndTypes(t *testing.T) {
	want := []string{"hero", "product_grid", "text_section", "cta_banner", "feature_list", "testimonial"}
	var got []string
	for _, e := range Registry() {
		got = append(got, e.Type)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Registry() types %v, want %v", got, want)
	}
	if !slices.Equal(Types(), want) {
		t.Fatalf("Types() %v, want %v", Types(), want)
	}
}

// TestRegistrySpecProps: hero and product_grid have exactly the props api/openapi.yaml lists, with
// their types, required flags and default.
func TestRegistrySpecProps(t *testing.T) {
	type spec struct {
		typ      string
		required bool
		def      any
	}
	cases := []struct {
		name  string
		props map[string]spec
	}{
		{"hero", map[string]spec{
			"headline":    {"string", true, nil},
			"subheadline": {"string", false, nil},
			"cta_label":   {"string", false, nil},
			"cta_url":     {"string", false, nil},
			"image_url":   {"string", false, nil},
		}},
		{"product_grid", map[string]spec{
			"product_skus": {"array", true, nil},
			"columns":      {"integer", false, 3},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := Lookup(tc.name)
			if !ok {
				t.Fatalf("Lookup(%q) not found", tc.name)
			}
			got := map[string]spec{}
			for name, p := range e.PropsSchema {
				got[name] = spec{p.Type, p.Required, p.Default}
			}
			if !reflect.DeepEqual(got, tc.props) {
				t.Fatalf("props of %s:\n got %v\nwant %v", tc.name, got, tc.props)
			}
		})
	}
}

// TestRegistryIssueProps: the four other types have the props api/openapi.yaml names.
func TestRegistryIssueProps(t *testing.T) {
	cases := []struct {
		name     string
		props    []string
		required []string
	}{
		{"text_section", []string{"align", "body", "heading"}, []string{"body"}},
		{"cta_banner", []string{"body", "cta_label", "cta_url", "headline"}, []string{"cta_label", "cta_url", "headline"}},
		{"feature_list", []string{"heading", "items"}, []string{"items"}},
		{"testimonial", []string{"author", "avatar_url", "quote", "role"}, []string{"author", "quote"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := Lookup(tc.name)
			if !ok {
				t.Fatalf("Lookup(%q) not found", tc.name)
			}
			var req []string
			for _, n := range propNames(e.PropsSchema) {
				if e.PropsSchema[n].Required {
					req = append(req, n)
				}
			}
			if got := propNames(e.PropsSchema); !slices.Equal(got, tc.props) {
				t.Errorf("props %v, want %v", got, tc.props)
			}
			if !slices.Equal(req, tc.required) {
				t.Errorf("required %v, want %v", req, tc.required)
			}
		})
	}
	fl, _ := Lookup("feature_list")
	items := fl.PropsSchema["items"]
	if items.MinItems != 1 || items.MaxItems != 12 || !items.Items["title"].Required || items.Items["description"].Required {
		t.Errorf("feature_list.items: %+v", items)
	}
	ts, _ := Lookup("text_section")
	if al := ts.PropsSchema["align"]; al.Default != "left" || !slices.Equal(al.Enum, []string{"left", "center", "right"}) {
		t.Errorf("text_section.align: %+v", al)
	}
}

// TestRegistryWellFormed: every entry reads well in a builder UI and every prop is one the
// validator knows how to check.
func TestRegistryWellFormed(t *testing.T) {
	urlProps := map[string]bool{"cta_url": true, "image_url": true, "avatar_url": true}
	var checkProp func(t *testing.T, where string, p Prop)
	checkProp = func(t *testing.T, where string, p Prop) {
		if p.Description == "" {
			t.Errorf("%s has no description", where)
		}
		switch p.Type {
		case TypeString:
			if p.MaxLength <= 0 && p.Enum == nil {
				t.Errorf("%s: a string without a max length", where)
			}
		case TypeInteger:
			if p.Min == nil || p.Max == nil {
				t.Errorf("%s: an integer without a range", where)
			}
		case TypeArray:
			if p.ItemType != "" && p.ItemType != TypeString {
				t.Errorf("%s: item_type %q: the validator checks arrays of strings only", where, p.ItemType)
			}
			if (p.Items == nil) == (p.ItemType == "") {
				t.Errorf("%s: an array needs exactly one of items and item_type", where)
			}
			if p.MaxItems <= 0 {
				t.Errorf("%s: an array without max_items", where)
			}
			for n, ip := range p.Items {
				checkProp(t, where+"."+n, ip)
			}
		default:
			t.Errorf("%s: type %q", where, p.Type)
		}
		if p.Default != nil {
			c := newCollector()
			if _, ok := checkValue(c, where, p, p.Default); !ok {
				t.Errorf("%s: default %v does not validate: %v", where, p.Default, c.err())
			}
		}
	}
	for _, e := range Registry() {
		if e.Label == "" || e.Description == "" {
			t.Errorf("%s: label %q, description %q", e.Type, e.Label, e.Description)
		}
		for n, p := range e.PropsSchema {
			where := e.Type + "." + n
			checkProp(t, where, p)
			if urlProps[n] != (p.Format == FormatURL) {
				t.Errorf("%s: format %q", where, p.Format)
			}
		}
	}
}

func TestRegistryCopies(t *testing.T) {
	r := Registry()
	r[0].Type = "changed"
	r[1].PropsSchema["columns"] = Prop{Type: "boolean"}
	e, _ := Lookup("text_section")
	e.PropsSchema["align"].Enum[0] = "changed"
	g, _ := Lookup("product_grid")
	*g.PropsSchema["columns"].Max = 100

	again := Registry()
	if again[0].Type != "hero" || again[1].PropsSchema["columns"].Type != "integer" || *again[1].PropsSchema["columns"].Max != 6 {
		t.Fatalf("the registry changed through a copy: %+v", again[1].PropsSchema["columns"])
	}
	if ts, _ := Lookup("text_section"); ts.PropsSchema["align"].Enum[0] != "left" {
		t.Fatal("the registry's enum changed through a copy")
	}
	if _, ok := Lookup("nope"); ok {
		t.Fatal("Lookup of an unknown type found one")
	}
	if _, ok := Lookup(""); ok {
		t.Fatal("Lookup of the empty type found one")
	}
}

// TestRegistryJSON: the wire shape of GET /api/ai-pages/blocks/.
func TestRegistryJSON(t *testing.T) {
	raw, err := json.Marshal(Registry())
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Type        string                    `json:"type"`
		Label       string                    `json:"label"`
		Description string                    `json:"description"`
		PropsSchema map[string]map[string]any `json:"props_schema"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got[1].Type != "product_grid" {
		t.Fatalf("decoded %+v", got)
	}
	cols := got[1].PropsSchema["columns"]
	want := map[string]any{"type": "integer", "required": false, "default": 3.0, "minimum": 1.0, "maximum": 6.0,
		"description": cols["description"]}
	if !reflect.DeepEqual(cols, want) {
		t.Errorf("product_grid.columns = %v, want %v", cols, want)
	}
	head := got[0].PropsSchema["headline"]
	if head["type"] != "string" || head["required"] != true || head["max_length"] != 200.0 {
		t.Errorf("hero.headline = %v", head)
	}
	if _, has := head["default"]; has {
		t.Errorf("hero.headline has a default: %v", head)
	}
	if sub := got[0].PropsSchema["subheadline"]; sub["required"] != false {
		t.Errorf("hero.subheadline: required must be present and false: %v", sub)
	}
	items := got[4].PropsSchema["items"]["items"].(map[string]any)
	if title := items["title"].(map[string]any); title["required"] != true || title["type"] != "string" {
		t.Errorf("feature_list.items.title = %v", title)
	}
}

var idRE = regexp.MustCompile(`^blk_[a-z2-7]{12}$`)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := NewID()
		if !idRE.MatchString(id) {
			t.Fatalf("NewID() = %q", id)
		}
		if msg := CheckID(id); msg != "" {
			t.Fatalf("NewID() = %q is not a valid id: %s", id, msg)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}
