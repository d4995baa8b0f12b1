package wire

import "github.com/cohort-dev/cohort/internal/warehouse"

// NumericProperties calls fn with the name and numeric text (as warehouse.JNum gives it) of every
// top-level property of a JSON object that warehouse.jnum reads as a number, and whose name is at
// most maxName bytes, without decoding the whole payload: the loader sees every event, and a map
// per payload was a large share of its CPU. The payload is valid JSON (the API stored it); anything
// unexpected ends the scan early.
//
// A repeated key (stored as sent; jsonb keeps its last value) is reported again: with the new
// number, or with num "" when the last value is not a number, so the caller can replace or drop
// the earlier one.
func NumericProperties(p []byte, maxName int, fn func(name, num string)) {
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
			num, numeric = warehouse.JNum(val)
		}
		if numeric || containsKey(seen, rawKey) {
			if name, ok := decodeKey(rawKey); ok && len(name) <= maxName {
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
