package block

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/errs"
)

// errorMsg is the summary of every validation error of this package.
const errorMsg = "blocks do not match the block registry (GET /api/ai-pages/blocks/)"

// collector gathers field errors up to maxErrors; once full, validation stops.
type collector struct {
	fields errs.Fields
	full   bool
}

func newCollector() *collector { return &collector{fields: errs.Fields{}} }

func (c *collector) add(field, format string, args ...any) {
	if c.full {
		return
	}
	if len(c.fields) >= maxErrors {
		c.full = true
		return
	}
	c.fields.Add(field, format, args...)
}

func (c *collector) err() error {
	if len(c.fields) == 0 {
		return nil
	}
	msg := errorMsg
	if c.full {
		msg += fmt.Sprintf("; only the first %d errors are listed", maxErrors)
	}
	return &errs.ValidationError{Msg: msg, Fields: c.fields}
}

// join appends a field name to a path: ("blocks[2].props", "headline") -> "blocks[2].props.headline".
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// index appends a list index to a path: ("blocks", 2) -> "blocks[2]".
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// CheckID returns "" when id can be a block id, else why not.
func CheckID(id string) string {
	if len(id) == 0 || len(id) > MaxIDLength {
		return fmt.Sprintf("must be 1 to %d letters, digits, _ or -", MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("must be 1 to %d letters, digits, _ or -", MaxIDLength)
		}
	}
	return ""
}

