package prodseg

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
)

// Built-in fields every product has, outside its data.
const (
	FieldSKU  = "sku"
	FieldName = "name"
)

// Operators by field kind (a schema field type, or sku / name).
var (
	textOps    = []string{OpEq, OpNeq, OpIn, OpNotIn, OpContains, OpExists, OpNotExists}
	orderedOps = []string{OpEq, OpNeq, OpGt, OpGte, OpLt, OpLte, OpIn, OpNotIn, OpExists, OpNotExists}
	builtInOps = []string{OpEq, OpNeq, OpIn, OpNotIn, OpContains}
	opsByKind  = map[string][]string{
		catalog.TypeString:  textOps,
		catalog.TypeText:    textOps,
		catalog.TypeURL:     textOps,
		catalog.TypeImage:   textOps,
		catalog.TypeArray:   textOps,
		catalog.TypeNumber:  orderedOps,
		catalog.TypeInteger: orderedOps,
		catalog.TypePrice:   orderedOps,
		catalog.TypeDate:    orderedOps,
		catalog.TypeBoolean: {OpEq, OpNeq, OpIn, OpNotIn, OpExists, OpNotExists},
		FieldSKU:            builtInOps,
		FieldName:           builtInOps,
	}
	compare = map[string]string{OpGt: ">", OpGte: ">=", OpLt: "<", OpLte: "<="}
)

// Query is a compiled definition: a predicate over the products table (alias p) that filters on
// the tenant first, with its bound arguments. User values and field names are only ever
// arguments; the SQL text is built from fixed fragments.
type Query struct {
	// Where is "p.tenant_id = $1 AND (...)".
	Where string
	// Args are the arguments of Where: Args[0] is the tenant id.
	Args []any
}

// SQL is the membership query of the predicate, as previews show it.
func (q *Query) SQL() string {
	return "SELECT p.id FROM products p WHERE " + q.Where + " ORDER BY p.id"
}

// Compile checks the definition against the tenant's schema (fields exist, operators apply to
// their types, values have the field's type) and compiles it. Problems are reported at their
// paths in an *errs.ValidationError.
func Compile(def *Definition, sc *catalog.Schema, tenantID int64) (*Query, error) {
	c := &compiler{args: []any{tenantID}, f: errs.Fields{}, fields: map[string]catalog.Field{}}
	if sc != nil {
		for _, fd := range sc.Fields {
			c.fields[fd.Name] = fd
			c.names = append(c.names, fd.Name)
		}
	}
	pred := c.group(def.Logic, def.Conditions, def.Negate, "")
	if err := c.f.Err(); err != nil {
		return nil, err
	}
	return &Query{Where: "p.tenant_id = $1 AND " + pred, Args: c.args}, nil
}

type compiler struct {
	args   []any
	f      errs.Fields
	fields map[string]catalog.Field
	names  []string
}

// arg binds v and returns its placeholder.
func (c *compiler) arg(v any) string {
	c.args = append(c.args, v)
	return "$" + strconv.Itoa(len(c.args))
}

func (c *compiler) group(logic string, nodes []Node, negate bool, path string) string {
	parts := make([]string, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		npath := fmt.Sprintf("%s[%d]", at(path, "conditions"), i)
		if n.IsGroup() {
			parts = append(parts, c.group(n.Logic, n.Conditions, n.Negate, npath))
		} else {
			parts = append(parts, c.condition(n, npath))
		}
	}
	join := " AND "
	if logic == "OR" {
		join = " OR "
	}
	out := "(" + strings.Join(parts, join) + ")"
	if negate {
		out = "(NOT " + out + ")"
	}
	return out
}

// kind is the field's kind: sku, name or its schema type.
func (c *compiler) kind(name, path string) (string, bool) {
	switch name {
	case FieldSKU, FieldName:
		return name, true
	}
	if fd, ok := c.fields[name]; ok {
		return fd.Type, true
	}
	names := c.names
	more := ""
	if len(names) > 20 {
		names, more = names[:20], fmt.Sprintf(" and %d more", len(c.names)-20)
	}
	known := "sku, name"
	if len(names) > 0 {
		known += ", " + strings.Join(names, ", ") + more
	}
	c.f.Add(at(path, "field"), "is not a field of the product schema (fields: %s)", known)
	return "", false
}

