package draft

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrNotUnderstood means Rules could not turn the description into a definition. The wrapping
// error says which part failed and what the rules understand.
var ErrNotUnderstood = errors.New("description not understood")

// understood is appended to every ErrNotUnderstood so the marketer can rephrase.
const understood = `the rule-based drafter understands clauses joined by "and", "but" or "," (all must hold) ` +
	`and "or" (any may hold), such as: "spent over 100 in the last 30 days", "average order value above 50", ` +
	`"placed an order over $200", "haven't ordered in 30 days", "lapsed for over 60 days", ` +
	`"ordered in the last 7 days", "ordered between 7 and 30 days ago", "never ordered", ` +
	`"visited more than 5 times in the last week", "viewed at least 3 pages", "viewed the pricing page", ` +
	`"viewed a product", "added to cart in the last 3 days", "signed up in the last 7 days", ` +
	`"on the pro plan", "plan is pro or enterprise", "country is DE", "from Germany", "age over 30", ` +
	`"has an email", "has no phone number", "in segment 12"`

func notUnderstood(format string, args ...any) error {
	return fmt.Errorf("%w: %s; %s", ErrNotUnderstood, fmt.Sprintf(format, args...), understood)
}

// Limits of the rule-based drafter.
const (
	maxDescriptionBytes = 4000
	maxConditions       = 50
	maxDays             = 36500
	maxAmount           = 1e15
	maxCount            = 1e9
	maxValueWords       = 6
)

// Operators and types of the definition.
const (
	opEq  = "eq"
	opNeq = "neq"
	opGt  = "gt"
	opGte = "gte"
	opLt  = "lt"
	opLte = "lte"
	opIn  = "in"

	typeMonetary  = "monetary"
	typeRecency   = "recency"
	typeFrequency = "frequency"
	typeTrait     = "trait"
	typeEventProp = "event_property"
	typeInSegment = "in_segment"

	logicAnd = "AND"
	logicOr  = "OR"
)

// cond is a group (Logic set) or a condition (Type set) of the definition. Field order is the
// JSON key order.
type cond struct {
	Logic       string  `json:"logic,omitempty"`
	Conditions  []*cond `json:"conditions,omitempty"`
	Type        string  `json:"type,omitempty"`
	EventType   string  `json:"event_type,omitempty"`
	Property    string  `json:"property,omitempty"`
	Trait       string  `json:"trait,omitempty"`
	Metric      string  `json:"metric,omitempty"`
	Operator    string  `json:"operator,omitempty"`
	Value       any     `json:"value,omitempty"` // nil is omitted; a number 0 is kept
	WindowDays  int     `json:"window_days,omitempty"`
	BetweenDays []int   `json:"between_days,omitempty"`
	SegmentID   int64   `json:"segment_id,omitempty"`
	Negate      bool    `json:"negate,omitempty"`
}

func (c *cond) clone() *cond {
	d := *c
	d.BetweenDays = slices.Clone(c.BetweenDays)
	if vs, ok := c.Value.([]any); ok {
		d.Value = slices.Clone(vs)
	}
	return &d
}

// not negates c: monetary conditions carry negate themselves, anything else is wrapped in a
// negated group.
func not(c *cond) *cond {
	if c.Type == typeMonetary {
		c.Negate = true
		return c
	}
	return &cond{Logic: logicAnd, Conditions: []*cond{c}, Negate: true}
}

// Rules is the deterministic drafter: it understands simple English descriptions (see the
// understood constant) and returns a definition. Clauses joined by "and", "but" or "," are ANDed;
// "or" separates alternatives (and binds looser than "and"). Errors wrap ErrNotUnderstood.
func Rules(description string, h Hints) (json.RawMessage, error) {
	if len(description) > maxDescriptionBytes {
		return nil, notUnderstood("the description is longer than %d bytes", maxDescriptionBytes)
	}
	p := parser{v: newVocab(h)}
	root, err := p.parse(description)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("encode definition: %w", err)
	}
	return b, nil
}

type parser struct {
	v vocab
}

// clauseResult is what one clause contributes.
type clauseResult struct {
	conds  []*cond // ANDed
	base   *cond   // the plain (unnegated) condition later elliptical clauses refer to
	merged bool    // the clause was a further value of the previous trait ("pro or enterprise")
}

