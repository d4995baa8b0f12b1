// Package ingest accepts behavioural events: it decodes and validates them, publishes accepted
// batches to the event bus (Pub/Sub or NATS JetStream) and keeps the ingestion error log. The
// format of events on the bus is package wire's; the worker loads them into the warehouse, the
// profile store and the stats rollups with package load.
package ingest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/jsontext"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Limits of the ingestion API.
const (
	MaxBatchEvents    = 500
	MaxEventBytes     = 32 << 10
	MaxBatchBytes     = 4 << 20
	MaxUserIDLen      = ident.MaxUserIDLen
	MaxMessageIDLen   = 128
	MaxFutureSkew     = 24 * time.Hour
	ContextIdentified = "context_identified"
	// ContextAliased is an alias (the Segment-compatible API's): stored with the new user id as
	// its user_id and the previous id as its anonymous_id; it links the previous id to the user.
	ContextAliased = "context_aliased"
)

// Rejection says why one event was not accepted.
type Rejection struct {
	Code    string `json:"code"`
	Field   string `json:"-"`
	Message string `json:"message"`
}

func (r *Rejection) Error() string { return r.Field + ": " + r.Message }

// errorTypeOf is the error log's type for a rejection code.
func errorTypeOf(code string) string {
	if code == "user_mismatch" {
		return ErrorSessionUser
	}
	return ErrorValidation
}

func reject(code, field, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Decode parses and validates one raw event received at receivedAt for the tenant.
func Decode(raw []byte, tenantID int64, receivedAt time.Time) (warehouse.Event, *Rejection) {
	if len(raw) > MaxEventBytes {
		return warehouse.Event{}, reject("event_too_large", "event", "event is %d bytes; the limit is %d", len(raw), MaxEventBytes)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return warehouse.Event{}, reject("invalid_json", "event", "an event must be a JSON object")
	}
	var in wire.Input
	if !wire.DecodeInputFast(trimmed, &in) {
		in = wire.Input{}
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if err := dec.Decode(&in); err != nil {
			return warehouse.Event{}, decodeRejection(err)
		}
		if len(bytes.TrimSpace(trimmed[dec.InputOffset():])) > 0 {
			return warehouse.Event{}, reject("invalid_json", "event", "trailing data after the event object")
		}
	}
	// encoding/json silently turns invalid UTF-8 into U+FFFD; refuse it instead, naming the field.
	if !utf8.Valid(trimmed) {
		switch {
		case !utf8.Valid(in.Payload):
			return warehouse.Event{}, reject("invalid_payload", "payload", "must be valid UTF-8")
		case strings.ContainsRune(in.UserID, utf8.RuneError):
			return warehouse.Event{}, reject("invalid_user_id", "user_id", "must be valid UTF-8")
		case strings.ContainsRune(in.AnonymousID, utf8.RuneError):
			return warehouse.Event{}, reject("invalid_anonymous_id", "anonymous_id", "must be valid UTF-8")
		default:
			return warehouse.Event{}, reject("invalid_json", "event", "must be valid UTF-8")
		}
	}
	// A \u escape of an unpaired surrogate decodes to U+FFFD too (the payload's are refused by
	// storableJSON). Only a decoded U+FFFD, which events seldom carry, costs a look at the raw text.
	if strings.ContainsRune(in.UserID, utf8.RuneError) && surrogateIn(trimmed, "user_id") {
		return warehouse.Event{}, reject("invalid_user_id", "user_id", "%s", jsontext.Problem)
	}
	if strings.ContainsRune(in.AnonymousID, utf8.RuneError) && surrogateIn(trimmed, "anonymous_id") {
		return warehouse.Event{}, reject("invalid_anonymous_id", "anonymous_id", "%s", jsontext.Problem)
	}
	if strings.ContainsRune(in.MessageID, utf8.RuneError) && surrogateIn(trimmed, "message_id") {
		return warehouse.Event{}, reject("invalid_message_id", "message_id", "%s", jsontext.Problem)
	}
	return Validate(in, tenantID, receivedAt)
}

// surrogateIn reports whether the top-level field of the event's JSON text p holds text that is
// not valid UTF-8 (p itself is: an unpaired surrogate escape, then).
func surrogateIn(p []byte, field string) bool {
	for base := 0; base < len(p); {
		off := jsontext.Check(p[base:])
		if off < 0 {
			return false
		}
		if jsontext.PathAt(p, base+off) == field {
			return true
		}
		base += off + 1
	}
	return false
}

func decodeRejection(err error) *Rejection {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return reject("invalid_json", "event", "an event must be a JSON object")
		}
		want := "a string"
		if field == "payload" {
			want = "an object"
		}
		return reject("invalid_"+strings.SplitN(field, ".", 2)[0], field, "must be %s", want)
	}
	return reject("invalid_json", "event", "not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// Validate checks a decoded event and normalises it into a warehouse row.
func Validate(in wire.Input, tenantID int64, receivedAt time.Time) (warehouse.Event, *Rejection) {
	receivedAt = receivedAt.UTC()
	ev := warehouse.Event{TenantID: tenantID, ReceivedAt: receivedAt, OccurredAt: receivedAt}
	if r := checkSubject(in.UserID, in.AnonymousID); r != nil {
		return ev, r
	}
	ev.UserID, ev.AnonymousID = in.UserID, in.AnonymousID
	if ev.UserID == "" {
		ev.UserID = in.AnonymousID
	}
	if !validEventType(in.EventType) {
		return ev, reject("invalid_event_type", "event_type", "must be snake_case: a lowercase letter, then up to 127 of a-z, 0-9, _")
	}
	ev.EventType = in.EventType
	if in.OccurredAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *in.OccurredAt)
		if err != nil {
			return ev, reject("invalid_occurred_at", "occurred_at", "must be an RFC 3339 timestamp such as 2024-05-01T12:00:00Z")
		}
		ev.OccurredAt = t.UTC()
		if in.SentAt != nil {
			sent, err := time.Parse(time.RFC3339Nano, *in.SentAt)
			if err != nil {
				return ev, reject("invalid_sent_at", "sent_at", "must be an RFC 3339 timestamp")
			}
			// The client's clock may be off: keep the interval it measured, anchor it at receipt.
			// An interval beyond what a time.Duration holds (about 292 years) would saturate and
			// anchor the event at a made-up time: refuse it.
			measured := sent.Sub(t)
			if !t.Add(measured).Equal(sent) {
				return ev, reject("invalid_sent_at", "sent_at", "is too far from occurred_at to correct the client's clock")
			}
			ev.OccurredAt = receivedAt.Add(-measured).UTC()
		}
		if ev.OccurredAt.After(receivedAt.Add(MaxFutureSkew)) {
			return ev, reject("invalid_occurred_at", "occurred_at", "is more than 24 hours in the future")
		}
	} else if in.SentAt != nil {
		if _, err := time.Parse(time.RFC3339Nano, *in.SentAt); err != nil {
			return ev, reject("invalid_sent_at", "sent_at", "must be an RFC 3339 timestamp")
		}
	}
	payload, r := checkPayload(in.Payload)
	if r != nil {
		return ev, r
	}
	ev.Payload = payload
	if in.MessageID != "" {
		if len(in.MessageID) > MaxMessageIDLen || !printable(in.MessageID) {
			return ev, reject("invalid_message_id", "message_id", "must be at most 128 printable characters")
		}
		ev.EventID = in.MessageID
	} else {
		ev.EventID = NewEventID()
	}
	return ev, nil
}

