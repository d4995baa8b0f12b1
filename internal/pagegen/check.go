package pagegen

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
)

// checkMsg is the summary of a candidate's validation error.
const checkMsg = "the page copy does not match the block registry or the found products"

// check validates candidate copy: the intro copy, the blocks against the block registry, a hero
// and a product grid present, and every SKU of a product grid one of the found products (matched
// case-insensitively, as the catalogue does, and written as the catalogue spells it). It returns
// the normalised copy (blocks with ids) or an *errs.ValidationError keyed by field path
// ("intro_copy", "blocks", "blocks[2].props.headline", "blocks[1].props.product_skus[3]").
func check(req Request, intro string, blocks []block.Block) (Copy, error) {
	fields := errs.Fields{}
	intro = strings.TrimSpace(intro)
	switch {
	case intro == "":
		fields.Add("intro_copy", "is required: a few sentences introducing the page")
	case !utf8.ValidString(intro):
		fields.Add("intro_copy", "must be valid UTF-8")
	case utf8.RuneCountInString(intro) > MaxIntroCopyLength:
		fields.Add("intro_copy", "must be at most %d characters", MaxIntroCopyLength)
	case strings.ContainsFunc(intro, func(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) }):
		fields.Add("intro_copy", "must not contain control characters other than line feeds and tabs")
	}
	found := make(map[string]string, len(req.Products))
	for _, p := range req.Products {
		found[strings.ToLower(p.SKU)] = p.SKU
	}
	// SKUs of the raw blocks: what the model wrote, before the registry normalises it.
	hasHero, hasGrid := false, false
	for i, b := range blocks {
		switch b.Type {
		case block.Hero:
			hasHero = true
		case block.ProductGrid:
			hasGrid = true
			skus, ok := b.Props["product_skus"].([]any)
			if !ok {
				continue
			}
			for j, s := range skus {
				if sku, ok := s.(string); ok && sku != "" {
					if _, known := found[strings.ToLower(sku)]; !known {
						fields.Add(skuPath(i, j), "%q is not one of the found products; use only these SKUs: %s", clip(sku, 80), skuList(req))
					}
				}
			}
		}
	}
	if len(blocks) > 0 && !hasHero {
		fields.Add("blocks", "must include a hero block")
	}
	if len(blocks) > 0 && !hasGrid {
		fields.Add("blocks", "must include a product_grid block with the SKUs of the found products")
	}
	if len(blocks) == 0 {
		fields.Add("blocks", "is required: a hero, a product_grid and the other blocks that fit")
	}
	out, err := block.Validate("blocks", blocks)
	if err != nil {
		var ve *errs.ValidationError
		if !errors.As(err, &ve) {
			return Copy{}, err
		}
		for _, k := range slices.Sorted(maps.Keys(ve.Fields)) {
			fields.Add(k, "%s", ve.Fields[k])
		}
	}
	if len(fields) > 0 {
		return Copy{}, &errs.ValidationError{Msg: checkMsg, Fields: fields}
	}
	// Write the SKUs as the catalogue spells them.
	for _, b := range out {
		if b.Type != block.ProductGrid {
			continue
		}
		if skus, ok := b.Props["product_skus"].([]any); ok {
			for j, s := range skus {
				if sku, ok := s.(string); ok {
					skus[j] = found[strings.ToLower(sku)]
				}
			}
		}
	}
	return Copy{IntroCopy: intro, Blocks: out, ProductSKUs: skusOf(req)}, nil
}

func skuPath(blockIndex, skuIndex int) string {
	return "blocks[" + itoa(blockIndex) + "].props.product_skus[" + itoa(skuIndex) + "]"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// skusOf lists the found products' SKUs in their order.
func skusOf(req Request) []string {
	out := make([]string, len(req.Products))
	for i, p := range req.Products {
		out[i] = p.SKU
	}
	return out
}

// skuList is the found SKUs as the feedback lists them (the first few when there are many).
func skuList(req Request) string {
	const shown = 20
	skus := skusOf(req)
	more := ""
	if len(skus) > shown {
		more = " ..."
		skus = skus[:shown]
	}
	return strings.Join(skus, ", ") + more
}

// problems is a validation error's field messages, one "path: message" a line, sorted.
func problems(err error) string {
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		return err.Error()
	}
	lines := make([]string, 0, len(ve.Fields))
	for _, k := range slices.Sorted(maps.Keys(ve.Fields)) {
		lines = append(lines, k+": "+ve.Fields[k])
	}
	return strings.Join(lines, "\n")
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func invalidField(field, msg string) error { return errs.Invalid(field, msg) }