// Validate checks a page's blocks against the registry and returns a normalised copy. Field
// errors are keyed by their path under path: with path "blocks", "blocks[2].type",
// "blocks[1].id", "blocks[2].props.headline", "blocks[3].props.items[1].title". All errors are
// collected, up to a cap, into one *errs.ValidationError.
//
// The copy shares nothing with blocks. A block without an id gets a new one (NewID); ids are
// unique within the list. Props keep the values given, in the shapes encoding/json decodes
// into any: strings, float64 for integers (json.Number and Go integers are converted), []any
// for arrays and map[string]any for array items. Defaults are not filled in: a missing optional
// prop stays missing, and readers apply the registry's default. JSON null is not a value of any
// prop: leave an optional prop out instead. A nil or empty list is a page without blocks. An
// empty path means "blocks".
func Validate(path string, blocks []Block) ([]Block, error) {
	if path == "" {
		path = "blocks"
	}
	c := newCollector()
	if len(blocks) > MaxBlocks {
		c.add(path, "must have at most %d blocks", MaxBlocks)
		return nil, c.err()
	}
	seen := make(map[string]int, len(blocks))
	for i, b := range blocks {
		if b.ID == "" {
			continue
		}
		key := join(index(path, i), "id")
		if msg := CheckID(b.ID); msg != "" {
			c.add(key, "%s", msg)
			continue
		}
		if j, dup := seen[b.ID]; dup {
			c.add(key, "repeats the id of %s: %q", index(path, j), b.ID)
			continue
		}
		seen[b.ID] = i
	}
	out := make([]Block, len(blocks))
	for i, b := range blocks {
		if c.full {
			break
		}
		out[i] = validateBlock(c, index(path, i), b)
		if out[i].ID == "" {
			id := NewID()
			for _, taken := seen[id]; taken; _, taken = seen[id] {
				id = NewID()
			}
			seen[id] = i
			out[i].ID = id
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ValidateOne checks one block by the rules of Validate, its errors keyed under path (the path of
// the block, for example "blocks[3]": "blocks[3].props.headline"), and returns a normalised copy
// with an id (a new one when it had none). Uniqueness among a page's blocks is Validate's to check.
func ValidateOne(path string, b Block) (Block, error) {
	c := newCollector()
	if b.ID != "" {
		if msg := CheckID(b.ID); msg != "" {
			c.add(join(path, "id"), "%s", msg)
		}
	}
	out := validateBlock(c, path, b)
	if err := c.err(); err != nil {
		return Block{}, err
	}
	if out.ID == "" {
		out.ID = NewID()
	}
	return out, nil
}

// ValidateProps checks the props of a block of type typ, its errors keyed under path (the path of
// the props object, for example "blocks[2].props": "blocks[2].props.headline"). An unknown type
// is an error keyed by path itself ("type" when path is empty).
func ValidateProps(path, typ string, props map[string]any) error {
	c := newCollector()
	e, ok := lookup(typ)
	if !ok {
		key := path
		if key == "" {
			key = "type"
		}
		c.add(key, "%s", unknownType(typ))
		return c.err()
	}
	checkObject(c, path, e.PropsSchema, props, "is not a prop of "+e.Type)
	return c.err()
}

func unknownType(typ string) string {
	if typ == "" {
		return "is required"
	}
	return "must be one of " + strings.Join(Types(), ", ")
}

// validateBlock checks type and props (not the id) and returns the normalised copy with the id
// as given.
func validateBlock(c *collector, path string, b Block) Block {
	out := Block{ID: b.ID, Type: b.Type}
	e, ok := lookup(b.Type)
	if !ok {
		c.add(join(path, "type"), "%s", unknownType(b.Type))
		return out
	}
	out.Props = checkObject(c, join(path, "props"), e.PropsSchema, b.Props, "is not a prop of "+e.Type)
	return out
}

// checkObject checks the fields of obj against schema and returns a copy; nil is an empty object.
func checkObject(c *collector, path string, schema map[string]Prop, obj map[string]any, unknownMsg string) map[string]any {
	out := make(map[string]any, len(obj))
	names := propNames(schema)
	var extra []string
	for k := range obj {
		if _, ok := schema[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		// Sorted, so the errors kept under the cap are the same on every run.
		slices.Sort(extra)
		for _, k := range extra {
			c.add(join(path, k), "%s (%s)", unknownMsg, strings.Join(names, ", "))
		}
	}
	for _, name := range names {
		p := schema[name]
		v, present := obj[name]
		key := join(path, name)
		if !present {
			if p.Required {
				c.add(key, "is required")
			}
			continue
		}
		if nv, ok := checkValue(c, key, p, v); ok {
			out[name] = nv
		}
	}
	return out
}

// checkValue checks one value against its prop and returns the normalised value; ok is false
// when it was refused (the error is added).
func checkValue(c *collector, key string, p Prop, v any) (any, bool) {
	if v == nil {
		c.add(key, "must be %s, not null", typeName(p))
		return nil, false
	}
	switch p.Type {
	case TypeString:
		s, ok := v.(string)
		if !ok {
			c.add(key, "must be %s", typeName(p))
			return nil, false
		}
		if msg := checkString(p, s); msg != "" {
			c.add(key, "%s", msg)
			return nil, false
		}
		return s, true
	case TypeInteger:
		n, ok := toInteger(v)
		if !ok || p.Min != nil && n < float64(*p.Min) || p.Max != nil && n > float64(*p.Max) {
			c.add(key, "must be %s", typeName(p))
			return nil, false
		}
		return n, true
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			c.add(key, "must be %s", typeName(p))
			return nil, false
		}
		return b, true
	case TypeArray:
		return checkArray(c, key, p, v)
	}
	c.add(key, "has a type the registry does not know")
	return nil, false
}

// checkArray checks an array prop: its length, then each element.
func checkArray(c *collector, key string, p Prop, v any) (any, bool) {
	var elems []any
	switch a := v.(type) {
	case []any:
		elems = a
	case []string:
		elems = make([]any, len(a))
		for i, s := range a {
			elems[i] = s
		}
	case []map[string]any:
		elems = make([]any, len(a))
		for i, m := range a {
			elems[i] = m
		}
	default:
		c.add(key, "must be %s", typeName(p))
		return nil, false
	}
	if len(elems) < p.MinItems || p.MaxItems > 0 && len(elems) > p.MaxItems {
		c.add(key, "must have %s", itemCount(p))
		return nil, false
	}
	out := make([]any, len(elems))
	before := len(c.fields)
	if p.Items != nil {
		for i, el := range elems {
			ek := index(key, i)
			m, ok := el.(map[string]any)
			if !ok {
				c.add(ek, "must be an object with %s", strings.Join(propNames(p.Items), ", "))
				continue
			}
			out[i] = checkObject(c, ek, p.Items, m, "is not a field of an item")
		}
	} else {
		seen := make(map[string]int, len(elems))
		for i, el := range elems {
			ek := index(key, i)
			s, ok := el.(string)
			if !ok {
				c.add(ek, "must be a string")
				continue
			}
			if msg := checkItemString(p, s); msg != "" {
				c.add(ek, "%s", msg)
				continue
			}
			if p.UniqueItems {
				// Case-insensitively, as the catalogue tells SKUs apart.
				k := strings.ToLower(s)
				if j, dup := seen[k]; dup {
					c.add(ek, "repeats %s (ignoring case): %q", index(key, j), s)
					continue
				}
				seen[k] = i
			}
			out[i] = s
		}
	}
	if len(c.fields) > before || c.full {
		return nil, false
	}
	return out, true
}

// checkString returns "" when s is a valid value of the string prop p, else why not.
func checkString(p Prop, s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if p.Format == FormatURL {
		return checkURL(s)
	}
	if p.Enum != nil {
		if slices.Contains(p.Enum, s) {
			return ""
		}
		return "must be one of " + strings.Join(p.Enum, ", ")
	}
	if hasControl(s) {
		return "must not contain control characters other than line feeds and tabs"
	}
	if p.Required && strings.TrimSpace(s) == "" {
		return "must not be empty"
	}
	if p.MaxLength > 0 && utf8.RuneCountInString(s) > p.MaxLength {
		return fmt.Sprintf("must be at most %d characters", p.MaxLength)
	}
	return ""
}

// checkItemString checks an element of an array of strings (a SKU): not empty, at most
// MaxLength bytes, no control characters.
func checkItemString(p Prop, s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case p.MaxLength > 0 && len(s) > p.MaxLength:
		return fmt.Sprintf("must be at most %d bytes", p.MaxLength)
	case strings.ContainsFunc(s, unicode.IsControl):
		return "must not contain control characters"
	}
	return ""
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) })
}

