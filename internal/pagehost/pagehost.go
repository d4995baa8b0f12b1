// Package pagehost serves a tenant's published pages to browsers, search engines and AI
// assistants: each page as HTML (the export's renderer, internal/pageexport, with the tenant's
// design system and tracking snippet, plus a <head> with a meta description, canonical URL, Open
// Graph tags and schema.org JSON-LD), and per tenant a sitemap.xml, a robots.txt and an llms.txt.
// Pages are read through internal/page's public cache and counted like its JSON reads.
package pagehost

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
)

// MaxSitemapURLs is the sitemap protocol's limit of URLs in one sitemap file; past it the
// sitemap becomes a sitemap index of sitemap-<n>.xml files.
const MaxSitemapURLs = 50000

// maxDescription bounds a page's meta description.
const maxDescription = 300

// Deps are a Service's dependencies.
type Deps struct {
	Pages  *page.Service
	Design pageexport.DesignSource // optional: without it pages use pageexport.DefaultTokens
	Keys   pageexport.KeySource    // the tracking snippet's public key
	// SitemapURLs is the number of URLs per sitemap file (default MaxSitemapURLs).
	SitemapURLs int
}

// Service renders hosted pages and the per-tenant files.
type Service struct {
	pages       *page.Service
	design      pageexport.DesignSource
	keys        pageexport.KeySource
	sitemapURLs int
}

// New builds the service.
func New(d Deps) *Service {
	if d.SitemapURLs <= 0 || d.SitemapURLs > MaxSitemapURLs {
		d.SitemapURLs = MaxSitemapURLs
	}
	return &Service{pages: d.Pages, design: d.Design, keys: d.Keys, sitemapURLs: d.SitemapURLs}
}

// PageURL is the hosted page's absolute URL under base (the API's public origin).
func PageURL(base, tenantSlug, pageSlug string) string {
	return base + "/p/" + tenantSlug + "/" + pageSlug
}

// Page answers a read of a published page as HTML; base is the public origin its links use. The
// read is counted like a JSON read (not under a page.WithoutCounting context); unknown,
// unpublished and other tenants' pages are not found.
func (s *Service) Page(ctx context.Context, tenantSlug, pageSlug, userAgent, base string) (*page.Rendered, error) {
	return s.pages.PublicRendered(ctx, tenantSlug, pageSlug, userAgent, "html "+base, func(ctx context.Context, d *page.PublicDoc) ([]byte, error) {
		return s.render(ctx, d, base)
	})
}

func (s *Service) render(ctx context.Context, d *page.PublicDoc, base string) ([]byte, error) {
	tokens := pageexport.DefaultTokens()
	if s.design != nil {
		var err error
		if tokens, err = s.design.Tokens(ctx, d.TenantID); err != nil {
			return nil, fmt.Errorf("load design tokens: %w", err)
		}
	}
	key, err := s.keys.PublicKey(ctx, d.TenantID)
	if err != nil {
		return nil, fmt.Errorf("load public key: %w", err)
	}
	canonical := PageURL(base, d.TenantSlug, d.Page.Slug)
	ld, err := JSONLD(d, canonical)
	if err != nil {
		return nil, err
	}
	head := &pageexport.Head{Description: describe(d.Page.IntroCopy), Canonical: canonical, JSONLD: ld}
	for _, p := range d.Products {
		if p.ImageURL != nil && isHTTP(*p.ImageURL) {
			head.Image = *p.ImageURL
			break
		}
	}
	return pageexport.RenderHTML(pageexport.Content{Page: d.Page, Products: d.Products, Tokens: tokens,
		Tracking: pageexport.TrackingFor(base, key), At: d.Page.UpdatedAt, Head: head})
}

// describe is the meta description of a page: its intro copy's text, whitespace collapsed, cut
// on a word.
func describe(intro string) string {
	s := strings.Join(strings.Fields(intro), " ")
	if len(s) <= maxDescription {
		return s
	}
	cut := s[:maxDescription]
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return strings.ToValidUTF8(cut, "") + "…"
}

