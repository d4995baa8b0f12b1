package wire

import (
	"bytes"
	"encoding/json"
)

// SessionTokenField is the batch body's field that carries a session token for beacon requests
// (navigator.sendBeacon cannot set an Authorization header).
const SessionTokenField = "session_token"

// TakeSessionToken reads a session_token that is the body's first field, as in
// {"session_token": "...", "events": [...]} (the layout the client library sends), and blanks it
// out with spaces in place: what is left is the plain batch body that SplitBatch (the batch
// decoder's fast path) splits without a second decode. found is false for any other layout (the
// field elsewhere, an escaped or non-string value), which SessionTokenOf then reads.
func TakeSessionToken(body []byte) (token string, found bool) {
	const key = `"` + SessionTokenField + `"`
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return "", false
	}
	start := skipSpace(body, i+1)
	if !bytes.HasPrefix(body[start:], []byte(key)) {
		return "", false
	}
	i = skipSpace(body, start+len(key))
	if i >= len(body) || body[i] != ':' {
		return "", false
	}
	i = skipSpace(body, i+1)
	if i >= len(body) || body[i] != '"' {
		return "", false
	}
	end := i + 1
	for end < len(body) && body[end] != '"' && body[end] != '\\' && body[end] >= 0x20 {
		end++
	}
	if end >= len(body) || body[end] != '"' {
		return "", false
	}
	token = string(body[i+1 : end])
	stop := skipSpace(body, end+1)
	switch {
	case stop >= len(body):
		return "", false
	case body[stop] == ',':
		stop++
	case body[stop] != '}':
		return "", false
	}
	for j := start; j < stop; j++ {
		body[j] = ' '
	}
	return token, true
}

// SessionTokenOf reads the body's session_token with encoding/json, wherever it is. ok is false
// when the body is not a JSON object or the field is not a string.
func SessionTokenOf(body []byte) (token string, found, ok bool) {
	var in struct {
		SessionToken *string `json:"session_token"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return "", false, false
	}
	if in.SessionToken == nil {
		return "", false, true
	}
	return *in.SessionToken, true, true
}
