package warehouse

import (
	"encoding/json"
	"regexp"
	"strings"
)

// JNumPattern is what the SQL function warehouse.jnum (schema/postgres/0003_segments.sql) asks of
// a JSON string to read it as a number, in Postgres's regular expression syntax, as the function
// writes it. JNum applies the same pattern; TestJNumAgreesWithSQL checks that the function in the
// database holds this pattern and that both read a table of values alike.
const JNumPattern = `^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$`

// numericString is JNumPattern for Go's regexp: Postgres's \s is [ \t\n\r\f\v], RE2's lacks \v.
var numericString = regexp.MustCompile(strings.ReplaceAll(JNumPattern, `\s`, `[\t\n\v\f\r ]`))

// JNum is warehouse.jnum in Go, for a valid JSON value v (as stored): the text Postgres casts to
// numeric when jnum reads v as a number, and whether it does. A JSON number is read as written; a
// string when it matches JNumPattern (its decoded text); anything else is SQL NULL.
func JNum(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch c := v[0]; {
	case c == '-' || (c >= '0' && c <= '9'):
		return string(v), true
	case c == '"':
		if !maybeNumericString(v) {
			return "", false
		}
		var s string
		if json.Unmarshal(v, &s) != nil || !numericString.MatchString(s) {
			return "", false
		}
		return s, true
	}
	return "", false
}

// maybeNumericString is a cheap pre-check of a JSON string for numericString: without escapes, it
// holds a digit and nothing but what the pattern allows.
func maybeNumericString(v json.RawMessage) bool {
	if len(v) < 2 {
		return true
	}
	digit := false
	for _, c := range v[1 : len(v)-1] {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c == '\\':
			return true // an escape may stand for anything: let the decoder and the pattern tell
		case c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E' || c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
		default:
			return false
		}
	}
	return digit
}
