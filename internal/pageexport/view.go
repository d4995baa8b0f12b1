package pageexport

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
)

// The view is what the HTML and TSX renderers draw: the page's blocks with typed props (only
// the registry's props, links that are not http(s) or a same-site path dropped) and the design
// tokens as safe CSS.

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

// safeURL keeps an absolute http(s) URL or a same-site path; anything else (javascript:, data:,
// protocol-relative) is dropped.
func safeURL(s string) string {
	s = strings.TrimSpace(s)
	l := strings.ToLower(s)
	switch {
	case strings.HasPrefix(l, "https://"), strings.HasPrefix(l, "http://"):
		return s
	case strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "//") && !strings.HasPrefix(s, "/\\"):
		return s
	}
	return ""
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
		bv := blockView{ID: b.ID, Type: b.Type}
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
	fontRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 _-]{0,62}$`)
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
		HeadingFont:     pick(strings.TrimSpace(t.HeadingFont), d.HeadingFont, fontRE),
		BodyFont:        pick(strings.TrimSpace(t.BodyFont), d.BodyFont, fontRE),
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

func quoteFont(f string) string { return `"` + f + `", system-ui, sans-serif` }

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
