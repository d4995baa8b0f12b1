package design

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

func TestPatchValidate(t *testing.T) {
	tests := []struct {
		name  string
		in    Patch
		field string // the field error expected; "" when valid
	}{
		{"empty patch", Patch{}, ""},
		{"short hex", Patch{PrimaryColor: new("#FA0")}, ""},
		{"long hex", Patch{TextColor: new(" #1E40af ")}, ""},
		{"hex without #", Patch{PrimaryColor: new("1e40af")}, "primary_color"},
		{"named color", Patch{SecondaryColor: new("red")}, "secondary_color"},
		{"four digits", Patch{BackgroundColor: new("#abcd")}, "background_color"},
		{"css injection in color", Patch{TextColor: new("#fff;}body{x:y")}, "text_color"},
		{"font", Patch{HeadingFont: new("  IBM   Plex Sans ")}, ""},
		{"font with digits", Patch{BodyFont: new("Source Sans 3")}, ""},
		{"font unicode", Patch{BodyFont: new("Noto Sans 日本語")}, ""},
		{"font semicolon", Patch{BodyFont: new("Inter;color:red")}, "body_font"},
		{"font brace", Patch{HeadingFont: new("Inter}")}, "heading_font"},
		{"font angle", Patch{HeadingFont: new("</style>")}, "heading_font"},
		{"font parens", Patch{HeadingFont: new("url(x)")}, "heading_font"},
		{"font quote", Patch{HeadingFont: new(`"Inter"`)}, "heading_font"},
		{"font comma", Patch{HeadingFont: new("Inter, sans-serif")}, "heading_font"},
		{"font blank", Patch{HeadingFont: new("   ")}, "heading_font"},
		{"font too long", Patch{HeadingFont: new(strings.Repeat("a", MaxFontLength+1))}, "heading_font"},
		{"radius zero", Patch{BorderRadius: new("0")}, ""},
		{"radius px", Patch{BorderRadius: new("4px")}, ""},
		{"radius rem", Patch{BorderRadius: new("0.5rem")}, ""},
		{"radius percent", Patch{BorderRadius: new("8%")}, ""},
		{"radius leading dot", Patch{BorderRadius: new(".25em")}, ""},
		{"radius no unit", Patch{BorderRadius: new("4")}, "border_radius"},
		{"radius negative", Patch{BorderRadius: new("-4px")}, "border_radius"},
		{"radius expression", Patch{BorderRadius: new("calc(1px)")}, "border_radius"},
		{"radius injection", Patch{BorderRadius: new("4px;}")}, "border_radius"},
		{"spacing 0", Patch{SpacingUnit: new(0)}, ""},
		{"spacing 64", Patch{SpacingUnit: new(64)}, ""},
		{"spacing 65", Patch{SpacingUnit: new(65)}, "spacing_unit"},
		{"spacing negative", Patch{SpacingUnit: new(-1)}, "spacing_unit"},
		{"css", Patch{CustomCSS: new(".hero > h1 { letter-spacing: -0.02em; }")}, ""},
		{"css at cap", Patch{CustomCSS: new(strings.Repeat("a", MaxCustomCSSBytes))}, ""},
		{"css over cap", Patch{CustomCSS: new(strings.Repeat("a", MaxCustomCSSBytes+1))}, "custom_css"},
		{"css closes style", Patch{CustomCSS: new("a{}</STYLE><script>alert(1)</script>")}, "custom_css"},
		{"css closes style spaced", Patch{CustomCSS: new("a{}</style >")}, "custom_css"},
		{"css comment open", Patch{CustomCSS: new("<!-- a{}")}, "custom_css"},
		{"css comment close", Patch{CustomCSS: new("a{} -->")}, "custom_css"},
		{"css script", Patch{CustomCSS: new("<ScRiPt>")}, "custom_css"},
		{"css NUL", Patch{CustomCSS: new("a{}\x00")}, "custom_css"},
		{"css invalid utf8", Patch{CustomCSS: new("a{}\xff")}, "custom_css"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.in.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tt.field] == "" {
				t.Fatalf("error %v, want a field error on %s", err, tt.field)
			}
			if len(ve.Fields) != 1 {
				t.Errorf("fields %v, want only %s", ve.Fields, tt.field)
			}
		})
	}
}

func TestPatchNormalises(t *testing.T) {
	p, err := Patch{PrimaryColor: new(" #1E40AF"), HeadingFont: new("  IBM   Plex Sans "), BorderRadius: new(" 4px ")}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if *p.PrimaryColor != "#1e40af" || *p.HeadingFont != "IBM Plex Sans" || *p.BorderRadius != "4px" {
		t.Fatalf("normalised %q %q %q", *p.PrimaryColor, *p.HeadingFont, *p.BorderRadius)
	}
}

func TestCSSVariables(t *testing.T) {
	s := Default(1)
	s.PrimaryColor, s.HeadingFont, s.CustomCSS = "#1e40af", "IBM Plex Sans", ".hero{color:red}"
	got := s.CSSVariables()
	want := `:root{--cohort-primary:#1e40af;--cohort-secondary:#f59e0b;--cohort-background:#ffffff;--cohort-text:#111827;` +
		`--cohort-heading-font:"IBM Plex Sans",system-ui,sans-serif;--cohort-body-font:"Inter",system-ui,sans-serif;` +
		`--cohort-border-radius:8px;--cohort-spacing-unit:8px}`
	if got != want {
		t.Fatalf("CSSVariables\n got %s\nwant %s", got, want)
	}
	if sheet := s.StyleSheet(); sheet != want+"\n.hero{color:red}" {
		t.Fatalf("StyleSheet %q", sheet)
	}

	// Values that never passed validation (a row written by hand) cannot inject CSS or HTML.
	bad := System{Tokens: Tokens{PrimaryColor: "red;}</style><script>", HeadingFont: `x";}</style>`, BorderRadius: "1px;}",
		SpacingUnit: 999, CustomCSS: "</style><script>alert(1)</script>"}}
	out := bad.StyleSheet()
	for _, s := range []string{"</style", "<script", "red;", "1px;}", "999"} {
		if strings.Contains(strings.ToLower(out), s) {
			t.Errorf("style sheet %q contains %q", out, s)
		}
	}
	if !strings.Contains(out, "--cohort-primary:#2563eb;") || !strings.Contains(out, `--cohort-heading-font:"Inter"`) {
		t.Errorf("invalid tokens did not fall back to the defaults: %s", out)
	}
}

func TestContrastRatio(t *testing.T) {
	black, white := Color{0, 0, 0}, Color{255, 255, 255}
	if r := ContrastRatio(black, white); r < 20.99 || r > 21.01 {
		t.Errorf("black/white %.3f, want 21", r)
	}
	if r := ContrastRatio(white, white); r != 1 {
		t.Errorf("white/white %.3f, want 1", r)
	}
	// #767676 on white is the classic 4.54:1.
	if r := ContrastRatio(Color{0x76, 0x76, 0x76}, white); r < 4.5 || r > 4.6 {
		t.Errorf("#767676/white %.3f, want 4.54", r)
	}
	c, ok := ParseHex("#FA0")
	if !ok || c != (Color{0xff, 0xaa, 0x00}) || c.Hex() != "#ffaa00" {
		t.Errorf("ParseHex(#FA0) = %v %v", c, ok)
	}
}