func (p *parser) parse(description string) (*cond, error) {
	text := normalize(description)
	type item struct {
		conds []*cond
		or    bool
	}
	var items []item
	var prev *cond
	pendingOr := false
	for _, pc := range splitClauses(text) {
		pendingOr = pendingOr || pc.or
		cl := stripFiller(pc.text)
		if cl == "" {
			continue
		}
		res, err := p.clause(cl, prev)
		if err != nil {
			return nil, err
		}
		if res.merged {
			pendingOr = false
			continue
		}
		items = append(items, item{conds: res.conds, or: pendingOr && len(items) > 0})
		pendingOr = false
		prev = res.base
	}
	if len(items) == 0 {
		return nil, notUnderstood("the description has no condition")
	}
	var branches [][]*cond
	for i, it := range items {
		if i == 0 || it.or {
			branches = append(branches, nil)
		}
		branches[len(branches)-1] = append(branches[len(branches)-1], it.conds...)
	}
	var root *cond
	if len(branches) == 1 {
		root = &cond{Logic: logicAnd, Conditions: branches[0]}
	} else {
		root = &cond{Logic: logicOr}
		for _, b := range branches {
			if len(b) == 1 {
				root.Conditions = append(root.Conditions, b[0])
			} else {
				root.Conditions = append(root.Conditions, &cond{Logic: logicAnd, Conditions: b})
			}
		}
	}
	if n := countConditions(root); n > maxConditions {
		return nil, notUnderstood("the description has %d conditions; at most %d are allowed", n, maxConditions)
	}
	return root, nil
}

func countConditions(c *cond) int {
	if c.Type != "" {
		return 1
	}
	n := 0
	for _, sub := range c.Conditions {
		n += countConditions(sub)
	}
	return n
}

// clause turns one clause into conditions. prev is the previous clause's base condition.
func (p *parser) clause(s string, prev *cond) (clauseResult, error) {
	if r, ok, err := p.segment(s); ok || err != nil {
		return r, err
	}
	t, rest, err := extractTime(s)
	if err != nil {
		return clauseResult{}, err
	}
	if t.kind == noTime {
		if r, ok, err := p.trait(s); ok || err != nil {
			return r, err
		}
	}
	if r, ok, err := p.event(rest, t); ok || err != nil {
		return r, err
	}
	if r, ok, err := p.ellipsis(rest, t, prev); ok || err != nil {
		return r, err
	}
	if t.kind == noTime && p.merge(s, prev) {
		return clauseResult{merged: true}, nil
	}
	return clauseResult{}, notUnderstood("could not understand %q", display(s))
}

func single(c *cond) clauseResult {
	return clauseResult{conds: []*cond{c}, base: c}
}

// ---------------------------------------------------------------------------------------------
// Words

var (
	reNeg = regexp.MustCompile(`(?i)\b(?:not|no|none|nothing|nobody|without|never|cannot|neither|nor|(?:haven|hasn|hadn|didn|don|doesn|isn|aren|wasn|weren|won|can|wouldn|shouldn)'?t)\b`)
	// reNever marks "never did X" (frequency eq 0).
	reNever = regexp.MustCompile(`(?i)\bnever\b`)
	// reLapsed words mean "not for a while" without a negation.
	reLapsed = regexp.MustCompile(`(?i)\b(?:lapsed|lapsing|churned|churning|dormant|inactive|gone\s+quiet|gone\s+cold)\b`)
	// reMoney marks monetary clauses (besides an amount written with a currency).
	reMoney = regexp.MustCompile(`(?i)\b(?:spen[dt]|spends|spending|spender|revenue|ltv|clv|lifetime\s+value|customer\s+value|order\s+values?|aov|basket\s+(?:size|value)|cart\s+value|total\s+value|purchase\s+values?|paid|pay|paying|worth|gmv|sales|amount|order\s+totals?|totall?ing)\b`)
	reAvg   = regexp.MustCompile(`(?i)\b(?:average|avg|mean|aov|typical)\b`)
	reMax   = regexp.MustCompile(`(?i)\b(?:largest|biggest|highest|max(?:imum)?|most\s+expensive|single|an?\s+(?:order|purchase)|one\s+(?:order|purchase)|any\s+(?:order|purchase)|order\s+(?:of|worth))\b`)
	reMin   = regexp.MustCompile(`(?i)\b(?:smallest|lowest|cheapest|min(?:imum)?\s+order)\b`)
	// reIdentTok is an explicit event name written in the text ("did app_opened").
	reIdentTok = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9]*(?:[_:][A-Za-z0-9]+)+\b`)
)

func hasNeg(s string) bool { return reNeg.MatchString(s) }

// mentionsActivity reports whether s names an event, spending or inactivity, so it is not a
// profile trait.
func mentionsActivity(l string) bool {
	if reMoney.MatchString(l) || reLapsed.MatchString(l) {
		return true
	}
	for _, c := range concepts {
		if c.re.MatchString(l) {
			return true
		}
	}
	return false
}

// fillerWords may remain in an elliptical clause ("but not in the last 7 days").
var fillerWords = map[string]bool{
	"not": true, "no": true, "never": true, "none": true, "nothing": true, "but": true, "and": true,
	"also": true, "even": true, "again": true, "any": true, "anything": true, "at": true, "all": true,
	"did": true, "do": true, "does": true, "have": true, "has": true, "had": true, "it": true,
	"so": true, "that": true, "this": true, "too": true, "was": true, "were": true, "yet": true,
	"still": true, "only": true, "except": true, "either": true, "then": true, "they": true,
	"times": true, "time": true, "x": true, "or": true, "just": true, "once": true,
}

func onlyFiller(s string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '\'')
	}) {
		if !fillerWords[w] && !reNeg.MatchString(w) {
			return false
		}
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
}

// ---------------------------------------------------------------------------------------------
// Segments

var (
	reSegment       = regexp.MustCompile(`(?i)\bsegments?\s*(?:#\s*|id\s*|number\s*|no\.?\s*)?(\d+)\b`)
	reSegmentFiller = regexp.MustCompile(`(?i)^(?:(?:not|never|no|are|is|in|of|part|members?|belong|belongs|belonging|to|within|inside|the|from|a|an|who|aren'?t|isn'?t|don'?t|doesn'?t|do|does|already|currently|that|which)\s*)*$`)
)

