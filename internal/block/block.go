// Package block is the block registry of generated pages: the block types a page is made of,
// the props each type takes, and the one validator every write of blocks goes through (page
// PATCH, generation output, templates, the build agent). Nothing else decides what a valid
// block is.
package block

import (
	"crypto/rand"
	"encoding/base32"
)

// Block is one block of a page: a stable id, a registered type and its props.
type Block struct {
	ID    string         `json:"id"`
	Type  string         `json:"type"`
	Props map[string]any `json:"props"`
}

// Prop types of a props schema.
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeArray   = "array"
)

// FormatURL marks a string prop that holds a link: an absolute http(s) URL with a host, or a path
// on the same site starting with "/".
const FormatURL = "url"

// Prop describes one prop of a block type (or one field of an array item).
type Prop struct {
	Type        string          `json:"type"`
	Required    bool            `json:"required"`
	Default     any             `json:"default,omitempty"`
	Description string          `json:"description,omitempty"`
	Format      string          `json:"format,omitempty"`     // FormatURL for links
	Enum        []string        `json:"enum,omitempty"`       // the allowed values of a string prop
	Items       map[string]Prop `json:"items,omitempty"`      // the fields of each element of an array of objects
	ItemType    string          `json:"item_type,omitempty"`  // the type of each element of an array of scalars
	MaxLength   int             `json:"max_length,omitempty"` // strings: characters; elements of an array of strings: bytes
	MinItems    int             `json:"min_items,omitempty"`
	MaxItems    int             `json:"max_items,omitempty"`
	UniqueItems bool            `json:"unique_items,omitempty"` // strings compare ignoring case, as SKUs do
	Min         *int            `json:"minimum,omitempty"`      // integers
	Max         *int            `json:"maximum,omitempty"`      // integers
}

// Entry is one block type of the registry, as GET /api/ai-pages/blocks/ lists it.
type Entry struct {
	Type        string          `json:"type"`
	Label       string          `json:"label"`
	Description string          `json:"description"`
	PropsSchema map[string]Prop `json:"props_schema"`
}

// Limits of a page's blocks.
const (
	MaxBlocks    = 100  // blocks per page
	MaxIDLength  = 64   // characters of a block id
	MaxURLLength = 2048 // bytes of a URL prop
	MaxSKULength = 255  // bytes of a product SKU, as the catalogue allows
	maxErrors    = 50   // field errors reported at most
)

// idPrefix starts every id NewID makes.
const idPrefix = "blk_"

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a new random block id: "blk_" and twelve lower-case base32 characters from
// crypto/rand.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return idPrefix + idEncoding.EncodeToString(b[:])[:12]
}
