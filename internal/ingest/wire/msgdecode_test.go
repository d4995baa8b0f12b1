package wire

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// decodeSame checks that DecodeMessage gives what json.Unmarshal gives, error or value.
func decodeSame(t *testing.T, data []byte) {
	t.Helper()
	var got, want Message
	gerr := DecodeMessage(data, &got)
	werr := json.Unmarshal(data, &want)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("DecodeMessage(%q) error %v, json.Unmarshal error %v", data, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeMessage(%q) =\n%#v\nwant\n%#v", data, got, want)
	}
}

func TestDecodeMessage(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	marshal := func(m Message) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	events := []warehouse.Event{
		{TenantID: 7, EventID: "e1", UserID: "u1", EventType: "order_completed", OccurredAt: at, ReceivedAt: at.Add(time.Second), Payload: json.RawMessage(`{"amount":12.5}`)},
		{TenantID: 7, EventID: "é<\"\\>", UserID: "u\u2028", EventType: "page_view", OccurredAt: at.In(time.FixedZone("x", 3600)), ReceivedAt: at, Payload: json.RawMessage(`{}`)},
		{TenantID: -1, EventID: "", UserID: "", EventType: "", OccurredAt: time.Time{}, ReceivedAt: at, Payload: json.RawMessage(`{"a":[1,{"b":"}"}],"c":null}`)},
		{TenantID: 7, EventID: "e3", UserID: "anon-1", EventType: "page_view", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{}`), AnonymousID: "anon-1"},
		{TenantID: 7, EventID: "e4", UserID: "u1", EventType: "context_identified", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{}`), AnonymousID: "anon-1", LinkAuth: warehouse.LinkVerified},
	}
	cases := []struct {
		name string
		data []byte
		fast bool // the fast path takes it
	}{
		{"published", marshal(Message{V: 1, TenantID: 7, Events: events}), true},
		{"no events", marshal(Message{V: 1, TenantID: 7, Events: []warehouse.Event{}}), true},
		{"nil events", marshal(Message{V: 1, TenantID: 7}), true},
		{"whitespace", []byte(`{ "v": 1, "tenant_id": 7, "events": [] }`), false},
		{"other key order", []byte(`{"tenant_id":7,"v":1,"events":[]}`), false},
		{"unknown key", []byte(`{"v":1,"tenant_id":7,"events":[],"x":1}`), false},
		{"upper-case key", []byte(`{"V":1,"tenant_id":7,"events":[]}`), false},
		{"version 2", []byte(`{"v":2,"tenant_id":7,"events":[]}`), true},
		{"leading zero", []byte(`{"v":01,"tenant_id":7,"events":[]}`), false},
		{"fraction", []byte(`{"v":1.0,"tenant_id":7,"events":[]}`), false},
		{"overflow", []byte(`{"v":1,"tenant_id":99999999999999999999,"events":[]}`), false},
		{"trailing data", []byte(`{"v":1,"tenant_id":7,"events":[]}x`), false},
		{"truncated", marshal(Message{V: 1, TenantID: 7, Events: events})[:200], false},
		{"bad payload", []byte(`{"v":1,"tenant_id":7,"events":[{"tenant_id":7,"event_id":"a","user_id":"u","event_type":"t","occurred_at":"2024-05-01T12:00:00Z","received_at":"2024-05-01T12:00:00Z","payload":{"a":}}]}`), false},
		{"null payload", []byte(`{"v":1,"tenant_id":7,"events":[{"tenant_id":7,"event_id":"a","user_id":"u","event_type":"t","occurred_at":"2024-05-01T12:00:00Z","received_at":"2024-05-01T12:00:00Z","payload":null}]}`), true},
		{"bad time", []byte(`{"v":1,"tenant_id":7,"events":[{"tenant_id":7,"event_id":"a","user_id":"u","event_type":"t","occurred_at":"2024-05-01","received_at":"2024-05-01T12:00:00Z","payload":{}}]}`), false},
		{"invalid utf-8", []byte("{\"v\":1,\"tenant_id\":7,\"events\":[{\"tenant_id\":7,\"event_id\":\"\xff\",\"user_id\":\"u\",\"event_type\":\"t\",\"occurred_at\":\"2024-05-01T12:00:00Z\",\"received_at\":\"2024-05-01T12:00:00Z\",\"payload\":{}}]}"), true},
		{"control character", []byte("{\"v\":1,\"tenant_id\":7,\"events\":[{\"tenant_id\":7,\"event_id\":\"\x01\",\"user_id\":\"u\",\"event_type\":\"t\",\"occurred_at\":\"2024-05-01T12:00:00Z\",\"received_at\":\"2024-05-01T12:00:00Z\",\"payload\":{}}]}"), false},
		{"not json", []byte(`nope`), false},
		// Written before events carried anonymous ids: still read, on the fast path.
		{"message without anonymous ids", []byte(`{"v":1,"tenant_id":7,"events":[{"tenant_id":7,"event_id":"a","user_id":"u","event_type":"t","occurred_at":"2024-05-01T12:00:00Z","received_at":"2024-05-01T12:00:00Z","payload":{}}]}`), true},
		{"link_auth without anonymous_id", []byte(`{"v":1,"tenant_id":7,"events":[{"tenant_id":7,"event_id":"a","user_id":"u","event_type":"t","occurred_at":"2024-05-01T12:00:00Z","received_at":"2024-05-01T12:00:00Z","payload":{},"link_auth":"session"}]}`), true},
		{"anonymous_id not a string", []byte(`{"v":1,"tenant_id":7,"events":[{"tenant_id":7,"event_id":"a","user_id":"u","event_type":"t","occurred_at":"2024-05-01T12:00:00Z","received_at":"2024-05-01T12:00:00Z","payload":{},"anonymous_id":1}]}`), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			decodeSame(t, tc.data)
			var m Message
			if fast := decodeMessageFast(tc.data, &m); fast != tc.fast {
				t.Errorf("fast path took it: %v, want %v", fast, tc.fast)
			}
		})
	}
}

