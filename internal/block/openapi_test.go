package block

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// openAPISchema is the part of an OpenAPI schema object the registry is compared with.
type openAPISchema struct {
	Type                 string                   `yaml:"type"`
	Required             []string                 `yaml:"required"`
	Properties           map[string]openAPISchema `yaml:"properties"`
	AdditionalProperties any                      `yaml:"additionalProperties"`
	Items                *openAPISchema           `yaml:"items"`
	Format               string                   `yaml:"format"`
	Enum                 []string                 `yaml:"enum"`
	Default              any                      `yaml:"default"`
	MinLength            int                      `yaml:"minLength"`
	MaxLength            int                      `yaml:"maxLength"`
	MinItems             int                      `yaml:"minItems"`
	MaxItems             int                      `yaml:"maxItems"`
	UniqueItems          bool                     `yaml:"uniqueItems"`
	Minimum              *int                     `yaml:"minimum"`
	Maximum              *int                     `yaml:"maximum"`
}

// propsSchemaName is the name of a block type's props schema in openapi.yaml: cta_banner -> CtaBannerProps.
func propsSchemaName(typ string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(typ, "_") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String() + "Props"
}

// TestOpenAPIMatchesRegistry: the props schemas documented in api/openapi.yaml say what the
// registry checks, so the document cannot drift from the code.
func TestOpenAPIMatchesRegistry(t *testing.T) {
	raw, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]openAPISchema `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Paths["/api/ai-pages/blocks/"]; !ok {
		t.Error("openapi.yaml does not list /api/ai-pages/blocks/")
	}
	blk, ok := doc.Components.Schemas["Block"]
	if !ok {
		t.Fatal("openapi.yaml has no Block schema")
	}
	if got := blk.Properties["type"].Enum; !slices.Equal(got, Types()) {
		t.Errorf("Block.type enum %v, want %v", got, Types())
	}
	if _, ok := doc.Components.Schemas["BlockRegistryEntry"]; !ok {
		t.Error("openapi.yaml has no BlockRegistryEntry schema")
	}
	for _, e := range Registry() {
		name := propsSchemaName(e.Type)
		t.Run(name, func(t *testing.T) {
			s, ok := doc.Components.Schemas[name]
			if !ok {
				t.Fatalf("openapi.yaml has no %s schema", name)
			}
			compareObject(t, name, s, e.PropsSchema)
		})
	}
}

func compareObject(t *testing.T, where string, s openAPISchema, props map[string]Prop) {
	t.Helper()
	if s.Type != "object" || s.AdditionalProperties != false {
		t.Errorf("%s: want type object with additionalProperties false", where)
	}
	var docNames []string
	for n := range s.Properties {
		docNames = append(docNames, n)
	}
	slices.Sort(docNames)
	if !slices.Equal(docNames, propNames(props)) {
		t.Errorf("%s: properties %v, registry %v", where, docNames, propNames(props))
	}
	var req []string
	for _, n := range propNames(props) {
		if props[n].Required {
			req = append(req, n)
		}
	}
	docReq := slices.Clone(s.Required)
	slices.Sort(docReq)
	if !slices.Equal(docReq, req) {
		t.Errorf("%s: required %v, registry %v", where, docReq, req)
	}
	for n, p := range props {
		ds, ok := s.Properties[n]
		if !ok {
			continue
		}
		compareProp(t, where+"."+n, ds, p)
	}
}

func compareProp(t *testing.T, where string, s openAPISchema, p Prop) {
	t.Helper()
	if s.Type != p.Type {
		t.Errorf("%s: type %q, registry %q", where, s.Type, p.Type)
	}
	if s.Format != p.Format {
		t.Errorf("%s: format %q, registry %q", where, s.Format, p.Format)
	}
	if !slices.Equal(s.Enum, p.Enum) {
		t.Errorf("%s: enum %v, registry %v", where, s.Enum, p.Enum)
	}
	if !reflect.DeepEqual(s.Default, p.Default) {
		t.Errorf("%s: default %#v, registry %#v", where, s.Default, p.Default)
	}
	switch p.Type {
	case TypeString:
		wantMin := 0
		if p.Required && p.Enum == nil || p.Format == FormatURL { // a URL is never empty
			wantMin = 1
		}
		if s.MaxLength != p.MaxLength || s.MinLength != wantMin {
			t.Errorf("%s: minLength %d maxLength %d, registry min %d max %d", where, s.MinLength, s.MaxLength, wantMin, p.MaxLength)
		}
	case TypeInteger:
		if !reflect.DeepEqual(s.Minimum, p.Min) || !reflect.DeepEqual(s.Maximum, p.Max) {
			t.Errorf("%s: minimum/maximum differ from the registry", where)
		}
	case TypeArray:
		if s.MinItems != p.MinItems || s.MaxItems != p.MaxItems || s.UniqueItems != p.UniqueItems {
			t.Errorf("%s: minItems %d maxItems %d uniqueItems %v, registry %d %d %v", where, s.MinItems, s.MaxItems, s.UniqueItems, p.MinItems, p.MaxItems, p.UniqueItems)
		}
		if s.Items == nil {
			t.Errorf("%s: no items", where)
			return
		}
		if p.Items != nil {
			compareObject(t, where+"[]", *s.Items, p.Items)
			return
		}
		if s.Items.Type != p.ItemType || s.Items.MaxLength != p.MaxLength || s.Items.MinLength != 1 {
			t.Errorf("%s[]: type %q minLength %d maxLength %d, registry %q 1 %d", where, s.Items.Type, s.Items.MinLength, s.Items.MaxLength, p.ItemType, p.MaxLength)
		}
	}
}
