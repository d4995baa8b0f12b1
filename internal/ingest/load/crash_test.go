package load_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

const (
	crashProject = "crash-test"
	crashTopic   = "events"
	crashSub     = "loader"
)

// TestCrashChild is the loader process of TestLoaderSurvivesKills; it runs only when re-executed.
func TestCrashChild(t *testing.T) {
	if os.Getenv("COHORT_CRASH_CHILD") != "1" {
		t.Skip("helper process of TestLoaderSurvivesKills")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("COHORT_CRASH_DB"))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var recv bus.Receiver
	switch os.Getenv("COHORT_CRASH_BUS") {
	case "nats":
		n, err := bus.OpenNATS(ctx, bus.NATSConfig{URL: os.Getenv("COHORT_CRASH_NATS_URL"), AckWait: 10 * time.Second}, logger)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = n.Close() }()
		recv = n
	default:
		// PUBSUB_EMULATOR_HOST points the client at the parent's pstest server.
		b, err := bus.OpenPubSub(ctx, bus.PubSubConfig{Project: crashProject, Topic: crashTopic, Subscription: crashSub})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = b.Close() }()
		recv = b
	}
	errlog := ingest.NewErrorLog(pool, logger, time.Now)
	sink := load.NewSink(pool, whpg.New(pool))
	l := load.NewLoader(recv, sink, pool, errlog, logger, load.LoaderConfig{})
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// A loader process is SIGKILLed twice while 1,000,000 events flow; every accepted event ends up in
// the warehouse exactly once. On both buses.
func TestLoaderSurvivesKills(t *testing.T) {
	for _, kind := range busKinds {
		t.Run(kind, func(t *testing.T) { testLoaderSurvivesKills(t, kind) })
	}
}

func testLoaderSurvivesKills(t *testing.T, kind string) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	const perMessage = 500
	dbURL := testenv.Database(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var tbus *testBus
	childEnv := []string{"COHORT_CRASH_BUS=" + kind}
	if kind == "nats" {
		tbus = startTestNATS(t, 10*time.Second, false)
		childEnv = append(childEnv, "COHORT_CRASH_NATS_URL="+tbus.nats.ClientURL())
	} else {
		tbus = startTestBus(t, crashProject, crashTopic, crashSub, 10*time.Second)
		childEnv = append(childEnv, "PUBSUB_EMULATOR_HOST="+tbus.emb.Addr())
	}
	pub := tbus.pub

	startChild := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), "COHORT_CRASH_CHILD=1", "COHORT_CRASH_DB="+dbURL), childEnv...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	stored := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM warehouse.events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	child := startChild()
	var published atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		received := time.Now().UTC()
		sem := make(chan struct{}, 16)
		var inner sync.WaitGroup
		for m := 0; m < total/perMessage; m++ {
			events := make([]warehouse.Event, perMessage)
			for i := range events {
				n := m*perMessage + i
				events[i] = warehouse.Event{TenantID: 1, EventID: "e" + strconv.Itoa(n), UserID: "u" + strconv.Itoa(n%50_000),
					EventType: "order_completed", OccurredAt: received, ReceivedAt: received, Payload: []byte(`{"amount":12.5}`)}
			}
			sem <- struct{}{}
			inner.Go(func() {
				defer func() { <-sem }()
				if err := pub.Publish(ctx, 1, events); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				published.Add(int64(len(events)))
			})
		}
		inner.Wait()
	})

	// Kill the loader twice, mid-flight, without warning.
	for kill := 1; kill <= 2; kill++ {
		target := total * kill / 3
		deadline := time.Now().Add(5 * time.Minute)
		for stored() < target {
			if time.Now().After(deadline) {
				t.Fatalf("loader stalled at %d events before kill %d", stored(), kill)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		t.Logf("kill %d at %d stored events", kill, stored())
		child = startChild()
	}
	wg.Wait()
	start := time.Now()
	deadline := time.Now().Add(5 * time.Minute)
	for stored() < int(published.Load()) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	// Give redeliveries of messages that were committed but not acked time to arrive (ack deadline 10 s).
	time.Sleep(12 * time.Second)
	_ = child.Process.Signal(syscall.SIGTERM)
	_ = child.Wait()
	got := stored()
	var distinct int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT event_id) FROM warehouse.events`).Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d, stored %d (%d distinct), drained in %v", published.Load(), got, distinct, time.Since(start).Round(time.Millisecond))
	if int64(got) != published.Load() || distinct != got || got != total {
		t.Fatalf("published %d, stored %d rows, %d distinct: want exactly %d once each", published.Load(), got, distinct, total)
	}
	var hourly int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly`).Scan(&hourly); err != nil {
		t.Fatal(err)
	}
	if hourly != total {
		t.Fatalf("rollups count %d events, want %d", hourly, total)
	}
	fmt.Fprintln(os.Stderr, "crash test ok")
}
