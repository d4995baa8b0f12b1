package feed

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/csvimport"
)

// mapper turns a feed item into a bulk product by the feed's field_map and the product schema.
type mapper struct {
	cols []column // sku first, then by source, so messages come in a stable order
}

type column struct {
	source, target, typ string // typ "" for sku and name
}

// newMapper checks fm against the tenant's schema of now: a field the map names that is no longer
// in the schema fails the sync before any product is touched.
func newMapper(fm map[string]string, sc *catalog.Schema) (*mapper, error) {
	if problems := validateFieldMap(fm, sc); len(problems) > 0 {
		keys := make([]string, 0, len(problems))
		for k := range problems {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + problems[k]
		}
		return nil, fmt.Errorf("the feed's field_map no longer fits the product schema: %s", strings.Join(parts, "; "))
	}
	types := make(map[string]string, len(sc.Fields))
	for _, f := range sc.Fields {
		types[f.Name] = f.Type
	}
	m := &mapper{}
	for src, target := range fm {
		m.cols = append(m.cols, column{source: src, target: target, typ: types[target]})
	}
	sort.Slice(m.cols, func(i, j int) bool {
		if (m.cols[i].target == "sku") != (m.cols[j].target == "sku") {
			return m.cols[i].target == "sku"
		}
		return m.cols[i].source < m.cols[j].source
	})
	return m, nil
}

// product maps one item: the bulk product and its SKU, or the reason it cannot be imported (with
// the SKU when it was read).
func (m *mapper) product(it *item) (p map[string]any, sku, reason string) {
	if it.err != "" {
		return nil, "", it.err
	}
	p = make(map[string]any, len(m.cols))
	var problems []string
	for _, c := range m.cols {
		v, found := lookup(it.fields, c.source)
		switch c.target {
		case "sku":
			s, ok := scalarText(v)
			if !found || !ok || s == "" {
				if found && !ok {
					return nil, "", fmt.Sprintf("%s (sku) must be text or a number", c.source)
				}
				return nil, "", fmt.Sprintf("no sku: %s is missing or empty", c.source)
			}
			sku = s
			p["sku"] = s
		case "name":
			if !found || v == nil {
				continue
			}
			s, ok := scalarText(v)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s (name) must be text", c.source))
				continue
			}
			if s != "" {
				p["name"] = s
			}
		default:
			if !found || v == nil {
				continue
			}
			out, msg := convertValue(c.typ, v)
			if msg != "" {
				problems = append(problems, fmt.Sprintf("%s (%s, %s): %s", c.source, c.target, c.typ, msg))
				continue
			}
			if out != nil {
				p[c.target] = out
			}
		}
	}
	if len(problems) > 0 {
		return nil, sku, strings.Join(problems, "; ")
	}
	return p, sku, ""
}

// lookup finds a dotted path in an item: an exact key first ("offers.price" may be one key),
// then one segment after the other; a number indexes a list, and a name applied to a list looks
// into its first element (a repeated XML element, a list of offers).
func lookup(v any, path string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if out, ok := x[path]; ok {
			return out, true
		}
		for i := 0; i < len(path); i++ {
			if path[i] != '.' {
				continue
			}
			if next, ok := x[path[:i]]; ok {
				if out, ok := lookup(next, path[i+1:]); ok {
					return out, true
				}
			}
		}
	case []any:
		head, rest, more := strings.Cut(path, ".")
		if n, err := strconv.Atoi(head); err == nil {
			if n < 0 || n >= len(x) {
				return nil, false
			}
			if !more {
				return x[n], true
			}
			return lookup(x[n], rest)
		}
		if len(x) > 0 {
			return lookup(x[0], path)
		}
	}
	return nil, false
}

// scalarText is a string or a number as text; a list gives its first element.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x), true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	case []any:
		if len(x) == 0 {
			return "", true
		}
		return scalarText(x[0])
	}
	return "", false
}

// convertValue turns a feed value into the value a product's data holds for a field type, by the
// CSV import's conversions (csvimport.Convert): "15.00 USD" is the price 15, "in stock" stays
// text, "yes" is true. A number field takes a price with its currency too. (nil, "") is an empty
// value, left out.
func convertValue(typ string, v any) (any, string) {
	switch x := v.(type) {
	case map[string]any:
		return nil, "is an object, not a single value"
	case []any:
		if typ == catalog.TypeArray {
			out := make([]any, 0, len(x))
			for _, e := range x {
				s, ok := scalarText(e)
				if !ok {
					return nil, "must be a list of texts"
				}
				if s != "" {
					out = append(out, s)
				}
			}
			if len(out) == 0 {
				return nil, ""
			}
			return out, ""
		}
		if len(x) == 0 {
			return nil, ""
		}
		return convertValue(typ, x[0])
	case json.Number:
		switch typ {
		case catalog.TypeNumber, catalog.TypePrice, catalog.TypeInteger, catalog.TypeString, catalog.TypeText, catalog.TypeArray:
			return convertText(typ, x.String())
		}
		return nil, "must not be a number"
	case bool:
		switch typ {
		case catalog.TypeBoolean:
			return x, ""
		case catalog.TypeString, catalog.TypeText:
			return strconv.FormatBool(x), ""
		}
		return nil, "must not be true or false"
	case string:
		return convertText(typ, x)
	}
	return nil, "has an unsupported value"
}

func convertText(typ, s string) (any, string) {
	v, err := csvimport.Convert(typ, s)
	if err != nil && (typ == catalog.TypeNumber || typ == catalog.TypeInteger) {
		// "15.00 USD" into a number field: the amount.
		if f, perr := csvimport.Convert(catalog.TypePrice, s); perr == nil && f != nil {
			amount := f.(float64)
			if typ == catalog.TypeNumber {
				return amount, ""
			}
			if amount == float64(int64(amount)) {
				return int64(amount), ""
			}
		}
	}
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), csvimport.ErrInvalidValue.Error()+": ")
	}
	if list, ok := v.([]string); ok { // the upsert takes data as JSON decodes it
		items := make([]any, len(list))
		for i, e := range list {
			items[i] = e
		}
		return items, ""
	}
	return v, ""
}
