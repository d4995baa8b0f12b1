package load_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// logRecorder is a slog handler that keeps the messages it is given.
type logRecorder struct {
	mu    sync.Mutex
	msgs  []string
	lines []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	line := r.Time.Format("15:04:05.000") + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.lines = append(h.lines, line)
	return nil
}

// dump logs what the loader logged when the test failed.
func (h *logRecorder) dump(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("LOADER_LOGS") == "" {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, l := range h.lines {
			t.Log("loader: " + l)
		}
	})
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }
func (h *logRecorder) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// loaderEnv is a pstest server with a topic and subscription, a fresh database, and a loader.
type loaderEnv struct {
	emb    *bus.EmbeddedPubSub
	bus    *bus.PubSub
	pool   *pgxpool.Pool
	errlog *ingest.ErrorLog
	pub    *ingest.BusPublisher
	raw    *pubsub.Publisher
	logs   *logRecorder
	loader *load.Loader
	stop   func()
}

func newLoaderEnv(t *testing.T, cfg load.LoaderConfig) *loaderEnv {
	t.Helper()
	env := &loaderEnv{pool: openPool(t), logs: &logRecorder{}}
	tb := startTestBus(t, "cohort-test", "events", "events-loader", 0)
	env.emb, env.bus, env.pub = tb.emb, tb.bus, tb.pub
	b := tb.bus
	env.raw = b.Client().Publisher("events")
	t.Cleanup(env.raw.Stop)
	env.errlog = newErrorLog(t, env.pool, time.Now)
	sink := load.NewSink(env.pool, whpg.New(env.pool))
	env.loader = load.NewLoader(b, sink, env.pool, env.errlog, slog.New(env.logs), cfg)
	return env
}

// start runs the loader until the test ends (or stop is called).
func (env *loaderEnv) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.loader.Run(ctx) }()
	var once sync.Once
	env.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("loader Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("loader did not stop within 30s")
			}
		})
	}
	t.Cleanup(env.stop)
}

func (env *loaderEnv) publishRaw(t *testing.T, data []byte) string {
	t.Helper()
	id, err := env.raw.Publish(context.Background(), &pubsub.Message{Data: data}).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// allAcked waits until every message the server holds was acked. A nacked message is usually
// redelivered at once, but when the client's receipt modack reaches pstest after the nack, only
// after the 10s minimum ack deadline: leave room for two such delays.
func (env *loaderEnv) allAcked(t *testing.T, want int) {
	t.Helper()
	eventually(t, 60*time.Second, "every message acked", func() (bool, string) {
		msgs := env.emb.Server().Messages()
		acked := 0
		for _, m := range msgs {
			if m.Acks > 0 {
				acked++
			}
		}
		return len(msgs) == want && acked == want, fmt.Sprintf("%d of %d messages acked", acked, len(msgs))
	})
}

// publishRepeats publishes messages messages of 5 events of tenant 1, concurrently, repeats
// times over: a resend carries the same event ids, with a later receipt time.
func publishRepeats(t *testing.T, ctx context.Context, pub *ingest.BusPublisher, messages, repeats int) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, messages*repeats)
	for r := range repeats {
		for m := range messages {
			wg.Go(func() {
				evs := tenantEvents(1, fmt.Sprintf("m%d", m), 5)
				if r > 0 {
					for i := range evs {
						evs[i].ReceivedAt = evs[i].ReceivedAt.Add(time.Minute)
					}
				}
				errc <- pub.Publish(ctx, 1, evs)
			})
		}
		wg.Wait()
	}
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func tenantEvents(tenant int64, prefix string, n int) []warehouse.Event {
	out := make([]warehouse.Event, n)
	for i := range out {
		out[i] = whEvent(tenant, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("user-%d", i%13), "page_view", recv, recv, fmt.Sprintf(`{"i":%d}`, i))
	}
	return out
}