func isHTTP(u string) bool {
	l := strings.ToLower(strings.TrimSpace(u))
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// schema.org JSON-LD: the page is an ItemList of its products, each a ListItem whose item is a
// Product with an Offer (price and ISO 4217 currency from the catalogue).

type ldList struct {
	Context  string   `json:"@context"`
	Type     string   `json:"@type"`
	Name     string   `json:"name"`
	URL      string   `json:"url"`
	Count    int      `json:"numberOfItems"`
	Elements []ldItem `json:"itemListElement"`
}

type ldItem struct {
	Type     string    `json:"@type"`
	Position int       `json:"position"`
	Item     ldProduct `json:"item"`
}

type ldProduct struct {
	Type   string   `json:"@type"`
	Name   string   `json:"name"`
	SKU    string   `json:"sku"`
	Image  string   `json:"image,omitempty"`
	URL    string   `json:"url,omitempty"`
	Offers *ldOffer `json:"offers,omitempty"`
}

type ldOffer struct {
	Type         string `json:"@type"`
	Price        string `json:"price"`
	Currency     string `json:"priceCurrency"`
	Availability string `json:"availability,omitempty"`
	URL          string `json:"url,omitempty"`
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// JSONLD is the page's schema.org document: an ItemList of its products (in the page's order),
// each a Product with its name, SKU, image and URL when known, and an Offer when the catalogue
// gives a price and an ISO 4217 currency (availability when the product data says).
func JSONLD(d *page.PublicDoc, canonical string) ([]byte, error) {
	list := ldList{Context: "https://schema.org", Type: "ItemList", Name: d.Page.Title, URL: canonical, Elements: []ldItem{}}
	for _, p := range d.Products {
		prod := ldProduct{Type: "Product", Name: p.Name, SKU: p.SKU, URL: productURL(p.Data)}
		if p.ImageURL != nil && isHTTP(*p.ImageURL) {
			prod.Image = *p.ImageURL
		}
		cur := strings.ToUpper(strings.TrimSpace(p.Currency))
		if p.Price != nil && currencyRE.MatchString(cur) {
			prod.Offers = &ldOffer{Type: "Offer", Price: strconv.FormatFloat(*p.Price, 'f', 2, 64), Currency: cur,
				Availability: availability(p.Data), URL: prod.URL}
		}
		list.Elements = append(list.Elements, ldItem{Type: "ListItem", Position: len(list.Elements) + 1, Item: prod})
	}
	list.Count = len(list.Elements)
	b, err := json.Marshal(list) // escapes "<", ">" and "&" in strings
	if err != nil {
		return nil, fmt.Errorf("encode json-ld: %w", err)
	}
	return b, nil
}

// productURL is the product's own page when its data names one (url, product_url or link).
func productURL(data map[string]any) string {
	for _, f := range []string{"url", "product_url", "link"} {
		if s, ok := data[f].(string); ok && isHTTP(s) {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// availability maps the product data's availability, in_stock or stock to a schema.org
// ItemAvailability, or "" when it says nothing.
func availability(data map[string]any) string {
	const base = "https://schema.org/"
	if s, ok := data["availability"].(string); ok {
		switch strings.NewReplacer(" ", "", "_", "", "-", "").Replace(strings.ToLower(s)) {
		case "instock", "available":
			return base + "InStock"
		case "outofstock", "soldout", "unavailable":
			return base + "OutOfStock"
		case "preorder":
			return base + "PreOrder"
		case "backorder":
			return base + "BackOrder"
		}
	}
	if b, ok := data["in_stock"].(bool); ok {
		if b {
			return base + "InStock"
		}
		return base + "OutOfStock"
	}
	if n, ok := data["stock"].(float64); ok {
		if n > 0 {
			return base + "InStock"
		}
		return base + "OutOfStock"
	}
	return ""
}

// Doc is a per-tenant text file and its strong validator.
type Doc struct {
	Body []byte
	ETag string
}

func newDoc(b []byte) *Doc { return &Doc{Body: b, ETag: page.StrongETag(b)} }

func notFound() error { return errs.Coded(errs.ErrNotFound, "not_found", "not found") }

// Sitemap is the tenant's sitemap.xml (part 0) or one part of it (sitemap-<part>.xml). Up to
// SitemapURLs published pages it is one urlset; past that, sitemap.xml is a sitemap index of
// the parts, each a urlset of at most SitemapURLs pages. A part that does not exist is not found.
func (s *Service) Sitemap(ctx context.Context, tenantSlug, base string, part int) (*Doc, error) {
	site, err := s.pages.PublishedSite(ctx, tenantSlug, false)
	if err != nil {
		return nil, err
	}
	n := s.sitemapURLs
	parts := (len(site.Pages) + n - 1) / n
	var b bytes.Buffer
	b.WriteString(xml.Header)
	switch {
	case part == 0 && parts > 1:
		b.WriteString(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
		for i := range parts {
			var last time.Time
			for _, p := range site.Pages[i*n : min((i+1)*n, len(site.Pages))] {
				if p.UpdatedAt.After(last) {
					last = p.UpdatedAt
				}
			}
			b.WriteString("<sitemap><loc>")
			_ = xml.EscapeText(&b, []byte(base+"/p/"+site.Slug+"/sitemap-"+strconv.Itoa(i+1)+".xml"))
			b.WriteString("</loc><lastmod>" + last.UTC().Format(time.RFC3339) + "</lastmod></sitemap>\n")
		}
		b.WriteString("</sitemapindex>\n")
		return newDoc(b.Bytes()), nil
	case part == 0:
		writeURLSet(&b, base, site, site.Pages)
	case part <= parts && parts > 1:
		writeURLSet(&b, base, site, site.Pages[(part-1)*n:min(part*n, len(site.Pages))])
	default:
		return nil, notFound()
	}
	return newDoc(b.Bytes()), nil
}

func writeURLSet(b *bytes.Buffer, base string, site *page.Site, pages []page.SitePage) {
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	// The URLs differ only by the page slug, which is letters, digits and hyphens: the prefix
	// is escaped once.
	var prefix bytes.Buffer
	prefix.WriteString("<url><loc>")
	_ = xml.EscapeText(&prefix, []byte(PageURL(base, site.Slug, "")))
	b.Grow(len(pages) * (prefix.Len() + 64))
	for _, p := range pages {
		b.Write(prefix.Bytes())
		b.WriteString(p.Slug) // a page slug needs no escaping
		b.WriteString("</loc><lastmod>")
		b.Write(p.UpdatedAt.UTC().AppendFormat(b.AvailableBuffer(), time.RFC3339))
		b.WriteString("</lastmod></url>\n")
	}
	b.WriteString("</urlset>\n")
}

// Robots is the tenant's robots.txt: each AI crawler Cohort knows, allowed or (as the tenant's
// setting says) disallowed by name, every other agent allowed, and the sitemap. Its paths are
// the site's root: served for a tenant's own domain, which a CDN maps to /p/<tenant_slug>/.
func (s *Service) Robots(ctx context.Context, tenantSlug, base string) (*Doc, error) {
	site, err := s.pages.PublishedSite(ctx, tenantSlug, false)
	if err != nil {
		return nil, err
	}
	blocked := map[string]bool{}
	for _, c := range site.BlockedCrawlers {
		blocked[c] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: published pages\n\n", oneLine(site.Name))
	for _, c := range page.Crawlers {
		rule := "Allow: /"
		if blocked[c] {
			rule = "Disallow: /"
		}
		fmt.Fprintf(&b, "User-agent: %s\n%s\n\n", c, rule)
	}
	b.WriteString("User-agent: *\nAllow: /\n\n")
	fmt.Fprintf(&b, "Sitemap: %s/p/%s/sitemap.xml\n", base, site.Slug)
	return newDoc([]byte(b.String())), nil
}

// LLMs is the tenant's llms.txt (llmstxt.org): "# <tenant name>", a "> " summary line, and
// "## Pages" listing each published page as "- [title](url): summary".
func (s *Service) LLMs(ctx context.Context, tenantSlug, base string) (*Doc, error) {
	site, err := s.pages.PublishedSite(ctx, tenantSlug, true)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", oneLine(site.Name))
	fmt.Fprintf(&b, "> Product pages published by %s: %d pages, each a curated selection of products with prices.\n\n", oneLine(site.Name), len(site.Pages))
	b.WriteString("## Pages\n\n")
	for _, p := range site.Pages {
		fmt.Fprintf(&b, "- [%s](%s)", linkText(p.Title), PageURL(base, site.Slug, p.Slug))
		if p.Summary != "" {
			fmt.Fprintf(&b, ": %s", oneLine(p.Summary))
		}
		b.WriteString("\n")
	}
	return newDoc([]byte(b.String())), nil
}

// oneLine collapses whitespace (line breaks included) to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

var linkTextEscaper = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`)

// linkText is s as a Markdown link's text: one line, brackets and backslashes escaped.
func linkText(s string) string { return linkTextEscaper.Replace(oneLine(s)) }