// checkSubject checks an event's ids: at least one of user_id and anonymous_id, each a valid id
// (ident.CheckUserID) when given.
func checkSubject(userID, anonymousID string) *Rejection {
	if userID == "" && anonymousID == "" {
		return reject("invalid_user_id", "user_id", "user_id or anonymous_id is required")
	}
	if userID != "" {
		if err := ident.CheckUserID(userID); err != nil {
			return reject("invalid_user_id", "user_id", "%s", err.Error())
		}
	}
	if anonymousID != "" {
		if err := ident.CheckUserID(anonymousID); err != nil {
			return reject("invalid_anonymous_id", "anonymous_id", "%s", err.Error())
		}
	}
	return nil
}

func validEventType(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

var emptyObject = json.RawMessage(`{}`)

func checkPayload(p json.RawMessage) (json.RawMessage, *Rejection) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return emptyObject, nil
	}
	if p[0] != '{' {
		return nil, reject("invalid_payload", "payload", "must be an object")
	}
	// What Postgres jsonb (and BigQuery JSON) cannot store is refused here rather than failing
	// the loader: NUL, invalid UTF-8, unpaired surrogate escapes, numbers out of range.
	if problem := storableJSON(p); problem != "" {
		return nil, reject("invalid_payload", "payload", "%s", problem)
	}
	out := make(json.RawMessage, len(p))
	copy(out, p)
	return out, nil
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// NewEventID returns a random event id for events sent without a message_id.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func marshalPayload(p map[string]any) (json.RawMessage, error) {
	if p == nil {
		return emptyObject, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return b, nil
}

// storableJSON scans valid JSON text for what a JSON column cannot store; "" when all is well.
func storableJSON(p []byte) string {
	if !utf8.Valid(p) {
		return "must be valid UTF-8"
	}
	inString := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if inString {
			switch c {
			case '"':
				inString = false
			case '\\':
				if i+1 < len(p) && p[i+1] == 'u' && i+5 < len(p) {
					r := jsontext.Hex4(p[i+2 : i+6])
					switch {
					case r == 0:
						return "must not contain NUL characters (\\u0000)"
					case r >= 0xD800 && r <= 0xDBFF:
						if i+11 >= len(p) || p[i+6] != '\\' || p[i+7] != 'u' {
							return "has an unpaired surrogate escape"
						}
						if lo := jsontext.Hex4(p[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
							return "has an unpaired surrogate escape"
						}
						i += 11
						continue
					case r >= 0xDC00 && r <= 0xDFFF:
						return "has an unpaired surrogate escape"
					}
					i += 5
					continue
				}
				i++
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == 'e' || c == 'E':
			// Inside a number (true/false contain 'e' but no digits follow): check the exponent.
			j := i + 1
			negative := false
			if j < len(p) && (p[j] == '+' || p[j] == '-') {
				negative = p[j] == '-'
				j++
			}
			for j < len(p) && p[j] == '0' { // leading zeros carry no magnitude
				j++
			}
			start := j
			for j < len(p) && p[j] >= '0' && p[j] <= '9' {
				j++
			}
			// Large numbers must fit a double (BigQuery JSON); tiny ones Postgres numeric's scale.
			limit := 308
			if negative {
				limit = 1000
			}
			if j-start > 4 || (j > start && atoiSmall(p[start:j]) > limit) {
				return "has a number out of range (exponent beyond 1e308 or 1e-1000)"
			}
		}
	}
	return ""
}

func atoiSmall(b []byte) int {
	n := 0
	for _, c := range b {
		n = n*10 + int(c-'0')
	}
	return n
}