func TestLoaderStoresEachEventOnce(t *testing.T) {
	cases := []struct {
		name     string
		messages int // messages of 5 events
		repeats  int // times each message is published
		stored   int64
	}{
		{name: "200 messages", messages: 200, repeats: 1, stored: 1000},
		{name: "same event ids published twice", messages: 40, repeats: 2, stored: 200},
		{name: "same event ids published three times", messages: 10, repeats: 3, stored: 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond})
			env.logs.dump(t)
			env.start(t)
			ctx := context.Background()
			publishRepeats(t, ctx, env.pub, tc.messages, tc.repeats)
			env.allAcked(t, tc.messages*tc.repeats)
			checks := []struct {
				name string
				sql  string
			}{
				{"events", `SELECT count(*) FROM warehouse.events WHERE tenant_id = 1`},
				{"distinct ids", `SELECT count(DISTINCT event_id) FROM warehouse.events WHERE tenant_id = 1`},
				{"hourly counts", `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly WHERE tenant_id = 1`},
			}
			for _, c := range checks {
				if got := queryInt(t, env.pool, c.sql); got != tc.stored {
					t.Errorf("%s = %d, want %d", c.name, got, tc.stored)
				}
			}
			if n := queryInt(t, env.pool, `SELECT count(*) FROM ingestion_dead_letters`); n != 0 {
				t.Errorf("%d dead letters", n)
			}
			// Acked messages are not delivered again.
			time.Sleep(300 * time.Millisecond)
			for _, m := range env.emb.Server().Messages() {
				if m.Deliveries != 1 {
					t.Errorf("message %s delivered %d times", m.ID, m.Deliveries)
				}
			}
		})
	}
}

// Messages published while no loader runs wait in the subscription and are loaded when one starts.
func TestLoaderLoadsBacklog(t *testing.T) {
	env := newLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond, MaxBatchEvents: 40})
	for m := range 30 {
		if err := env.pub.Publish(context.Background(), 2, tenantEvents(2, fmt.Sprintf("b%d", m), 10)); err != nil {
			t.Fatal(err)
		}
	}
	env.start(t)
	env.allAcked(t, 30)
	if n := queryInt(t, env.pool, `SELECT count(*) FROM warehouse.events WHERE tenant_id = 2`); n != 300 {
		t.Errorf("stored %d events, want 300", n)
	}
}

type deadLetter struct {
	tenant   *int64
	reason   string
	attempts int
	data     []byte
}

func readDeadLetters(t *testing.T, pool *pgxpool.Pool) map[string]deadLetter {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT message_id, tenant_id, reason, attempts, data FROM ingestion_dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]deadLetter{}
	for rows.Next() {
		var id string
		var d deadLetter
		if err := rows.Scan(&id, &d.tenant, &d.reason, &d.attempts, &d.data); err != nil {
			t.Fatal(err)
		}
		out[id] = d
	}
	return out
}

// poisonMessage is a well-formed message whose event the warehouse refuses (jsonb cannot hold NUL),
// so applying it always fails.
func poisonMessage(tenant int64, id string) []byte {
	ts := recv.Format(time.RFC3339Nano)
	return fmt.Appendf(nil, `{"v":1,"tenant_id":%d,"events":[{"tenant_id":%d,"event_id":%q,"user_id":"u","event_type":"x",`+
		`"occurred_at":%q,"received_at":%q,"payload":{"a":"\u0000"}}]}`, tenant, tenant, id, ts, ts)
}

