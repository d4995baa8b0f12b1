package ai

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// The local rule-based tool caller.
//
// Selection: every tool is scored by how many (stemmed) words of the last user message appear in
// its name (3 points each), its description and its parameter names (1 point each), plus 3 points
// per `key: value` pair naming one of its parameters and 1 per enum value mentioned. The best
// score wins, ties go to the earlier tool, and a score of 0 means no tool call (a text answer).
//
// Arguments, per parameter of the winning tool's JSON schema, first match wins:
//  1. an explicit `name: value` / `name=value` pair (quoted or up to , ; or end of line),
//  2. for enums, an enum value mentioned in the message,
//  3. for strings, the next unused quoted text,
//  4. for numbers and integers, a number next to the parameter's name, else the next unused
//     number (clamped to minimum/maximum),
//  5. the schema default,
//  6. only for required parameters: strings get the message minus its leading instruction words
//     ("find red running shoes" -> "red running shoes"), enums their first value, numbers their
//     minimum or 0, booleans false, arrays [] and objects {}.
//
// Optional parameters without a value are left out; the arguments are always a valid JSON object.

func pickToolCall(tools []Tool, msgs []Message) (ToolCall, bool) {
	tools = canonicalSchemas(tools)
	text := msgs[len(msgs)-1].Content
	kvs := parseKVs(text)
	msgStems := stemSet(text)
	kvKeys := map[string]bool{}
	for _, k := range kvs {
		kvKeys[k.key] = true
	}
	best, bestScore := -1, 0
	for i, t := range tools {
		if s := toolScore(t, msgStems, kvKeys); s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return ToolCall{}, false
	}
	tool := tools[best]
	args, err := json.Marshal(extractArgs(tool, text, kvs))
	if err != nil { // only JSON-safe values are built; keep the contract anyway
		args = []byte("{}")
	}
	id := fmt.Sprintf("call_%016x", stableHash("tool call", tool.Name, string(args), strconv.Itoa(len(msgs)), text))
	return ToolCall{ID: id, Name: tool.Name, Arguments: string(args)}, true
}

// canonicalSchemas round-trips each tool's parameter schema through JSON, so schemas written in
// Go ([]string enums, int minimums, nested typed maps) read like decoded JSON ([]any, float64,
// map[string]any).
func canonicalSchemas(tools []Tool) []Tool {
	out := make([]Tool, len(tools))
	for i, t := range tools {
		out[i] = t
		var params map[string]any
		if b, err := json.Marshal(t.Parameters); err == nil && json.Unmarshal(b, &params) == nil {
			out[i].Parameters = params
		} else {
			out[i].Parameters = nil
		}
	}
	return out
}

// stemSet is the set of stemmed non-stop words of s, plus the "#concept" of each word that has one.
func stemSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, t := range tokenize(nil, s) {
		if !stopWords[t] {
			st := stem(t)
			set[st] = true
			for _, c := range concepts[st] {
				set[c] = true
			}
		}
	}
	return set
}

// concepts groups verbs that ask for the same action, so "find red shoes" matches search_products.
var concepts = map[string][]string{
	"search": {"#search"}, "find": {"#search"}, "look": {"#search"}, "lookup": {"#search"},
	"query": {"#search"}, "browse": {"#search"}, "seek": {"#search"}, "discover": {"#search"},
	"show": {"#search", "#read"}, "fetch": {"#search", "#read"}, "retrieve": {"#search", "#read"},
	"get": {"#read"}, "read": {"#read"}, "load": {"#read"}, "open": {"#read"}, "view": {"#read"},
	"list":   {"#search", "#read"},
	"create": {"#create"}, "make": {"#create"}, "new": {"#create"}, "add": {"#create"},
	"build": {"#create"}, "generate": {"#create", "#write"}, "draft": {"#create", "#write"},
	"write": {"#write"}, "compose": {"#write"}, "copy": {"#write"}, "copywrite": {"#write"},
	"save": {"#save"}, "store": {"#save"}, "persist": {"#save"}, "publish": {"#save"},
	"commit": {"#save"}, "update": {"#save", "#update"}, "edit": {"#update"},
	"change": {"#update"}, "modify": {"#update"}, "set": {"#update"}, "rename": {"#update"},
	"delete": {"#delete"}, "remove": {"#delete"}, "drop": {"#delete"}, "erase": {"#delete"},
}

