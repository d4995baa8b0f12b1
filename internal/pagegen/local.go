package pagegen

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/block"
)

// Ids of the blocks of the local copy: stable, so a regeneration keeps them.
const (
	localHeroID     = "blk_hero"
	localGridID     = "blk_products"
	localFeaturesID = "blk_highlights"
	localDetailsID  = "blk_details"
)

// Data fields the local copy reads, by the names catalogues commonly use (first match wins).
var (
	priceKeys       = []string{"price", "sale_price", "current_price", "amount"}
	currencyKeys    = []string{"currency", "price_currency"}
	descriptionKeys = []string{"short_description", "description", "summary", "subtitle", "tagline"}
	imageKeys       = []string{"image_url", "image", "main_image", "thumbnail", "thumbnail_url", "picture"}
	// skipKeys are fields that are not attributes to list (ids, links, long texts, prices).
	skipKeys = []string{"id", "sku", "name", "title", "url", "link", "slug", "gtin", "ean", "upc", "mpn", "barcode"}
)

const (
	maxHighlights     = 6  // products in the feature list
	maxAttributes     = 4  // attributes summarised in the details section
	maxAttrValues     = 5  // values listed per attribute
	maxAttrValueChars = 40 // longer string values are not attributes
)

// localCopy writes deterministic template copy from the products' own fields: a hero, a product
// grid of every found product, a feature list of the best matches and, when the products share
// attributes, a text section summarising them. It goes through the same checks as a model's
// answer.
func localCopy(req Request) (Copy, error) {
	facts := gather(req.Products)
	names := make([]string, 0, 3)
	for _, p := range req.Products[:min(3, len(req.Products))] {
		if p.Name != "" {
			names = append(names, p.Name)
		}
	}
	n := len(req.Products)

	hero := map[string]any{
		"headline":    clip(capitalize(req.Title), 200),
		"subheadline": clip(subheadline(req.Query, n, names), 500),
	}
	if urlAccepted("#" + localGridID) { // the grid's block id: storefronts render it as the anchor
		hero["cta_label"] = "Shop the selection"
		hero["cta_url"] = "#" + localGridID
	}
	if img := facts.image; img != "" {
		hero["image_url"] = img
	}
	blocks := []block.Block{
		{ID: localHeroID, Type: block.Hero, Props: hero},
		{ID: localGridID, Type: block.ProductGrid, Props: map[string]any{
			"product_skus": toAny(skusOf(req)),
			"columns":      GridColumns,
		}},
	}
	if items := highlights(req.Products); len(items) > 0 {
		blocks = append(blocks, block.Block{ID: localFeaturesID, Type: block.FeatureList, Props: map[string]any{
			"heading": "Top matches",
			"items":   items,
		}})
	}
	if body := details(facts); body != "" {
		blocks = append(blocks, block.Block{ID: localDetailsID, Type: block.TextSection, Props: map[string]any{
			"heading": "At a glance",
			"body":    body,
			"align":   "left",
		}})
	}
	out, err := check(req, intro(req, n, names, facts), blocks)
	if err != nil {
		// The templates are built to pass; a failure here is a bug, reported as such.
		return Copy{}, fmt.Errorf("local page copy: %w", err)
	}
	out.Attempts = 1
	return out, nil
}

func subheadline(query string, n int, names []string) string {
	what := "products"
	if n == 1 {
		what = "product"
	}
	s := fmt.Sprintf("%d %s matching “%s”", n, what, query)
	if len(names) > 0 {
		s += ", including " + joinAnd(names)
	}
	return s + "."
}

func intro(req Request, n int, names []string, f facts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Looking for %s? ", req.Query)
	switch {
	case n == 1 && len(names) == 1:
		fmt.Fprintf(&b, "The %s is the best match in our catalogue.", names[0])
	case len(names) >= 2:
		fmt.Fprintf(&b, "We found %d products that match, led by the %s.", n, joinAnd(names))
	default:
		fmt.Fprintf(&b, "We found %d products that match.", n)
	}
	if f.priceCount > 0 {
		b.WriteString(" ")
		b.WriteString(priceSentence(f))
	}
	if len(f.attrs) > 0 {
		a := f.attrs[0]
		fmt.Fprintf(&b, " Choose by %s: %s.", a.label, joinOr(a.values))
	}
	return clip(b.String(), MaxIntroCopyLength)
}

