package draft

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// currencyMark replaces currency signs and codes during normalization: "$1,000" and "1000 EUR" both
// become "1000¤", so the amount parser sees one number and knows it was money.
const currencyMark = "¤"

// ---------------------------------------------------------------------------------------------
// Normalization

var (
	reWordRange   = regexp.MustCompile(`(?i)\b(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[\s-]+(one|two|three|four|five|six|seven|eight|nine)\b`)
	reNumberWord  = regexp.MustCompile(`(?i)\b(zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|once|twice|thrice|a\s+dozen|dozen|a\s+couple\s+of|a\s+couple)\b`)
	reOneOf       = regexp.MustCompile(`(?i)\bone\s+of\b`)
	reHundreds    = regexp.MustCompile(`(?i)\b(?:(\d+)|an?)\s+(hundred|thousand)\b|\b(hundred|thousand)\b`)
	reDigitDash   = regexp.MustCompile(`(\d)\s*-\s*(\d)`)
	reThousands   = regexp.MustCompile(`\b\d{1,3}(?:,\d{3})+\b`)
	reKilo        = regexp.MustCompile(`(?i)\b(\d+(?:\.\d+)?)k\b`)
	reCurPrefix   = regexp.MustCompile(`(?i)(?:\bus\$|[$€£¥]|\b(?:usd|eur|gbp|chf|cad|aud|jpy|inr)\s*)\s*(\d+(?:\.\d+)?)`)
	reCurSuffix   = regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)` + currencyMark + `?\s*(?:[$€£¥]|(?:usd|eur|gbp|chf|cad|aud|jpy|inr|sek|nok|dkk|pln|dollars?|euros?|pounds?|bucks|quid|yen|rupees?)\b)`)
	reOrMore      = regexp.MustCompile(`(?i)\b(\d+(?:\.\d+)?` + currencyMark + `?)\s*(?:\+|or\s+more|or\s+above|or\s+higher|or\s+greater|or\s+over|and\s+above|and\s+up|and\s+over|and\s+more)`)
	reOrLess      = regexp.MustCompile(`(?i)\b(\d+(?:\.\d+)?` + currencyMark + `?)\s*(?:or\s+less|or\s+fewer|or\s+below|or\s+under|or\s+lower|and\s+below|and\s+under|and\s+less)\b`)
	reBetweenAnd  = regexp.MustCompile(`(?i)\b(between\s+\d+(?:\.\d+)?` + currencyMark + `?(?:\s*[a-z]+)?)\s+(?:and|&)\s+(\d)`)
	reExcept      = regexp.MustCompile(`(?i)\b(?:except\s+for|except|excluding|but\s+not|apart\s+from|aside\s+from)\b`)
	reAndOr       = regexp.MustCompile(`(?i)\band\s*/\s*or\b`)
	reEquals      = regexp.MustCompile(`\s*==?\s*`)
	reSpaces      = regexp.MustCompile(`\s+`)
	symbolReplace = strings.NewReplacer(
		">=", " at least ", "=>", " at least ", "≥", " at least ",
		"<=", " at most ", "=<", " at most ", "≤", " at most ",
		"!=", " is not ", "<>", " is not ", "≠", " is not ",
		">", " over ", "<", " under ",
		"&", " and ",
		"(", " ", ")", " ", "[", " ", "]", " ", "{", " ", "}", " ",
	)
)

var numberWords = map[string]int{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
	"fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
	"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
	"dozen": 12, "couple": 2,
}

// normalize rewrites a description into a form the clause patterns expect, keeping the user's
// letter case (values such as "Germany" or "DE" are copied as written): punctuation variants are
// unified, number words become digits, thousands separators and currencies are folded into
// "1000¤", "5 or more" becomes "at least 5", "between 7 and 30" becomes "between 7 to 30" (so it
// is not split as two clauses) and comparison symbols become words.
func normalize(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '’', '‘', '`', '´', 'ʼ':
			return '\''
		case '“', '”', '«', '»', '„':
			return '"'
		case '–', '—', '−', '‒':
			return '-'
		case '¤':
			return ' '
		}
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	s = reOneOf.ReplaceAllString(s, "any of")
	s = reWordRange.ReplaceAllStringFunc(s, func(m string) string {
		parts := strings.FieldsFunc(strings.ToLower(m), func(r rune) bool { return r == ' ' || r == '-' })
		return strconv.Itoa(numberWords[parts[0]] + numberWords[parts[len(parts)-1]])
	})
	s = reNumberWord.ReplaceAllStringFunc(s, func(m string) string {
		w := strings.ToLower(m)
		switch w {
		case "once":
			return "1 times"
		case "twice":
			return "2 times"
		case "thrice":
			return "3 times"
		}
		f := strings.Fields(w)
		if f[len(f)-1] == "of" {
			f = f[:len(f)-1]
		}
		return strconv.Itoa(numberWords[f[len(f)-1]])
	})
	s = reHundreds.ReplaceAllStringFunc(s, func(m string) string {
		sub := reHundreds.FindStringSubmatch(m)
		unit := strings.ToLower(sub[2] + sub[3])
		mult := 100
		if unit == "thousand" {
			mult = 1000
		}
		n := 1
		if sub[1] != "" {
			v, err := strconv.Atoi(sub[1])
			if err != nil || v > 1e9 {
				return m
			}
			n = v
		}
		return strconv.Itoa(n * mult)
	})
	s = reThousands.ReplaceAllStringFunc(s, func(m string) string { return strings.ReplaceAll(m, ",", "") })
	s = reKilo.ReplaceAllStringFunc(s, func(m string) string {
		v, err := strconv.ParseFloat(m[:len(m)-1], 64)
		if err != nil || math.IsInf(v*1000, 0) {
			return m
		}
		return strconv.FormatFloat(v*1000, 'f', -1, 64)
	})
	s = reDigitDash.ReplaceAllString(s, "$1 to $2")
	s = reCurPrefix.ReplaceAllString(s, "${1}"+currencyMark)
	s = reCurSuffix.ReplaceAllString(s, "${1}"+currencyMark)
	s = reAndOr.ReplaceAllString(s, "or")
	s = symbolReplace.Replace(s)
	s = reEquals.ReplaceAllString(s, " is ")
	s = reOrMore.ReplaceAllString(s, "at least $1")
	s = reOrLess.ReplaceAllString(s, "at most $1")
	s = reBetweenAnd.ReplaceAllString(s, "$1 to $2")
	s = reExcept.ReplaceAllString(s, " and not ")
	s = reSpaces.ReplaceAllString(s, " ")
	return strings.Trim(s, " .!?;:,\"'")
}