const urlRule = "must be an absolute http or https URL with a host, a path starting with /, or a #fragment"

// checkURL returns "" when s is an absolute http(s) URL with a host and without user info, or a
// path on the same site ("/..." but not "//..."), or a fragment of the page ("#..."). Whitespace, control and format characters
// and backslashes (which browsers read as "/", so "/\host" would leave the site) are refused.
func checkURL(s string) string {
	if len(s) > MaxURLLength {
		return fmt.Sprintf("must be at most %d bytes", MaxURLLength)
	}
	if s == "" {
		return urlRule
	}
	if strings.ContainsFunc(s, func(r rune) bool {
		return r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError
	}) {
		return "must not contain whitespace, control characters or backslashes"
	}
	if s[0] == '#' { // an anchor on the page itself, e.g. a hero's link to its product grid
		if len(s) == 1 {
			return urlRule
		}
		return ""
	}
	if s[0] == '/' {
		if len(s) > 1 && s[1] == '/' {
			return urlRule
		}
		if _, err := url.Parse(s); err != nil {
			return urlRule
		}
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Hostname() == "" {
		return urlRule
	}
	if u.Scheme != "http" && u.Scheme != "https" { // url.Parse lower-cases the scheme
		return urlRule
	}
	if u.User != nil {
		return "must not contain a user name or password"
	}
	return ""
}

// toInteger returns v as a float64 when it is a whole number: a float64 or float32 without a
// fraction, a json.Number of one, or a Go integer. Values far outside the int64 range are
// refused, as are NaN and infinities.
func toInteger(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			f = float64(i)
			break
		}
		x, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, false
		}
		f = x
	case int:
		f = float64(n)
	case int8:
		f = float64(n)
	case int16:
		f = float64(n)
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	case uint:
		f = float64(n)
	case uint8:
		f = float64(n)
	case uint16:
		f = float64(n)
	case uint32:
		f = float64(n)
	case uint64:
		f = float64(n)
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return f + 0, true // + 0 turns -0 into 0
}

// typeName is how a prop's type reads in an error message ("must be ...").
func typeName(p Prop) string {
	switch p.Type {
	case TypeString:
		if p.Format == FormatURL {
			return "a string (a URL)"
		}
		return "a string"
	case TypeInteger:
		switch {
		case p.Min != nil && p.Max != nil:
			return fmt.Sprintf("an integer from %d to %d", *p.Min, *p.Max)
		case p.Min != nil:
			return fmt.Sprintf("an integer of at least %d", *p.Min)
		case p.Max != nil:
			return fmt.Sprintf("an integer of at most %d", *p.Max)
		}
		return "an integer"
	case TypeBoolean:
		return "true or false"
	case TypeArray:
		if p.Items != nil {
			return "an array of objects"
		}
		return "an array of " + p.ItemType + "s"
	}
	return p.Type
}