func priceSentence(f facts) string {
	cur := ""
	if f.currency != "" {
		cur = " " + f.currency
	}
	if f.minPrice == f.maxPrice {
		return "Priced at " + formatPrice(f.minPrice) + cur + "."
	}
	return "Prices run from " + formatPrice(f.minPrice) + " to " + formatPrice(f.maxPrice) + cur + "."
}

// highlights are the feature-list items of the best matches: the name, and the product's
// description or its attributes.
func highlights(products []Product) []any {
	items := make([]any, 0, maxHighlights)
	for _, p := range products {
		if len(items) == maxHighlights {
			break
		}
		if strings.TrimSpace(p.Name) == "" {
			continue
		}
		item := map[string]any{"title": clip(p.Name, 200)}
		if d := describe(p); d != "" {
			item["description"] = clip(d, 1000)
		}
		items = append(items, item)
	}
	return items
}

// describe is a product's description field, else its price and short attributes.
func describe(p Product) string {
	if s := firstString(p.Data, descriptionKeys); s != "" {
		return clip(s, 200)
	}
	var parts []string
	if price, ok := firstNumber(p.Data, priceKeys); ok {
		s := formatPrice(price)
		if c := firstString(p.Data, currencyKeys); c != "" && utf8.RuneCountInString(c) <= 8 {
			s += " " + c
		}
		parts = append(parts, s)
	}
	for _, k := range sortedKeys(p.Data) {
		if len(parts) == 4 {
			break
		}
		if skipAttr(k) {
			continue
		}
		if vals := attrValues(p.Data[k]); len(vals) > 0 {
			parts = append(parts, label(k)+": "+strings.Join(vals[:min(3, len(vals))], ", "))
		}
	}
	return strings.Join(parts, " · ")
}

