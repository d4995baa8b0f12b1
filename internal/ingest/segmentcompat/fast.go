package segmentcompat

import (
	"encoding/json"
	"strings"

	"github.com/cohort-dev/cohort/internal/ingest/wire"
)

// The fast path reads the layout SDKs send in place, without encoding/json's reflection and its
// second scan, and checks as it goes that the text is valid JSON: the structure it walks itself,
// strings through wire.DecodeString, every value it does not decode (properties, traits, context ...)
// with json.Valid. Anything it is not sure to read as json.Unmarshal would (a key that differs from
// a known one only in case, a null or a value of another type in a known field, a repeated batch)
// makes it give up, and encoding/json decides.

// eachMember calls fn for each member of the object p (nothing but space after it) with its
// decoded key and its value's bytes, unvalidated; fn returns false to give up. It returns false
// when p is not such an object or fn gave up.
func eachMember(p []byte, fn func(key string, val []byte) bool) bool {
	i := wire.SkipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return false
	}
	i = wire.SkipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return wire.SkipSpace(p, i+1) == len(p)
	}
	for {
		if i >= len(p) || p[i] != '"' {
			return false
		}
		end := wire.SkipString(p, i)
		if end < 0 {
			return false
		}
		key, ok := wire.DecodeString(p[i:end])
		if !ok {
			return false
		}
		i = wire.SkipSpace(p, end)
		if i >= len(p) || p[i] != ':' {
			return false
		}
		i = wire.SkipSpace(p, i+1)
		end = wire.SkipValue(p, i)
		if end <= i || !fn(key, p[i:end:end]) {
			return false
		}
		i = wire.SkipSpace(p, end)
		if i >= len(p) {
			return false
		}
		if p[i] == '}' {
			return wire.SkipSpace(p, i+1) == len(p)
		}
		if p[i] != ',' {
			return false
		}
		i = wire.SkipSpace(p, i+1)
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

var messageKeys = []string{"type", "event", "name", "category", "userId", "anonymousId", "messageId", "timestamp", "originalTimestamp", "sentAt", "properties", "traits", "previousId", "groupId"}

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
		case "userId", "anonymousId", "previousId", "groupId":
			var id ID
			switch {
			case val[0] == '"':
				s, ok := wire.DecodeString(val)
				if !ok {
					return false
				}
				id = ID(s)
			case (val[0] == '-' || (val[0] >= '0' && val[0] <= '9')) && json.Valid(val):
				id = ID(val)
			default:
				return false
			}
			switch key {
			case "userId":
				m.UserID = id
			case "anonymousId":
				m.AnonymousID = id
			case "previousId":
				m.PreviousID = id
			default:
				m.GroupID = id
			}
			return true
		}
		if val[0] != '"' {
			return false
		}
		s, ok := wire.DecodeString(val)
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
			s, ok := wire.DecodeString(val)
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
		i := wire.SkipSpace(val, 1)
		if i < len(val) && val[i] == ']' {
			in.Batch = msgs
			return i+1 == len(val)
		}
		for {
			end := wire.SkipValue(val, i)
			if end <= i {
				return false
			}
			msgs = append(msgs, json.RawMessage(val[i:end:end]))
			i = wire.SkipSpace(val, end)
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
			i = wire.SkipSpace(val, i+1)
		}
	})
}
