package wire

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// DecodeMessage decodes a bus message exactly as json.Unmarshal does. The API writes messages in
// json.Marshal's layout (EncodeMessage), so a fast path reads that layout (keys in struct order,
// no whitespace outside payloads) without reflection; anything else it leaves to encoding/json.
func DecodeMessage(data []byte, msg *Message) error {
	if decodeMessageFast(data, msg) {
		return nil
	}
	*msg = Message{}
	return json.Unmarshal(data, msg)
}

// msgScanner reads the layout json.Marshal writes for a Message.
type msgScanner struct {
	p     []byte
	i     int
	types map[string]string // event types seen in the message, shared
}

func decodeMessageFast(data []byte, msg *Message) bool {
	s := msgScanner{p: data}
	var m Message
	var ok bool
	if !s.lit(`{"v":`) {
		return false
	}
	if m.V, ok = s.int(); !ok || !s.lit(`,"tenant_id":`) {
		return false
	}
	var tenant int64
	if tenant, ok = s.int64(); !ok {
		return false
	}
	m.TenantID = tenant
	if !s.lit(`,"events":`) {
		return false
	}
	switch {
	case s.lit(`null`):
	case s.lit(`[`):
		m.Events = []warehouse.Event{}
		if !s.lit(`]`) {
			for {
				var e warehouse.Event
				if !s.event(&e) {
					return false
				}
				m.Events = append(m.Events, e)
				if s.lit(`]`) {
					break
				}
				if !s.lit(`,`) {
					return false
				}
			}
		}
	default:
		return false
	}
	if !s.lit(`}`) || s.i != len(s.p) {
		return false
	}
	*msg = m
	return true
}

func (s *msgScanner) event(e *warehouse.Event) bool {
	var ok bool
	if !s.lit(`{"tenant_id":`) {
		return false
	}
	if e.TenantID, ok = s.int64(); !ok || !s.lit(`,"event_id":`) {
		return false
	}
	if e.EventID, ok = s.str(); !ok || !s.lit(`,"user_id":`) {
		return false
	}
	if e.UserID, ok = s.str(); !ok || !s.lit(`,"event_type":`) {
		return false
	}
	var typ []byte
	if typ, ok = s.strBytes(); !ok || !s.lit(`,"occurred_at":`) {
		return false
	}
	// A message holds few event types: one string each.
	if t, seen := s.types[string(typ)]; seen {
		e.EventType = t
	} else {
		if e.EventType, ok = decodeString(typ); !ok {
			return false
		}
		if s.types == nil {
			s.types = map[string]string{}
		}
		s.types[string(typ)] = e.EventType
	}
	if !s.time(&e.OccurredAt) || !s.lit(`,"received_at":`) || !s.time(&e.ReceivedAt) || !s.lit(`,"payload":`) {
		return false
	}
	start := s.i
	end := skipValue(s.p, s.i)
	if end < 0 || !json.Valid(s.p[start:end]) {
		return false
	}
	s.i = end
	// The message's bytes stay untouched for as long as its events live (until the ack).
	e.Payload = json.RawMessage(s.p[start:end:end])
	// Present only when not empty; messages written before they existed have neither.
	if s.lit(`,"anonymous_id":`) {
		if e.AnonymousID, ok = s.str(); !ok {
			return false
		}
	}
	if s.lit(`,"link_auth":`) {
		if e.LinkAuth, ok = s.str(); !ok {
			return false
		}
	}
	return s.lit(`}`)
}

// lit consumes l if the input continues with it.
func (s *msgScanner) lit(l string) bool {
	if len(s.p)-s.i < len(l) || string(s.p[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

// int64 reads an integer in JSON's syntax (no leading zero, no fraction or exponent).
func (s *msgScanner) int64() (int64, bool) {
	start := s.i
	if s.i < len(s.p) && s.p[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.p) && s.p[s.i] >= '0' && s.p[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.p[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	if s.i < len(s.p) && (s.p[s.i] == '.' || s.p[s.i] == 'e' || s.p[s.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.p[start:s.i]), 10, 64)
	return n, err == nil
}

func (s *msgScanner) int() (int, bool) {
	n, ok := s.int64()
	if !ok || int64(int(n)) != n {
		return 0, false
	}
	return int(n), true
}

// strBytes returns the JSON string token (quotes included) at the input.
func (s *msgScanner) strBytes() ([]byte, bool) {
	if s.i >= len(s.p) || s.p[s.i] != '"' {
		return nil, false
	}
	end := skipString(s.p, s.i)
	if end < 0 {
		return nil, false
	}
	tok := s.p[s.i:end]
	s.i = end
	return tok, true
}

func (s *msgScanner) str() (string, bool) {
	tok, ok := s.strBytes()
	if !ok {
		return "", false
	}
	return decodeString(tok)
}

func (s *msgScanner) time(t *time.Time) bool {
	tok, ok := s.strBytes()
	return ok && t.UnmarshalJSON(tok) == nil
}
