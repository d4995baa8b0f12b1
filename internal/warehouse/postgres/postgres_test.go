package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

func ev(tenant int64, id, payload string) warehouse.Event {
	if payload == "" {
		payload = "{}"
	}
	return warehouse.Event{TenantID: tenant, EventID: id, UserID: "user-" + id, EventType: "page_view",
		OccurredAt: t0, ReceivedAt: t0.Add(time.Minute), Payload: json.RawMessage(payload)}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// stored lists tenant/event_id=payload of the stored events, sorted.
func stored(t *testing.T, pool *pgxpool.Pool, tenants ...int64) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT tenant_id, event_id, payload::text FROM warehouse.events WHERE tenant_id = ANY($1)`, tenants)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var tenant int64
		var id, p string
		if err := rows.Scan(&tenant, &id, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d/%s=%s", tenant, id, p))
	}
	sort.Strings(out)
	return out
}

func TestWriterName(t *testing.T) {
	if got := whpg.New(nil).Name(); got != "postgres" {
		t.Errorf("Name() = %q, want postgres (the key of the health check)", got)
	}
}

func TestWriterWrite(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	w := whpg.New(pool)
	type write struct {
		events  []warehouse.Event
		wantNew int
	}
	cases := []struct {
		name   string
		writes []write
		want   []string
	}{
		{
			name:   "new events",
			writes: []write{{[]warehouse.Event{ev(1, "a", `{"x":1}`), ev(1, "b", "")}, 2}},
			want:   []string{`1/a={"x": 1}`, `1/b={}`},
		},
		{
			name:   "same batch again stores nothing",
			writes: []write{{[]warehouse.Event{ev(2, "a", ""), ev(2, "b", "")}, 2}, {[]warehouse.Event{ev(2, "a", ""), ev(2, "b", "")}, 0}},
			want:   []string{`2/a={}`, `2/b={}`},
		},
		{
			name:   "duplicates inside a batch: the first is kept",
			writes: []write{{[]warehouse.Event{ev(3, "a", `{"v":1}`), ev(3, "a", `{"v":2}`), ev(3, "b", ""), ev(3, "a", `{"v":3}`)}, 2}},
			want:   []string{`3/a={"v": 1}`, `3/b={}`},
		},
		{
			name:   "overlap",
			writes: []write{{[]warehouse.Event{ev(4, "a", ""), ev(4, "b", "")}, 2}, {[]warehouse.Event{ev(4, "c", ""), ev(4, "b", `{"late":true}`)}, 1}},
			want:   []string{`4/a={}`, `4/b={}`, `4/c={}`},
		},
		{
			name:   "event ids are per tenant",
			writes: []write{{[]warehouse.Event{ev(5, "a", ""), ev(6, "a", "")}, 2}, {[]warehouse.Event{ev(6, "a", "")}, 0}},
			want:   []string{`5/a={}`, `6/a={}`},
		},
		{
			name:   "empty and nil batches",
			writes: []write{{nil, 0}, {[]warehouse.Event{}, 0}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenants := map[int64]bool{}
			for i, wr := range tc.writes {
				n, err := w.Write(context.Background(), wr.events)
				if err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				if n != wr.wantNew {
					t.Errorf("write %d: %d new, want %d", i, n, wr.wantNew)
				}
				for _, e := range wr.events {
					tenants[e.TenantID] = true
				}
			}
			var ts []int64
			for k := range tenants {
				ts = append(ts, k)
			}
			if got := stored(t, pool, ts...); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("stored %v, want %v", got, tc.want)
			}
		})
	}
}

// Every column round-trips; times keep microsecond precision (Postgres and BigQuery both store
// microseconds).
func TestWriterColumns(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	in := warehouse.Event{
		TenantID: 42, EventID: "evt-ü-1", UserID: "José 用户", EventType: "context_identified",
		OccurredAt: time.Date(2024, 2, 29, 23, 59, 59, 123456000, time.UTC),
		ReceivedAt: time.Date(2024, 3, 1, 0, 0, 1, 999999000, time.FixedZone("x", 5*3600)),
		Payload:    json.RawMessage(`{"email":"jose@example.com","plan":{"name":"pro","seats":3},"tags":["a","b"],"n":1.5,"nil":null}`),
	}
	if n, err := whpg.New(pool).Write(context.Background(), []warehouse.Event{in}); err != nil || n != 1 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	var out warehouse.Event
	var payload []byte
	err := pool.QueryRow(context.Background(), `SELECT tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload
		FROM warehouse.events`).Scan(&out.TenantID, &out.EventID, &out.UserID, &out.EventType, &out.OccurredAt, &out.ReceivedAt, &payload)
	if err != nil {
		t.Fatal(err)
	}
	if out.TenantID != in.TenantID || out.EventID != in.EventID || out.UserID != in.UserID || out.EventType != in.EventType {
		t.Errorf("row = %+v, want %+v", out, in)
	}
	if !out.OccurredAt.Equal(in.OccurredAt) || !out.ReceivedAt.Equal(in.ReceivedAt) {
		t.Errorf("times = %v / %v, want %v / %v", out.OccurredAt, out.ReceivedAt, in.OccurredAt, in.ReceivedAt)
	}
	var a, b any
	if err := json.Unmarshal(payload, &a); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(in.Payload, &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("payload = %s, want %s", payload, in.Payload)
	}
}

// A write that fails stores none of its events, so its redelivery stores them all.
func TestWriterWriteIsAtomic(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	w := whpg.New(pool)
	cases := []struct {
		name string
		bad  warehouse.Event
	}{
		{name: "NUL in payload", bad: ev(1, "bad", `{"a":"\u0000"}`)},
		{name: "not JSON payload", bad: ev(1, "bad", `{"a":`)},
		{name: "NUL in user id", bad: warehouse.Event{TenantID: 1, EventID: "bad", UserID: "a\x00b", EventType: "x", OccurredAt: t0, ReceivedAt: t0, Payload: json.RawMessage(`{}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := w.Write(context.Background(), []warehouse.Event{ev(1, "good", ""), tc.bad}); err == nil {
				t.Fatal("Write stored an event Postgres cannot hold")
			}
			if n := count(t, pool, `SELECT count(*) FROM warehouse.events`); n != 0 {
				t.Fatalf("a failed write left %d rows", n)
			}
		})
	}
	if n, err := w.Write(context.Background(), []warehouse.Event{ev(1, "good", "")}); err != nil || n != 1 {
		t.Fatalf("retry = %d, %v; want 1 new", n, err)
	}
}