func (c *compiler) condition(n *Node, path string) string {
	kind, ok := c.kind(n.Field, path)
	if !ok {
		return "false"
	}
	ops := opsByKind[kind]
	if !slices.Contains(ops, n.Operator) {
		c.f.Add(at(path, "operator"), "%s does not apply to %s (%s field); use one of %s", n.Operator, n.Field, kind, strings.Join(ops, ", "))
		return "false"
	}
	var value any
	var list []any
	switch n.Operator {
	case OpExists, OpNotExists:
	case OpIn, OpNotIn:
		var raw []any
		_ = json.Unmarshal(n.Value, &raw)
		list = make([]any, len(raw))
		for i, v := range raw {
			tv, msg := typed(kind, n.Operator, v)
			if msg != "" {
				c.f.Add(fmt.Sprintf("%s[%d]", at(path, "value"), i), "%s", msg)
				return "false"
			}
			list[i] = tv
		}
	default:
		var raw any
		_ = json.Unmarshal(n.Value, &raw)
		tv, msg := typed(kind, n.Operator, raw)
		if msg != "" {
			c.f.Add(at(path, "value"), "%s", msg)
			return "false"
		}
		value = tv
	}
	var pred string
	switch kind {
	case FieldSKU:
		pred = c.sku(n.Operator, value, list)
	case FieldName:
		pred = c.name(n.Operator, value, list)
	default:
		pred = c.data(kind, n.Field, n.Operator, value, list)
	}
	if n.Negate {
		pred = "(NOT " + pred + ")"
	}
	return pred
}

// typed checks a value against the field kind and returns it normalised: strings as string,
// numbers as float64, booleans as bool, dates as "YYYY-MM-DD".
func typed(kind, op string, v any) (any, string) {
	switch kind {
	case FieldSKU, FieldName, catalog.TypeString, catalog.TypeText, catalog.TypeURL, catalog.TypeImage, catalog.TypeArray:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Sprintf("must be a string (%s field)", kind)
		}
		if op == OpContains && s == "" {
			return nil, "must be a non-empty string with operator contains"
		}
		return s, ""
	case catalog.TypeNumber, catalog.TypePrice:
		f, ok := v.(float64)
		if !ok {
			return nil, fmt.Sprintf("must be a number (%s field)", kind)
		}
		return f, ""
	case catalog.TypeInteger:
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
			return nil, "must be a whole number smaller than 2^53 in magnitude (integer field)"
		}
		return f, ""
	case catalog.TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be true or false (boolean field)"
		}
		return b, ""
	case catalog.TypeDate:
		s, ok := v.(string)
		if !ok {
			return nil, "must be a date as a string YYYY-MM-DD (date field)"
		}
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return nil, "must be a date YYYY-MM-DD (date field)"
		}
		return s, ""
	}
	return nil, "has a field of unknown type " + strconv.Quote(kind)
}

func strs(list []any, conv func(string) string) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = conv(v.(string))
	}
	return out
}

func same(s string) string { return s }

// sku: SKUs are case-insensitive (as their identity is): compared on sku_key, the lower-cased
// SKU, which the (tenant_id, sku_key) index serves for eq and in.
func (c *compiler) sku(op string, value any, list []any) string {
	switch op {
	case OpEq:
		return "p.sku_key = " + c.arg(fold(value.(string)))
	case OpNeq:
		return "p.sku_key <> " + c.arg(fold(value.(string)))
	case OpIn:
		return "p.sku_key = ANY(" + c.arg(strs(list, fold)) + "::text[])"
	case OpNotIn:
		return "(NOT p.sku_key = ANY(" + c.arg(strs(list, fold)) + "::text[]))"
	default: // contains
		return "p.sku_key LIKE " + c.arg(containsPattern(fold(value.(string))))
	}
}

