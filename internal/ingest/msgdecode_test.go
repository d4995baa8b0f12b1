package ingest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// decodeSame checks that decodeMessage gives what json.Unmarshal gives, error or value.
func decodeSame(t *testing.T, data []byte) {
	t.Helper()
	var got, want Message
	gerr := decodeMessage(data, &got)
	werr := json.Unmarshal(data, &want)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("decodeMessage(%q) error %v, json.Unmarshal error %v", data, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeMessage(%q) =\n%#v\nwant\n%#v", data, got, want)
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