// ---------------------------------------------------------------------------------------------
// Clause splitting

// reSeparator matches a run of clause separators: commas, semicolons, sentence ends and the
// joining words. "who"/"whose" split too ("users who ..." leaves a filler-only clause that is
// dropped).
var reSeparator = regexp.MustCompile(`(?i)(?:\s*(?:[,;]|\.(?:\s|$)|\b(?:and\s+also|as\s+well\s+as|and|but|or|while|whereas|plus|although|though|yet|who|whose|however|also)\b)\s*)+`)

var reOrWord = regexp.MustCompile(`(?i)\bor\b`)

type piece struct {
	text string
	or   bool // joined to the previous piece by "or"
}

func splitClauses(s string) []piece {
	var out []piece
	last, or := 0, false
	for _, m := range reSeparator.FindAllStringIndex(s, -1) {
		out = append(out, piece{text: s[last:m[0]], or: or})
		or = reOrWord.MatchString(s[m[0]:m[1]])
		last = m[1]
	}
	return append(out, piece{text: s[last:], or: or})
}

var (
	reLeadFiller  = regexp.MustCompile(`(?i)^(?:(?:all|the|only|also|both|either|then|still|they|them|those|these|everyone|everybody|anyone|anybody|someone|somebody|users?|customers?|people|persons?|visitors?|shoppers?|members?|buyers?|clients?|contacts?|subscribers?|profiles?|leads?|audience|show\s+me|show|find|give\s+me|get|list|select|target|include|i\s+want|we\s+want|want|who\s+are|that\s+are|which\s+are|that|which|who|whose|are|is|were|was|currently|really|just|have\s+been|has\s+been|had\s+been|been|of|with\s+users)\s+)+`)
	reTrailFiller = regexp.MustCompile(`(?i)(?:\s+(?:users?|customers?|people|visitors?|shoppers?|members?|buyers?|clients?|contacts?|subscribers?|profiles?|only|too|also|as\s+well|please|overall|in\s+total|in\s+their\s+lifetime|lifetime|of\s+all\s+time|all\s+time|ever|at\s+all|so\s+far|to\s+date|before|previously|either))+$`)
)

// stripFiller removes subject nouns and glue words around a clause ("users who are", "customers").
func stripFiller(s string) string {
	s = strings.Trim(s, " .!?;:,\"'")
	s = reLeadFiller.ReplaceAllString(s+" ", "")
	s = strings.TrimSpace(s)
	s = reTrailFiller.ReplaceAllString(" "+s, "")
	return strings.Trim(s, " .!?;:,\"'")
}

