package wire

import (
	"fmt"
	"strconv"
	"time"

	"github.com/cohort-dev/cohort/internal/jsonenc"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// EncodeMessage writes a Message in json.Marshal's layout (keys in struct order, no whitespace,
// strings written by jsonenc, times as time.Time writes them), which DecodeMessage's fast path
// reads. Payloads are copied as they are: they are valid JSON objects (see ingest.Publisher), so
// compacting or checking them again would only cost CPU (BenchmarkEncodeMessage).
func EncodeMessage(tenantID int64, events []warehouse.Event) ([]byte, error) {
	b := make([]byte, 0, MessageSize(events))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, MessageVersion, 10)
	b = append(b, `,"tenant_id":`...)
	b = strconv.AppendInt(b, tenantID, 10)
	b = append(b, `,"events":`...)
	if events == nil {
		return append(b, `null}`...), nil
	}
	b = append(b, '[')
	// An endpoint's batch shares one received_at, and occurred_at where clients leave it out (it
	// defaults to the receipt time): a time equal to the previous event's is copied as text.
	var occurred, received timeText
	for i := range events {
		e := &events[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"tenant_id":`...)
		b = strconv.AppendInt(b, e.TenantID, 10)
		b = append(b, `,"event_id":`...)
		b = jsonenc.AppendString(b, e.EventID)
		b = append(b, `,"user_id":`...)
		b = jsonenc.AppendString(b, e.UserID)
		b = append(b, `,"event_type":`...)
		b = jsonenc.AppendString(b, e.EventType)
		var err error
		b = append(b, `,"occurred_at":`...)
		if b, err = occurred.append(b, e.OccurredAt); err != nil {
			return nil, fmt.Errorf("event %d occurred_at: %w", i, err)
		}
		b = append(b, `,"received_at":`...)
		if b, err = received.append(b, e.ReceivedAt); err != nil {
			return nil, fmt.Errorf("event %d received_at: %w", i, err)
		}
		b = append(b, `,"payload":`...)
		if e.Payload == nil {
			b = append(b, `null`...)
		} else {
			b = append(b, e.Payload...)
		}
		// Both are omitted when empty (omitempty), as in messages written before they existed.
		if e.AnonymousID != "" {
			b = append(b, `,"anonymous_id":`...)
			b = jsonenc.AppendString(b, e.AnonymousID)
		}
		if e.LinkAuth != "" {
			b = append(b, `,"link_auth":`...)
			b = jsonenc.AppendString(b, e.LinkAuth)
		}
		b = append(b, '}')
	}
	return append(b, `]}`...), nil
}

// MessageSize is the most EncodeMessage writes for events, so its buffer never grows (growing
// copies the whole message); only strings that need escapes can exceed it.
func MessageSize(events []warehouse.Event) int {
	size := len(`{"v":,"tenant_id":,"events":[]}`) + 2*maxInt64Digits
	for i := range events {
		e := &events[i]
		size += eventOverhead + len(e.EventID) + len(e.UserID) + len(e.EventType) + len(e.Payload) +
			len(e.AnonymousID) + len(e.LinkAuth)
	}
	return size
}

// eventOverhead is what one event takes besides its strings and payload, at most: its keys,
// quotes and punctuation, its tenant id, two times at their longest, and a missing payload.
const eventOverhead = len(`,{"tenant_id":,"event_id":"","user_id":"","event_type":"","occurred_at":,"received_at":,"payload":,"anonymous_id":"","link_auth":""}`) +
	maxInt64Digits + 2*len(`"2006-01-02T15:04:05.999999999-07:00"`) + len(`null`)

// maxInt64Digits is the longest decimal int64, sign included.
const maxInt64Digits = len("-9223372036854775808")

// appendJSONTime writes t as time.Time.MarshalJSON does, with its range check.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b, err := t.AppendText(append(b, '"'))
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

// timeText remembers the last time appendJSONTime wrote and its text.
type timeText struct {
	t    time.Time
	text []byte // nil until a time is written
}

// append writes t as appendJSONTime does. Equal time.Time values (the same instant, location
// and monotonic reading: ==, not Equal) have the same text.
func (c *timeText) append(b []byte, t time.Time) ([]byte, error) {
	if c.text != nil && t == c.t {
		return append(b, c.text...), nil
	}
	start := len(b)
	b, err := appendJSONTime(b, t)
	if err != nil {
		return nil, err
	}
	c.t, c.text = t, append(c.text[:0], b[start:]...)
	return b, nil
}