// name: eq, neq, in and not_in are exact (case-sensitive); contains ignores case and uses the
// trigram index on name_key, as the product list's q does.
func (c *compiler) name(op string, value any, list []any) string {
	switch op {
	case OpEq:
		s := value.(string)
		// name_key narrows through the trigram index (where pg_trgm is installed); name decides.
		return "(p.name_key = " + c.arg(fold(s)) + " AND p.name = " + c.arg(s) + ")"
	case OpNeq:
		return "p.name <> " + c.arg(value.(string))
	case OpIn:
		return "p.name = ANY(" + c.arg(strs(list, same)) + "::text[])"
	case OpNotIn:
		return "(NOT p.name = ANY(" + c.arg(strs(list, same)) + "::text[]))"
	default: // contains
		return "p.name_key LIKE " + c.arg(containsPattern(fold(value.(string))))
	}
}

// containment is the data document {"field": v} (arrays: {"field": [v]}) whose containment
// (data @> doc) means "equals" (arrays: "has the element"); the GIN index on data serves it.
func containment(kind, field string, v any) string {
	if kind == catalog.TypeArray {
		v = []any{v}
	}
	b, _ := json.Marshal(map[string]any{field: v})
	return string(b)
}

func (c *compiler) data(kind, field, op string, value any, list []any) string {
	if op == OpExists || op == OpNotExists {
		pred := "p.data ? " + c.arg(field)
		if op == OpNotExists {
			return "(NOT " + pred + ")"
		}
		return pred
	}
	if kind == catalog.TypeDate {
		return c.date(field, op, value, list)
	}
	docs := func() string {
		out := make([]string, len(list))
		for i, v := range list {
			out[i] = containment(kind, field, v)
		}
		return c.arg(out) + "::text[]::jsonb[]"
	}
	switch op {
	case OpEq:
		return "p.data @> " + c.arg(containment(kind, field, value)) + "::jsonb"
	case OpNeq:
		return "(NOT p.data @> " + c.arg(containment(kind, field, value)) + "::jsonb)"
	case OpIn:
		return "p.data @> ANY(" + docs() + ")"
	case OpNotIn:
		return "(NOT p.data @> ANY(" + docs() + "))"
	case OpContains:
		if kind == catalog.TypeArray {
			return "p.data @> " + c.arg(containment(kind, field, value)) + "::jsonb"
		}
		return "COALESCE((p.data ->> " + c.arg(field) + ") ILIKE " + c.arg(containsPattern(value.(string))) + ", false)"
	}
	// gt, gte, lt, lte on number, integer and price.
	f := c.arg(field)
	return "(CASE WHEN jsonb_typeof(p.data -> " + f + ") = 'number' THEN (p.data -> " + f + ")::numeric " +
		compare[op] + " " + c.arg(strconv.FormatFloat(value.(float64), 'g', -1, 64)) + "::numeric ELSE false END)"
}

// date compares the calendar date: the first 10 characters of the stored value (YYYY-MM-DD, the
// date part of a timestamp as written), in byte order.
func (c *compiler) date(field, op string, value any, list []any) string {
	day := "left(p.data ->> " + c.arg(field) + ", 10) COLLATE \"C\""
	switch op {
	case OpEq:
		return "COALESCE(" + day + " = " + c.arg(value.(string)) + ", false)"
	case OpNeq:
		return "(NOT COALESCE(" + day + " = " + c.arg(value.(string)) + ", false))"
	case OpIn:
		return "COALESCE(" + day + " = ANY(" + c.arg(strs(list, same)) + "::text[]), false)"
	case OpNotIn:
		return "(NOT COALESCE(" + day + " = ANY(" + c.arg(strs(list, same)) + "::text[]), false))"
	}
	return "COALESCE(" + day + " " + compare[op] + " " + c.arg(value.(string)) + ", false)"
}

// containsPattern is the LIKE pattern of a substring.
func containsPattern(s string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}

// fold is the case-insensitive key of a SKU or name, as the catalogue stores sku_key and
// name_key: Unicode lower case computed in Go, whatever the database's collation.
func fold(s string) string { return strings.ToLower(s) }