// details is the text section's body: one line per shared attribute, and the price range.
func details(f facts) string {
	var lines []string
	for _, a := range f.attrs {
		lines = append(lines, capitalize(a.label)+": "+strings.Join(a.values, ", "))
	}
	if f.priceCount > 0 {
		cur := ""
		if f.currency != "" {
			cur = " " + f.currency
		}
		if f.minPrice == f.maxPrice {
			lines = append(lines, "Price: "+formatPrice(f.minPrice)+cur)
		} else {
			lines = append(lines, "Price: "+formatPrice(f.minPrice)+" to "+formatPrice(f.maxPrice)+cur)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return clip(strings.Join(lines, "\n"), 10000)
}

// facts are what the products have in common.
type facts struct {
	attrs              []attr
	priceCount         int
	minPrice, maxPrice float64
	currency           string
	image              string
}

// attr is an attribute shared by several products, with its most frequent values.
type attr struct {
	key, label string
	values     []string
	products   int // products that have it
}

func gather(products []Product) facts {
	var f facts
	currencies := map[string]int{}
	type tally struct {
		products int
		counts   map[string]int
		order    []string // first-seen order of the values, for stable ties
	}
	tallies := map[string]*tally{}
	for _, p := range products {
		if price, ok := firstNumber(p.Data, priceKeys); ok {
			if f.priceCount == 0 || price < f.minPrice {
				f.minPrice = price
			}
			if f.priceCount == 0 || price > f.maxPrice {
				f.maxPrice = price
			}
			f.priceCount++
		}
		if c := firstString(p.Data, currencyKeys); c != "" && utf8.RuneCountInString(c) <= 8 {
			currencies[c]++
		}
		if f.image == "" {
			if img := firstString(p.Data, imageKeys); img != "" && isHTTPURL(img) && urlAccepted(img) {
				f.image = img
			}
		}
		for _, k := range sortedKeys(p.Data) {
			if skipAttr(k) {
				continue
			}
			vals := attrValues(p.Data[k])
			if len(vals) == 0 {
				continue
			}
			t := tallies[k]
			if t == nil {
				t = &tally{counts: map[string]int{}}
				tallies[k] = t
			}
			t.products++
			for _, v := range vals {
				if t.counts[v] == 0 {
					t.order = append(t.order, v)
				}
				t.counts[v]++
			}
		}
	}
	if len(currencies) == 1 {
		for c := range currencies {
			f.currency = c
		}
	}
	// Attributes most products have first; an attribute with one distinct value only when
	// several products share it.
	keys := make([]string, 0, len(tallies))
	for k, t := range tallies {
		if t.products >= 2 || len(products) == 1 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := tallies[b].products - tallies[a].products; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		if len(f.attrs) == maxAttributes {
			break
		}
		t := tallies[k]
		vals := slices.Clone(t.order)
		slices.SortStableFunc(vals, func(a, b string) int { return t.counts[b] - t.counts[a] })
		if len(vals) > maxAttrValues {
			vals = vals[:maxAttrValues]
		}
		f.attrs = append(f.attrs, attr{key: k, label: label(k), values: vals, products: t.products})
	}
	return f
}

// skipAttr says a data field is not an attribute to summarise.
func skipAttr(k string) bool {
	lk := strings.ToLower(k)
	if slices.Contains(skipKeys, lk) || slices.Contains(priceKeys, lk) || slices.Contains(currencyKeys, lk) ||
		slices.Contains(descriptionKeys, lk) || slices.Contains(imageKeys, lk) {
		return true
	}
	return strings.HasSuffix(lk, "_id") || strings.HasSuffix(lk, "_url") || strings.HasSuffix(lk, "_at")
}

// attrValues are a field's short values: a string, the strings of an array, a boolean as
// yes/no; URLs and long texts are not attributes.
func attrValues(v any) []string {
	one := func(s string) (string, bool) {
		s = strings.TrimSpace(s)
		if s == "" || utf8.RuneCountInString(s) > maxAttrValueChars || isHTTPURL(s) || strings.ContainsAny(s, "\n\t") {
			return "", false
		}
		return s, true
	}
	switch t := v.(type) {
	case string:
		if s, ok := one(t); ok {
			return []string{s}
		}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				if s, ok := one(s); ok && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
		return out
	case bool:
		if t {
			return []string{"yes"}
		}
		return []string{"no"}
	}
	return nil
}

func firstString(data map[string]any, keys []string) string {
	for _, k := range keys {
		if s, ok := data[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

func firstNumber(data map[string]any, keys []string) (float64, bool) {
	for _, k := range keys {
		var f float64
		switch n := data[k].(type) {
		case float64:
			f = n
		case float32:
			f = float64(n)
		case int:
			f = float64(n)
		case int64:
			f = float64(n)
		case int32:
			f = float64(n)
		case string:
			v, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
			if err != nil {
				continue
			}
			f = v
		default:
			continue
		}
		if !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 {
			return f, true
		}
	}
	return 0, false
}

func formatPrice(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// urlAccepted says the block registry accepts s as a link.
func urlAccepted(s string) bool {
	return block.ValidateProps("", block.Hero, map[string]any{"headline": "x", "cta_url": s}) == nil
}

// label turns a field name into words: "fit_type" -> "fit type".
func label(k string) string {
	return strings.TrimSpace(strings.Join(strings.FieldsFunc(strings.ToLower(k), func(r rune) bool {
		return r == '_' || r == '-' || r == '.' || unicode.IsSpace(r)
	}), " "))
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

func joinWith(items []string, last string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + last + " " + items[len(items)-1]
}

func joinAnd(items []string) string { return joinWith(items, "and") }
func joinOr(items []string) string  { return joinWith(items, "or") }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