func (p *parser) segment(s string) (clauseResult, bool, error) {
	m := reSegment.FindStringSubmatchIndex(s)
	if m == nil {
		return clauseResult{}, false, nil
	}
	rest := collapse(s, m[0], m[1])
	if !reSegmentFiller.MatchString(rest) {
		return clauseResult{}, false, nil
	}
	id, err := strconv.ParseInt(s[m[2]:m[3]], 10, 64)
	if err != nil || id <= 0 {
		return clauseResult{}, true, notUnderstood("%q is not a valid segment id", s[m[2]:m[3]])
	}
	c := &cond{Type: typeInSegment, SegmentID: id}
	r := single(c)
	if hasNeg(rest) {
		r.conds = []*cond{not(c)}
	}
	return r, true, nil
}

// ---------------------------------------------------------------------------------------------
// Traits

const keyPat = `([a-z][\w.-]*(?:\s+[a-z][\w.-]*){0,2}?)`

type traitOp struct {
	op     string
	negate bool
}

// traitOps are the "<key> <op> <value>" verbs, by phrase.
var traitOps = map[string]traitOp{
	"is not equal to": {op: opNeq}, "does not equal": {op: opNeq}, "doesn't equal": {op: opNeq},
	"is different from": {op: opNeq}, "is anything but": {op: opNeq}, "is other than": {op: opNeq},
	"not equal to": {op: opNeq}, "is not": {op: opNeq}, "isn't": {op: opNeq}, "are not": {op: opNeq},
	"aren't": {op: opNeq}, "is never": {op: opNeq},
	"does not contain": {op: "contains", negate: true}, "doesn't contain": {op: "contains", negate: true},
	"does not include": {op: "contains", negate: true}, "doesn't include": {op: "contains", negate: true},
	"not containing":      {op: "contains", negate: true},
	"does not start with": {op: "starts_with", negate: true}, "doesn't start with": {op: "starts_with", negate: true},
	"is one of": {op: opIn}, "is any of": {op: opIn}, "is either": {op: opIn}, "is in": {op: opIn},
	"are in": {op: opIn}, "any of": {op: opIn}, "in": {op: opIn},
	"starts with": {op: "starts_with"}, "begins with": {op: "starts_with"}, "starting with": {op: "starts_with"},
	"beginning with": {op: "starts_with"}, "start with": {op: "starts_with"}, "begin with": {op: "starts_with"},
	"ends with": {op: "ends_with"}, "ending with": {op: "ends_with"}, "end with": {op: "ends_with"},
	"contains": {op: "contains"}, "includes": {op: "contains"}, "containing": {op: "contains"},
	"including": {op: "contains"}, "is like": {op: "contains"}, "like": {op: "contains"},
	"is equal to": {op: opEq}, "is exactly": {op: opEq}, "equals": {op: opEq}, "equal to": {op: opEq},
	"is": {op: opEq}, "are": {op: opEq}, "was": {op: opEq}, "matches": {op: opEq},
}

func alternation(m map[string]traitOp) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	for i, k := range keys {
		keys[i] = strings.ReplaceAll(regexp.QuoteMeta(k), " ", `\s+`)
	}
	return "(" + strings.Join(keys, "|") + ")"
}

const negPrefix = `((?:not|never|aren'?t|isn'?t|are\s+not|is\s+not|don'?t|doesn'?t|do\s+not|does\s+not)\s+)?`

