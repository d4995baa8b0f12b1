package shopify

import (
	"errors"
	"testing"
	"time"
)

// FuzzMap feeds arbitrary topic x body pairs to Map. Map must never panic; it either fails with
// ErrBadPayload and no events, or returns events the caller can store as they are.
//
//	go test ./internal/ingest/shopify -run '^$' -fuzz FuzzMap -fuzztime 30s
func FuzzMap(f *testing.F) {
	for file, topic := range fixtureTopics {
		body := fixture(f, file)
		f.Add(topic, body)
		// The same body under every other topic: shapes the mapper does not expect.
		for _, other := range SupportedTopics() {
			if other != topic {
				f.Add(other, body)
			}
		}
	}
	for _, seed := range []struct{ topic, body string }{
		{TopicOrdersCreate, `{}`},
		{TopicOrdersCreate, `{"customer":{"id":1e400},"line_items":[{"quantity":1e400,"price":"1e400","line_price":"-1e308"}]}`},
		{TopicCartsUpdate, `{"token":"t","line_items":[{"quantity":1000000000,"price":"1.7976931348623157e308"},{"quantity":1000000000,"price":"1.7976931348623157e308"}]}`},
		{TopicCartsCreate, `{"token":"t","line_items":[{"line_price":"1.7976931348623157e308"},{"line_price":"-1.7976931348623157e308"},{"line_price":"1.7976931348623157e308"}]}`},
		{TopicCustomersCreate, `{"id":"gid://shopify/Customer/","email":"@","tags":",,,"}`},
		{TopicCustomersUpdate, `{"id":"gid://","created_at":"9999-12-31T23:59:59.999999999+23:59"}`},
		{TopicCheckoutsCreate, `{"customer":[],"line_items":[[[[[]]]]],"discount_codes":{"code":"X"}}`},
		{TopicCartsCreate, `{"token":"?key=only-a-key"}`},
		{"unknown/topic", `{"id":1}`},
		{TopicOrdersPaid, `[`},
		{TopicOrdersPaid, "{\"email\":\"\xff\xfe@x\"}"},
	} {
		f.Add(seed.topic, []byte(seed.body))
	}

	received := time.Date(2024, 12, 1, 12, 0, 0, 0, time.UTC)
	supported := map[string]bool{}
	for _, topic := range SupportedTopics() {
		supported[topic] = true
	}
	f.Fuzz(func(t *testing.T, topic string, body []byte) {
		events, err := Map(topic, body, received)
		if err != nil {
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("Map error %v is not ErrBadPayload", err)
			}
			if events != nil {
				t.Fatalf("Map returned events with an error")
			}
			return
		}
		if events != nil && len(events) == 0 {
			t.Fatal("Map returned an empty, non-nil slice")
		}
		checkInvariants(t, events)
		for _, e := range events {
			if e.OccurredAt.Location() != time.UTC {
				t.Fatalf("%s occurred_at not in UTC", e.EventType)
			}
		}
	})
}

// FuzzVerify: Verify never panics and only ever accepts the real signature.
func FuzzVerify(f *testing.F) {
	secret := []byte("fuzz-secret")
	body := []byte(`{"id":1}`)
	f.Add(secret, body, sign(secret, body))
	f.Add([]byte{}, body, sign(nil, body))
	f.Add(secret, body, "")
	f.Add(secret, body, "====")
	f.Fuzz(func(t *testing.T, secret, body []byte, header string) {
		err := Verify(secret, body, header)
		if err != nil && !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Verify error %v is not ErrBadSignature", err)
		}
		if err == nil && (len(secret) == 0 || header == "") {
			t.Fatalf("Verify accepted secret %q header %q", secret, header)
		}
	})
}
