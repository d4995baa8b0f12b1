package ingest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// Every event Decode accepts must be storable: an accepted event that the sink cannot write is
// retried, dead-lettered and lost, though the client was told it was queued.
func TestDecodedEventsAreStorable(t *testing.T) {
	pool := openPool(t)
	sink := load.NewSink(pool, whpg.New(pool))
	deep := strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500)
	cases := []struct {
		name string
		raw  []byte
	}{
		{name: "unicode everywhere", raw: ev("user_id", "José 用户 😀", "payload", raw(`{"name":"Zoë","emoji":"😀","esc":"\u00e9\n\t\"","rtl":"שלום"}`))},
		{name: "surrogate pair escape", raw: ev("payload", raw(`{"a":"\ud83d\ude00"}`))},
		{name: "large numbers", raw: ev("payload", raw(`{"big":123456789012345678901234567890,"exp":1e300,"neg":-1.5e-300,"f":0.1}`))},
		{name: "deep nesting", raw: ev("payload", raw(deep))},
		{name: "32 KB event", raw: sizedEvent(t, ingest.MaxEventBytes)},
		{name: "duplicate keys", raw: ev("payload", raw(`{"a":1,"a":2}`))},
		{name: "control character escapes", raw: ev("payload", raw(`{"a":"\u0001\u001f"}`))},
		{name: "invalid UTF-8 in payload", raw: []byte("{\"user_id\":\"u\",\"event_type\":\"x\",\"payload\":{\"a\":\"\xff\xfe\"}}")},
		{name: "lone high surrogate", raw: ev("payload", raw(`{"a":"\ud800"}`))},
		{name: "lone low surrogate", raw: ev("payload", raw(`{"a":"\udc00x"}`))},
		{name: "number out of the warehouse's range", raw: ev("payload", raw(`{"a":1e200000}`))},
		{name: "tiny number out of the warehouse's range", raw: ev("payload", raw(`{"a":1e-200000}`))},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, rej := ingest.Decode(tc.raw, int64(i+1), recv)
			if rej != nil {
				return // refused at the edge: the client was told
			}
			if _, err := sink.Apply(context.Background(), []warehouse.Event{e}); err != nil {
				t.Fatalf("Decode accepted the event but the sink cannot store it: %v", err)
			}
			var stored []byte
			if err := pool.QueryRow(context.Background(), `SELECT payload FROM warehouse.events WHERE tenant_id = $1`, int64(i+1)).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			var a, b any
			if json.Unmarshal(stored, &a) != nil || json.Unmarshal(e.Payload, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("stored payload %s differs from %s", trim(stored), trim(e.Payload))
			}
		})
	}
}

func trim(b []byte) string {
	if len(b) > 80 {
		sum := sha256.Sum256(b)
		return string(b[:80]) + "...(" + hex.EncodeToString(sum[:4]) + ")"
	}
	return string(b)
}