var (
	rePlan        = regexp.MustCompile(`(?i)^` + negPrefix + `(?:(?:on|in|with|using|subscribed\s+to|has|have|having|paying\s+for|signed\s+up\s+for)\s+)?(?:(?:the|a|an|their)\s+)?([\w.+-]+)\s+(plan|tier|subscription|package|pricing\s+plan)s?$`)
	reTraitExists = regexp.MustCompile(`(?i)^(?:(?:the|their|whose)\s+)?` + keyPat + `\s+(is\s+set|is\s+present|is\s+known|is\s+provided|is\s+filled(?:\s+in)?|is\s+not\s+empty|exists|is\s+not\s+set|isn'?t\s+set|is\s+empty|is\s+missing|is\s+unknown|is\s+not\s+known|is\s+blank|is\s+null|is\s+absent|does\s+not\s+exist|doesn'?t\s+exist)$`)
	reTraitNum    = regexp.MustCompile(`(?i)^(?:(?:the|their|whose)\s+)?` + keyPat + `\s+(?:(?:is|are|was)\s+)?(` + compAlt + `)\s+(\d+(?:\.\d+)?)` + currencyMark + `?$`)
	reTraitOp     = regexp.MustCompile(`(?i)^(?:(?:the|their|whose|his|her|its)\s+)?` + keyPat + `\s+` + alternation(traitOps) + `\s+(.+)$`)
	reCountry     = regexp.MustCompile(`(?i)^` + negPrefix + `(?:(?:is|are|lives?|living|located|based|resident|residing|coming)\s+)?(?:(from)|in)\s+(?:the\s+)?([\p{L}][\p{L}.' -]{0,60})$`)
	reHas         = regexp.MustCompile(`(?i)^` + negPrefix + `(has\s+no|have\s+no|with\s+no|has\s+not\s+got|hasn'?t\s+got|haven'?t\s+got|has\s+got|have\s+got|has\s+not|have\s+not|hasn'?t|haven'?t|has|have|having|with|without|no|missing|lacks?|lacking)\s+(?:(?:an?|the|any|a\s+valid|valid|their|a\s+known|known)\s+)?` + keyPat + `(?:\s+(?:set|on\s+file|stored|present|provided|known))?$`)
	reExistsNeg   = regexp.MustCompile(`(?i)not\s+set|isn'?t|empty|missing|unknown|not\s+known|blank|null|absent|not\s+exist|n'?t\s+exist`)
	reHasNeg      = regexp.MustCompile(`(?i)\bno\b|not|n'?t|without|missing|lack`)
	reNumber      = regexp.MustCompile(`^\d+(?:\.\d+)?` + currencyMark + `?$`)
	reQuoted      = regexp.MustCompile(`^["'](.*)["']$`)
	reBareValue   = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N} ._@+/'-]{0,63}$`)
)

// Words that cannot be (part of) a trait key in "<key> <op> <value>".
var notKeyWords = map[string]bool{
	"not": true, "no": true, "never": true, "has": true, "have": true, "had": true, "is": true,
	"are": true, "was": true, "did": true, "do": true, "does": true, "who": true, "the": true, "a": true,
	"an": true, "in": true, "on": true, "at": true, "for": true, "with": true, "from": true, "of": true,
	"and": true, "or": true, "but": true, "they": true, "it": true, "any": true, "all": true,
}

// Keys that take a bare "in" ("country in DE") without being a known trait.
var inKeys = map[string]bool{
	"country": true, "country_code": true, "city": true, "region": true, "state": true, "plan": true,
	"tier": true, "language": true, "locale": true, "timezone": true, "status": true, "role": true,
}

// Keys meaning a page's address: "url contains pricing" is about page views, not a trait.
var pageKeys = map[string]bool{
	"url": true, "path": true, "page": true, "page url": true, "page path": true, "page_url": true,
	"page_path": true, "pathname": true,
}

func validKey(key string) bool {
	for _, w := range strings.Fields(strings.ToLower(key)) {
		if notKeyWords[w] {
			return false
		}
	}
	return !mentionsActivity(strings.ToLower(key))
}

// traitValue converts a written value: numbers become numbers, true/false booleans, quotes go.
func traitValue(s string) (any, bool) {
	s = strings.TrimSpace(s)
	if m := reQuoted.FindStringSubmatch(s); m != nil {
		s = strings.TrimSpace(m[1])
		if s == "" {
			return nil, false
		}
		return s, true
	}
	s = strings.Trim(s, "\"'")
	if s == "" || len(strings.Fields(s)) > maxValueWords {
		return nil, false
	}
	if reNumber.MatchString(s) {
		if v, ok := parseAmount(strings.TrimSuffix(s, currencyMark)); ok {
			return v, true
		}
		return nil, false
	}
	switch strings.ToLower(s) {
	case "true", "yes":
		return true, true
	case "false":
		return false, true
	}
	return display(s), true
}