// InsertNew and Dedupe run in the caller's transaction: a rollback undoes them.
func TestInsertNewAndDedupeInTransaction(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	ctx := context.Background()
	cases := []struct {
		name  string
		fn    func(context.Context, pgx.Tx, []warehouse.Event) ([]warehouse.Event, error)
		table string
	}{
		{name: "InsertNew", fn: whpg.InsertNew, table: "warehouse.events"},
		{name: "Dedupe", fn: whpg.Dedupe, table: "warehouse.event_ids"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenant := int64(100 + i)
			batch := []warehouse.Event{ev(tenant, "a", `{"n":1}`), ev(tenant, "b", ""), ev(tenant, "a", `{"n":2}`)}
			run := func(commit bool) []warehouse.Event {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				fresh, err := tc.fn(ctx, tx, batch)
				if err != nil {
					t.Fatal(err)
				}
				if commit {
					if err := tx.Commit(ctx); err != nil {
						t.Fatal(err)
					}
				}
				return fresh
			}
			if fresh := run(false); len(fresh) != 2 || fresh[0].EventID != "a" || string(fresh[0].Payload) != `{"n":1}` || fresh[1].EventID != "b" {
				t.Fatalf("fresh = %+v, want a (first copy) and b", fresh)
			}
			if n := count(t, pool, `SELECT count(*) FROM `+tc.table+` WHERE tenant_id = $1`, tenant); n != 0 {
				t.Fatalf("rolled back, yet %d rows", n)
			}
			if fresh := run(true); len(fresh) != 2 {
				t.Fatalf("after rollback: %d fresh, want 2", len(fresh))
			}
			if fresh := run(true); len(fresh) != 0 {
				t.Fatalf("after commit: %d fresh, want 0", len(fresh))
			}
			if n := count(t, pool, `SELECT count(*) FROM `+tc.table+` WHERE tenant_id = $1`, tenant); n != 2 {
				t.Fatalf("%d rows, want 2", n)
			}
			if fresh, err := tc.fn(ctx, nil, nil); err != nil || len(fresh) != 0 {
				t.Fatalf("empty batch = %v, %v", fresh, err)
			}
		})
	}
}

