package shopify

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Tolerant readers over a generically decoded body. Each returns ok=false (or the zero value) for
// a missing key, a JSON null or a value of the wrong type; none of them panics.

// maxQuantity bounds a line item quantity; anything larger is treated as malformed. It keeps
// item_count far from integer overflow however many line items a body holds.
const maxQuantity = 1_000_000_000

// object returns m[key] when it is a JSON object.
func object(m map[string]any, key string) map[string]any {
	o, _ := m[key].(map[string]any)
	return o
}

// array returns m[key] when it is a JSON array.
func array(m map[string]any, key string) []any {
	a, _ := m[key].([]any)
	return a
}

// text returns m[key] trimmed when it is a non-empty string.
func text(m map[string]any, key string) (string, bool) {
	s, ok := m[key].(string)
	if !ok {
		return "", false
	}
	s = strings.TrimSpace(s)
	return s, s != ""
}

// putText copies a non-empty string field of src into dst under the same key.
func putText(dst, src map[string]any, key string) {
	if s, ok := text(src, key); ok {
		dst[key] = s
	}
}

// flag returns m[key] when it is a JSON boolean.
func flag(m map[string]any, key string) (bool, bool) {
	b, ok := m[key].(bool)
	return b, ok
}

// idOf renders a Shopify id as a decimal string: a JSON integer (exact, however large), a string
// of digits, or a GraphQL global id such as "gid://shopify/Customer/123". It returns "" for
// anything else, including zero and negative numbers.
func idOf(v any) string {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
		if strings.HasPrefix(s, "gid://") {
			s = s[strings.LastIndexByte(s, '/')+1:]
			if i := strings.IndexByte(s, '?'); i >= 0 {
				s = s[:i]
			}
		}
	default:
		return ""
	}
	s = strings.TrimLeft(s, "0")
	if s == "" || len(s) > 20 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return ""
		}
	}
	return s
}

// money parses an amount. Shopify sends money as decimal strings ("199.00"); a JSON number is
// accepted too. Anything else, including NaN, infinities, hex and out-of-range values, is
// malformed and returns ok=false.
func money(v any) (float64, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case json.Number:
		s = string(x)
	default:
		return 0, false
	}
	if !isDecimal(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	if f == 0 {
		f = 0 // no negative zero
	}
	return f, true
}

// moneyField reads m[key], falling back to m[key+"_set"].shop_money.amount, the same amount in
// the shop currency that Shopify sends beside most money fields.
func moneyField(m map[string]any, key string) (float64, bool) {
	if f, ok := money(m[key]); ok {
		return f, true
	}
	return money(object(object(m, key+"_set"), "shop_money")["amount"])
}

// putMoney copies a parseable amount of src into dst under the same key.
func putMoney(dst, src map[string]any, key string) {
	if f, ok := moneyField(src, key); ok {
		dst[key] = f
	}
}

// isDecimal reports whether s is a plain decimal number: [+-]digits[.digits][e[+-]digits], with
// digits on at least one side of the point.
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// count parses a non-negative whole number (a quantity or a count) from a JSON number or a
// string of digits, up to maxQuantity.
func count(v any) (int, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxQuantity {
			return 0, false
		}
		return int(n), true
	}
	// 3.0 or 3e0: whole numbers written as floats.
	if !isDecimal(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > maxQuantity || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// timestamp returns the first of keys that holds an RFC 3339 time, in UTC.
func timestamp(m map[string]any, keys ...string) (time.Time, bool) {
	for _, k := range keys {
		s, ok := text(m, k)
		if !ok {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// occurredAt is timestamp with receivedAt as the fallback.
func occurredAt(m map[string]any, receivedAt time.Time, keys ...string) time.Time {
	if t, ok := timestamp(m, keys...); ok {
		return t
	}
	return receivedAt
}

// email returns the first value that looks like an e-mail address, trimmed and lower-cased.
func email(vs ...any) string {
	for _, v := range vs {
		s, ok := v.(string)
		if !ok {
			continue
		}
		s = strings.ToLower(strings.TrimSpace(s))
		if strings.Contains(s, "@") {
			return s
		}
	}
	return ""
}

// splitTags turns Shopify's comma-separated tag string into a list of trimmed, non-empty tags.
func splitTags(s string) []any {
	out := []any{}
	for t := range strings.SplitSeq(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// roundAmount trims float noise from computed sums (19.99*3 = 59.970000000000006) at a precision
// finer than any currency's minor unit.
func roundAmount(f float64) float64 {
	r := math.Round(f*1e6) / 1e6
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return f
	}
	return r
}
