package wire_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// The encoder's buffer is sized from the events' strings with a fixed overhead per event, computed
// from the literal layout rather than written as a number: an event at every longest field (the
// most negative tenant id, times with nanoseconds and an offset, no payload) fits, so the buffer
// never grows.
func TestMessageSizeBoundsTheWorstCase(t *testing.T) {
	zone := time.FixedZone("", -(11*3600 + 59*60))
	long := time.Date(9999, 12, 31, 23, 59, 59, 999999999, zone)
	events := []warehouse.Event{
		{TenantID: math.MinInt64, EventID: "e1", UserID: "u", EventType: "t", OccurredAt: long, ReceivedAt: long.Add(-time.Nanosecond)},
		{TenantID: math.MinInt64, EventID: strings.Repeat("e", 128), UserID: strings.Repeat("u", 255), EventType: "t", OccurredAt: long.Add(-2 * time.Nanosecond), ReceivedAt: long, Payload: []byte(`{"a":1}`)},
	}
	for _, tc := range []struct {
		name   string
		events []warehouse.Event
	}{{"one", events[:1]}, {"two", events}, {"none", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := wire.EncodeMessage(math.MinInt64, tc.events)
			if err != nil {
				t.Fatal(err)
			}
			if n := wire.MessageSize(tc.events); len(data) > n {
				t.Fatalf("encoded %d bytes, over the %d the buffer was sized for", len(data), n)
			}
		})
	}
}