func FuzzDecodeMessage(f *testing.F) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	seed, _ := json.Marshal(Message{V: 1, TenantID: 3, Events: []warehouse.Event{
		{TenantID: 3, EventID: "a", UserID: "b", EventType: "c", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{"x":"1"}`)},
		{TenantID: 3, EventID: "d\"", UserID: "é", EventType: "c", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`[true]`)},
	}})
	f.Add(seed)
	f.Add([]byte(`{"v":1,"tenant_id":7,"events":null}`))
	f.Fuzz(func(t *testing.T, data []byte) { decodeSame(t, data) })
}

// sameMessage checks that data (from EncodeMessage) decodes, on the loader's fast path, to what
// json.Marshal's encoding of m decodes to.
func sameMessage(t *testing.T, data []byte, m Message) {
	t.Helper()
	var got, want Message
	if !decodeMessageFast(data, &got) {
		t.Fatalf("the fast decoder refused %q", data)
	}
	enc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(enc, &want); err != nil {
		t.Fatal(err)
	}
	// Payloads are compared as values: json.Marshal compacts them and escapes <, > and &.
	if len(got.Events) != len(want.Events) {
		t.Fatalf("%d events, want %d", len(got.Events), len(want.Events))
	}
	for i := range got.Events {
		var g, w any
		if json.Unmarshal(got.Events[i].Payload, &g) != nil || json.Unmarshal(want.Events[i].Payload, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Fatalf("event %d payload %s, want %s", i, got.Events[i].Payload, want.Events[i].Payload)
		}
		got.Events[i].Payload, want.Events[i].Payload = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", got, want)
	}
}

// EncodeMessage writes json.Marshal's bytes for the usual messages (plain strings, compact
// payloads), and messages that decode to the same for any others.
func TestEncodeMessage(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	plain := []warehouse.Event{
		{TenantID: 7, EventID: "e1", UserID: "u1", EventType: "order_completed", OccurredAt: at, ReceivedAt: at.Add(time.Second), Payload: json.RawMessage(`{"amount":12.5}`)},
		{TenantID: 7, EventID: "0f3a", UserID: "日本語 😀 \"q\" \\", EventType: "page_view", OccurredAt: at.In(time.FixedZone("x", 3600)), ReceivedAt: at, Payload: json.RawMessage(`{}`)},
		{TenantID: 1 << 62, EventID: "x", UserID: "y", EventType: "z", OccurredAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), ReceivedAt: time.Time{}, Payload: nil},
		// Times repeated from the event before (written once, then copied), and the same instant
		// in other zones, which is written anew.
		{TenantID: 7, EventID: "r1", UserID: "u", EventType: "a", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{}`)},
		{TenantID: 7, EventID: "r2", UserID: "u", EventType: "a", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{}`)},
		{TenantID: 7, EventID: "r3", UserID: "u", EventType: "a", OccurredAt: at.In(time.FixedZone("y", -7200)), ReceivedAt: at.Local(), Payload: json.RawMessage(`{}`)},
		{TenantID: 7, EventID: "r4", UserID: "u", EventType: "a", OccurredAt: at.In(time.FixedZone("y", -7200)), ReceivedAt: at, Payload: json.RawMessage(`{}`)},
		{TenantID: 7, EventID: "a1", UserID: "anon \"1\"", EventType: "a", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{}`), AnonymousID: "anon \"1\""},
		{TenantID: 7, EventID: "a2", UserID: "u", EventType: "context_identified", OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{}`), AnonymousID: "anon", LinkAuth: warehouse.LinkSession},
	}
	for _, m := range []Message{
		{V: MessageVersion, TenantID: 7, Events: plain},
		{V: MessageVersion, TenantID: 7, Events: []warehouse.Event{}},
		{V: MessageVersion, TenantID: 0},
	} {
		got, err := EncodeMessage(m.TenantID, m.Events)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if string(got) != string(want) {
			t.Fatalf("EncodeMessage =\n%s\njson.Marshal =\n%s", got, want)
		}
		sameMessage(t, got, m)
	}

	// Strings json.Marshal escapes otherwise (HTML characters, \b, \f, invalid UTF-8) and
	// payloads as clients send them (whitespace, HTML characters): the same message.
	odd := []warehouse.Event{
		{TenantID: 2, EventID: "é<\"\\>&", UserID: "u\u2028\u2029\b\f\n\r\t\x00\x1f\x7f", EventType: "bad \xff utf-8 \xe2\x82", OccurredAt: at, ReceivedAt: at,
			Payload: json.RawMessage("{ \"html\": \"<b>&</b>\",\n\t\"n\": [ 1, 2 ] }")},
	}
	got, err := EncodeMessage(2, odd)
	if err != nil {
		t.Fatal(err)
	}
	sameMessage(t, got, Message{V: MessageVersion, TenantID: 2, Events: odd})

	// What json.Marshal refuses is refused (but for invalid payloads, which never reach it: see
	// Publisher and TestPublishEventsRefusesInvalidPayloads).
	for name, e := range map[string]warehouse.Event{
		"year 10000":    {OccurredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), ReceivedAt: at, Payload: json.RawMessage(`{}`)},
		"negative year": {OccurredAt: at, ReceivedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), Payload: json.RawMessage(`{}`)},
	} {
		if _, err := EncodeMessage(1, []warehouse.Event{e}); err == nil {
			t.Errorf("%s: encoded", name)
		}
		if _, err := json.Marshal(Message{Events: []warehouse.Event{e}}); err == nil {
			t.Errorf("%s: json.Marshal accepts it", name)
		}
	}
}

// randomID is an event id as the API generates one for events sent without a message_id
// (ingest.NewEventID).
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// BenchmarkEncodeMessage writes the message of a 500-event batch as the batch endpoint makes it:
// one received_at, occurred_at a second apart.
func BenchmarkEncodeMessage(b *testing.B) {
	now := time.Now().UTC()
	events := make([]warehouse.Event, 500)
	for i := range events {
		events[i] = warehouse.Event{TenantID: 1, EventID: randomID(), UserID: "user-" + strconv.Itoa(i*7919%100000),
			EventType: []string{"page_viewed", "order_completed", "add_to_cart"}[i%3], OccurredAt: now.Add(-time.Duration(i) * time.Second),
			ReceivedAt: now, Payload: json.RawMessage(`{"amount":` + strconv.Itoa(12+i) + `.5,"currency":"EUR","sku":"SKU-` + strconv.Itoa(i) + `"}`)}
	}
	for b.Loop() {
		if _, err := EncodeMessage(1, events); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzEncodeMessage: for any strings and times, EncodeMessage fails where json.Marshal fails,
// and otherwise writes a message the loader decodes to the same events.
func FuzzEncodeMessage(f *testing.F) {
	f.Add("e1", "u1", "page_view", int64(1714557600123456789))
	f.Add("<&>\u2028", "\xff\xfe", "\x00\x1f\"\\", int64(-62135596800000000))
	f.Fuzz(func(t *testing.T, id, user, typ string, nanos int64) {
		at := time.Unix(0, nanos).UTC()
		m := Message{V: MessageVersion, TenantID: nanos, Events: []warehouse.Event{
			{TenantID: nanos, EventID: id, UserID: user, EventType: typ, OccurredAt: at, ReceivedAt: at, Payload: json.RawMessage(`{"x":1}`)}}}
		got, err := EncodeMessage(m.TenantID, m.Events)
		_, werr := json.Marshal(m)
		if (err == nil) != (werr == nil) {
			t.Fatalf("EncodeMessage error %v, json.Marshal error %v", err, werr)
		}
		if err == nil {
			sameMessage(t, got, m)
		}
	})
}
