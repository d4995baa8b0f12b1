package wire

import "encoding/json"

// SplitBatch reads a batch body laid out as {"events": [e0, e1, ...]} (any JSON whitespace
// between tokens, the one key spelled exactly so, at most maxEvents events) and returns each
// event's bytes in place, without copying or parsing them: encoding/json would scan the body twice
// and copy every event before each is parsed again.
//
// It does not validate the events: skipValue only finds where each one ends. That is enough when
// every event then decodes as a JSON object (ingest.Decode checks each one whole, with nothing
// after it): the body is then valid JSON, and json.Unmarshal into {"events": []json.RawMessage}
// gives the same events. The batch endpoint relies on exactly that, and takes encoding/json's path
// otherwise. false means another layout (other or repeated keys, escapes in the key, events not an
// array, trailing data, too many events): encoding/json decides those.
func SplitBatch(body []byte, maxEvents int) ([]json.RawMessage, bool) {
	const key = `"events"`
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i = skipSpace(body, i+1)
	if len(body)-i < len(key) || string(body[i:i+len(key)]) != key {
		return nil, false
	}
	i = skipSpace(body, i+len(key))
	if i >= len(body) || body[i] != ':' {
		return nil, false
	}
	i = skipSpace(body, i+1)
	if i >= len(body) || body[i] != '[' {
		return nil, false
	}
	i = skipSpace(body, i+1)
	events := make([]json.RawMessage, 0, 64)
	if i < len(body) && body[i] == ']' {
		i++
	} else {
		for {
			if i >= len(body) || body[i] != '{' || len(events) == maxEvents {
				return nil, false
			}
			end := skipValue(body, i)
			if end < 0 {
				return nil, false
			}
			events = append(events, json.RawMessage(body[i:end:end]))
			i = skipSpace(body, end)
			if i >= len(body) {
				return nil, false
			}
			if body[i] == ']' {
				i++
				break
			}
			if body[i] != ',' {
				return nil, false
			}
			i = skipSpace(body, i+1)
		}
	}
	i = skipSpace(body, i)
	if i >= len(body) || body[i] != '}' {
		return nil, false
	}
	if skipSpace(body, i+1) != len(body) {
		return nil, false
	}
	return events, true
}
