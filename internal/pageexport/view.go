package pageexport

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/page"
)

// The view is what the HTML and TSX renderers draw: the page's blocks with typed props (only
// the registry's props, links that are not http(s), a same-site path or a fragment dropped),
// each with its block id, which the renderers give its element as its HTML id (so a CTA's
// "#blk_products" lands on that block), and the design tokens as safe CSS.

type heroView struct{ Headline, Subheadline, CTALabel, CTAURL, ImageURL string }

type productView struct{ SKU, Name, Price, ImageURL string }

type gridView struct {
	Columns  int
	Products []productView
}

type textView struct{ Heading, Body, Align string }

type ctaView struct{ Headline, Body, CTALabel, CTAURL string }

type featureItem struct{ Title, Description string }

type featureView struct {
	Heading string
	Items   []featureItem
}

type testimonialView struct{ Quote, Author, Role, AvatarURL string }

// blockView is one block; exactly one of its typed fields is set.
type blockView struct {
	ID, Type    string
	Hero        *heroView
	Grid        *gridView
	Text        *textView
	CTA         *ctaView
	Features    *featureView
	Testimonial *testimonialView
}

type pageView struct {
	Title     string
	Slug      string
	IntroCopy string
	Blocks    []blockView
	Types     []string // the block types used, in registry order
	CSS       string   // tokens as CSS variables, the base styles and the custom CSS
	Tokens    Tokens   // sanitised
	Tracking  Tracking
}

func propString(p map[string]any, name string) string {
	s, _ := p[name].(string)
	return s
}

func propInt(p map[string]any, name string, def int) int {
	switch v := p[name].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case int64:
		return int(v)
	}
	return def
}

// safeURL keeps an absolute http(s) URL, a same-site path or a fragment of the page ("#..."),
// as the block registry allows them; anything else (javascript:, data:, protocol-relative) is
// dropped.
func safeURL(s string) string {
	s = strings.TrimSpace(s)
	l := strings.ToLower(s)
	switch {
	case strings.HasPrefix(l, "https://"), strings.HasPrefix(l, "http://"):
		return s
	case strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//") && !strings.HasPrefix(s, "/\\"):
		return s
	case len(s) > 1 && s[0] == '#' && !strings.ContainsFunc(s, notURLRune):
		return s // a fragment of the page: "#blk_products" lands on that block's element
	}
	return ""
}

// notURLRune is a rune no link of an export carries (the block registry refuses them too).
func notURLRune(r rune) bool {
	return r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError
}

// GridSKUs are the SKUs an export needs products of: the page's and its product grids', each
// once (page.ShownSKUs, as the public read lists them).
func GridSKUs(p *page.Page) []string { return page.ShownSKUs(p.ProductSKUs, p.Blocks) }

func formatPrice(p page.PublicProduct) string {
	if p.Price == nil {
		return ""
	}
	s := strconv.FormatFloat(*p.Price, 'f', 2, 64)
	if p.Currency != "" {
		s += " " + p.Currency
	}
	return s
}

