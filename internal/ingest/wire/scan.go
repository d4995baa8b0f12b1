package wire

import "encoding/json"

// The JSON scanner: the readers of this package walk JSON text with these, in place, without
// decoding what they skip. None of them validates what it skips: a reader that must know its
// input is valid JSON checks it (json.Valid) or leaves what it cannot vouch for to encoding/json.

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

// decodeString decodes a JSON string token: plain ASCII as it is, anything else (escapes,
// non-ASCII bytes that encoding/json checks as UTF-8) by encoding/json.
func decodeString(tok []byte) (string, bool) {
	body := tok[1 : len(tok)-1]
	for _, c := range body {
		if c < 0x20 || c >= 0x80 || c == '\\' || c == '"' {
			var out string
			if json.Unmarshal(tok, &out) != nil {
				return "", false
			}
			return out, true
		}
	}
	return string(body), true
}

// jsonString decodes the JSON string at p[i] and returns it and the index after it.
func jsonString(p []byte, i int) (string, int, bool) {
	if i >= len(p) || p[i] != '"' {
		return "", 0, false
	}
	end := skipString(p, i)
	if end < 0 {
		return "", 0, false
	}
	s, ok := decodeString(p[i:end])
	return s, end, ok
}

// decodeKey decodes an object key's string token (quotes included).
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

// SkipSpace, SkipString, SkipValue and DecodeString are the scanner's primitives for the other
// readers of JSON on the ingestion path (the Segment-compatible API's fast path), so that the
// scanner stays in one place.

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(p []byte, i int) int { return skipSpace(p, i) }

// SkipString returns the index after the string starting at p[i] == '"', or -1.
func SkipString(p []byte, i int) int { return skipString(p, i) }

// SkipValue returns the index after the JSON value starting at p[i], or -1; it does not validate
// what it skips.
func SkipValue(p []byte, i int) int { return skipValue(p, i) }

// DecodeString decodes a JSON string token (quotes included).
func DecodeString(tok []byte) (string, bool) { return decodeString(tok) }