func (p *parser) trait(s string) (clauseResult, bool, error) {
	l := strings.ToLower(s)
	if m := rePlan.FindStringSubmatch(s); m != nil {
		value, word := m[2], strings.ToLower(m[3])
		key := "plan"
		if word == "tier" {
			key = "tier"
		}
		key = p.v.traitKey(key)
		neg := m[1] != ""
		switch strings.ToLower(value) {
		case "any", "some":
			return single(&cond{Type: typeTrait, Trait: key, Operator: existsOp(neg)}), true, nil
		case "no":
			return single(&cond{Type: typeTrait, Trait: key, Operator: existsOp(!neg)}), true, nil
		}
		if !mentionsActivity(strings.ToLower(value)) {
			v, _ := traitValue(value)
			op := opEq
			if neg {
				op = opNeq
			}
			return single(&cond{Type: typeTrait, Trait: key, Operator: op, Value: v}), true, nil
		}
	}
	if m := reTraitExists.FindStringSubmatch(s); m != nil && validKey(m[1]) {
		if key := p.v.traitKey(m[1]); key != "" {
			neg := reExistsNeg.MatchString(m[2]) && !strings.Contains(strings.ToLower(m[2]), "not empty")
			return single(&cond{Type: typeTrait, Trait: key, Operator: existsOp(neg)}), true, nil
		}
	}
	if m := reTraitNum.FindStringSubmatch(s); m != nil && validKey(m[1]) {
		key := p.v.traitKey(m[1])
		v, ok := parseAmount(m[3])
		if key != "" && ok {
			return p.numericTrait(key, compOp(m[2]), v), true, nil
		}
	}
	if m := reTraitOp.FindStringSubmatch(s); m != nil && validKey(m[1]) {
		if r, ok, err := p.traitOp(m[1], m[2], m[3]); ok || err != nil {
			return r, ok, err
		}
	}
	if m := reCountry.FindStringSubmatch(s); m != nil && !mentionsActivity(strings.ToLower(m[3])) {
		if m[2] != "" || startsWithUpper(m[3]) || strings.Contains(l, "based") || strings.Contains(l, "live") ||
			strings.Contains(l, "located") || strings.Contains(l, "resid") {
			v, ok := traitValue(m[3])
			if ok {
				op := opEq
				if m[1] != "" {
					op = opNeq
				}
				return single(&cond{Type: typeTrait, Trait: p.v.traitKey("country"), Operator: op, Value: v}), true, nil
			}
		}
	}
	if m := reHas.FindStringSubmatch(s); m != nil && validKey(m[3]) {
		if key := p.v.traitKey(m[3]); key != "" {
			neg := reHasNeg.MatchString(m[2]) != (m[1] != "")
			return single(&cond{Type: typeTrait, Trait: key, Operator: existsOp(neg)}), true, nil
		}
	}
	return clauseResult{}, false, nil
}

func startsWithUpper(s string) bool {
	return s != "" && s[0] >= 'A' && s[0] <= 'Z'
}

func existsOp(neg bool) string {
	if neg {
		return "not_exists"
	}
	return "exists"
}

// numericTrait builds "<trait> <op> <number>"; trait conditions have no gte/lte, so those become
// an OR of gt/lt and eq.
func (p *parser) numericTrait(key, op string, v float64) clauseResult {
	mk := func(op string) *cond { return &cond{Type: typeTrait, Trait: key, Operator: op, Value: v} }
	switch op {
	case opGte:
		return single(&cond{Logic: logicOr, Conditions: []*cond{mk(opGt), mk(opEq)}})
	case opLte:
		return single(&cond{Logic: logicOr, Conditions: []*cond{mk(opLt), mk(opEq)}})
	case "":
		return single(mk(opEq))
	}
	return single(mk(op))
}

func (p *parser) traitOp(keyWords, opPhrase, value string) (clauseResult, bool, error) {
	op := traitOps[strings.Join(strings.Fields(strings.ToLower(opPhrase)), " ")]
	lowKey := strings.ToLower(strings.Join(strings.Fields(keyWords), " "))
	if op.op == "ends_with" {
		return clauseResult{}, true, notUnderstood("%q: \"ends with\" is not supported, use \"contains\" instead", keyWords+" "+opPhrase+" "+value)
	}
	v, ok := traitValue(value)
	if !ok {
		return clauseResult{}, false, nil
	}
	if pageKeys[lowKey] {
		event := p.v.eventFor(conceptPage)
		c := &cond{Type: typeEventProp, EventType: event, Property: p.v.property(event, pathProps, pathWords), Operator: op.op, Value: v}
		if op.op == opIn {
			c.Value = []any{v}
		}
		return negateIf(c, op.negate), true, nil
	}
	key := p.v.traitKey(keyWords)
	if key == "" {
		return clauseResult{}, false, nil
	}
	if op.op == opIn {
		if strings.ToLower(opPhrase) == "in" && !inKeys[key] && !slices.Contains(p.v.traits, key) {
			return clauseResult{}, false, nil
		}
		v = []any{v}
	}
	return negateIf(&cond{Type: typeTrait, Trait: key, Operator: op.op, Value: v}, op.negate), true, nil
}

func negateIf(c *cond, neg bool) clauseResult {
	r := single(c)
	if neg {
		r.conds = []*cond{not(c.clone())}
	}
	return r
}