func newView(c Content) pageView {
	products := map[string]productView{}
	for _, p := range c.Products {
		v := productView{SKU: p.SKU, Name: p.Name, Price: formatPrice(p)}
		if p.ImageURL != nil {
			v.ImageURL = safeURL(*p.ImageURL)
		}
		products[strings.ToLower(p.SKU)] = v
	}
	used := map[string]bool{}
	v := pageView{Title: c.Page.Title, Slug: c.Page.Slug, IntroCopy: c.Page.IntroCopy, Tracking: c.Tracking}
	for _, b := range c.Page.Blocks {
		bv := blockView{Type: b.Type}
		if block.CheckID(b.ID) == "" {
			bv.ID = b.ID // letters, digits, _ and -: safe as an HTML id and in a fragment
		}
		p := b.Props
		switch b.Type {
		case block.Hero:
			bv.Hero = &heroView{Headline: propString(p, "headline"), Subheadline: propString(p, "subheadline"),
				CTALabel: propString(p, "cta_label"), CTAURL: safeURL(propString(p, "cta_url")), ImageURL: safeURL(propString(p, "image_url"))}
		case block.ProductGrid:
			g := &gridView{Columns: min(max(propInt(p, "columns", 3), 1), 6), Products: []productView{}}
			list, _ := p["product_skus"].([]any)
			for _, s := range list {
				if sku, ok := s.(string); ok {
					if pv, ok := products[strings.ToLower(sku)]; ok {
						g.Products = append(g.Products, pv)
					}
				}
			}
			bv.Grid = g
		case block.TextSection:
			align := propString(p, "align")
			if align != "center" && align != "right" {
				align = "left"
			}
			bv.Text = &textView{Heading: propString(p, "heading"), Body: propString(p, "body"), Align: align}
		case block.CTABanner:
			bv.CTA = &ctaView{Headline: propString(p, "headline"), Body: propString(p, "body"),
				CTALabel: propString(p, "cta_label"), CTAURL: safeURL(propString(p, "cta_url"))}
		case block.FeatureList:
			f := &featureView{Heading: propString(p, "heading"), Items: []featureItem{}}
			items, _ := p["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					f.Items = append(f.Items, featureItem{Title: propString(m, "title"), Description: propString(m, "description")})
				}
			}
			bv.Features = f
		case block.Testimonial:
			bv.Testimonial = &testimonialView{Quote: propString(p, "quote"), Author: propString(p, "author"),
				Role: propString(p, "role"), AvatarURL: safeURL(propString(p, "avatar_url"))}
		default:
			continue // not in the registry: every stored block was validated, so none should be
		}
		used[b.Type] = true
		v.Blocks = append(v.Blocks, bv)
	}
	for _, t := range block.Types() {
		if used[t] {
			v.Types = append(v.Types, t)
		}
	}
	v.Tokens = sanitizeTokens(c.Tokens)
	v.CSS = pageCSS(v.Tokens)
	return v
}