// collapse removes the byte range [i, j) from s and tidies the spaces.
func collapse(s string, i, j int) string {
	return strings.TrimSpace(reSpaces.ReplaceAllString(s[:i]+" "+s[j:], " "))
}

// ---------------------------------------------------------------------------------------------
// Comparators

var compPhrases = map[string]string{
	"greater than or equal to": "gte", "more than or equal to": "gte", "equal to or greater than": "gte",
	"equal to or more than": "gte", "less than or equal to": "lte", "fewer than or equal to": "lte",
	"equal to or less than": "lte", "not equal to": "neq", "other than": "neq",
	"no less than": "gte", "not less than": "gte", "no fewer than": "gte", "not fewer than": "gte",
	"not under": "gte", "not below": "gte", "a minimum of": "gte", "minimum of": "gte",
	"at least": "gte", "minimum": "gte", "min": "gte", "starting at": "gte",
	"no more than": "lte", "not more than": "lte", "no greater than": "lte", "not over": "lte",
	"not above": "lte", "a maximum of": "lte", "maximum of": "lte", "at most": "lte", "up to": "lte",
	"maximum": "lte", "max": "lte",
	"more than": "gt", "greater than": "gt", "higher than": "gt", "larger than": "gt",
	"bigger than": "gt", "in excess of": "gt", "upwards of": "gt", "north of": "gt",
	"exceeding": "gt", "exceeds": "gt", "exceeded": "gt", "exceed": "gt", "above": "gt", "over": "gt",
	"beyond":    "gt",
	"less than": "lt", "fewer than": "lt", "lower than": "lt", "smaller than": "lt", "south of": "lt",
	"shy of": "lt", "below": "lt", "under": "lt", "beneath": "lt",
	"exactly": "eq", "precisely": "eq", "equal to": "eq", "equals": "eq", "equal": "eq",
}

// compAlt is a regexp alternation of compPhrases, longest first so "no more than" wins over "more than".
var compAlt = func() string {
	keys := make([]string, 0, len(compPhrases))
	for k := range compPhrases {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		keys[i] = strings.ReplaceAll(regexp.QuoteMeta(k), " ", `\s+`)
	}
	return "(?:" + strings.Join(keys, "|") + ")"
}()

// compOp maps a matched comparator phrase to an operator ("" for none).
func compOp(phrase string) string {
	return compPhrases[strings.Join(strings.Fields(strings.ToLower(phrase)), " ")]
}

// ---------------------------------------------------------------------------------------------
// Time expressions

type timeKind int

const (
	noTime      timeKind = iota
	timeWindow           // "in the last 30 days": window_days
	timeBetween          // "between 7 and 30 days ago": between_days
	timeAgo              // "more than 60 days ago": a number of days compared with comp
)

type timeSpec struct {
	kind   timeKind
	days   int    // window or ago
	lo, hi int    // between
	comp   string // comparator written with the time ("for over 60 days"), "" when none
	since  bool   // "since 30 days ago"
}

const (
	numPat  = `(\d+(?:\.\d+)?)`
	numAPat = `(\d+(?:\.\d+)?|an?|the)`
	unitPat = `(hours?|hrs?|h|days?|d|weeks?|wks?|w|fortnights?|months?|mos?|quarters?|years?|yrs?|y)`
)

var (
	reTimeBetween = regexp.MustCompile(`(?i)\b(?:between|from)\s+` + numPat + `\s*(?:` + unitPat + `)?\s+(?:to|and)\s+` + numPat + `\s*` + unitPat + `\b(?:\s+ago\b)?`)
	reTimeAgo     = regexp.MustCompile(`(?i)\b(?:(since|from)\s+)?(?:(` + compAlt + `)\s+)?` + numAPat + `\s*` + unitPat + `\s+ago\b`)
	reTimeLast    = regexp.MustCompile(`(?i)\b(?:(?:in|within|during|over|for|throughout|of|at\s+any\s+(?:time|point)\s+in)\s+)?(?:the\s+|this\s+)?(?:last|past|previous|prior|recent|trailing|most\s+recent)\s+(?:` + numPat + `\s*)?` + unitPat + `\b`)
	reTimeWithin  = regexp.MustCompile(`(?i)\b(?:in|within|for|during|inside(?:\s+of)?|since)\s+(?:(` + compAlt + `)\s+)?` + numAPat + `\s*` + unitPat + `\b`)
	reTimeThis    = regexp.MustCompile(`(?i)\b(?:(?:in|during|within|over)\s+)?this\s+(week|month|quarter|year)\b|\b(?:since\s+|as\s+of\s+)?(today|yesterday|tonight|last\s+night)\b`)
	reTimePer     = regexp.MustCompile(`(?i)\b(?:a|an|per|each|every)\s+(day|week|fortnight|month|quarter|year)\b`)
	reTimeBare    = regexp.MustCompile(`(?i)\b(?:(` + compAlt + `)\s+)?` + numPat + `\s*` + unitPat + `\b`)
	reTimeRecent  = regexp.MustCompile(`(?i)\b(?:recently|lately|of\s+late)\b`)
)

