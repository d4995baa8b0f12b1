package ai

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chat answers deterministically: a summary after tool results, a tool call when tools are offered
// and one matches the last user message, otherwise template copy.
func (l *Local) Chat(ctx context.Context, req ChatRequest) (ChatResponse, error) {
	if err := ctx.Err(); err != nil {
		return ChatResponse{}, fmt.Errorf("local chat: %w", err)
	}
	if err := validateChatRequest(req); err != nil {
		return ChatResponse{}, err
	}
	return respond(req), nil
}

// ChatStream emits the Chat answer word by word, then its tool calls.
func (l *Local) ChatStream(ctx context.Context, req ChatRequest, fn func(StreamEvent) error) (ChatResponse, error) {
	resp, err := l.Chat(ctx, req)
	if err != nil {
		return ChatResponse{}, err
	}
	for _, d := range wordDeltas(resp.Content) {
		if err := ctx.Err(); err != nil {
			return ChatResponse{}, fmt.Errorf("local chat stream: %w", err)
		}
		if err := fn(StreamEvent{ContentDelta: d}); err != nil {
			return ChatResponse{}, fmt.Errorf("local chat stream: %w", err)
		}
	}
	for i := range resp.ToolCalls {
		tc := resp.ToolCalls[i]
		if err := fn(StreamEvent{ToolCall: &tc}); err != nil {
			return ChatResponse{}, fmt.Errorf("local chat stream: %w", err)
		}
	}
	return resp, nil
}

