package draft

import (
	"regexp"
	"slices"
	"strings"
)

// identRE is the definition's identifier syntax (event types, properties, traits).
var identRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// vocab is Hints with invalid and duplicate names dropped.
type vocab struct {
	events []string
	props  map[string][]string
	traits []string
}

func newVocab(h Hints) vocab {
	v := vocab{props: map[string][]string{}}
	v.events = validNames(h.EventTypes)
	for e, ps := range h.Properties {
		if identRE.MatchString(e) {
			if names := validNames(ps); len(names) > 0 {
				v.props[e] = names
			}
		}
	}
	v.traits = validNames(h.Traits)
	return v
}

func validNames(in []string) []string {
	var out []string
	for _, n := range in {
		if identRE.MatchString(n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// Event concepts

// Concept names.
const (
	conceptCart    = "add_to_cart"
	conceptProduct = "product_viewed"
	conceptSignup  = "signup"
	conceptLogin   = "login"
	conceptOrder   = "order"
	conceptPage    = "page_view"
)

// concept is a family of events the rules recognise in text (re) and in the tenant's event names
// (a name qualifies when it contains one of any, and one of all when all is set; good and bad
// words move it up or down).
type concept struct {
	name, def           string
	re                  *regexp.Regexp
	any, all, good, bad []string
}

// concepts, in detection order: the more specific phrases first ("added to cart" before
// "ordered", "viewed a product" before "viewed").
var concepts = []concept{
	{
		name: conceptCart, def: "add_to_cart",
		re:  regexp.MustCompile(`\b(?:add(?:ed|s|ing)?\b.*\bto\s+(?:the\s+|their\s+|a\s+|his\s+|her\s+)?(?:cart|basket|bag)|add[- _]to[- _](?:cart|basket)|carted|cart\s+adds?)\b`),
		any: []string{"cart", "basket"}, all: []string{"add"}, bad: []string{"remove", "abandon", "view", "clear"},
	},
	{
		name: conceptProduct, def: "product_viewed",
		re:  regexp.MustCompile(`\b(?:view(?:ed|s|ing)?|look(?:ed|s|ing)?\s+at|brows(?:ed|es|ing|e)|saw|seen)\b.*\b(?:products?|items?|skus?)\b|\bproduct\s+(?:views?|pages?|details?)\b|\bproduct[_ ]viewed\b`),
		any: []string{"product", "item", "sku"}, all: []string{"view", "seen", "detail"}, bad: []string{"cart", "order", "purchase", "list"},
	},
	{
		name: conceptSignup, def: "signup",
		re:  regexp.MustCompile(`\b(?:sign(?:ed|s|ing)?[- ]?ups?|registered|registration|register(?:s|ing)?|joined|created\s+(?:an\s+|their\s+|a\s+)?accounts?|account\s+creation)\b`),
		any: []string{"signup", "signedup", "register", "registration", "accountcreated", "usercreated", "createdaccount", "accountcreation", "joined"},
	},
	{
		name: conceptLogin, def: "login",
		re:  regexp.MustCompile(`\b(?:log(?:ged|s|ging)?[- ]?ins?|logins?|sign(?:ed|s|ing)?[- ]?ins?|signins?)\b`),
		any: []string{"login", "loggedin", "signin", "signedin", "logon", "sessionstart"},
	},
	{
		name: conceptOrder, def: "order_completed",
		re:   regexp.MustCompile(`\b(?:order(?:ed|s|ing)?|purchas(?:e|ed|es|ing|ers?)|bought|buy(?:s|ing|ers?)?|check(?:ed|s)?[- ]?out|checkouts?|transact(?:ed|ions?)?|convert(?:ed)?|conversions?|paid|customers?)\b`),
		any:  []string{"order", "purchase", "checkout", "transaction", "payment", "charge"},
		good: []string{"complete", "placed", "created", "paid", "success", "confirm", "captured", "submitted"},
		bad:  []string{"start", "view", "cancel", "fail", "refund", "abandon", "initiat", "update", "return", "delete", "remove", "declin", "cart"},
	},
	{
		name: conceptPage, def: "page_view",
		re:  regexp.MustCompile(`\b(?:visit(?:ed|s|ing|ors?)?|view(?:ed|s|ing)?|page\s?views?|pageviews?|pages?|sessions?|active|came\s+back|browsed|browsing|seen|engaged|opened\s+the\s+(?:site|app|website))\b`),
		any: []string{"pageview", "page", "screenview", "screen", "visit"},
		bad: []string{"product", "item", "cart", "order", "checkout", "leave", "exit"},
	},
}

func conceptByName(name string) concept {
	for _, c := range concepts {
		if c.name == name {
			return c
		}
	}
	panic("draft: unknown concept " + name)
}

// squash lower-cases name and drops everything but letters and digits.
func squash(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, name)
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// score rates event name as a member of c; below 10 it is not one.
func (c concept) score(name string) int {
	key := squash(name)
	if !containsAny(key, c.any) || (c.all != nil && !containsAny(key, c.all)) {
		return 0
	}
	s := 10
	if containsAny(key, c.good) {
		s += 3
	}
	if containsAny(key, c.bad) {
		s -= 8
	}
	if key == squash(c.def) {
		s += 20
	}
	return s
}

// eventFor is the tenant's event for concept c: the best scoring hint (the most frequent on a
// tie), else the default name.
func (v vocab) eventFor(name string) string {
	c := conceptByName(name)
	best, bestScore := c.def, 9
	for _, e := range v.events {
		if s := c.score(e); s > bestScore {
			best, bestScore = e, s
		}
	}
	return best
}

// conceptOf names the concept an event name belongs to, "" when none.
func conceptOf(name string) string {
	for _, c := range concepts {
		if c.score(name) >= 10 {
			return c.name
		}
	}
	return ""
}

// tokenMatch finds a hint event whose name's words all appear in the text ("opened the app" ->
// app_opened); the one with the most words wins, then the most frequent.
func (v vocab) tokenMatch(l string) string {
	stems := map[string]bool{}
	for _, w := range strings.FieldsFunc(l, notAlnum) {
		stems[stem(w)] = true
	}
	best, bestN := "", 0
	for _, e := range v.events {
		toks := strings.FieldsFunc(strings.ToLower(e), notAlnum)
		if len(toks) <= bestN {
			continue
		}
		ok := true
		for _, t := range toks {
			if len(t) < 2 || !stems[stem(t)] {
				ok = false
				break
			}
		}
		if ok {
			best, bestN = e, len(toks)
		}
	}
	return best
}

func notAlnum(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
}

// stem is a crude English stemmer, enough to equate "ordered", "orders" and "order".
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			w = w[:len(w)-len(suf)]
			break
		}
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// ---------------------------------------------------------------------------------------------
// Properties and traits

var (
	amountProps = []string{"amount", "total", "revenue", "value", "price", "order_total", "total_amount", "order_value", "grand_total", "total_price", "subtotal", "amount_total", "sum"}
	amountWords = []string{"amount", "total", "revenue", "value", "price"}
	pathProps   = []string{"path", "url", "page_path", "pathname", "page_url", "page", "location", "href", "uri"}
	pathWords   = []string{"path", "url", "page", "uri", "href"}
)

// property picks the event's payload key for a role: the first of exact (in order), else the
// first hint containing one of words, else the default (exact[0]).
func (v vocab) property(event string, exact, words []string) string {
	props := v.props[event]
	for _, want := range exact {
		for _, p := range props {
			if strings.EqualFold(p, want) {
				return p
			}
		}
	}
	for _, p := range props {
		if containsAny(strings.ToLower(p), words) {
			return p
		}
	}
	return exact[0]
}

var traitAliases = map[string]string{
	"email_address": "email", "e-mail": "email", "e_mail": "email", "e-mail_address": "email", "mail": "email",
	"phone_number": "phone", "mobile": "phone", "mobile_number": "phone", "telephone": "phone",
	"telephone_number": "phone", "cell": "phone", "cell_phone": "phone",
	"subscription": "plan", "subscription_plan": "plan", "package": "plan", "pricing_plan": "plan",
	"firstname": "first_name", "lastname": "last_name",
}

var traitSynonyms = map[string][]string{
	"email":      {"email", "email_address", "e_mail"},
	"phone":      {"phone", "phone_number", "mobile", "mobile_number"},
	"country":    {"country", "country_code", "country_name", "geo_country"},
	"plan":       {"plan", "plan_name", "subscription_plan", "plan_id", "subscription", "plan_tier", "tier"},
	"tier":       {"tier", "plan_tier", "plan"},
	"first_name": {"first_name", "firstname", "given_name"},
	"last_name":  {"last_name", "lastname", "family_name", "surname"},
	"city":       {"city", "geo_city"},
	"language":   {"language", "lang", "locale"},
}

// traitKey resolves the words naming a trait ("email address") to a key: a hint when one
// matches, else the canonical snake_case name. "" when the words make no identifier.
func (v vocab) traitKey(words string) string {
	snake := strings.Join(strings.FieldsFunc(strings.ToLower(words), func(r rune) bool {
		return r == ' ' || r == '\''
	}), "_")
	canon := snake
	if a, ok := traitAliases[snake]; ok {
		canon = a
	}
	if !identRE.MatchString(canon) {
		return ""
	}
	cands := append([]string{snake, canon}, traitSynonyms[canon]...)
	for _, c := range cands {
		for _, t := range v.traits {
			if strings.EqualFold(t, c) {
				return t
			}
		}
	}
	for _, c := range cands {
		for _, t := range v.traits {
			if squash(t) == squash(c) {
				return t
			}
		}
	}
	return canon
}
