package load_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
)

// testBus is a bus with one topic (stream) and the loader's subscription (consumer), and a
// publisher on it: pstest behind the Pub/Sub adapter, or an embedded NATS JetStream server.
type testBus struct {
	kind string // "pubsub" or "nats"
	recv bus.Receiver
	pub  *ingest.BusPublisher

	emb *bus.EmbeddedPubSub // pubsub only
	bus *bus.PubSub         // pubsub only

	nats    *bus.EmbeddedNATS // nats only
	natsCfg bus.NATSConfig    // nats only
}

// busKinds are the adapters the loader is tested on.
var busKinds = []string{"pubsub", "nats"}

// startBus starts a bus of kind with the given ack deadline (0: the adapter's default).
func startBus(tb testing.TB, kind string, ackDeadline time.Duration) *testBus {
	tb.Helper()
	switch kind {
	case "pubsub":
		return startTestBus(tb, "cohort-test", "events", "events-loader", ackDeadline)
	case "nats":
		return startTestNATS(tb, ackDeadline, true)
	}
	tb.Fatalf("unknown bus %q", kind)
	return nil
}

// startTestBus starts pstest with topic and sub; everything stops when the test ends.
func startTestBus(tb testing.TB, project, topic, sub string, ackDeadline time.Duration) *testBus {
	tb.Helper()
	ctx := context.Background()
	emb, opts, err := bus.StartEmbeddedPubSub()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = emb.Close() })
	b, err := bus.OpenPubSub(ctx, bus.PubSubConfig{Project: project, Topic: topic, Subscription: sub, AckDeadline: ackDeadline, ClientOptions: opts})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	if err := b.EnsureTopology(ctx); err != nil {
		tb.Fatal(err)
	}
	return &testBus{kind: "pubsub", recv: b, pub: ingest.NewBusPublisher(b), emb: emb, bus: b}
}

// startTestNATS starts an embedded NATS server with JetStream in a temporary directory, listening
// on loopback (so child processes can connect), with the stream and consumer set up. inProcess
// connects this process without a socket, as `cohort dev` does.
func startTestNATS(tb testing.TB, ackWait time.Duration, inProcess bool) *testBus {
	tb.Helper()
	srv, err := bus.StartEmbeddedNATS(bus.EmbeddedNATSOptions{Dir: tb.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	cfg := bus.NATSConfig{URL: srv.ClientURL(), Manage: true, AckWait: ackWait}
	if inProcess {
		cfg.InProcess = srv
	}
	n, err := bus.OpenNATS(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = n.Close() })
	if err := n.EnsureTopology(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return &testBus{kind: "nats", recv: n, pub: ingest.NewBusPublisher(n), nats: srv, natsCfg: n.Config()}
}