// merge adds a bare value ("enterprise" in "plan is pro or enterprise") to the previous trait
// condition, turning eq into in.
func (p *parser) merge(s string, prev *cond) bool {
	if prev == nil || prev.Type != typeTrait || (prev.Operator != opEq && prev.Operator != opIn) {
		return false
	}
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s, "the "), "a "))
	if strings.HasSuffix(strings.ToLower(s), " plan") && (prev.Trait == p.v.traitKey("plan")) {
		s = strings.TrimSpace(s[:len(s)-len(" plan")])
	}
	if !reBareValue.MatchString(s) || len(strings.Fields(s)) > 3 || hasNeg(s) || mentionsActivity(strings.ToLower(s)) {
		return false
	}
	v, ok := traitValue(s)
	if !ok {
		return false
	}
	if prev.Operator == opEq {
		prev.Operator = opIn
		prev.Value = []any{prev.Value, v}
	} else {
		vs, _ := prev.Value.([]any)
		prev.Value = append(vs, v)
	}
	return true
}

// ---------------------------------------------------------------------------------------------
// Events and spending

func (p *parser) detectEvent(s string) (event, conceptName string) {
	for _, m := range reIdentTok.FindAllStringIndex(s, -1) {
		if m[0] > 0 && (s[m[0]-1] == '/' || s[m[0]-1] == '.') {
			continue
		}
		name := s[m[0]:m[1]]
		if identRE.MatchString(name) {
			return name, conceptOf(name)
		}
	}
	// Page addresses ("/checkout") name pages, not events.
	l := strings.ToLower(rePath.ReplaceAllString(reURL.ReplaceAllString(s, " "), " "))
	// A tenant event spelled out in the text ("opened the app" -> app_opened) wins over the
	// generic families, unless it is itself a member of one (then the family's best pick is used).
	matched := p.v.tokenMatch(l)
	if matched != "" && conceptOf(matched) == "" {
		return matched, ""
	}
	for _, c := range concepts {
		if c.re.MatchString(l) {
			return p.v.eventFor(c.name), c.name
		}
	}
	if matched != "" {
		return matched, conceptOf(matched)
	}
	return "", ""
}

func (p *parser) event(s string, t timeSpec) (clauseResult, bool, error) {
	l := strings.ToLower(s)
	money := reMoney.MatchString(l) || strings.Contains(s, currencyMark)
	event, con := p.detectEvent(s)
	lapsed := reLapsed.FindString(l)
	if !money && event == "" && lapsed == "" {
		return clauseResult{}, false, nil
	}
	if money {
		r, err := p.monetary(s, event, con, t)
		return r, true, err
	}
	if event == "" {
		con = conceptOrder
		if strings.EqualFold(lapsed, "inactive") {
			con = conceptPage
		}
		event = p.v.eventFor(con)
	}
	if con == conceptPage {
		if op, value, rest, ok := findPage(s); ok {
			r, err := p.pageVisit(event, op, value, rest, s, t)
			return r, true, err
		}
	}
	am, rest, err := findAmount(s)
	if err != nil {
		return clauseResult{}, true, err
	}
	rl := strings.ToLower(rest)
	never := reNever.MatchString(rl)
	neg := hasNeg(rl)
	if am.found {
		r, err := p.count(event, am, t, neg)
		return r, true, err
	}
	if never {
		c := &cond{Type: typeFrequency, EventType: event, Operator: opEq, Value: 0.0}
		if err := applyWindow(c, t, s); err != nil {
			return clauseResult{}, true, err
		}
		return single(c), true, nil
	}
	if lapsed != "" && t.kind == noTime {
		return clauseResult{}, true, notUnderstood("%q: say for how long, e.g. \"lapsed for over 60 days\"", display(s))
	}
	r, err := p.lastSeen(event, t, neg || lapsed != "", s)
	return r, true, err
}

// lastSeen handles "did X" / "didn't do X" with an optional time.
func (p *parser) lastSeen(event string, t timeSpec, negative bool, s string) (clauseResult, error) {
	recency := func(op string, days int) clauseResult {
		return single(&cond{Type: typeRecency, EventType: event, Operator: op, WindowDays: days})
	}
	everDid := &cond{Type: typeFrequency, EventType: event, Operator: opGte, Value: 1.0}
	switch t.kind {
	case timeWindow:
		op := t.comp
		if op == "" {
			op = opLte
			if negative {
				op = opGt
			}
		}
		return recency(op, t.days), nil
	case timeAgo:
		op := t.comp
		switch {
		case negative:
			op = opGt
		case t.since:
			op = opLte
		case op == "":
			op = opEq
		}
		return recency(op, t.days), nil
	case timeBetween:
		everDid.BetweenDays = []int{t.lo, t.hi}
		r := single(everDid)
		if negative {
			r.conds = []*cond{not(everDid.clone())}
		}
		return r, nil
	}
	if negative {
		return single(&cond{Type: typeFrequency, EventType: event, Operator: opEq, Value: 0.0}), nil
	}
	return single(everDid), nil
}