// wordDeltas splits s after each run of whitespace; the pieces concatenate back to s.
func wordDeltas(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range s {
		sp := unicode.IsSpace(r)
		if inSpace && !sp {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = sp
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func respond(req ChatRequest) ChatResponse {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	resp := ChatResponse{FinishReason: FinishStop}
	switch {
	case last.Role == RoleTool:
		summary := summarizeToolResults(msgs)
		if req.JSONMode {
			resp.Content = jsonAnswer(msgs, factsFrom(msgs), summary, map[string]any{"summary": summary})
		} else {
			resp.Content = summary
		}
	case len(req.Tools) > 0 && last.Role == RoleUser:
		if tc, ok := pickToolCall(req.Tools, msgs); ok {
			resp.ToolCalls = []ToolCall{tc}
			resp.FinishReason = FinishToolCalls
			break
		}
		fallthrough
	default:
		resp.Content = textAnswer(req)
	}
	// MaxTokens counts words here; JSON content is never cut, so it always stays valid JSON.
	if !req.JSONMode && req.MaxTokens > 0 {
		if words := strings.Fields(resp.Content); len(words) > req.MaxTokens {
			resp.Content = strings.Join(words[:req.MaxTokens], " ")
			resp.FinishReason = FinishLength
		}
	}
	for _, m := range msgs {
		resp.Usage.PromptTokens += 4 + estimateTokens(m.Content)
		for _, tc := range m.ToolCalls {
			resp.Usage.PromptTokens += estimateTokens(tc.Name) + estimateTokens(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		b, _ := json.Marshal(t.Parameters)
		resp.Usage.PromptTokens += estimateTokens(t.Name) + estimateTokens(t.Description) + estimateTokens(string(b))
	}
	resp.Usage.CompletionTokens = estimateTokens(resp.Content)
	for _, tc := range resp.ToolCalls {
		resp.Usage.CompletionTokens += estimateTokens(tc.Name) + estimateTokens(tc.Arguments)
	}
	return resp
}

// estimateTokens approximates a BPE token count (about four characters per token).
func estimateTokens(s string) int {
	n := utf8.RuneCountInString(s)
	return (n + 3) / 4
}

// ---- conversation reading ----

func lastUser(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

func systemText(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		if m.Role == RoleSystem {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n")
}

// conversationKey is the hash input that picks templates: the whole conversation.
func conversationKey(msgs []Message) uint64 {
	parts := make([]string, 0, 2*len(msgs))
	for _, m := range msgs {
		parts = append(parts, m.Role, m.Content)
	}
	return stableHash(parts...)
}

// kv is one `key: value` or `key=value` pair found in free text.
type kv struct {
	key        string // normalised: lowercase letters and digits only
	value      string // up to , ; or newline, unquoted
	raw        string // up to ; or newline (keeps commas, for lists)
	start, end int    // byte span of the whole pair in the text
}

var kvKeyRE = regexp.MustCompile(`([\p{L}_][\p{L}\p{N}_\-]*)[ \t]*[:=][ \t]*`)

func normKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseKVs finds key/value pairs. A value runs to the next key, the end of the line, or (for
// value, not raw) the next comma or semicolon; quotes around it are removed.
func parseKVs(text string) []kv {
	locs := kvKeyRE.FindAllStringSubmatchIndex(text, -1)
	var out []kv
	for i, loc := range locs {
		if loc[0] > 0 { // a key starts a word
			if r, _ := utf8.DecodeLastRuneInString(text[:loc[0]]); unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		rest := text[loc[1]:end]
		if strings.HasPrefix(rest, "//") { // a URL scheme, not a key
			continue
		}
		raw := rest
		if j := strings.IndexAny(raw, ";\n"); j >= 0 {
			raw = raw[:j]
		}
		value := raw
		if q, ok := leadingQuoted(value); ok {
			value = q
		} else if j := strings.IndexAny(value, ","); j >= 0 {
			value = value[:j]
		}
		out = append(out, kv{
			key:   normKey(text[loc[2]:loc[3]]),
			value: cleanValue(value),
			raw:   cleanValue(raw),
			start: loc[0],
			end:   loc[1] + len(raw),
		})
	}
	return out
}

func leadingQuoted(s string) (string, bool) {
	s = strings.TrimSpace(s)
	for _, q := range [][2]string{{`"`, `"`}, {"'", "'"}, {"“", "”"}, {"«", "»"}, {"`", "`"}} {
		if strings.HasPrefix(s, q[0]) {
			if j := strings.Index(s[len(q[0]):], q[1]); j >= 0 {
				return s[len(q[0]) : len(q[0])+j], true
			}
		}
	}
	return "", false
}

func cleanValue(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, ".!?")
	s = strings.TrimSpace(s)
	if q, ok := leadingQuoted(s); ok && len(q)+2 >= len(s)-2 {
		return q
	}
	return strings.Trim(s, "\"'`“”«»")
}

func findKV(kvs []kv, keys ...string) (kv, bool) {
	for _, k := range kvs {
		if slices.Contains(keys, k.key) && k.value != "" {
			return k, true
		}
	}
	return kv{}, false
}

type span struct{ start, end int }

func inSpans(spans []span, i, j int) bool {
	for _, s := range spans {
		if i < s.end && j > s.start {
			return true
		}
	}
	return false
}

var quotedRE = regexp.MustCompile(`"([^"\n]+)"|“([^”\n]+)”|«([^»\n]+)»|(?:^|[\s(\[{,:=])'([^'\n]+)'(?:$|[\s)\]},.;:!?])`)

type quoted struct {
	text       string
	start, end int
}

func findQuoted(text string, skip []span) []quoted {
	var out []quoted
	for _, m := range quotedRE.FindAllStringSubmatchIndex(text, -1) {
		for g := 1; g <= 4; g++ {
			if m[2*g] >= 0 {
				if !inSpans(skip, m[2*g], m[2*g+1]) {
					out = append(out, quoted{text: strings.TrimSpace(text[m[2*g]:m[2*g+1]]), start: m[0], end: m[1]})
				}
				break
			}
		}
	}
	return out
}

// ---- copy facts ----

type copyFacts struct {
	topic    string
	products []string
	total    int
}

var (
	listItemRE    = regexp.MustCompile(`(?m)^[ \t]*(?:[-*•·]|\d{1,3}[.)])[ \t]+(.+?)[ \t]*$`)
	aboutForRE    = regexp.MustCompile(`(?i)\b(?:for|about|on|featuring|around)\s+([^.\n:;!?]+)`)
	prepositionRE = regexp.MustCompile(`(?i)\b(?:for|about|on|featuring|around)\b`)
	keySepRE      = regexp.MustCompile(`\s*(?:,|\band\b)\s*`)
	identRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// genericWords are instruction vocabulary, not the subject of the copy.
var genericWords = map[string]bool{
	"write": true, "create": true, "generate": true, "draft": true, "make": true, "give": true,
	"short": true, "brief": true, "long": true, "intro": true, "introduction": true,
	"paragraph": true, "copy": true, "text": true, "description": true, "describe": true,
	"headline": true, "title": true, "tagline": true, "landing": true, "page": true, "pages": true,
	"product": true, "products": true, "following": true, "below": true, "above": true,
	"listed": true, "list": true, "seo": true, "meta": true, "cta": true, "sentence": true,
	"sentences": true, "words": true, "word": true, "summary": true, "summarize": true,
	"json": true, "return": true, "respond": true, "reply": true, "object": true, "key": true,
	"keys": true, "field": true, "fields": true, "catchy": true, "compelling": true,
	"engaging": true, "marketing": true, "blurb": true, "section": true, "hero": true,
	"query": true, "search": true, "results": true, "result": true, "one": true, "two": true,
	"three": true, "subtitle": true, "slogan": true, "button": true, "help": true, "need": true,
	"want": true, "like": true, "good": true, "nice": true, "great": true, "new": true, "items": true,
	"item": true, "shoppers": true, "customers": true, "visitors": true, "audience": true,
}

// cleanTopic trims stop words and instruction words from both ends of a phrase.
func cleanTopic(phrase string) string {
	words := strings.Fields(phrase)
	trim := func(w string) string { return strings.Trim(w, `"'“”«»()[]{},.;:!?`+"`") }
	skip := func(w string) bool {
		lw := strings.ToLower(trim(w))
		return lw == "" || stopWords[lw] || genericWords[lw] || genericWords[stem(lw)]
	}
	for len(words) > 0 && skip(words[0]) {
		words = words[1:]
	}
	for len(words) > 0 && skip(words[len(words)-1]) {
		words = words[:len(words)-1]
	}
	if len(words) > 8 {
		words = words[:8]
	}
	for i := range words {
		words[i] = trim(words[i])
	}
	return strings.Join(words, " ")
}

// extractTopic finds the subject of a request: a query/topic pair, quoted text, the phrase after
// "for" or "about", or (when loose) the instruction itself minus instruction words.
func extractTopic(text string, loose bool) string {
	text = wordLimitRE.ReplaceAllString(text, " ")
	kvs := parseKVs(text)
	if k, ok := findKV(kvs, "query", "topic", "search", "searchquery", "keyword", "keywords", "collection",
		"category", "theme", "subject", "q"); ok {
		return cleanValue(k.value)
	}
	var skip []span
	for _, k := range kvs {
		skip = append(skip, span{k.start, k.end})
	}
	for _, q := range findQuoted(text, skip) {
		if t := cleanTopic(q.text); t != "" {
			return t
		}
	}
	// The first line that is not a list item or key/value pair carries the instruction.
	instruction := text
	if j := strings.IndexByte(text, '\n'); j >= 0 {
		instruction = text[:j]
	}
	for _, m := range aboutForRE.FindAllStringSubmatch(instruction, -1) {
		// "for a landing page about summer dresses" -> try each for/about segment in turn.
		segs := prepositionRE.Split(m[1], -1)
		for _, s := range segs {
			if t := cleanTopic(s); t != "" {
				return t
			}
		}
	}
	if loose && len(kvs) == 0 && !listItemRE.MatchString(text) {
		return cleanTopic(instruction)
	}
	return ""
}

// productName shortens a list item such as "Linen Midi Dress — $59, breathable" to its name.
func productName(item string) string {
	item = strings.TrimSpace(strings.ReplaceAll(item, "**", ""))
	if kvs := parseKVs(item); len(kvs) > 0 {
		if k, ok := findKV(kvs, "title", "name", "product"); ok {
			return k.value
		}
	}
	cut := len(item)
	for _, sep := range []string{" — ", " – ", " - ", ": ", " | ", " (", ", $", " $", ", ", " – ", "\t"} {
		if j := strings.Index(item, sep); j > 0 && j < cut {
			cut = j
		}
	}
	name := strings.Trim(strings.TrimSpace(item[:cut]), `"'“”`)
	if utf8.RuneCountInString(name) > 60 {
		name = truncateWords(name, 8)
	}
	return name
}

// jsonProducts returns title/name fields of objects in a JSON array or in an object's array field.
func jsonProducts(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '[' && s[0] != '{') {
		return nil
	}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	return namesIn(v)
}

func namesIn(v any) []string {
	switch t := v.(type) {
	case []any:
		var out []string
		for _, e := range t {
			if o, ok := e.(map[string]any); ok {
				if n := objectName(o); n != "" {
					out = append(out, n)
				}
			} else if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	case map[string]any:
		for _, k := range []string{"products", "items", "results", "data", "hits"} {
			if arr, ok := t[k].([]any); ok {
				return namesIn(arr)
			}
		}
	}
	return nil
}

func objectName(o map[string]any) string {
	for _, k := range []string{"title", "name", "product_name", "label"} {
		if s, ok := o[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// embeddedJSONNames decodes JSON arrays and objects embedded in free text and returns the
// title/name fields of their items.
func embeddedJSONNames(text string) []string {
	tries := 0
	for i := 0; i < len(text) && tries < 32; i++ {
		if text[i] != '[' && text[i] != '{' {
			continue
		}
		tries++
		var v any
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		if dec.Decode(&v) != nil {
			continue
		}
		if names := namesIn(v); len(names) > 0 {
			return names
		}
		i += int(dec.InputOffset()) - 1
	}
	return nil
}

func extractProducts(text string) []string {
	if p := embeddedJSONNames(text); len(p) > 0 {
		return p
	}
	var out []string
	if k, ok := findKV(parseKVs(text), "products", "items"); ok && !strings.Contains(text[k.start:k.end], "\n") {
		for _, p := range strings.Split(k.raw, ",") {
			if p = cleanValue(p); p != "" {
				out = append(out, p)
			}
		}
		if len(out) > 1 {
			return out
		}
		out = nil
	}
	for _, m := range listItemRE.FindAllStringSubmatch(text, -1) {
		if n := productName(m[1]); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// factsFrom reads the subject and the products of the conversation: the last user message first,
// then earlier user messages and tool results.
func factsFrom(msgs []Message) copyFacts {
	var f copyFacts
	seen := map[string]bool{}
	addProducts := func(ps []string) {
		for _, p := range ps {
			if k := strings.ToLower(p); !seen[k] {
				seen[k] = true
				f.products = append(f.products, p)
			}
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		switch m.Role {
		case RoleUser:
			if f.topic == "" {
				f.topic = extractTopic(m.Content, true)
			}
			if len(f.products) == 0 {
				addProducts(extractProducts(m.Content))
			}
		case RoleTool:
			if len(f.products) == 0 {
				addProducts(jsonProducts(m.Content))
			}
		}
	}
	if f.topic == "" {
		f.topic = extractTopic(systemText(msgs), false)
		if len(strings.Fields(f.topic)) > 5 { // a whole system instruction, not a subject
			f.topic = ""
		}
	}
	f.total = len(f.products)
	return f
}

// ---- copy templates ----

type copyKind int

const (
	kindIntro copyKind = iota
	kindHeadline
	kindTagline
	kindMeta
	kindCTA
	kindHelp
)

var copyWords = []string{"write", "copy", "intro", "introduction", "description", "describe",
	"headline", "title", "tagline", "blurb", "paragraph", "generate", "create", "draft", "landing",
	"page", "seo", "meta", "cta", "slogan", "subtitle", "summary", "summarize", "text"}

// instructionLine is the part of a message that says what to do: its first line, before any
// inline JSON data.
func instructionLine(text string) string {
	if j := strings.IndexByte(text, '\n'); j >= 0 {
		text = text[:j]
	}
	if j := strings.IndexAny(text, "[{"); j >= 0 {
		text = text[:j]
	}
	return text
}

func detectKind(instruction string, f copyFacts) copyKind {
	toks := tokenize(nil, instruction)
	has := func(ws ...string) bool {
		for _, t := range toks {
			if slices.Contains(ws, t) {
				return true
			}
		}
		return false
	}
	switch {
	case has("meta", "seo"):
		return kindMeta
	case has("cta", "button") || strings.Contains(strings.ToLower(instruction), "call to action"):
		return kindCTA
	case has("tagline", "slogan", "subtitle", "subheading"):
		return kindTagline
	case has("headline", "title", "heading", "h1") && !has("intro", "introduction", "paragraph", "description"):
		return kindHeadline
	case has(copyWords...) || f.topic != "" && len(f.products) > 0:
		return kindIntro
	case len(f.products) > 0:
		return kindIntro
	default:
		return kindHelp
	}
}

func pick(h uint64, salt string, options []string) string {
	return options[stableHash(strconv.FormatUint(h, 16), salt)%uint64(len(options))]
}

func titleCase(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		r, n := utf8.DecodeRuneInString(w)
		if i > 0 && stopWords[strings.ToLower(w)] && len(w) <= 3 {
			continue
		}
		words[i] = string(unicode.ToTitle(r)) + w[n:]
	}
	return strings.Join(words, " ")
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	case 2:
		return items[0] + " and " + items[1]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func (f copyFacts) subject() string {
	if f.topic != "" {
		return f.topic
	}
	if len(f.products) > 0 {
		return "our top picks"
	}
	return "our latest products"
}

func fill(tmpl string, f copyFacts) string {
	r := strings.NewReplacer(
		"{topic}", f.subject(),
		"{Topic}", titleCase(f.subject()),
		"{p1}", at(f.products, 0),
		"{p2}", at(f.products, 1),
		"{p3}", at(f.products, 2),
		"{list}", joinAnd(first(f.products, 3)),
		"{n}", strconv.Itoa(f.total),
	)
	return capitalize(r.Replace(tmpl))
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func introCopy(f copyFacts, h uint64) string {
	switch {
	case len(f.products) >= 3:
		return fill(pick(h, "intro3", []string{
			"Discover {topic}, hand-picked for you. From the {p1} to the {p2}, every one of these {n} picks earns its place, so you can find your new favourite in minutes.",
			"Looking for {topic}? Start with the {p1}, compare it with the {p2} and the {p3}, then explore the rest of our {n} hand-picked products.",
			"Our {topic} edit brings together standouts like the {list}. Each one is chosen for quality, value and style, so you can shop with confidence.",
			"Everything you need for {topic}, in one place. Highlights include the {list}, all ready to ship.",
		}), f)
	case len(f.products) >= 1:
		return fill(pick(h, "intro1", []string{
			"Discover {topic}, hand-picked for you. Start with the {list}: chosen for quality, value and everyday style.",
			"Looking for {topic}? Meet the {list}, a favourite with shoppers who want quality without the guesswork.",
			"Our {topic} selection puts the {list} front and centre, so you can compare the details and shop with confidence.",
		}), f)
	default:
		return fill(pick(h, "intro0", []string{
			"Discover our curated selection of {topic}. Every piece is chosen for quality, value and everyday style, so finding the right one is easy.",
			"Looking for {topic}? You're in the right place: explore our favourites, compare the details and find the one that fits you best.",
			"Meet our {topic} collection: hand-picked essentials and fresh finds, brought together so you can shop with confidence.",
			"From everyday essentials to standout finds, our {topic} range has something for everyone. Browse the collection and find your new favourite.",
		}), f)
	}
}

func headlineCopy(f copyFacts, h uint64) string {
	return fill(pick(h, "headline", []string{
		"{Topic}: Our Top Picks",
		"Shop {Topic}",
		"The {Topic} Edit",
		"Discover {Topic}",
		"{Topic}, Hand-Picked for You",
	}), f)
}

func taglineCopy(f copyFacts, h uint64) string {
	return fill(pick(h, "tagline", []string{
		"Hand-picked {topic}, ready when you are.",
		"The best of {topic}, all in one place.",
		"Quality {topic} without the guesswork.",
		"Find your favourite {topic} today.",
	}), f)
}

func metaCopy(f copyFacts, h uint64) string {
	var s string
	if len(f.products) > 0 {
		s = fill(pick(h, "meta", []string{
			"Shop {topic}: {n} hand-picked products including the {p1}. Compare the details and find your favourite.",
			"Discover {topic}, from the {p1} and more. Hand-picked quality, great value and fast delivery.",
		}), f)
	} else {
		s = fill(pick(h, "meta", []string{
			"Shop {topic}: hand-picked quality, great value and fast delivery. Compare the details and find your favourite.",
			"Discover our selection of {topic}. Hand-picked quality and everyday value, all in one place.",
		}), f)
	}
	return truncateRunes(s, 155)
}

func ctaCopy(f copyFacts, h uint64) string {
	return fill(pick(h, "cta", []string{
		"Shop {topic}",
		"Explore {topic}",
		"Find your favourite",
		"Browse the collection",
	}), f)
}

func keywordsOf(f copyFacts) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		for _, t := range contentTokens(nil, s) {
			if !seen[t] && !genericWords[t] && utf8.RuneCountInString(t) > 2 {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	add(f.topic)
	for _, p := range f.products {
		add(p)
	}
	if len(out) > 8 {
		out = out[:8]
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func bulletsOf(f copyFacts, h uint64) []string {
	if len(f.products) == 0 {
		return []string{
			fill("Hand-picked {topic}", f),
			"Quality you can count on",
			"Great value, every day",
		}
	}
	var out []string
	for i, p := range first(f.products, 5) {
		out = append(out, pick(h+uint64(i), "bullet", []string{
			"The " + p + ": a standout pick",
			p + ", chosen for quality and value",
			p + ", a shopper favourite",
		}))
	}
	return out
}

func helpText() string {
	return "I'm Cohort's local assistant: no external language model is configured, so I write short template copy. " +
		"Ask me for an intro, headline, tagline or meta description for a search query or a list of products."
}

// truncateRunes cuts s to at most n runes (the last being "…"), at a space when there is one.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut, lastSpace, count := 0, 0, 0
	for i := range s {
		if count == n-1 {
			cut = i
			break
		}
		if s[i] == ' ' {
			lastSpace = i
		}
		count++
	}
	if lastSpace > 0 {
		cut = lastSpace
	}
	return strings.TrimRight(s[:cut], " ,;:") + "…"
}

func truncateWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) <= n {
		return s
	}
	return strings.Join(w[:n], " ")
}

var wordLimitRE = regexp.MustCompile(`(?i)(?:\b(?:under|at most|max(?:imum)?|no more than|up to|within|in|of|about|around)\s+)?(\d{1,4})\s*(?:-|\s)?words?\b`)

// limitWords keeps whole sentences of s within an explicit "N words" request in the instruction.
func limitWords(s, instruction string) string {
	m := wordLimitRE.FindStringSubmatch(instruction)
	if m == nil {
		return s
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 || len(strings.Fields(s)) <= n {
		return s
	}
	var kept []string
	count := 0
	for _, sent := range splitSentences(s) {
		c := len(strings.Fields(sent))
		if count+c > n {
			break
		}
		kept = append(kept, sent)
		count += c
	}
	if len(kept) == 0 {
		return strings.TrimRight(truncateWords(s, n), ",;:") + "…"
	}
	return strings.Join(kept, " ")
}

func splitSentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && (i+1 == len(s) || s[i+1] == ' ') {
			out = append(out, strings.TrimSpace(s[start:i+1]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

func copyFor(kind copyKind, f copyFacts, h uint64) string {
	switch kind {
	case kindHeadline:
		return headlineCopy(f, h)
	case kindTagline:
		return taglineCopy(f, h)
	case kindMeta:
		return metaCopy(f, h)
	case kindCTA:
		return ctaCopy(f, h)
	case kindHelp:
		return helpText()
	default:
		return introCopy(f, h)
	}
}

func textAnswer(req ChatRequest) string {
	msgs := req.Messages
	f := factsFrom(msgs)
	instruction := lastUser(msgs)
	kind := detectKind(instructionLine(instruction), f)
	if kind == kindHelp {
		if k := detectKind(systemText(msgs), f); k != kindHelp && (f.topic != "" || len(f.products) > 0) {
			kind = k
		}
	}
	h := conversationKey(msgs)
	text := limitWords(copyFor(kind, f, h), instruction)
	if !req.JSONMode {
		return text
	}
	def := map[string]any{"content": text}
	switch kind {
	case kindIntro:
		def = map[string]any{"title": headlineCopy(f, h), "intro": text}
	case kindHelp:
		def = map[string]any{"message": text}
	}
	return jsonAnswer(msgs, f, text, def)
}

// ---- JSON mode ----

var keysListRE = regexp.MustCompile("(?i)\\b(?:keys|fields|properties)\\b\\s*:?\\s*([\\w\"'`, ]+(?:\\s+and\\s+[\\w\"'`]+)?)")

// jsonTemplate finds the shape the prompt asks for: a JSON object example, or a list of keys
// ("with keys headline, intro and cta").
func jsonTemplate(msgs []Message) map[string]any {
	var order []string
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser || msgs[i].Role == RoleSystem {
			order = append(order, msgs[i].Content)
		}
	}
	for _, text := range order {
		tries := 0
		for i := 0; i < len(text) && tries < 32; i++ {
			if text[i] != '{' {
				continue
			}
			tries++
			var m map[string]any
			if json.NewDecoder(strings.NewReader(text[i:])).Decode(&m) == nil && len(m) > 0 {
				return m
			}
		}
	}
	for _, text := range order {
		if m := keysListRE.FindStringSubmatch(text); m != nil {
			tmpl := map[string]any{}
			for _, part := range keySepRE.Split(m[1], -1) {
				k := part
				if w := strings.Fields(part); len(w) > 0 {
					k = strings.Trim(w[0], "\"'`")
				}
				if identRE.MatchString(k) {
					tmpl[k] = ""
				}
			}
			if len(tmpl) > 0 {
				return tmpl
			}
		}
	}
	return nil
}

func jsonAnswer(msgs []Message, f copyFacts, mainText string, def map[string]any) string {
	obj := def
	if tmpl := jsonTemplate(msgs); tmpl != nil {
		obj = fillTemplate(tmpl, f, conversationKey(msgs), mainText)
	}
	b, err := json.Marshal(obj)
	if err != nil { // cannot happen for the values built here
		return `{}`
	}
	return string(b)
}

func fillTemplate(tmpl map[string]any, f copyFacts, h uint64, mainText string) map[string]any {
	out := make(map[string]any, len(tmpl))
	for k, example := range tmpl {
		out[k] = valueFor(k, example, f, h, mainText)
	}
	return out
}

func valueFor(key string, example any, f copyFacts, h uint64, mainText string) any {
	k := strings.ToLower(key)
	has := func(parts ...string) bool {
		for _, p := range parts {
			if strings.Contains(k, p) {
				return true
			}
		}
		return false
	}
	switch ex := example.(type) {
	case map[string]any:
		return fillTemplate(ex, f, h, mainText)
	case []any:
		switch {
		case has("bullet", "highlight", "feature", "point", "benefit"):
			return toAny(bulletsOf(f, h))
		case has("product", "item", "pick"):
			if len(f.products) > 0 {
				return toAny(f.products)
			}
			return []any{}
		default:
			return toAny(keywordsOf(f))
		}
	case float64, bool:
		return ex
	}
	switch {
	case has("slug"):
		return slugify(f.subject())
	case has("meta", "seo"):
		return metaCopy(f, h)
	case has("cta", "button", "call_to_action", "calltoaction"):
		return ctaCopy(f, h)
	case has("tagline", "subtitle", "subheading", "subhead", "slogan"):
		return taglineCopy(f, h)
	case has("title", "headline", "heading", "h1", "name"):
		return headlineCopy(f, h)
	case has("keyword", "tag"):
		return strings.Join(keywordsOf(f), ", ")
	case has("bullet", "highlight", "feature"):
		return strings.Join(bulletsOf(f, h), "; ")
	default:
		return mainText
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func slugify(s string) string {
	return strings.Join(tokenize(nil, s), "-")
}

// ---- tool results ----

// summarizeToolResults describes the trailing tool messages in one or two sentences.
func summarizeToolResults(msgs []Message) string {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == RoleTool {
		start--
	}
	names := map[string]string{}
	for _, m := range msgs[:start] {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
		}
	}
	var parts []string
	for _, m := range msgs[start:] {
		name := m.Name
		if name == "" {
			name = names[m.ToolCallID]
		}
		if name == "" {
			name = "the tool"
		}
		parts = append(parts, describeResult(name, m.Content))
	}
	return "Done. " + strings.Join(parts, " ")
}

func describeResult(name, content string) string {
	content = strings.TrimSpace(content)
	var v any
	name = "The " + name + " tool"
	if content == "" {
		return name + " finished with no output."
	}
	if json.Unmarshal([]byte(content), &v) != nil {
		return name + " returned: " + truncateRunes(strings.Join(strings.Fields(content), " "), 200)
	}
	switch t := v.(type) {
	case []any:
		return name + " returned " + countPhrase(len(t)) + withNames(namesIn(t)) + "."
	case map[string]any:
		if e, ok := t["error"]; ok && e != nil && e != false && e != "" {
			return name + " reported an error: " + scalarText(e) + "."
		}
		for _, key := range []string{"products", "items", "results", "data", "hits"} {
			if arr, ok := t[key].([]any); ok {
				return name + " returned " + countPhrase(len(arr)) + withNames(namesIn(arr)) + "."
			}
		}
		keys := make([]string, 0, len(t))
		for k, val := range t {
			switch val.(type) {
			case string, float64, bool:
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var fields []string
		for _, k := range first(keys, 4) {
			fields = append(fields, k+" "+scalarText(t[k]))
		}
		if len(fields) == 0 {
			return name + " completed."
		}
		return name + " completed with " + joinAnd(fields) + "."
	default:
		return name + " returned " + scalarText(v) + "."
	}
}

func countPhrase(n int) string {
	if n == 1 {
		return "1 result"
	}
	return strconv.Itoa(n) + " results"
}

func withNames(names []string) string {
	if len(names) == 0 {
		return ""
	}
	quoted := make([]string, 0, 3)
	for _, n := range first(names, 3) {
		quoted = append(quoted, strconv.Quote(n))
	}
	return ", including " + joinAnd(quoted)
}

func scalarText(v any) string {
	switch t := v.(type) {
	case string:
		return truncateRunes(t, 120)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	case map[string]any:
		if m, ok := t["message"].(string); ok {
			return truncateRunes(m, 120)
		}
	}
	b, _ := json.Marshal(v)
	return truncateRunes(string(b), 120)
}
