package ingest

import "encoding/json"

// Input fields, as bits: decodeInputFast refuses a repeated key (encoding/json keeps the last).
const (
	keyUserID = 1 << iota
	keyEventType
	keyOccurredAt
	keySentAt
	keyPayload
	keyMessageID
)

// decodeInputFast decodes an event the way json.Unmarshal into Input does, for the layout SDKs
// send: the known keys spelled exactly, each once; user_id, event_type, occurred_at, sent_at
// and message_id as strings; payload an object. It returns false for anything else (other keys
// or spellings, nulls, invalid JSON, data after the object), which Decode leaves to
// encoding/json. When it returns true, p is valid JSON and json.Unmarshal would have decoded the
// same Input: strings are decoded by decodeString (encoding/json's own decoding for any that
// is not plain ASCII), and the payload is checked whole with json.Valid.
//
// It saves encoding/json's second scan of every event and its reflection, about half of the
// batch endpoint's decoding. The payload keeps p's bytes: Validate copies it.
func decodeInputFast(p []byte, in *Input) bool {
	var seen int
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return false
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return skipSpace(p, i+1) == len(p)
	}
	for {
		key, end, ok := jsonString(p, i)
		if !ok {
			return false
		}
		i = skipSpace(p, end)
		if i >= len(p) || p[i] != ':' {
			return false
		}
		i = skipSpace(p, i+1)
		var bit int
		switch key {
		case "user_id":
			bit = keyUserID
		case "event_type":
			bit = keyEventType
		case "occurred_at":
			bit = keyOccurredAt
		case "sent_at":
			bit = keySentAt
		case "payload":
			bit = keyPayload
		case "message_id":
			bit = keyMessageID
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		if bit == keyPayload {
			if i >= len(p) || p[i] != '{' {
				return false
			}
			end = skipValue(p, i)
			if end < 0 || !json.Valid(p[i:end]) {
				return false
			}
			in.Payload = json.RawMessage(p[i:end:end])
		} else {
			var s string
			if s, end, ok = jsonString(p, i); !ok {
				return false
			}
			switch bit {
			case keyUserID:
				in.UserID = s
			case keyEventType:
				in.EventType = s
			case keyMessageID:
				in.MessageID = s
			case keyOccurredAt:
				in.OccurredAt = &s
			case keySentAt:
				in.SentAt = &s
			}
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