// unitDays converts a count of a time unit to whole days (hours round up, at least 1 day).
func unitDays(n float64, unit string) (int, bool) {
	u := strings.ToLower(unit)
	var per float64
	switch {
	case u == "h" || strings.HasPrefix(u, "hour") || strings.HasPrefix(u, "hr"):
		per = 1.0 / 24
	case u == "d" || strings.HasPrefix(u, "day"):
		per = 1
	case u == "w" || strings.HasPrefix(u, "week") || strings.HasPrefix(u, "wk"):
		per = 7
	case strings.HasPrefix(u, "fortnight"):
		per = 14
	case strings.HasPrefix(u, "mo"):
		per = 30
	case strings.HasPrefix(u, "quarter"):
		per = 90
	case u == "y" || strings.HasPrefix(u, "year") || strings.HasPrefix(u, "yr"):
		per = 365
	default:
		return 0, false
	}
	d := n * per
	if math.IsNaN(d) || d <= 0 || d > maxDays {
		return 0, false
	}
	if per < 1 {
		return max(1, int(math.Ceil(d))), true
	}
	days := int(math.Round(d))
	return days, days >= 1
}

func parseNumA(s string) (float64, bool) {
	switch strings.ToLower(s) {
	case "", "a", "an", "the":
		return 1, true
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsInf(v, 0)
}

// extractTime finds the time expression of a clause and returns it with the clause minus the
// expression. A clause has at most one time expression.
func extractTime(s string) (timeSpec, string, error) {
	t, rest, err := extractOneTime(s)
	if err != nil || t.kind == noTime {
		return t, rest, err
	}
	if t2, _, err := extractOneTime(rest); err == nil && t2.kind != noTime {
		return timeSpec{}, s, notUnderstood("%q has more than one time range; split it with \"and\"", display(s))
	}
	return t, rest, nil
}

// comparedDays reads the "[comparator] number unit" part of a time match: the comparator is
// submatch g of m (absent: comp is ""), the number and the unit the two after it.
func comparedDays(s string, m []int, g int) (days int, comp string, ok bool) {
	n, ok := parseNumA(s[m[2*g+2]:m[2*g+3]])
	if !ok {
		return 0, "", false
	}
	if days, ok = unitDays(n, s[m[2*g+4]:m[2*g+5]]); !ok {
		return 0, "", false
	}
	if m[2*g] >= 0 {
		comp = compOp(s[m[2*g]:m[2*g+1]])
	}
	return days, comp, true
}

func extractOneTime(s string) (timeSpec, string, error) {
	bad := func() (timeSpec, string, error) {
		return timeSpec{}, s, notUnderstood("the time range in %q is not a whole number of days between 1 and %d", display(s), maxDays)
	}
	// window is a "within 30 days" / "over 2 weeks" match (submatches: comparator, number, unit).
	window := func(m []int) (timeSpec, string, error) {
		d, comp, ok := comparedDays(s, m, 1)
		if !ok {
			return bad()
		}
		return timeSpec{kind: timeWindow, days: d, comp: comp}, collapse(s, m[0], m[1]), nil
	}
	if m := reTimeBetween.FindStringSubmatchIndex(s); m != nil {
		a, errA := strconv.ParseFloat(s[m[2]:m[3]], 64)
		b, errB := strconv.ParseFloat(s[m[6]:m[7]], 64)
		unitB := s[m[8]:m[9]]
		unitA := unitB
		if m[4] >= 0 {
			unitA = s[m[4]:m[5]]
		}
		if errA != nil || errB != nil {
			return bad()
		}
		hi, okB := unitDays(b, unitB)
		if !okB {
			return bad()
		}
		lo := 0
		if a != 0 {
			var okA bool
			if lo, okA = unitDays(a, unitA); !okA {
				return bad()
			}
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		rest := collapse(s, m[0], m[1])
		switch {
		case lo == hi:
			return timeSpec{}, s, notUnderstood("the range in %q is empty", display(s))
		case lo == 0:
			return timeSpec{kind: timeWindow, days: hi}, rest, nil
		}
		return timeSpec{kind: timeBetween, lo: lo, hi: hi}, rest, nil
	}
	if m := reTimeAgo.FindStringSubmatchIndex(s); m != nil {
		// Submatches: since/from, comparator, number, unit.
		d, comp, ok := comparedDays(s, m, 2)
		if !ok {
			return bad()
		}
		return timeSpec{kind: timeAgo, days: d, comp: comp, since: m[2] >= 0}, collapse(s, m[0], m[1]), nil
	}
	if m := reTimeLast.FindStringSubmatchIndex(s); m != nil {
		n := 1.0
		if m[2] >= 0 {
			v, ok := parseNumA(s[m[2]:m[3]])
			if !ok {
				return bad()
			}
			n = v
		}
		d, ok := unitDays(n, s[m[4]:m[5]])
		if !ok {
			return bad()
		}
		return timeSpec{kind: timeWindow, days: d}, collapse(s, m[0], m[1]), nil
	}
	if m := reTimeWithin.FindStringSubmatchIndex(s); m != nil {
		return window(m)
	}
	if m := reTimeThis.FindStringSubmatchIndex(s); m != nil {
		d := 1
		if m[2] >= 0 {
			switch strings.ToLower(s[m[2]:m[3]]) {
			case "week":
				d = 7
			case "month":
				d = 30
			case "quarter":
				d = 90
			case "year":
				d = 365
			}
		}
		return timeSpec{kind: timeWindow, days: d}, collapse(s, m[0], m[1]), nil
	}
	if m := reTimePer.FindStringSubmatchIndex(s); m != nil {
		d, _ := unitDays(1, s[m[2]:m[3]])
		return timeSpec{kind: timeWindow, days: d}, collapse(s, m[0], m[1]), nil
	}
	if m := reTimeBare.FindStringSubmatchIndex(s); m != nil {
		return window(m)
	}
	if m := reTimeRecent.FindStringIndex(s); m != nil {
		return timeSpec{kind: timeWindow, days: 30}, collapse(s, m[0], m[1]), nil
	}
	return timeSpec{}, s, nil
}

// ---------------------------------------------------------------------------------------------
// Amounts and counts

type amount struct {
	found   bool
	op      string // "" when the number had no comparator
	value   float64
	between bool // lo..hi inclusive
	lo, hi  float64
	money   bool // written with a currency
}

var (
	reAmountBetween = regexp.MustCompile(`(?i)\bbetween\s+(\d+(?:\.\d+)?)(` + currencyMark + `)?\s+to\s+(\d+(?:\.\d+)?)(` + currencyMark + `)?`)
	reAmount        = regexp.MustCompile(`(?i)(?:\b(` + compAlt + `)\s+)?(?:(?:a\s+)?total\s+of\s+)?\b(\d+(?:\.\d+)?)(` + currencyMark + `)?`)
)

func parseAmount(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && v >= 0 && v <= maxAmount
}

// findAmount finds the first number of s with its comparator and returns s minus them.
func findAmount(s string) (amount, string, error) {
	if m := reAmountBetween.FindStringSubmatchIndex(s); m != nil {
		lo, okLo := parseAmount(s[m[2]:m[3]])
		hi, okHi := parseAmount(s[m[6]:m[7]])
		if !okLo || !okHi {
			return amount{}, s, notUnderstood("the numbers in %q are too large", display(s))
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		return amount{found: true, between: true, lo: lo, hi: hi, money: m[4] >= 0 || m[8] >= 0}, collapse(s, m[0], m[1]), nil
	}
	m := reAmount.FindStringSubmatchIndex(s)
	if m == nil {
		return amount{}, s, nil
	}
	v, ok := parseAmount(s[m[4]:m[5]])
	if !ok {
		return amount{}, s, notUnderstood("the number in %q is too large", display(s))
	}
	a := amount{found: true, value: v, money: m[6] >= 0}
	if m[2] >= 0 {
		a.op = compOp(s[m[2]:m[3]])
	}
	return a, collapse(s, m[0], m[1]), nil
}

// display shows a normalized clause to the user without the internal currency mark.
func display(s string) string {
	return strings.ReplaceAll(s, currencyMark, "")
}
