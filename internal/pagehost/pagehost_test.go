package pagehost

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
)

func ptr[T any](v T) *T { return &v }

// TestJSONLD: the document escapes "<" (a title cannot end its <script>), gives an Offer only
// with a price and an ISO 4217 currency, and maps the product data's availability.
func TestJSONLD(t *testing.T) {
	d := &page.PublicDoc{TenantSlug: "acme", Page: &page.Page{Slug: "linen", Title: "</script><script>alert(1)</script>"}, Products: []page.PublicProduct{
		{SKU: "A", Name: "priced", Price: ptr(12.5), Currency: "eur", Data: map[string]any{"availability": "out of stock", "url": "https://shop.example/a"}},
		{SKU: "B", Name: "no currency", Price: ptr(3.0), Data: map[string]any{}},
		{SKU: "C", Name: "bad currency", Price: ptr(3.0), Currency: "euro", Data: map[string]any{"url": "javascript:alert(1)"}},
		{SKU: "D", Name: "no price", Currency: "USD", Data: map[string]any{"stock": 4.0}},
		{SKU: "E", Name: "stocked", Price: ptr(1.0), Currency: "USD", ImageURL: ptr("data:x"), Data: map[string]any{"in_stock": true}},
	}}
	raw, err := JSONLD(d, "https://pages.example/p/acme/linen")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "<") {
		t.Fatalf("JSON-LD has a raw <: %s", raw)
	}
	var doc struct {
		Name  string `json:"name"`
		Items []struct {
			Position int `json:"position"`
			Item     struct {
				SKU    string `json:"sku"`
				URL    string `json:"url"`
				Image  string `json:"image"`
				Offers *struct {
					Price        string `json:"price"`
					Currency     string `json:"priceCurrency"`
					Availability string `json:"availability"`
				} `json:"offers"`
			} `json:"item"`
		} `json:"itemListElement"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Name != d.Page.Title || len(doc.Items) != 5 {
		t.Fatalf("%s: %v", raw, err)
	}
	for _, tc := range []struct {
		name, sku, price, currency, availability, url string
	}{
		{"priced", "A", "12.50", "EUR", "https://schema.org/OutOfStock", "https://shop.example/a"},
		{"no currency", "B", "", "", "", ""},
		{"bad currency", "C", "", "", "", ""},
		{"no price", "D", "", "", "", ""},
		{"stocked", "E", "1.00", "USD", "https://schema.org/InStock", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var it = doc.Items[0]
			for i, x := range doc.Items {
				if x.Item.SKU == tc.sku {
					it = x
					if x.Position != i+1 {
						t.Errorf("position %d at %d", x.Position, i)
					}
				}
			}
			if it.Item.URL != tc.url || it.Item.Image != "" {
				t.Errorf("url %q image %q", it.Item.URL, it.Item.Image)
			}
			if tc.price == "" {
				if it.Item.Offers != nil {
					t.Fatalf("offer %+v, want none", it.Item.Offers)
				}
				return
			}
			if o := it.Item.Offers; o == nil || o.Price != tc.price || o.Currency != tc.currency || o.Availability != tc.availability {
				t.Fatalf("offer %+v", it.Item.Offers)
			}
		})
	}
}

// TestHeadScriptCannotBreakOut: whatever JSON the head carries, RenderHTML keeps it inside its
// <script type="application/ld+json"> and it parses back to the same value.
func TestHeadScriptCannotBreakOut(t *testing.T) {
	ld := []byte(`{"name":"</script><script>alert(1)</script>"}`)
	out, err := pageexport.RenderHTML(pageexport.Content{Page: &page.Page{Slug: "x", Title: "t", UpdatedAt: time.Unix(0, 0)},
		Tokens: pageexport.DefaultTokens(), Head: &pageexport.Head{Canonical: "https://pages.example/p/a/x", JSONLD: ld}})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script type="application/ld\+json">(.*?)</script>`).FindSubmatch(out)
	if m == nil || strings.Contains(string(out), "<script>alert(1)") {
		t.Fatalf("head:\n%s", out)
	}
	var v struct{ Name string }
	if err := json.Unmarshal(m[1], &v); err != nil || v.Name != "</script><script>alert(1)</script>" {
		t.Fatalf("JSON-LD %s: %v", m[1], err)
	}
}

func TestTextHelpers(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"link text escapes brackets", linkText("a [b]\n\\c"), `a \[b\] \\c`},
		{"one line", oneLine(" a\n\tb  c "), "a b c"},
		{"short description", describe("  About\nlinen "), "About linen"},
		{"long description cut on a word", describe(strings.Repeat("word ", 100)), strings.TrimSpace(strings.Repeat("word ", 60)) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("%q, want %q", tc.got, tc.want)
			}
		})
	}
}
