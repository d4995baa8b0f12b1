// Package catalog is the tenant's product catalogue (PIM): a typed product schema, products with
// their data validated against it, filters, facets and bulk upserts by case-insensitive SKU.
package catalog

// Field types of a product schema.
const (
	TypeString  = "string"  // short text; facetable
	TypeText    = "text"    // long text (descriptions)
	TypeNumber  = "number"  // any number (decimals)
	TypeInteger = "integer" // whole numbers
	TypeBoolean = "boolean"
	TypeDate    = "date"  // YYYY-MM-DD (RFC 3339 timestamps are accepted and kept)
	TypeURL     = "url"   // absolute http(s) URL
	TypeImage   = "image" // absolute http(s) URL of an image
	TypeArray   = "array" // list of strings; facetable; filters match any element
	TypePrice   = "price" // a number in the schema's default currency
)

// Types lists the field types in the order the API documents them.
var Types = []string{TypeString, TypeText, TypeNumber, TypeInteger, TypeBoolean, TypeDate, TypeURL, TypeImage, TypeArray, TypePrice}

// Field is one entry of a product schema.
type Field struct {
	Name       string `json:"name"`  // snake_case, unique; sku and name are built in
	Label      string `json:"label"` // for people; defaults to the name
	Type       string `json:"type"`
	Required   bool   `json:"required"`
	Facet      bool   `json:"facet"`      // counted by GET /api/pim/facets/ (string and array fields)
	Searchable bool   `json:"searchable"` // part of the text that is embedded for semantic search
	Unit       string `json:"unit,omitempty"`
}
