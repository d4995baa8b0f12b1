package design

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

func sp(s string) *string { return &s }
func ip(n int) *int       { return &n }

func TestPatchValidate(t *testing.T) {
	tests := []struct {
		name  string
		in    Patch
		field string // the field error expected; "" when valid
	}{
		{"empty patch", Patch{}, ""},
		{"short hex", Patch{PrimaryColor: sp("#FA0")}, ""},
		{"long hex", Patch{TextColor: sp(" #1E40af ")}, ""},
		{"hex without #", Patch{PrimaryColor: sp("1e40af")}, "primary_color"},
		{"named color", Patch{SecondaryColor: sp("red")}, "secondary_color"},
		{"four digits", Patch{BackgroundColor: sp("#abcd")}, "background_color"},
		{"css injection in color", Patch{TextColor: sp("#fff;}body{x:y")}, "text_color"},
		{"font", Patch{HeadingFont: sp("  IBM   Plex Sans ")}, ""},
		{"font with digits", Patch{BodyFont: sp("Source Sans 3")}, ""},
		{"font unicode", Patch{BodyFont: sp("Noto Sans 日本語")}, ""},
		{"font semicolon", Patch{BodyFont: sp("Inter;color:red")}, "body_font"},
		{"font brace", Patch{HeadingFont: sp("Inter}")}, "heading_font"},
		{"font angle", Patch{HeadingFont: sp("</style>")}, "heading_font"},
		{"font parens", Patch{HeadingFont: sp("url(x)")}, "heading_font"},
		{"font quote", Patch{HeadingFont: sp(`"Inter"`)}, "heading_font"},
		{"font comma", Patch{HeadingFont: sp("Inter, sans-serif")}, "heading_font"},
		{"font blank", Patch{HeadingFont: sp("   ")}, "heading_font"},
		{"font too long", Patch{HeadingFont: sp(strings.Repeat("a", MaxFontLength+1))}, "heading_font"},
		{"radius zero", Patch{BorderRadius: sp("0")}, ""},
		{"radius px", Patch{BorderRadius: sp("4px")}, ""},
		{"radius rem", Patch{BorderRadius: sp("0.5rem")}, ""},
		{"radius percent", Patch{BorderRadius: sp("8%")}, ""},
		{"radius leading dot", Patch{BorderRadius: sp(".25em")}, ""},
		{"radius no unit", Patch{BorderRadius: sp("4")}, "border_radius"},
		{"radius negative", Patch{BorderRadius: sp("-4px")}, "border_radius"},
		{"radius expression", Patch{BorderRadius: sp("calc(1px)")}, "border_radius"},
		{"radius injection", Patch{BorderRadius: sp("4px;}")}, "border_radius"},
		{"spacing 0", Patch{SpacingUnit: ip(0)}, ""},
		{"spacing 64", Patch{SpacingUnit: ip(64)}, ""},
		{"spacing 65", Patch{SpacingUnit: ip(65)}, "spacing_unit"},
		{"spacing negative", Patch{SpacingUnit: ip(-1)}, "spacing_unit"},
		{"css", Patch{CustomCSS: sp(".hero > h1 { letter-spacing: -0.02em; }")}, ""},
		{"css at cap", Patch{CustomCSS: sp(strings.Repeat("a", MaxCustomCSSBytes))}, ""},
		{"css over cap", Patch{CustomCSS: sp(strings.Repeat("a", MaxCustomCSSBytes+1))}, "custom_css"},
		{"css closes style", Patch{CustomCSS: sp("a{}</STYLE><script>alert(1)</script>")}, "custom_css"},
		{"css closes style spaced", Patch{CustomCSS: sp("a{}</style >")}, "custom_css"},
		{"css comment open", Patch{CustomCSS: sp("<!-- a{}")}, "custom_css"},
		{"css comment close", Patch{CustomCSS: sp("a{} -->")}, "custom_css"},
		{"css script", Patch{CustomCSS: sp("<ScRiPt>")}, "custom_css"},
		{"css NUL", Patch{CustomCSS: sp("a{}\x00")}, "custom_css"},
		{"css invalid utf8", Patch{CustomCSS: sp("a{}\xff")}, "custom_css"},
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
	p, err := Patch{PrimaryColor: sp(" #1E40AF"), HeadingFont: sp("  IBM   Plex Sans "), BorderRadius: sp(" 4px ")}.Validate()
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
