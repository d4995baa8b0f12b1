package load_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// natsEnv is an embedded NATS JetStream server with the events stream and the loader's consumer,
// a fresh database, and a loader on them.
type natsEnv struct {
	tb     *testBus
	loader *load.Loader
	logs   *logRecorder
	js     jetstream.JetStream
}

func newNATSLoaderEnv(t *testing.T, cfg load.LoaderConfig) (*natsEnv, *loaderEnv) {
	t.Helper()
	le := &loaderEnv{pool: openPool(t), logs: &logRecorder{}}
	tb := startTestNATS(t, 0, false)
	le.pub = tb.pub
	le.errlog = newErrorLog(t, le.pool, time.Now)
	sink := load.NewSink(le.pool, whpg.New(le.pool))
	le.loader = load.NewLoader(tb.recv, sink, le.pool, le.errlog, slog.New(le.logs), cfg)
	nc, err := nats.Connect(tb.nats.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &natsEnv{tb: tb, loader: le.loader, logs: le.logs, js: js}, le
}

// streamEmpty waits until the stream holds no message: with work-queue retention a message
// leaves it when the loader acks it.
func (n *natsEnv) streamEmpty(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "stream empty", func() (bool, string) {
		s, err := n.js.Stream(context.Background(), n.tb.natsCfg.Stream)
		if err != nil {
			return false, err.Error()
		}
		info, err := s.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.State.Msgs == 0, fmt.Sprintf("%d messages in the stream", info.State.Msgs)
	})
}

func (n *natsEnv) publishRaw(t *testing.T, data []byte) uint64 {
	t.Helper()
	ack, err := n.js.Publish(context.Background(), n.tb.natsCfg.Subject, data)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// The loader stores every event once from JetStream, repeats included, and the stream is empty
// once it has acked them.
func TestNATSLoaderStoresEachEventOnce(t *testing.T) {
	n, env := newNATSLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond})
	env.start(t)
	ctx := context.Background()
	publishRepeats(t, ctx, env.pub, 150, 2)
	n.streamEmpty(t)
	if got := queryInt(t, env.pool, `SELECT count(*) FROM warehouse.events`); got != 750 {
		t.Fatalf("stored %d events, want 750", got)
	}
	if got := queryInt(t, env.pool, `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly`); got != 750 {
		t.Fatalf("hourly rollups count %d events, want 750", got)
	}
}

// A message that cannot be stored is dead-lettered on NATS as on Pub/Sub: an undecodable one at
// once, a poison one after MaxAttempts deliveries, and the good ones beside it are stored.
func TestNATSLoaderDeadLetters(t *testing.T) {
	const maxAttempts = 3
	n, env := newNATSLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond, MaxAttempts: maxAttempts})
	for i := range 4 {
		n.publishRaw(t, goodMessage(t, 7, fmt.Sprintf("good%d", i), 4))
	}
	junk := n.publishRaw(t, []byte("not json"))
	poison := n.publishRaw(t, poisonMessage(7, "poison"))
	for i := 4; i < 8; i++ {
		n.publishRaw(t, goodMessage(t, 7, fmt.Sprintf("good%d", i), 4))
	}
	env.start(t)
	n.streamEmpty(t)
	dl := readDeadLetters(t, env.pool)
	if len(dl) != 2 {
		t.Fatalf("%d dead letters, want 2: %v", len(dl), dl)
	}
	if d, ok := dl[fmt.Sprint(junk)]; !ok || d.attempts != 1 || !strings.Contains(d.reason, "undecodable message") {
		t.Errorf("dead letter of the undecodable message = %+v (found %v)", d, ok)
	}
	if d, ok := dl[fmt.Sprint(poison)]; !ok || d.attempts != maxAttempts || !strings.Contains(d.reason, "SQLSTATE 22P05") {
		t.Errorf("dead letter of the poison message = %+v (found %v), want %d attempts", d, ok, maxAttempts)
	}
	if got := queryInt(t, env.pool, `SELECT count(*) FROM warehouse.events`); got != 32 {
		t.Errorf("stored %d events, want the 32 of the good messages", got)
	}
}

// A request whose message would exceed the server's max_payload is split over several messages;
// every event arrives once.
func TestNATSPublisherSplitsLargeBatches(t *testing.T) {
	srv, err := bus.StartEmbeddedNATS(bus.EmbeddedNATSOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	b, err := bus.OpenNATS(context.Background(), bus.NATSConfig{URL: srv.ClientURL(), Manage: true}, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.EnsureTopology(context.Background()); err != nil {
		t.Fatal(err)
	}
	pool := openPool(t)
	pub := ingest.NewBusPublisher(b)
	events := tenantEvents(1, "big", 500)
	for i := range events {
		events[i].Payload = []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 1000)))
	}
	if err := pub.Publish(context.Background(), 1, events); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), "COHORT_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < 8 {
		t.Fatalf("%d messages for 500 events of 1 KB under a 64 KB limit, want at least 8", info.State.Msgs)
	}
	errlog := newErrorLog(t, pool, time.Now)
	l := load.NewLoader(b, load.NewSink(pool, whpg.New(pool)), pool, errlog, discard(), load.LoaderConfig{MaxBatchDelay: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	eventually(t, 30*time.Second, "500 events stored", func() (bool, string) {
		got := queryInt(t, pool, `SELECT count(DISTINCT event_id) FROM warehouse.events`)
		return got == 500, fmt.Sprintf("%d stored", got)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM warehouse.events`); got != 500 {
		t.Fatalf("%d rows, want 500", got)
	}
}

// A loader stopped while it holds messages stores them or hands them back; a second loader then
// finds every event, and nothing is stored twice.
func TestNATSLoaderStopHandsBackWhatItHolds(t *testing.T) {
	n, env := newNATSLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: time.Hour, MaxBatchEvents: 1 << 20, DrainTimeout: time.Nanosecond})
	for i := range 40 {
		n.publishRaw(t, goodMessage(t, 1, fmt.Sprintf("held%d", i), 5))
	}
	// Batches wait for an hour and the drain budget is a nanosecond: at stop, the loader holds
	// what it received and must hand it back.
	env.start(t)
	eventually(t, 30*time.Second, "the loader holds messages", func() (bool, string) {
		c, err := n.js.Consumer(context.Background(), n.tb.natsCfg.Stream, n.tb.natsCfg.Consumer)
		if err != nil {
			return false, err.Error()
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 40, fmt.Sprintf("%d ack pending", info.NumAckPending)
	})
	env.stop()
	// A new loader on the same consumer stores them at once: nacked messages are redelivered
	// right away, where messages a dead receiver held wait for the ack wait (30 s here).
	sink := load.NewSink(env.pool, whpg.New(env.pool))
	l2 := load.NewLoader(n.tb.recv, sink, env.pool, env.errlog, discard(), load.LoaderConfig{MaxBatchDelay: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l2.Run(ctx) }()
	start := time.Now()
	n.streamEmpty(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the second loader took %v: handed-back messages waited for the ack wait", d)
	}
	if got := queryInt(t, env.pool, `SELECT count(*) FROM warehouse.events`); got != 200 {
		t.Fatalf("stored %d events, want 200", got)
	}
}