// count handles "did X more than 5 times".
func (p *parser) count(event string, am amount, t timeSpec, neg bool) (clauseResult, error) {
	mk := func(op string, v float64) (*cond, error) {
		if v != math.Trunc(v) || v > maxCount {
			return nil, notUnderstood("a count must be a whole number up to %d, not %v", int(maxCount), v)
		}
		c := &cond{Type: typeFrequency, EventType: event, Operator: op, Value: v}
		return c, applyWindow(c, t, "")
	}
	var conds []*cond
	if am.between {
		lo, err := mk(opGte, am.lo)
		if err != nil {
			return clauseResult{}, err
		}
		hi, err := mk(opLte, am.hi)
		if err != nil {
			return clauseResult{}, err
		}
		conds = []*cond{lo, hi}
	} else {
		op := am.op
		if op == "" {
			op = opGte
			if am.value == 0 {
				op = opEq
			}
		}
		c, err := mk(op, am.value)
		if err != nil {
			return clauseResult{}, err
		}
		conds = []*cond{c}
	}
	return negateAll(conds, neg), nil
}

// negateAll returns conds as a clause result, negated as a whole when neg.
func negateAll(conds []*cond, neg bool) clauseResult {
	r := clauseResult{conds: conds, base: conds[len(conds)-1].clone()}
	if !neg {
		return r
	}
	if len(conds) == 1 {
		r.conds = []*cond{not(conds[0])}
	} else {
		r.conds = []*cond{{Logic: logicAnd, Conditions: conds, Negate: true}}
	}
	return r
}

// applyWindow sets the condition's window from t. A point in time ("30 days ago") has no meaning
// for counts and sums.
func applyWindow(c *cond, t timeSpec, s string) error {
	switch t.kind {
	case timeWindow:
		c.WindowDays = t.days
	case timeBetween:
		c.BetweenDays = []int{t.lo, t.hi}
	case timeAgo:
		return notUnderstood("%q: counts and amounts take a range (\"in the last 30 days\", \"between 7 and 30 days ago\"), not a point in time", display(s))
	}
	return nil
}

func (p *parser) monetary(s, event, con string, t timeSpec) (clauseResult, error) {
	if event == "" || (con != "" && con != conceptOrder) {
		event = p.v.eventFor(conceptOrder)
	}
	am, rest, err := findAmount(s)
	if err != nil {
		return clauseResult{}, err
	}
	metric := "sum"
	switch {
	case reAvg.MatchString(rest):
		metric = "avg"
	case reMin.MatchString(rest):
		metric = "min"
	case reMax.MatchString(rest):
		metric = "max"
	}
	mk := func(op string, v float64) (*cond, error) {
		c := &cond{Type: typeMonetary, EventType: event, Property: p.v.property(event, amountProps, amountWords), Metric: metric, Operator: op, Value: v}
		return c, applyWindow(c, t, s)
	}
	var conds []*cond
	switch {
	case !am.found && metric != "sum":
		return clauseResult{}, notUnderstood("%q: say which amount, e.g. \"average order value above 50\"", display(s))
	case !am.found:
		c, err := mk(opGt, 0)
		if err != nil {
			return clauseResult{}, err
		}
		conds = []*cond{c}
	case am.between:
		lo, err := mk(opGte, am.lo)
		if err != nil {
			return clauseResult{}, err
		}
		hi, err := mk(opLte, am.hi)
		if err != nil {
			return clauseResult{}, err
		}
		conds = []*cond{lo, hi}
	default:
		op := am.op
		if op == "" {
			op = opGte
		}
		c, err := mk(op, am.value)
		if err != nil {
			return clauseResult{}, err
		}
		conds = []*cond{c}
	}
	neg := hasNeg(rest)
	if neg && len(conds) == 1 {
		// A monetary condition carries negate itself.
		base := conds[0].clone()
		conds[0].Negate = true
		return clauseResult{conds: conds, base: base}, nil
	}
	return negateAll(conds, neg), nil
}

var (
	reURL       = regexp.MustCompile(`(?i)\bhttps?://[^\s"']+`)
	rePath      = regexp.MustCompile(`(?:^|\s)(/[\w\-./~%?#:@!$&*+,;]*)`)
	rePageLike  = regexp.MustCompile(`(?i)\b(?:pages?|urls?|paths?|links?)\s+(?:that\s+contains?|containing|contains|with|including|includes|like|matching|about)\s+["']?([^\s"']+)["']?`)
	rePageDet   = regexp.MustCompile(`(?i)\b(?:the|a|an|our|your|their|any|that|this)\s+([a-z0-9][\w-]*(?:\s+[a-z0-9][\w-]*)?)\s+page\b`)
	rePageWord  = regexp.MustCompile(`(?i)\b([a-z0-9][\w-]*)\s+page\b`)
	reHomePage  = regexp.MustCompile(`(?i)\bhome\s?page\b`)
	notPageName = map[string]bool{
		"any": true, "a": true, "the": true, "one": true, "web": true, "single": true, "same": true,
		"this": true, "that": true, "every": true, "each": true, "specific": true, "particular": true,
		"product": true, "item": true, "visited": true, "viewed": true, "visit": true, "view": true,
		"saw": true, "seen": true, "opened": true, "browsed": true, "another": true, "other": true,
	}
)