var (
	hexColorRE = regexp.MustCompile(`^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)
	lengthRE   = regexp.MustCompile(`^(?:0|[0-9]{1,4}(?:\.[0-9]{1,3})?(?:px|rem|em|%))$`)
)

// sanitizeTokens keeps each token that is well formed and takes the default for any other, so
// nothing but a color, a font family name or a length reaches the CSS; custom CSS is kept with
// every "<" escaped, so it cannot close its style element.
func sanitizeTokens(t Tokens) Tokens {
	d := DefaultTokens()
	pick := func(v, def string, re *regexp.Regexp) string {
		if re.MatchString(v) {
			return v
		}
		return def
	}
	out := Tokens{
		PrimaryColor:    pick(t.PrimaryColor, d.PrimaryColor, hexColorRE),
		SecondaryColor:  pick(t.SecondaryColor, d.SecondaryColor, hexColorRE),
		BackgroundColor: pick(t.BackgroundColor, d.BackgroundColor, hexColorRE),
		TextColor:       pick(t.TextColor, d.TextColor, hexColorRE),
		HeadingFont:     pickFont(t.HeadingFont, d.HeadingFont),
		BodyFont:        pickFont(t.BodyFont, d.BodyFont),
		BorderRadius:    pick(strings.TrimSpace(t.BorderRadius), d.BorderRadius, lengthRE),
		SpacingUnit:     t.SpacingUnit,
		CustomCSS:       SafeCSS(t.CustomCSS),
	}
	if out.SpacingUnit < 0 || out.SpacingUnit > 64 {
		out.SpacingUnit = d.SpacingUnit
	}
	return out
}

// SafeCSS makes free-form CSS safe inside a <style> element: "<" becomes the CSS escape "\3c ",
// which means the same character inside CSS strings and is never valid elsewhere in CSS, so no
// "</style" or "<!--" can appear.
func SafeCSS(css string) string {
	css = strings.ToValidUTF8(css, "")
	css = strings.ReplaceAll(css, "\x00", "")
	return strings.ReplaceAll(css, "<", `\3c `)
}

// pageCSS is the stylesheet of an export: the tokens as CSS variables, the base styles of the
// block types, then the tenant's custom CSS.
func pageCSS(t Tokens) string {
	var b strings.Builder
	b.WriteString(":root{")
	for _, kv := range [][2]string{
		{"--cohort-primary", t.PrimaryColor}, {"--cohort-secondary", t.SecondaryColor},
		{"--cohort-background", t.BackgroundColor}, {"--cohort-text", t.TextColor},
		{"--cohort-heading-font", quoteFont(t.HeadingFont)}, {"--cohort-body-font", quoteFont(t.BodyFont)},
		{"--cohort-radius", t.BorderRadius}, {"--cohort-space", strconv.Itoa(t.SpacingUnit) + "px"},
	} {
		b.WriteString(kv[0] + ":" + kv[1] + ";")
	}
	b.WriteString("}\n")
	b.WriteString(baseCSS)
	if t.CustomCSS != "" {
		b.WriteString("\n/* custom_css */\n")
		b.WriteString(t.CustomCSS)
	}
	return b.String()
}

// pickFont keeps a font family name the design system accepts (design.NormalizeFont: letters
// and digits of any script, spaces, hyphens, underscores and periods), else def.
func pickFont(v, def string) string {
	if n, msg := design.NormalizeFont(v); msg == "" {
		return n
	}
	return def
}

// quoteFont is a font-family value: f as a quoted CSS string, then the generic fallbacks. Quotes,
// backslashes, <, > and &, and every character that is not graphic are CSS escapes ("\22 "), so
// the string can end neither itself nor its <style> element; NUL becomes U+FFFD as CSS reads it.
func quoteFont(f string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range f {
		switch {
		case r == 0:
			b.WriteString(`\fffd `)
		case r == '"' || r == '\\' || r == '<' || r == '>' || r == '&' || (r != ' ' && !unicode.IsGraphic(r)):
			fmt.Fprintf(&b, "\\%x ", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(`", system-ui, sans-serif`)
	return b.String()
}

const baseCSS = `*{box-sizing:border-box}
body{margin:0;background:var(--cohort-background);color:var(--cohort-text);font-family:var(--cohort-body-font);line-height:1.5}
h1,h2,h3{font-family:var(--cohort-heading-font);line-height:1.2;margin:0 0 calc(var(--cohort-space)*2)}
img{max-width:100%;height:auto;display:block}
.cohort-page{max-width:1120px;margin:0 auto;padding:calc(var(--cohort-space)*3)}
.cohort-block{margin:0 0 calc(var(--cohort-space)*4);padding:calc(var(--cohort-space)*3);border-radius:var(--cohort-radius)}
.cohort-intro{font-size:1.125rem;margin:0 0 calc(var(--cohort-space)*3)}
.cohort-hero{background:var(--cohort-primary);color:var(--cohort-background)}
.cohort-button{display:inline-block;padding:var(--cohort-space) calc(var(--cohort-space)*2);border-radius:var(--cohort-radius);background:var(--cohort-secondary);color:#fff;text-decoration:none;font-weight:600}
.cohort-grid{display:grid;gap:calc(var(--cohort-space)*2);grid-template-columns:repeat(var(--cohort-columns,3),minmax(0,1fr))}
.cohort-product{border:1px solid rgba(0,0,0,.1);border-radius:var(--cohort-radius);padding:calc(var(--cohort-space)*2)}
.cohort-text p{white-space:pre-line}
.cohort-cta{background:var(--cohort-secondary);color:#fff}
.cohort-features ul{list-style:none;padding:0;display:grid;gap:calc(var(--cohort-space)*2)}
.cohort-testimonial blockquote{margin:0;font-size:1.25rem;font-style:italic}
.cohort-testimonial img{width:48px;height:48px;border-radius:50%}
@media (max-width:640px){.cohort-grid{grid-template-columns:repeat(2,minmax(0,1fr))}}`

// typesUsed reports whether the view has a block of typ.
func (v pageView) uses(typ string) bool { return slices.Contains(v.Types, typ) }
