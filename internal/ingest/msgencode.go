package ingest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// encodeMessage writes a Message in json.Marshal's layout (keys in struct order, strings escaped
// as encoding/json escapes them, times in RFC 3339 with nanoseconds), which decodeMessage's fast
// path reads. Payloads are copied as they are: the API accepted them as valid JSON objects, and
// re-compacting them was a quarter of the batch endpoint's CPU under encoding/json. A payload
// that is not valid JSON is refused, as json.Marshal would refuse it.
func encodeMessage(tenantID int64, events []warehouse.Event) ([]byte, error) {
	size := 48
	for i := range events {
		e := &events[i]
		size += 160 + len(e.EventID) + len(e.UserID) + len(e.EventType) + len(e.Payload)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, MessageVersion, 10)
	b = append(b, `,"tenant_id":`...)
	b = strconv.AppendInt(b, tenantID, 10)
	b = append(b, `,"events":`...)
	if events == nil {
		return append(b, `null}`...), nil
	}
	b = append(b, '[')
	for i := range events {
		e := &events[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"tenant_id":`...)
		b = strconv.AppendInt(b, e.TenantID, 10)
		b = append(b, `,"event_id":`...)
		b = appendJSONString(b, e.EventID)
		b = append(b, `,"user_id":`...)
		b = appendJSONString(b, e.UserID)
		b = append(b, `,"event_type":`...)
		b = appendJSONString(b, e.EventType)
		var err error
		b = append(b, `,"occurred_at":`...)
		if b, err = appendJSONTime(b, e.OccurredAt); err != nil {
			return nil, fmt.Errorf("event %d occurred_at: %w", i, err)
		}
		b = append(b, `,"received_at":`...)
		if b, err = appendJSONTime(b, e.ReceivedAt); err != nil {
			return nil, fmt.Errorf("event %d received_at: %w", i, err)
		}
		b = append(b, `,"payload":`...)
		switch {
		case e.Payload == nil:
			b = append(b, `null`...)
		case !json.Valid(e.Payload):
			return nil, fmt.Errorf("event %d payload is not valid JSON", i)
		default:
			b = append(b, e.Payload...)
		}
		b = append(b, '}')
	}
	return append(b, `]}`...), nil
}

// appendJSONTime writes t as time.Time.MarshalJSON does, with its range check.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("year %d outside of range [0,9999]", y)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string the way encoding/json does (HTML-safe: <, > and &
// escaped; invalid UTF-8 as U+FFFD; U+2028 and U+2029 escaped), so messages stay byte-identical
// to json.Marshal's.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