// findPage finds the page a page-view clause names: a URL, a /path, "pages containing X" or
// "the pricing page" (-> contains "/pricing"; the home page -> eq "/").
func findPage(s string) (op, value, rest string, ok bool) {
	if m := reURL.FindStringIndex(s); m != nil {
		return "contains", s[m[0]:m[1]], collapse(s, m[0], m[1]), true
	}
	if m := rePath.FindStringSubmatchIndex(s); m != nil {
		return "contains", strings.TrimRight(s[m[2]:m[3]], ".,;:!?"), collapse(s, m[2], m[3]), true
	}
	if m := rePageLike.FindStringSubmatchIndex(s); m != nil {
		return "contains", s[m[2]:m[3]], collapse(s, m[0], m[1]), true
	}
	for _, re := range []*regexp.Regexp{rePageDet, rePageWord} {
		m := re.FindStringSubmatchIndex(s)
		if m == nil {
			continue
		}
		name := strings.ToLower(s[m[2]:m[3]])
		words := strings.Fields(name)
		if notPageName[words[0]] || notPageName[words[len(words)-1]] {
			continue
		}
		if name == "home" || name == "homepage" || name == "front" || name == "start" {
			return opEq, "/", collapse(s, m[0], m[1]), true
		}
		return "contains", "/" + strings.Join(words, "-"), collapse(s, m[0], m[1]), true
	}
	if m := reHomePage.FindStringIndex(s); m != nil {
		return opEq, "/", collapse(s, m[0], m[1]), true
	}
	return "", "", s, false
}

func (p *parser) pageVisit(event, op, value, rest, clause string, t timeSpec) (clauseResult, error) {
	am, rest, err := findAmount(rest)
	if err != nil {
		return clauseResult{}, err
	}
	if am.found {
		return clauseResult{}, notUnderstood("%q: counting views of one page is not supported; drop the count (\"viewed the pricing page\")", display(clause))
	}
	c := &cond{Type: typeEventProp, EventType: event, Property: p.v.property(event, pathProps, pathWords), Operator: op, Value: value}
	if err := applyWindow(c, t, clause); err != nil {
		return clauseResult{}, err
	}
	return negateAll([]*cond{c}, hasNeg(rest)), nil
}

// ellipsis handles a clause that only changes the time or the amount of the previous one:
// "spent over 100 in the last 30 days but not in the last 7 days", "... or over 500 in the last year".
func (p *parser) ellipsis(rest string, t timeSpec, prev *cond) (clauseResult, bool, error) {
	if prev == nil {
		return clauseResult{}, false, nil
	}
	switch prev.Type {
	case typeMonetary, typeFrequency, typeRecency, typeEventProp:
	default:
		return clauseResult{}, false, nil
	}
	am, r, err := findAmount(rest)
	if err != nil || !onlyFiller(r) || (t.kind == noTime && !am.found) {
		return clauseResult{}, false, nil
	}
	if am.found && prev.Type != typeMonetary && prev.Type != typeFrequency {
		return clauseResult{}, false, nil
	}
	base := prev.clone()
	base.Negate = false
	if t.kind != noTime {
		base.WindowDays, base.BetweenDays = 0, nil
		switch {
		case base.Type != typeRecency:
			if err := applyWindow(base, t, rest); err != nil {
				return clauseResult{}, true, err
			}
		case t.kind == timeBetween:
			base = &cond{Type: typeFrequency, EventType: prev.EventType, Operator: opGte, Value: 1.0, BetweenDays: []int{t.lo, t.hi}}
		default:
			base.WindowDays = t.days
			if t.comp != "" {
				base.Operator = t.comp
			}
		}
	}
	neg := hasNeg(r)
	if !am.found {
		return negateAll([]*cond{base}, neg), true, nil
	}
	if am.between {
		lo, hi := base.clone(), base.clone()
		lo.Operator, lo.Value = opGte, am.lo
		hi.Operator, hi.Value = opLte, am.hi
		return negateAll([]*cond{lo, hi}, neg), true, nil
	}
	base.Operator, base.Value = am.op, am.value
	if am.op == "" {
		base.Operator = opGte
	}
	if neg && base.Type == typeMonetary {
		c := base.clone()
		c.Negate = true
		return clauseResult{conds: []*cond{c}, base: base}, true, nil
	}
	return negateAll([]*cond{base}, neg), true, nil
}
