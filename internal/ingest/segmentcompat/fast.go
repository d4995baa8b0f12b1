package segmentcompat

import (
	"encoding/json"
	"strings"
)

// The fast path reads the layout SDKs send in place, without encoding/json's reflection and its
// second scan, and checks as it goes that the text is valid JSON: the structure it walks itself,
// strings through decodeString, every value it does not decode (properties, traits, context ...)
// with json.Valid. Anything it is not sure to read as json.Unmarshal would (a key that differs from
// a known one only in case, a null or a value of another type in a known field, a repeated batch)
// makes it give up, and encoding/json decides.

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

// skipValue returns the index after the JSON value starting at p[i], or -1. It does not validate
// what it skips.
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
	for i < len(p) && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' {
		i++
	}
	return i
}

// decodeString decodes a JSON string token: plain ASCII as it is, anything else by encoding/json.
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

// eachMember calls fn for each member of the object p (nothing but space after it) with its
// decoded key and its value's bytes, unvalidated; fn returns false to give up. It returns false
// when p is not such an object or fn gave up.
func eachMember(p []byte, fn func(key string, val []byte) bool) bool {
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return false
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return skipSpace(p, i+1) == len(p)
	}
	for {
		if i >= len(p) || p[i] != '"' {
			return false
		}
		end := skipString(p, i)
		if end < 0 {
			return false
		}
		key, ok := decodeString(p[i:end])
		if !ok {
			return false
		}
		i = skipSpace(p, end)
		if i >= len(p) || p[i] != ':' {
			return false
		}
		i = skipSpace(p, i+1)
		end = skipValue(p, i)
		if end <= i || !fn(key, p[i:end:end]) {
			return false
		}
		i = skipSpace(p, end)
		if i >= len(p) {
			return false
		}
		if p[i] == '}' {
			return skipSpace(p, i+1) == len(p)
		}
		if p[i] != ',' {
			return false
		}
		i = skipSpace(p, i+1)
	}
}

// known reports whether key is one of names exactly (1), differs from one only in case (-1, which
// encoding/json would match: give up), or neither (0).
func known(key string, names ...string) int {
	for _, n := range names {
		if key == n {
			return 1
		}
		if strings.EqualFold(key, n) {
			return -1
		}
	}
	return 0
}

var messageKeys = []string{"type", "event", "name", "category", "userId", "anonymousId", "messageId", "timestamp", "originalTimestamp", "sentAt", "properties", "traits"}

// decodeMessageFast decodes one message into m as json.Unmarshal would, and true means raw is
// valid JSON; false: leave it to encoding/json.
func decodeMessageFast(raw []byte, m *Message) bool {
	return eachMember(raw, func(key string, val []byte) bool {
		switch known(key, messageKeys...) {
		case 0:
			return json.Valid(val)
		case -1:
			return false
		}
		switch key {
		case "properties", "traits":
			if val[0] != '{' || !json.Valid(val) {
				return false
			}
			if key == "properties" {
				m.Properties = json.RawMessage(val)
			} else {
				m.Traits = json.RawMessage(val)
			}
			return true
		case "userId", "anonymousId":
			var id ID
			switch {
			case val[0] == '"':
				s, ok := decodeString(val)
				if !ok {
					return false
				}
				id = ID(s)
			case (val[0] == '-' || (val[0] >= '0' && val[0] <= '9')) && json.Valid(val):
				id = ID(val)
			default:
				return false
			}
			if key == "userId" {
				m.UserID = id
			} else {
				m.AnonymousID = id
			}
			return true
		}
		if val[0] != '"' {
			return false
		}
		s, ok := decodeString(val)
		if !ok {
			return false
		}
		switch key {
		case "type":
			m.Type = s
		case "event":
			m.Event = s
		case "name":
			m.Name = s
		case "category":
			m.Category = s
		case "messageId":
			m.MessageID = s
		case "timestamp":
			m.Timestamp = &s
		case "originalTimestamp":
			m.OriginalTimestamp = &s
		case "sentAt":
			m.SentAt = &s
		}
		return true
	})
}

// splitBatchFast reads {batch: [...], sentAt?, ...} as json.Unmarshal would, except that the
// messages are only delimited: true means the body is valid JSON if each message is. false: leave
// it to encoding/json.
func splitBatchFast(body []byte, in *batchBody) bool {
	return eachMember(body, func(key string, val []byte) bool {
		switch known(key, "batch", "sentAt") {
		case 0:
			return json.Valid(val)
		case -1:
			return false
		}
		if key == "sentAt" {
			if val[0] != '"' {
				return false
			}
			s, ok := decodeString(val)
			if !ok {
				return false
			}
			in.SentAt = &s
			return true
		}
		// A second batch would replace the first, whose messages would then go unchecked.
		if val[0] != '[' || in.Batch != nil {
			return false
		}
		msgs := make([]json.RawMessage, 0, 64)
		i := skipSpace(val, 1)
		if i < len(val) && val[i] == ']' {
			in.Batch = msgs
			return i+1 == len(val)
		}
		for {
			end := skipValue(val, i)
			if end <= i {
				return false
			}
			msgs = append(msgs, json.RawMessage(val[i:end:end]))
			i = skipSpace(val, end)
			if i >= len(val) {
				return false
			}
			if val[i] == ']' {
				in.Batch = msgs
				return i+1 == len(val)
			}
			if val[i] != ',' {
				return false
			}
			i = skipSpace(val, i+1)
		}
	})
}
