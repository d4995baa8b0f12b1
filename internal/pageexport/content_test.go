package pageexport

import (
	"time"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
)

// hostile is text that breaks out of every context a careless renderer puts it in: HTML text
// and attributes, a <script> or <style> element, a JS or TS string literal, JSX, comments.
const hostile = `</style></script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">"'` + "`${window.__pwned=3}` \u2028\u2029" + ` {window.__pwned} */ --> <!-- \" & end`

// fullContent is a page with a block of every registry type (and a second product grid), every
// text prop set to s, products whose texts are s too, images served from base.
func fullContent(s, base string) Content {
	img := base + "/img/p.png"
	blocks := []block.Block{
		{ID: "blk_hero", Type: block.Hero, Props: map[string]any{"headline": "Hero " + s, "subheadline": "Sub " + s,
			"cta_label": "Go " + s, "cta_url": "/shop?q=" + s, "image_url": img}},
		{ID: "blk_grid", Type: block.ProductGrid, Props: map[string]any{"product_skus": []any{"SKU-1", "sku-2", "missing"}, "columns": float64(3)}},
		{ID: "blk_text", Type: block.TextSection, Props: map[string]any{"heading": "Heading " + s, "body": "Body line one " + s + "\nline two", "align": "center"}},
		{ID: "blk_cta", Type: block.CTABanner, Props: map[string]any{"headline": "CTA " + s, "body": "CTA body " + s, "cta_label": "Buy " + s, "cta_url": "https://shop.example/buy"}},
		{ID: "blk_feat", Type: block.FeatureList, Props: map[string]any{"heading": "Features " + s, "items": []any{
			map[string]any{"title": "Fast " + s, "description": "Really " + s}, map[string]any{"title": "Cheap"}}}},
		{ID: "blk_quote", Type: block.Testimonial, Props: map[string]any{"quote": "Quote " + s, "author": "Ann " + s, "role": "Buyer " + s, "avatar_url": img}},
	}
	price := 15.5
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return Content{
		Page: &page.Page{ID: 7, Slug: "linen-dresses", Title: "Title " + s, IntroCopy: "Intro " + s,
			ProductSKUs: []string{"SKU-1", "sku-2"}, Blocks: blocks, Status: page.StatusReady, CreatedAt: now, UpdatedAt: now},
		Products: []page.PublicProduct{
			{SKU: "SKU-1", Name: "Dress " + s, Price: &price, Currency: "EUR", ImageURL: &img, Data: map[string]any{"color": s}},
			{SKU: "sku-2", Name: "Skirt " + s, Data: map[string]any{}},
		},
		Tokens: Tokens{PrimaryColor: "#112233", SecondaryColor: "#abc", BackgroundColor: "#ffffff", TextColor: "#000000",
			HeadingFont: "Playfair Display", BodyFont: "Inter", BorderRadius: "6px", SpacingUnit: 8,
			CustomCSS: ".cohort-hero h1{letter-spacing:.02em} /* " + s + " */"},
		Tracking: Tracking{ScriptURL: base + ScriptPath, APIURL: base, PublicKey: "pk_0123456789abcdef_0123456789abcdef0123456789abcdef"},
		At:       now,
	}
}