func itemCount(p Prop) string {
	switch {
	case p.MaxItems > 0 && p.MinItems > 0:
		return fmt.Sprintf("%d to %d items", p.MinItems, p.MaxItems)
	case p.MaxItems > 0:
		return fmt.Sprintf("at most %d items", p.MaxItems)
	}
	return fmt.Sprintf("at least %d items", p.MinItems)
}

// blockFields are the keys of a block object.
var blockFields = map[string]bool{"id": true, "type": true, "props": true}

// ParseBlocks decodes a JSON array of blocks strictly, with errors keyed under "blocks" (see
// ParseBlocksAt). It checks the shape only; Validate checks the blocks against the registry.
func ParseBlocks(raw []byte) ([]Block, error) { return ParseBlocksAt("blocks", raw) }

// ParseBlocksAt decodes a JSON array of blocks strictly: raw must be one JSON array (not null) of
// at most MaxBlocks objects whose keys are id (a string), type (a string) and props (an object);
// any other key is an error keyed by its path ("blocks[1].color"). Numbers in props are kept as
// json.Number, so Validate judges them without a float64 conversion. A missing props is an
// empty object. Malformed JSON is a *errs.ValidationError of code "invalid_json"; a wrong shape
// one of the default code with field paths. An empty path means "blocks".
func ParseBlocksAt(path string, raw []byte) ([]Block, error) {
	c := newCollector()
	if path == "" {
		path = "blocks"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		c.add(path, "is required")
		return nil, c.err()
	case err != nil:
		return nil, syntaxErr(path, err)
	case tok == nil:
		c.add(path, "must be an array of blocks, not null")
		return nil, c.err()
	case tok != json.Delim('['):
		c.add(path, "must be an array of blocks")
		return nil, c.err()
	}
	blocks := make([]Block, 0)
	for i := 0; dec.More(); i++ {
		if i == MaxBlocks {
			c.fields = errs.Fields{}
			c.full = false
			c.add(path, "must have at most %d blocks", MaxBlocks)
			return nil, c.err()
		}
		var el json.RawMessage
		if err := dec.Decode(&el); err != nil {
			return nil, syntaxErr(path, err)
		}
		b, ok := parseBlock(c, index(path, i), el)
		if ok {
			blocks = append(blocks, b)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ]
		return nil, syntaxErr(path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &errs.ValidationError{Code: "invalid_json", Msg: path + " has data after the JSON array",
			Fields: map[string]string{path: "must be one JSON array"}}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return blocks, nil
}

func syntaxErr(key string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "unexpected end of JSON input"
	}
	return &errs.ValidationError{Code: "invalid_json", Msg: key + " is not valid JSON: " + msg,
		Fields: map[string]string{key: "is not valid JSON: " + msg}}
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// parseBlock decodes one element of the array; ok is false when it added an error.
func parseBlock(c *collector, path string, raw json.RawMessage) (Block, bool) {
	var obj map[string]json.RawMessage
	if isNull(raw) {
		c.add(path, "must be a block object, not null")
		return Block{}, false
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		c.add(path, "must be a block object {id, type, props}")
		return Block{}, false
	}
	before := len(c.fields)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b Block
	for _, k := range keys {
		v := obj[k]
		key := join(path, k)
		switch {
		case !blockFields[k]:
			c.add(key, "is not a field of a block (id, type, props)")
		case k == "props":
			if isNull(v) {
				c.add(key, "must be an object, not null")
				continue
			}
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if err := d.Decode(&b.Props); err != nil {
				c.add(key, "must be an object")
			}
		default:
			var s string
			if isNull(v) || json.Unmarshal(v, &s) != nil {
				c.add(key, "must be a string")
				continue
			}
			if k == "id" {
				b.ID = s
			} else {
				b.Type = s
			}
		}
	}
	if len(c.fields) > before || c.full {
		return Block{}, false
	}
	return b, true
}
