package ingest

import (
	"encoding/json"
)

// numericProperties calls fn with the name and numeric text (as numericText defines it) of every
// top-level property of a JSON object that warehouse.jnum reads as a number, without decoding the
// whole payload: the loader sees every event, and a map per payload was a third of its CPU. The
// payload is valid JSON (the API stored it); anything unexpected ends the scan early.
//
// A repeated key (stored as sent; jsonb keeps its last value) is reported again: with the new
// number, or with num "" when the last value is not a number, so the caller can replace or drop
// the earlier one.
func numericProperties(p []byte, fn func(name, num string)) {
	var seen [][]byte // raw keys reported so far
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(p, i)
		if i >= len(p) || p[i] != '"' {
			return // '}' or malformed
		}
		keyStart := i
		i = skipString(p, i)
		if i < 0 {
			return
		}
		rawKey := p[keyStart:i]
		i = skipSpace(p, i)
		if i >= len(p) || p[i] != ':' {
			return
		}
		i = skipSpace(p, i+1)
		valStart := i
		i = skipValue(p, i)
		if i < 0 {
			return
		}
		val := p[valStart:i]
		num, numeric := "", false
		if len(val) > 0 && (val[0] == '-' || (val[0] >= '0' && val[0] <= '9') || val[0] == '"') {
			num, numeric = numericText(val)
		}
		if numeric || containsKey(seen, rawKey) {
			if name, ok := decodeKey(rawKey); ok && len(name) <= maxPropertyName {
				fn(name, num)
				seen = append(seen, rawKey)
			}
		}
		i = skipSpace(p, i)
		if i >= len(p) || p[i] != ',' {
			return
		}
		i++
	}
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if string(x) == string(k) {
			return true
		}
	}
	return false
}

func decodeKey(raw []byte) (string, bool) {
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

func skipSpace(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at p[i] == '"', or -1.
func skipString(p []byte, i int) int {
	for i++; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at p[i], or -1.
func skipValue(p []byte, i int) int {
	if i >= len(p) {
		return -1
	}
	switch p[i] {
	case '"':
		return skipString(p, i)
	case '{', '[':
		depth := 0
		for ; i < len(p); i++ {
			switch p[i] {
			case '"':
				i = skipString(p, i)
				if i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	// number, true, false, null
	for i < len(p) && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' {
		i++
	}
	return i
}