func goodMessage(t *testing.T, tenant int64, prefix string, n int) []byte {
	t.Helper()
	b, err := json.Marshal(wire.Message{V: wire.MessageVersion, TenantID: tenant, Events: tenantEvents(tenant, prefix, n)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoaderDeadLetters(t *testing.T) {
	const maxAttempts = 3
	cases := []struct {
		name     string
		data     []byte
		tenant   int64 // 0: the dead letter has no tenant
		attempts int
		reason   string // part of the dead letter's reason
		good     int    // good messages of 4 events published with it
		isolated bool   // the failure must have been isolated from a batch of good messages
	}{
		{name: "not json", data: []byte("not json"), attempts: 1, reason: "undecodable message", good: 3},
		{name: "events not an array", data: []byte(`{"v":1,"tenant_id":3,"events":"nope"}`), tenant: 3, attempts: 1, reason: "undecodable message: json: cannot unmarshal"},
		{name: "json but not a message", data: []byte(`[1,2,3]`), attempts: 1, reason: "undecodable message"},
		{name: "unknown version", data: []byte(`{"v":2,"tenant_id":9,"events":[]}`), tenant: 9, attempts: 1, reason: "undecodable message: unknown version 2"},
		{name: "poison event among good messages", data: poisonMessage(7, "poison"), tenant: 7, attempts: maxAttempts, reason: "SQLSTATE 22P05", good: 5, isolated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond, MaxAttempts: maxAttempts})
			env.logs.dump(t)
			// Publish before the loader starts so the first batch holds the bad message and the good ones.
			for i := range tc.good {
				env.publishRaw(t, goodMessage(t, 7, fmt.Sprintf("good%d", i), 4))
			}
			badID := env.publishRaw(t, tc.data)
			for i := tc.good; i < 2*tc.good; i++ {
				env.publishRaw(t, goodMessage(t, 7, fmt.Sprintf("good%d", i), 4))
			}
			env.start(t)
			env.allAcked(t, 2*tc.good+1)

			dl := readDeadLetters(t, env.pool)
			if len(dl) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dl))
			}
			d, ok := dl[badID]
			if !ok {
				t.Fatalf("dead letters %v do not hold message %s", dl, badID)
			}
			if (d.tenant == nil) != (tc.tenant == 0) || (d.tenant != nil && *d.tenant != tc.tenant) {
				t.Errorf("dead letter tenant = %v, want %d", d.tenant, tc.tenant)
			}
			if d.attempts != tc.attempts || !strings.Contains(d.reason, tc.reason) || string(d.data) != string(tc.data) {
				t.Errorf("dead letter = attempts %d, reason %q, data %q; want %d, a reason with %q, %q", d.attempts, d.reason, d.data, tc.attempts, tc.reason, tc.data)
			}
			if m := env.emb.Server().Message(badID); m.Deliveries != tc.attempts {
				t.Errorf("bad message delivered %d times, want %d", m.Deliveries, tc.attempts)
			}
			if n := queryInt(t, env.pool, `SELECT count(*) FROM warehouse.events`); n != 2*int64(tc.good)*4 {
				t.Errorf("stored %d events, want the %d of the good messages", n, 2*tc.good*4)
			}
			if n := queryInt(t, env.pool, `SELECT count(*) FROM warehouse.events WHERE event_id = 'poison'`); n != 0 {
				t.Errorf("poison event stored")
			}
			if tc.isolated && env.logs.count("batch failed; retrying its messages one by one") == 0 {
				t.Errorf("the poison message never shared a batch with the good ones; logs: %v", env.logs.msgs)
			}

			// The tenant sees the dead letter in its error log.
			if err := env.errlog.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.tenant != 0 {
				eventually(t, 5*time.Second, "the dead_letter error record", func() (bool, string) {
					recs, err := env.errlog.List(context.Background(), tc.tenant, 100)
					if err != nil {
						return false, err.Error()
					}
					return len(recs) == 1 && recs[0].ErrorType == ingest.ErrorDeadLetter && strings.Contains(recs[0].Detail, badID),
						fmt.Sprintf("%+v", recs)
				})
			}
			if n := queryInt(t, env.pool, `SELECT count(*) FROM ingestion_errors WHERE error_type = 'dead_letter'`); tc.tenant == 0 && n != 0 {
				t.Errorf("%d dead_letter records for a message without a tenant", n)
			}
		})
	}
}