// Loaders write overlapping batches concurrently (several flushers per loader, several loaders,
// redelivered messages): whatever order the events come in, the writes must not deadlock and
// every event is stored once.
func TestWriterConcurrentOverlap(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	w := whpg.New(pool)
	const total = 400
	all := make([]warehouse.Event, total)
	for i := range all {
		all[i] = ev(int64(1+i%3), fmt.Sprintf("e%03d", i), "")
	}
	var mu sync.Mutex
	written := 0
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	start := make(chan struct{})
	for worker := range 8 {
		wg.Go(func() {
			<-start
			r := rand.New(rand.NewPCG(uint64(worker), 1))
			for round := range 10 {
				b := append([]warehouse.Event(nil), all...)
				if round < 9 {
					start := r.IntN(total - 150)
					b = append([]warehouse.Event(nil), all[start:start+150]...)
				}
				r.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
				n, err := w.Write(context.Background(), b)
				if err != nil {
					errc <- fmt.Errorf("worker %d round %d: %w", worker, round, err)
					return
				}
				mu.Lock()
				written += n
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if written != total {
		t.Errorf("Write reported %d new in all, want %d", written, total)
	}
	if n := count(t, pool, `SELECT count(*) FROM warehouse.events`); n != total {
		t.Errorf("%d events stored, want %d", n, total)
	}
}

// Two writes holding the same events in opposite orders, lined up deterministically: both wait
// on a third transaction that holds event "g"; when it rolls back, the write that takes "g" next
// needs the event the other one already inserted. Lock order must not depend on batch order.
func TestWriterOppositeOrdersDoNotDeadlock(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	ctx := context.Background()
	w := whpg.New(pool)
	gate, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gate.Rollback(ctx) }()
	if _, err := whpg.InsertNew(ctx, gate, []warehouse.Event{ev(1, "g", "")}); err != nil {
		t.Fatal(err)
	}
	batches := map[string][]warehouse.Event{
		"ascending":  {ev(1, "e1", ""), ev(1, "g", ""), ev(1, "e2", "")},
		"descending": {ev(1, "e2", ""), ev(1, "g", ""), ev(1, "e1", "")},
	}
	type result struct {
		name string
		n    int
		err  error
	}
	results := make(chan result, len(batches))
	for name, b := range batches {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			n, err := w.Write(wctx, b)
			results <- result{name, n, err}
		}()
	}
	// Wait until both writes are blocked on the gate.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND (query LIKE '%INSERT INTO warehouse.events%' OR query ILIKE 'copy "warehouse"."events"%')`) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two writes never both waited on the gate")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := gate.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	total := 0
	for range batches {
		r := <-results
		if r.err != nil {
			t.Errorf("%s write: %v", r.name, r.err)
		}
		total += r.n
	}
	if total != 3 {
		t.Errorf("the writes stored %d new events in all, want 3", total)
	}
	if n := count(t, pool, `SELECT count(*) FROM warehouse.events`); n != 3 {
		t.Errorf("%d events stored, want 3", n)
	}
}

func TestWriterCheck(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	cases := []struct {
		name string
		pool func(t *testing.T) *pgxpool.Pool
		ok   bool
	}{
		{name: "migrated database", pool: func(*testing.T) *pgxpool.Pool { return pool }, ok: true},
		{name: "migrated database with events", pool: func(t *testing.T) *pgxpool.Pool {
			if _, err := whpg.New(pool).Write(context.Background(), []warehouse.Event{ev(1, "a", "")}); err != nil {
				t.Fatal(err)
			}
			return pool
		}, ok: true},
		{name: "database without the warehouse schema", pool: func(t *testing.T) *pgxpool.Pool {
			p, err := pgxpool.New(context.Background(), testenv.Server(t).AdminURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			return p
		}},
		{name: "unreachable server", pool: func(t *testing.T) *pgxpool.Pool {
			p, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			return p
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := whpg.New(tc.pool(t)).Check(ctx)
			if tc.ok && err != nil {
				t.Errorf("Check = %v, want ok", err)
			}
			if !tc.ok && err == nil {
				t.Error("Check = ok, want an error")
			}
		})
	}
}

// CopyNew is the fast path: it stores a batch of new events, each once, and fails as a whole
// (Retryable) when one of them is stored already, so the caller rolls back and uses InsertNew.
func TestCopyNew(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	ctx := context.Background()
	copyNew := func(events ...warehouse.Event) ([]warehouse.Event, error) {
		var fresh []warehouse.Event
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			fresh, err = whpg.CopyNew(ctx, tx, events)
			return err
		})
		return fresh, err
	}
	fresh, err := copyNew(ev(1, "b", `{"v":1}`), ev(1, "a", ""), ev(1, "b", `{"v":2}`), ev(2, "b", ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(eventIDs(fresh)); got != "[1/b 1/a 2/b]" {
		t.Errorf("CopyNew returned %s, want the first of each id in batch order", got)
	}
	if got, want := stored(t, pool, 1, 2), []string{`1/a={}`, `1/b={"v": 1}`, `2/b={}`}; !reflect.DeepEqual(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	_, err = copyNew(ev(1, "c", ""), ev(1, "a", `{"again":true}`))
	if !whpg.Retryable(err) {
		t.Fatalf("CopyNew of a stored event: %v, want a retryable conflict", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM warehouse.events WHERE tenant_id = 1`); n != 2 {
		t.Errorf("the failed copy left %d events of tenant 1, want 2", n)
	}
	// What the caller does then: the row-by-row path.
	if n, err := whpg.New(pool).Write(ctx, []warehouse.Event{ev(1, "c", ""), ev(1, "a", `{"again":true}`)}); err != nil || n != 1 {
		t.Fatalf("Write = %d, %v; want 1 new", n, err)
	}
	if fresh, err := copyNew(); err != nil || fresh != nil {
		t.Errorf("CopyNew of nothing = %v, %v", fresh, err)
	}
}

func eventIDs(events []warehouse.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%d/%s", e.TenantID, e.EventID)
	}
	return out
}

func TestDistinct(t *testing.T) {
	cases := []struct {
		name string
		in   []warehouse.Event
		want []string
	}{
		{"none", nil, []string{}},
		{"distinct", []warehouse.Event{ev(1, "a", ""), ev(1, "b", ""), ev(2, "a", "")}, []string{"1/a", "1/b", "2/a"}},
		{"the first is kept", []warehouse.Event{ev(1, "a", `{"n":1}`), ev(1, "b", ""), ev(1, "a", `{"n":2}`), ev(1, "a", `{"n":3}`), ev(1, "c", "")}, []string{"1/a", "1/b", "1/c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]warehouse.Event(nil), tc.in...)
			got := whpg.Distinct(in)
			if ids := eventIDs(got); !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("Distinct = %v, want %v", ids, tc.want)
			}
			for _, e := range got {
				if e.EventID == "a" && string(e.Payload) != string(tc.in[0].Payload) {
					t.Errorf("kept payload %s of a, want the first, %s", e.Payload, tc.in[0].Payload)
				}
			}
			if !reflect.DeepEqual(in, tc.in) {
				t.Error("Distinct changed its input")
			}
		})
	}
}