// splitIdent splits snake_case, kebab-case and camelCase identifiers into lowercase words.
func splitIdent(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

func identStems(s string) []string {
	var out []string
	for _, w := range splitIdent(s) {
		if !stopWords[w] {
			out = append(out, stem(w))
		}
	}
	return out
}

// withConcepts adds the "#concept" of each stem.
func withConcepts(stems []string) []string {
	out := slices.Clone(stems)
	for _, s := range stems {
		out = append(out, concepts[s]...)
	}
	return out
}

func toolScore(t Tool, msgStems, kvKeys map[string]bool) int {
	score := 0
	counted := map[string]bool{}
	count := func(stems []string, points int) {
		for _, s := range stems {
			if msgStems[s] && !counted[s] {
				counted[s] = true
				score += points
			}
		}
	}
	count(withConcepts(identStems(t.Name)), 3)
	var desc []string
	for s := range stemSet(t.Description) {
		desc = append(desc, s)
	}
	slices.Sort(desc)
	count(desc, 1)
	props, _ := t.Parameters["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		count(identStems(name), 1)
		if kvKeys[normKey(name)] {
			score += 3
		}
		if ps, ok := props[name].(map[string]any); ok {
			for _, e := range enumValues(ps) {
				if containsWords(msgStems, e) {
					score++
				}
			}
		}
	}
	return score
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func enumValues(schema map[string]any) []string {
	raw, _ := schema["enum"].([]any)
	var out []string
	for _, v := range raw {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// containsWords reports whether every word of phrase occurs (stemmed) in the message.
func containsWords(msgStems map[string]bool, phrase string) bool {
	toks := tokenize(nil, phrase)
	if len(toks) == 0 {
		return false
	}
	for _, t := range toks {
		if !msgStems[stem(t)] {
			return false
		}
	}
	return true
}

// schemaType returns the JSON schema type of a parameter, inferring it when absent.
func schemaType(ps map[string]any) string {
	switch t := ps["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
	}
	switch {
	case ps["properties"] != nil:
		return "object"
	case ps["items"] != nil:
		return "array"
	}
	return "string"
}

var numberRE = regexp.MustCompile(`(?:^|[^\p{L}\p{N}.,])(-?\d+(?:[.,]\d+)?)(?:$|[^\p{L}\p{N}])`)

type numberHit struct {
	value      float64
	start, end int
	used       bool
}

// leadingFillers are instruction words stripped from the front of free text used as a string
// argument: "please find me some red shoes" -> "red shoes".
var leadingFillers = map[string]bool{
	"find": true, "search": true, "show": true, "get": true, "list": true, "give": true,
	"look": true, "looking": true, "fetch": true, "retrieve": true, "call": true, "use": true,
	"run": true, "lookup": true, "want": true, "need": true, "like": true, "let": true,
	"see": true, "tell": true, "bring": true, "pull": true, "display": true, "browse": true,
	"create": true, "make": true, "build": true, "add": true, "set": true, "update": true,
	"generate": true, "write": true, "query": true, "matching": true, "named": true, "called": true,
	"hey": true, "hi": true, "hello": true, "ok": true, "okay": true, "now": true, "tool": true,
}

func extractArgs(tool Tool, text string, kvs []kv) map[string]any {
	props, _ := tool.Parameters["properties"].(map[string]any)
	var required []string
	switch r := tool.Parameters["required"].(type) {
	case []any:
		for _, e := range r {
			if s, ok := e.(string); ok {
				required = append(required, s)
			}
		}
	case []string:
		required = r
	}
	isRequired := map[string]bool{}
	var order []string
	for _, r := range required {
		if !isRequired[r] {
			isRequired[r] = true
			order = append(order, r)
		}
	}
	for _, k := range sortedKeys(props) {
		if !isRequired[k] {
			order = append(order, k)
		}
	}
	schemaOf := func(name string) map[string]any {
		ps, _ := props[name].(map[string]any)
		if ps == nil {
			ps = map[string]any{}
		}
		return ps
	}

	args := map[string]any{}
	var consumed []span // text used by a value: not reused for quotes, numbers or free text

	// 1. explicit key/value pairs
	for _, name := range order {
		k, ok := findKV(kvs, normKey(name))
		if !ok {
			continue
		}
		if v, ok := coerce(k, schemaOf(name)); ok {
			args[name] = v
			consumed = append(consumed, span{k.start, k.end})
		}
	}
	msgStems := stemSet(text)
	// 2. enum values mentioned in the message
	for _, name := range order {
		if _, done := args[name]; done {
			continue
		}
		ps := schemaOf(name)
		for _, e := range enumValues(ps) {
			if containsWords(msgStems, e) {
				args[name] = e
				break
			}
		}
	}
	// 3. quoted text for string parameters
	quotes := findQuoted(text, consumed)
	qi := 0
	for _, name := range order {
		if _, done := args[name]; done || qi >= len(quotes) {
			continue
		}
		ps := schemaOf(name)
		if schemaType(ps) == "string" && len(enumValues(ps)) == 0 {
			args[name] = quotes[qi].text
			consumed = append(consumed, span{quotes[qi].start, quotes[qi].end})
			qi++
		}
	}
	// 4. numbers for number and integer parameters
	var nums []numberHit
	for _, m := range numberRE.FindAllStringSubmatchIndex(text, -1) {
		if inSpans(consumed, m[2], m[3]) {
			continue
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(text[m[2]:m[3]], ",", "."), 64)
		if err == nil {
			nums = append(nums, numberHit{value: v, start: m[2], end: m[3]})
		}
	}
	takeNumber := func(name string, ps map[string]any, near bool) bool {
		integer := schemaType(ps) == "integer"
		for i := range nums {
			n := &nums[i]
			if n.used || (integer && n.value != math.Trunc(n.value)) {
				continue
			}
			if near && !nearWord(text, n.start, n.end, identStems(name)) {
				continue
			}
			n.used = true
			consumed = append(consumed, span{n.start, n.end})
			args[name] = clampNumber(n.value, ps, integer)
			return true
		}
		return false
	}
	for _, near := range []bool{true, false} {
		for _, name := range order {
			ps := schemaOf(name)
			if _, done := args[name]; done {
				continue
			}
			if t := schemaType(ps); t == "number" || t == "integer" {
				takeNumber(name, ps, near)
			}
		}
	}
	// 5 and 6. defaults, then fallbacks for required parameters
	for _, name := range order {
		if _, done := args[name]; done {
			continue
		}
		ps := schemaOf(name)
		if d, ok := ps["default"]; ok {
			args[name] = d
			continue
		}
		if !isRequired[name] {
			continue
		}
		switch schemaType(ps) {
		case "string":
			if e := enumValues(ps); len(e) > 0 {
				args[name] = e[0]
			} else {
				skip := identStems(tool.Name)
				for _, p := range sortedKeys(props) {
					skip = append(skip, identStems(p)...)
				}
				args[name] = freeText(text, consumed, skip)
			}
		case "integer":
			args[name] = clampNumber(0, ps, true)
		case "number":
			args[name] = clampNumber(0, ps, false)
		case "boolean":
			args[name] = false
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default: // "null" or unknown
			args[name] = nil
		}
	}
	return args
}

// coerce converts an explicit value to the parameter's type; ok is false when it does not fit.
func coerce(k kv, ps map[string]any) (any, bool) {
	switch schemaType(ps) {
	case "integer":
		f, err := strconv.ParseFloat(k.value, 64)
		if err != nil || f != math.Trunc(f) {
			return nil, false
		}
		return clampNumber(f, ps, true), true
	case "number":
		f, err := strconv.ParseFloat(k.value, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		return clampNumber(f, ps, false), true
	case "boolean":
		switch strings.ToLower(k.value) {
		case "true", "yes", "y", "on", "1":
			return true, true
		case "false", "no", "n", "off", "0":
			return false, true
		}
		return nil, false
	case "array":
		var arr []any
		if strings.HasPrefix(k.raw, "[") && json.Unmarshal([]byte(k.raw), &arr) == nil {
			return arr, true
		}
		items, _ := ps["items"].(map[string]any)
		out := []any{}
		for _, part := range strings.Split(strings.Trim(k.raw, "[]"), ",") {
			part = cleanValue(part)
			if part == "" {
				continue
			}
			if v, ok := coerce(kv{value: part, raw: part}, items); ok {
				out = append(out, v)
			}
		}
		return out, true
	case "object":
		var obj map[string]any
		if json.Unmarshal([]byte(k.raw), &obj) == nil {
			return obj, true
		}
		return nil, false
	default:
		if e := enumValues(ps); len(e) > 0 {
			for _, v := range e {
				if strings.EqualFold(v, k.value) {
					return v, true
				}
			}
			return nil, false
		}
		return k.value, true
	}
}

func clampNumber(v float64, ps map[string]any, integer bool) any {
	if lo, ok := ps["minimum"].(float64); ok && v < lo {
		v = lo
	}
	if hi, ok := ps["maximum"].(float64); ok && v > hi {
		v = hi
	}
	if integer {
		if v != math.Trunc(v) {
			v = math.Ceil(v)
		}
		return int64(v)
	}
	return v
}

// nearWord reports whether one of stems occurs within two words before or after text[start:end].
func nearWord(text string, start, end int, stems []string) bool {
	if len(stems) == 0 {
		return false
	}
	before := tokenize(nil, text[:start])
	after := tokenize(nil, text[end:])
	var window []string
	window = append(window, before[max(0, len(before)-2):]...)
	window = append(window, after[:min(2, len(after))]...)
	for _, w := range window {
		if slices.Contains(stems, stem(w)) {
			return true
		}
	}
	return false
}

// freeText is the message without consumed spans, without its leading instruction words and
// without the tool's and parameters' own names at either end.
func freeText(text string, consumed []span, nameStems []string) string {
	var b strings.Builder
	last := 0
	spans := slices.Clone(consumed)
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	for _, s := range spans {
		if s.start > last {
			b.WriteString(text[last:s.start])
		}
		b.WriteString(" ")
		last = max(last, s.end)
	}
	if last < len(text) {
		b.WriteString(text[last:])
	}
	words := strings.Fields(b.String())
	trim := func(w string) string { return strings.Trim(w, `"'“”«»()[]{},.;:!?`+"`") }
	skip := func(w string) bool {
		lw := strings.ToLower(trim(w))
		return lw == "" || stopWords[lw] || slices.Contains(nameStems, stem(lw))
	}
	for len(words) > 0 && (skip(words[0]) || leadingFillers[strings.ToLower(trim(words[0]))]) {
		words = words[1:]
	}
	for len(words) > 0 && skip(words[len(words)-1]) {
		words = words[:len(words)-1]
	}
	out := strings.TrimRight(strings.Join(words, " "), ".!?,;: ")
	if out == "" {
		out = strings.TrimSpace(text)
	}
	return out
}
