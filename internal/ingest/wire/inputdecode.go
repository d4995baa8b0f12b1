package wire

import "encoding/json"

// Input is an event as a client sends it.
type Input struct {
	UserID      string          `json:"user_id"`
	AnonymousID string          `json:"anonymous_id"` // the subject when user_id is empty
	EventType   string          `json:"event_type"`
	OccurredAt  *string         `json:"occurred_at"`
	Payload     json.RawMessage `json:"payload"`
	MessageID   string          `json:"message_id"` // optional dedupe key; generated when missing
	SentAt      *string         `json:"sent_at"`    // optional: client clock at send, corrects skew
}

// Input fields, as bits: DecodeInputFast refuses a repeated key (encoding/json keeps the last).
const (
	keyUserID = 1 << iota
	keyEventType
	keyOccurredAt
	keySentAt
	keyPayload
	keyMessageID
	keyAnonymousID
)

// DecodeInputFast decodes an event the way json.Unmarshal into Input does, for the layout SDKs
// send: the known keys spelled exactly, each once; user_id, anonymous_id, event_type,
// occurred_at, sent_at and message_id as strings; payload an object. It returns false for
// anything else (other keys or spellings, nulls, invalid JSON, data after the object), which
// ingest.Decode leaves to
// encoding/json. When it returns true, p is valid JSON and json.Unmarshal would have decoded the
// same Input: strings are decoded by decodeString (encoding/json's own decoding for any that
// is not plain ASCII), and the payload is checked whole with json.Valid.
//
// It saves encoding/json's second scan of every event and its reflection on the batch
// endpoint's path (BenchmarkIngestBatch's bare_decode_validate runs it). The payload keeps p's
// bytes: ingest.Validate copies it.
func DecodeInputFast(p []byte, in *Input) bool {
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
		case "anonymous_id":
			bit = keyAnonymousID
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
			case keyAnonymousID:
				in.AnonymousID = s
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
