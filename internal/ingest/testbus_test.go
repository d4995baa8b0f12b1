package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
)

// testBus is an embedded Pub/Sub server with one topic and its subscription, and a publisher.
type testBus struct {
	emb *bus.Embedded
	bus *bus.Bus
	pub *ingest.PubSubPublisher
}

// startTestBus starts pstest with topic and sub; everything stops when the test ends.
func startTestBus(tb testing.TB, project, topic, sub string, ackDeadline time.Duration) *testBus {
	tb.Helper()
	ctx := context.Background()
	emb, opts, err := bus.StartEmbedded()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = emb.Close() })
	b, err := bus.Open(ctx, bus.Config{Project: project, Topic: topic, Subscription: sub, AckDeadline: ackDeadline, ClientOptions: opts})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	if err := b.EnsureTopology(ctx); err != nil {
		tb.Fatal(err)
	}
	pub := ingest.NewPubSubPublisher(b.Client(), topic, b.Check)
	tb.Cleanup(pub.Stop)
	return &testBus{emb: emb, bus: b, pub: pub}
}
