package block

import (
	"maps"
	"slices"
)

// Block types.
const (
	Hero        = "hero"
	ProductGrid = "product_grid"
	TextSection = "text_section"
	CTABanner   = "cta_banner"
	FeatureList = "feature_list"
	Testimonial = "testimonial"
)

// Types lists the block types in registry order.
func Types() []string {
	out := make([]string, len(registry))
	for i, e := range registry {
		out[i] = e.Type
	}
	return out
}

func text(required bool, maxLen int, desc string) Prop {
	return Prop{Type: TypeString, Required: required, MaxLength: maxLen, Description: desc}
}

func link(required bool, desc string) Prop {
	return Prop{Type: TypeString, Required: required, Format: FormatURL, MaxLength: MaxURLLength, Description: desc}
}

// registry is the single source of the block types. Registry and Lookup hand out copies, so no
// caller can change it.
var registry = []Entry{
	{
		Type:        Hero,
		Label:       "Hero",
		Description: "The banner that opens a page: a headline, optionally a subheadline, an image and a call-to-action button.",
		PropsSchema: map[string]Prop{
			"headline":    text(true, 200, "The main heading of the page."),
			"subheadline": text(false, 500, "A line under the headline."),
			"cta_label":   text(false, 80, "The text of the call-to-action button."),
			"cta_url":     link(false, "Where the call-to-action button leads."),
			"image_url":   link(false, "The background or side image."),
		},
	},
	{
		Type:        ProductGrid,
		Label:       "Product grid",
		Description: "Catalogue products in a grid, by SKU, in the order given; the storefront shows each product's name, price and image.",
		PropsSchema: map[string]Prop{
			"product_skus": {Type: TypeArray, Required: true, ItemType: TypeString, MaxLength: MaxSKULength, MinItems: 1, MaxItems: 100, UniqueItems: true,
				Description: "The SKUs of the products shown, each once."},
			"columns": {Type: TypeInteger, Default: 3, Min: new(1), Max: new(6),
				Description: "Products per row on a wide screen."},
		},
	},
	{
		Type:        TextSection,
		Label:       "Text section",
		Description: "A section of text with an optional heading. The body is plain text (not HTML); line breaks are kept.",
		PropsSchema: map[string]Prop{
			"heading": text(false, 200, "The heading of the section."),
			"body":    text(true, 10000, "The text of the section."),
			"align":   {Type: TypeString, Default: "left", Enum: []string{"left", "center", "right"}, Description: "Alignment of the text."},
		},
	},
	{
		Type:        CTABanner,
		Label:       "Call-to-action banner",
		Description: "A banner that asks the visitor to act: a headline, optional text and a button.",
		PropsSchema: map[string]Prop{
			"headline":  text(true, 200, "The heading of the banner."),
			"body":      text(false, 2000, "Text under the headline."),
			"cta_label": text(true, 80, "The text of the button."),
			"cta_url":   link(true, "Where the button leads."),
		},
	},
	{
		Type:        FeatureList,
		Label:       "Feature list",
		Description: "A list of features or benefits, each a title and an optional description, with an optional heading.",
		PropsSchema: map[string]Prop{
			"heading": text(false, 200, "The heading above the list."),
			"items": {Type: TypeArray, Required: true, MinItems: 1, MaxItems: 12, Description: "The features, in order.",
				Items: map[string]Prop{
					"title":       text(true, 200, "The feature in a few words."),
					"description": text(false, 1000, "A sentence or two about it."),
				}},
		},
	},
	{
		Type:        Testimonial,
		Label:       "Testimonial",
		Description: "A customer's quote with its author, and optionally the author's role and picture.",
		PropsSchema: map[string]Prop{
			"quote":      text(true, 2000, "What the customer said."),
			"author":     text(true, 200, "Who said it."),
			"role":       text(false, 200, "The author's role or place, for example \"Verified buyer\"."),
			"avatar_url": link(false, "A picture of the author."),
		},
	},
}

// lookup returns the registry's own entry (not a copy).
func lookup(typ string) (*Entry, bool) {
	for i := range registry {
		if registry[i].Type == typ {
			return &registry[i], true
		}
	}
	return nil, false
}

// Registry returns every block type, in a stable order: hero, product_grid, text_section,
// cta_banner, feature_list, testimonial. The result is the caller's to change.
func Registry() []Entry {
	out := make([]Entry, len(registry))
	for i, e := range registry {
		out[i] = cloneEntry(e)
	}
	return out
}

// Lookup returns the registry entry of a block type (a copy).
func Lookup(typ string) (Entry, bool) {
	e, ok := lookup(typ)
	if !ok {
		return Entry{}, false
	}
	return cloneEntry(*e), true
}

func cloneEntry(e Entry) Entry {
	e.PropsSchema = cloneProps(e.PropsSchema)
	return e
}

func cloneProps(m map[string]Prop) map[string]Prop {
	if m == nil {
		return nil
	}
	out := make(map[string]Prop, len(m))
	for k, p := range m {
		p.Enum = slices.Clone(p.Enum)
		p.Items = cloneProps(p.Items)
		if p.Min != nil {
			p.Min = new(*p.Min)
		}
		if p.Max != nil {
			p.Max = new(*p.Max)
		}
		out[k] = p
	}
	return out
}

// propNames lists the names of a props schema, sorted.
func propNames(m map[string]Prop) []string { return slices.Sorted(maps.Keys(m)) }