func TestLoaderHeartbeat(t *testing.T) {
	env := newLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond})
	ctx := context.Background()
	if err := load.LoaderAlive(ctx, env.pool, time.Now()); err == nil {
		t.Fatal("alive before any loader ran")
	}
	env.start(t)
	eventually(t, 10*time.Second, "a loader heartbeat", func() (bool, string) {
		n := queryInt(t, env.pool, `SELECT count(*) FROM worker_heartbeats WHERE role = 'loader'`)
		return n == 1, fmt.Sprintf("%d heartbeat rows", n)
	})
	var dbNow time.Time
	if err := env.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		now   time.Time
		alive bool
	}{
		{name: "now", now: dbNow, alive: true},
		{name: "10s later", now: dbNow.Add(10 * time.Second), alive: true},
		{name: "16s later", now: dbNow.Add(16 * time.Second), alive: false},
		{name: "a minute later", now: dbNow.Add(time.Minute), alive: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := load.LoaderAlive(ctx, env.pool, tc.now)
			if (err == nil) != tc.alive {
				t.Errorf("LoaderAlive = %v, want alive=%v", err, tc.alive)
			}
		})
	}
	// A stale heartbeat (the loader stopped beating) is reported.
	if _, err := env.pool.Exec(ctx, `UPDATE worker_heartbeats SET last_seen_at = now() - interval '16 seconds'`); err != nil {
		t.Fatal(err)
	}
	if err := load.LoaderAlive(ctx, env.pool, time.Now()); err == nil {
		t.Error("a 16s old heartbeat reported alive")
	}
	// A stopped loader removes its heartbeat.
	env.stop()
	if n := queryInt(t, env.pool, `SELECT count(*) FROM worker_heartbeats`); n != 0 {
		t.Errorf("%d heartbeat rows after the loader stopped", n)
	}
	if err := load.LoaderAlive(ctx, env.pool, time.Now()); err == nil {
		t.Error("alive after the loader stopped")
	}
}

// A message's events are split over the loader's partitions by user. When one partition cannot
// store its share, the message is redelivered until it is dead-lettered, and the shares that the
// other partitions stored are stored once: not again at each redelivery.
func TestLoaderPartitionShareFails(t *testing.T) {
	const maxAttempts, flushers = 3, 2
	env := newLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond, MaxAttempts: maxAttempts, Flushers: flushers})
	env.logs.dump(t)
	events := tenantEvents(7, "split", 40) // users user-0 to user-12
	poison := whEvent(7, "poison", "user-0", "x", recv, recv, `{"a":"\u0000"}`)
	events = append(events, poison)
	wantStored := 0
	for i := range events[:40] {
		if load.PartitionOf(&events[i], flushers) != load.PartitionOf(&poison, flushers) {
			wantStored++
		}
	}
	if wantStored == 0 || wantStored == 40 {
		t.Fatalf("the message's good events are all in one partition (%d of 40 outside the poison's): pick other users", wantStored)
	}
	data, err := json.Marshal(wire.Message{V: wire.MessageVersion, TenantID: 7, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	id := env.publishRaw(t, data)
	env.start(t)
	env.allAcked(t, 1)

	if m := env.emb.Server().Message(id); m.Deliveries != maxAttempts {
		t.Errorf("message delivered %d times, want %d", m.Deliveries, maxAttempts)
	}
	dl := readDeadLetters(t, env.pool)
	if d, ok := dl[id]; !ok || d.attempts != maxAttempts || !strings.Contains(d.reason, "SQLSTATE 22P05") || string(d.data) != string(data) {
		t.Errorf("dead letters = %+v, want message %s whole after %d attempts with the warehouse's error", dl, id, maxAttempts)
	}
	for _, c := range []struct{ name, sql string }{
		{"events", `SELECT count(*) FROM warehouse.events WHERE tenant_id = 7`},
		{"distinct ids", `SELECT count(DISTINCT event_id) FROM warehouse.events WHERE tenant_id = 7`},
		{"hourly counts", `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly WHERE tenant_id = 7`},
		{"user event stats", `SELECT coalesce(sum(events), 0) FROM warehouse.user_event_stats WHERE tenant_id = 7`},
	} {
		if got := queryInt(t, env.pool, c.sql); got != int64(wantStored) {
			t.Errorf("%s = %d, want the %d events of the other partition", c.name, got, wantStored)
		}
	}
}
