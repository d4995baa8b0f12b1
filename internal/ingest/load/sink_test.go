package load_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// t0 is the base time of the sink tests.
var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newSink(pool *pgxpool.Pool) *load.Sink {
	return load.NewSink(pool, whpg.New(pool))
}

func apply(t *testing.T, sink *load.Sink, events []warehouse.Event) int {
	t.Helper()
	n, err := sink.Apply(context.Background(), events)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return n
}

// snapshot renders everything the sink writes for the tenants, so two snapshots compare equal
// exactly when nothing changed.
func snapshot(t *testing.T, pool *pgxpool.Pool, tenants ...int64) string {
	t.Helper()
	queries := []string{
		`SELECT tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload::text
			FROM warehouse.events WHERE tenant_id = ANY($1) ORDER BY 1, 2, 3, 4, 5, 6, 7`,
		`SELECT tenant_id, event_id, received_at FROM warehouse.event_ids WHERE tenant_id = ANY($1) ORDER BY 1, 2`,
		`SELECT tenant_id, user_id, traits::text, first_seen_at, last_seen_at, updated_at
			FROM profiles WHERE tenant_id = ANY($1) ORDER BY 1, 2`,
		`SELECT tenant_id, bucket, event_type, event_count FROM ingestion_hourly WHERE tenant_id = ANY($1) ORDER BY 1, 2, 3`,
		`SELECT tenant_id, bucket, md5(sketch) FROM ingestion_hourly_users WHERE tenant_id = ANY($1) ORDER BY 1, 2`,
	}
	var b strings.Builder
	for _, q := range queries {
		rows, err := pool.Query(context.Background(), q, tenants)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
		if rows.Err() != nil {
			t.Fatalf("snapshot: %v", rows.Err())
		}
		b.WriteString("--\n")
	}
	return b.String()
}

func TestSinkExactlyOnce(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	type batch struct {
		events  []warehouse.Event
		wantNew int
	}
	e := func(tenant int64, id, user, typ string, occ time.Duration, payload string) warehouse.Event {
		return whEvent(tenant, id, user, typ, at(occ), at(occ+time.Minute), payload)
	}
	cases := []struct {
		name    string
		batches []batch
		stored  []string // event_id=payload of the stored rows, sorted
	}{
		{
			name: "same batch twice",
			batches: []batch{
				{[]warehouse.Event{e(1, "a", "u1", "page_view", 0, `{"p":1}`), e(1, "b", "u2", "context_identified", time.Hour, `{"plan":"pro"}`), e(1, "c", "u1", "signup", 2*time.Hour, "")}, 3},
				{[]warehouse.Event{e(1, "a", "u1", "page_view", 0, `{"p":1}`), e(1, "b", "u2", "context_identified", time.Hour, `{"plan":"pro"}`), e(1, "c", "u1", "signup", 2*time.Hour, "")}, 0},
			},
			stored: []string{`a={"p": 1}`, `b={"plan": "pro"}`, `c={}`},
		},
		{
			name: "duplicates inside one batch stored once, first wins",
			batches: []batch{
				{[]warehouse.Event{e(2, "a", "u1", "page_view", 0, `{"v":"first"}`), e(2, "a", "u1", "page_view", 0, `{"v":"second"}`), e(2, "b", "u1", "page_view", 0, ""), e(2, "a", "u9", "other", 0, "")}, 2},
			},
			stored: []string{`a={"v": "first"}`, `b={}`},
		},
		{
			name: "overlapping batches",
			batches: []batch{
				{[]warehouse.Event{e(3, "a", "u1", "x", 0, ""), e(3, "b", "u2", "x", 0, "")}, 2},
				{[]warehouse.Event{e(3, "b", "u2", "x", 0, ""), e(3, "c", "u3", "x", 0, "")}, 1},
				{[]warehouse.Event{e(3, "c", "u3", "x", 0, ""), e(3, "a", "u1", "x", 0, "")}, 0},
			},
			stored: []string{`a={}`, `b={}`, `c={}`},
		},
		{
			name: "redelivery with changed content is ignored",
			batches: []batch{
				{[]warehouse.Event{e(4, "a", "u1", "context_identified", 0, `{"plan":"free"}`)}, 1},
				{[]warehouse.Event{e(4, "a", "u2", "context_identified", time.Hour, `{"plan":"pro"}`)}, 0},
			},
			stored: []string{`a={"plan": "free"}`},
		},
		{
			name: "same event id in two tenants is two events",
			batches: []batch{
				{[]warehouse.Event{e(5, "shared", "u1", "x", 0, "")}, 1},
				{[]warehouse.Event{e(6, "shared", "u1", "x", 0, ""), e(5, "shared", "u1", "x", 0, "")}, 1},
			},
			stored: []string{`shared={}`, `shared={}`},
		},
		{name: "empty batch", batches: []batch{{nil, 0}, {[]warehouse.Event{}, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenants := map[int64]bool{}
			for _, b := range tc.batches {
				for _, ev := range b.events {
					tenants[ev.TenantID] = true
				}
			}
			var ts []int64
			for k := range tenants {
				ts = append(ts, k)
			}
			seen := map[string]bool{}
			var prev string
			for i, b := range tc.batches {
				allSeen := true
				for _, ev := range b.events {
					k := fmt.Sprint(ev.TenantID, "/", ev.EventID)
					allSeen = allSeen && seen[k]
					seen[k] = true
				}
				if got := apply(t, sink, b.events); got != b.wantNew {
					t.Errorf("batch %d: Apply = %d new, want %d", i, got, b.wantNew)
				}
				snap := snapshot(t, pool, ts...)
				if i > 0 && allSeen && snap != prev {
					t.Errorf("batch %d held only stored events but changed the store:\nbefore:\n%s\nafter:\n%s", i, prev, snap)
				}
				prev = snap
			}
			var stored []string
			rows, err := pool.Query(context.Background(), `SELECT event_id, payload::text FROM warehouse.events WHERE tenant_id = ANY($1)`, ts)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, p string
				if err := rows.Scan(&id, &p); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, id+"="+p)
			}
			rows.Close()
			sort.Strings(stored)
			if strings.Join(stored, " ") != strings.Join(tc.stored, " ") {
				t.Errorf("stored %v, want %v", stored, tc.stored)
			}
			if n := queryInt(t, pool, `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly WHERE tenant_id = ANY($1)`, ts); n != int64(len(tc.stored)) {
				t.Errorf("hourly counts sum to %d, want %d", n, len(tc.stored))
			}
		})
	}
}

// A failing batch stores nothing at all, so its redelivery is not mistaken for a duplicate.
func TestSinkApplyIsAtomic(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	good := whEvent(1, "good", "u1", "context_identified", t0, t0, `{"plan":"pro"}`)
	bad := whEvent(1, "bad", "u2", "page_view", t0, t0, `{"a":"\u0000"}`) // jsonb refuses NUL
	if _, err := sink.Apply(context.Background(), []warehouse.Event{good, bad}); err == nil {
		t.Fatal("Apply stored an event jsonb cannot hold")
	}
	if s := snapshot(t, pool, 1); s != "--\n--\n--\n--\n--\n" {
		t.Fatalf("a failed Apply left rows behind:\n%s", s)
	}
	if n := apply(t, sink, []warehouse.Event{good}); n != 1 {
		t.Fatalf("retrying the good event stored %d, want 1", n)
	}
}

type profile struct {
	traits      map[string]any
	first, last time.Time
}

func readProfile(t *testing.T, pool *pgxpool.Pool, tenant int64, user string) (profile, bool) {
	t.Helper()
	var p profile
	var traits []byte
	err := pool.QueryRow(context.Background(), `SELECT traits, first_seen_at, last_seen_at FROM profiles
		WHERE tenant_id = $1 AND user_id = $2`, tenant, user).Scan(&traits, &p.first, &p.last)
	if err != nil {
		return p, false
	}
	if err := json.Unmarshal(traits, &p.traits); err != nil {
		t.Fatal(err)
	}
	return p, true
}

func TestSinkProfiles(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	id := func(d time.Duration, payload string) warehouse.Event {
		return whEvent(0, "", "", ingest.ContextIdentified, at(d), at(48*time.Hour), payload)
	}
	other := func(typ string, d time.Duration, payload string) warehouse.Event {
		return whEvent(0, "", "", typ, at(d), at(48*time.Hour), payload)
	}
	cases := []struct {
		name        string
		batches     [][]warehouse.Event
		traits      string
		first, last time.Duration
	}{
		{
			name: "one batch: later trait by occurred_at wins, whatever the order",
			batches: [][]warehouse.Event{{
				id(3*time.Hour, `{"plan":"pro"}`),
				id(1*time.Hour, `{"plan":"free","company":"acme"}`),
				other("page_view", 0, `{"plan":"ignored"}`),
				id(2*time.Hour, `{"email":"ana@example.com","plan":"trial"}`),
				other("purchase", 4*time.Hour, ""),
			}},
			traits: `{"plan":"pro","company":"acme","email":"ana@example.com"}`,
			first:  0, last: 4 * time.Hour,
		},
		{
			name:    "later batch with a newer value wins",
			batches: [][]warehouse.Event{{id(time.Hour, `{"plan":"free"}`)}, {id(2*time.Hour, `{"plan":"pro"}`)}},
			traits:  `{"plan":"pro"}`,
			first:   time.Hour, last: 2 * time.Hour,
		},
		{
			// Pub/Sub does not order messages: an older identify delivered later must not
			// overwrite a newer value, but its unrelated traits are still merged.
			name:    "later batch with an older value does not win",
			batches: [][]warehouse.Event{{id(2*time.Hour, `{"plan":"pro","seats":5}`)}, {id(time.Hour, `{"plan":"free","company":"acme"}`)}},
			traits:  `{"plan":"pro","seats":5,"company":"acme"}`,
			first:   time.Hour, last: 2 * time.Hour,
		},
		{
			// The late batch also holds a newer identify: that must not let its older value through.
			name: "late batch mixing an older and a newer identify",
			batches: [][]warehouse.Event{
				{id(3*time.Hour, `{"plan":"pro"}`)},
				{id(1*time.Hour, `{"plan":"free"}`), id(5*time.Hour, `{"email":"a@b.c"}`)},
			},
			traits: `{"plan":"pro","email":"a@b.c"}`,
			first:  time.Hour, last: 5 * time.Hour,
		},
		{
			// Recency is per trait: plan was last set at 3h, so a 4h plan wins even after a 5h
			// identify that set only email.
			name: "recency is per trait",
			batches: [][]warehouse.Event{
				{id(3*time.Hour, `{"plan":"pro"}`)},
				{id(5*time.Hour, `{"email":"a@b.c"}`)},
				{id(4*time.Hour, `{"plan":"enterprise"}`)},
			},
			traits: `{"plan":"enterprise","email":"a@b.c"}`,
			first:  3 * time.Hour, last: 5 * time.Hour,
		},
		{
			name:    "unrelated earlier traits kept",
			batches: [][]warehouse.Event{{id(0, `{"email":"a@b.c","plan":"free"}`)}, {id(time.Hour, `{"plan":"pro"}`)}, {id(2*time.Hour, `{"company":"acme"}`)}},
			traits:  `{"email":"a@b.c","plan":"pro","company":"acme"}`,
			first:   0, last: 2 * time.Hour,
		},
		{
			name:    "non-identify events create a profile with empty traits",
			batches: [][]warehouse.Event{{other("page_view", time.Hour, `{"plan":"pro"}`)}, {other("ai_referral_session", 0, `{"source_provider":"chatgpt"}`)}},
			traits:  `{}`,
			first:   0, last: time.Hour,
		},
		{
			name:    "identify with empty payload",
			batches: [][]warehouse.Event{{id(time.Hour, `{}`)}},
			traits:  `{}`,
			first:   time.Hour, last: time.Hour,
		},
		{
			name:    "seen times: min and max across batches",
			batches: [][]warehouse.Event{{other("x", 2*time.Hour, ""), other("x", 3*time.Hour, "")}, {other("x", time.Hour, ""), other("x", 5*time.Hour, "")}, {other("x", 4*time.Hour, "")}},
			traits:  `{}`,
			first:   time.Hour, last: 5 * time.Hour,
		},
		{
			name:    "trait values are replaced whole, null included",
			batches: [][]warehouse.Event{{id(0, `{"address":{"city":"Lisbon","zip":"1000"},"vip":true}`)}, {id(time.Hour, `{"address":{"city":"Porto"},"vip":null}`)}},
			traits:  `{"address":{"city":"Porto"},"vip":null}`,
			first:   0, last: time.Hour,
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenant := int64(10 + i)
			n := 0
			for _, b := range tc.batches {
				for j := range b {
					b[j].TenantID, b[j].UserID, b[j].EventID = tenant, "user-1", fmt.Sprintf("e%d", n)
					n++
				}
				apply(t, sink, b)
			}
			// The same user id in a neighbouring tenant is another profile.
			apply(t, sink, []warehouse.Event{whEvent(tenant+100, "n", "user-1", ingest.ContextIdentified, t0, t0, `{"plan":"neighbour"}`)})

			p, ok := readProfile(t, pool, tenant, "user-1")
			if !ok {
				t.Fatal("no profile")
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.traits), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.traits, want) {
				t.Errorf("traits = %v, want %v", p.traits, want)
			}
			if !p.first.Equal(at(tc.first)) || !p.last.Equal(at(tc.last)) {
				t.Errorf("seen %s..%s, want %s..%s", p.first.UTC(), p.last.UTC(), at(tc.first), at(tc.last))
			}
			if np, _ := readProfile(t, pool, tenant+100, "user-1"); np.traits["plan"] != "neighbour" {
				t.Errorf("neighbour tenant's profile = %v", np.traits)
			}
		})
	}
}

func TestSinkHourlyRollups(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	// received_at decides the bucket; occurred_at (a day earlier here) does not.
	e := func(tenant int64, id, typ string, received time.Time) warehouse.Event {
		return whEvent(tenant, id, "u-"+id, typ, received.Add(-24*time.Hour), received, "")
	}
	batches := [][]warehouse.Event{
		{
			e(1, "1", "page_view", h(0)),
			e(1, "2", "page_view", h(0).Add(59*time.Minute+59*time.Second)),
			e(1, "3", "signup", h(0).Add(30*time.Minute)),
			e(1, "4", "page_view", h(1)),
			e(2, "1", "page_view", h(0)),
		},
		{
			e(1, "5", "page_view", h(0).Add(10*time.Minute)),
			e(1, "4", "page_view", h(1)), // redelivered: not counted again
			e(1, "6", "purchase", h(1).Add(5*time.Minute)),
		},
	}
	for _, b := range batches {
		apply(t, sink, b)
	}
	cases := []struct {
		name   string
		tenant int64
		bucket time.Time
		typ    string
		want   int64
	}{
		{name: "page views in the first hour, two batches", tenant: 1, bucket: h(0), typ: "page_view", want: 3},
		{name: "signup in the first hour", tenant: 1, bucket: h(0), typ: "signup", want: 1},
		{name: "page view on the hour boundary belongs to the next hour", tenant: 1, bucket: h(1), typ: "page_view", want: 1},
		{name: "purchase in the second hour", tenant: 1, bucket: h(1), typ: "purchase", want: 1},
		{name: "nothing by occurred_at", tenant: 1, bucket: h(-24), typ: "page_view", want: 0},
		{name: "other tenant counted apart", tenant: 2, bucket: h(0), typ: "page_view", want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := queryInt(t, pool, `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly
				WHERE tenant_id = $1 AND bucket = $2 AND event_type = $3`, tc.tenant, tc.bucket, tc.typ)
			if got != tc.want {
				t.Errorf("count = %d, want %d", got, tc.want)
			}
		})
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM ingestion_hourly`); n != 5 {
		t.Errorf("%d hourly rows, want 5", n)
	}
	// Distinct users per hour: tenant 1 hour 0 saw u-1, u-2, u-3, u-5.
	var sk []byte
	if err := pool.QueryRow(context.Background(), `SELECT sketch FROM ingestion_hourly_users WHERE tenant_id = 1 AND bucket = $1`, h(0)).Scan(&sk); err != nil {
		t.Fatal(err)
	}
	if got := load.Sketch(sk).Estimate(); got != 4 {
		t.Errorf("hour 0 users = %d, want 4", got)
	}
}

func TestSinkUserSketch50k(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	const users = 50_000
	var batch []warehouse.Event
	for i := range 2 * users {
		// every user twice, in different batches
		u := i % users
		batch = append(batch, whEvent(1, fmt.Sprintf("e%d", i), fmt.Sprintf("user-%d@example.com", u), "page_view", t0, t0.Add(time.Duration(i%3000)*time.Second), ""))
		if len(batch) == 5000 {
			apply(t, sink, batch)
			batch = nil
		}
	}
	var sk []byte
	if err := pool.QueryRow(context.Background(), `SELECT sketch FROM ingestion_hourly_users WHERE tenant_id = 1 AND bucket = $1`, t0).Scan(&sk); err != nil {
		t.Fatal(err)
	}
	if est := load.Sketch(sk).Estimate(); relErr(est, users) > 0.02 {
		t.Errorf("estimated %d distinct users, want %d within 2%%", est, users)
	}
	if n := queryInt(t, pool, `SELECT event_count FROM ingestion_hourly WHERE tenant_id = 1 AND bucket = $1`, t0); n != 2*users {
		t.Errorf("hourly count %d, want %d", n, 2*users)
	}
}

// Four loaders applying overlapping batches of the same events (shared users, buckets and event
// types, so they contend on every row the sink locks) neither deadlock nor double count.
func TestSinkConcurrentOverlap(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	const total = 600
	all := make([]warehouse.Event, total)
	types := []string{"page_view", "signup", "purchase", ingest.ContextIdentified}
	for i := range all {
		all[i] = whEvent(int64(1+i%2), fmt.Sprintf("ev-%03d", i), fmt.Sprintf("user-%d", i%17), types[i%4],
			at(time.Duration(i)*time.Second), at(time.Duration(i%3)*time.Hour), fmt.Sprintf(`{"n":%d}`, i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	newTotal := 0
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for round := range 25 {
				start := r.IntN(total - 300)
				b := append([]warehouse.Event(nil), all[start:start+300]...)
				// each worker also sweeps the whole range once, so every event is applied
				if round == 24 {
					b = append([]warehouse.Event(nil), all...)
				}
				r.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
				n, err := sink.Apply(ctx, b)
				if err != nil {
					errc <- fmt.Errorf("worker %d round %d: %w", w, round, err)
					return
				}
				mu.Lock()
				newTotal += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if newTotal != total {
		t.Errorf("Apply reported %d new events in all, want %d", newTotal, total)
	}
	checks := []struct {
		name string
		sql  string
		want int64
	}{
		{"events", `SELECT count(*) FROM warehouse.events`, total},
		{"distinct event ids", `SELECT count(DISTINCT (tenant_id, event_id)) FROM warehouse.events`, total},
		{"hourly counts", `SELECT sum(event_count) FROM ingestion_hourly`, total},
		{"profiles", `SELECT count(*) FROM profiles`, 34}, // 17 users in each of 2 tenants
	}
	for _, c := range checks {
		if got := queryInt(t, pool, c.sql); got != c.want {
			t.Errorf("%s = %d, want %d", c.name, got, c.want)
		}
	}
	// The profile seen times are the min and max over all of the user's events.
	p, ok := readProfile(t, pool, 1, "user-0")
	if !ok || !p.first.Equal(all[0].OccurredAt) {
		t.Errorf("user-0 first seen %v, want %v", p.first, all[0].OccurredAt)
	}
}

// externalWarehouse stands in for BigQuery: a warehouse.Writer outside the sink's transaction.
type externalWarehouse struct {
	mu     sync.Mutex
	writes [][]string
	err    error
}

func (w *externalWarehouse) Name() string                { return "external" }
func (w *externalWarehouse) Check(context.Context) error { return nil }
func (w *externalWarehouse) Write(_ context.Context, events []warehouse.Event) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.writes = append(w.writes, ids(events))
	return len(events), nil
}

func TestSinkExternalWarehouse(t *testing.T) {
	pool := openPool(t)
	wh := &externalWarehouse{}
	sink := load.NewSink(pool, whpg.NewLedger(wh))
	b := []warehouse.Event{whEvent(1, "a", "u", "x", t0, t0, ""), whEvent(1, "b", "u", "x", t0, t0, ""), whEvent(1, "a", "u", "x", t0, t0, "")}

	wh.err = errors.New("bigquery: 503")
	if _, err := sink.Apply(context.Background(), b); err == nil || !strings.Contains(err.Error(), "external") {
		t.Fatalf("Apply = %v, want the warehouse error naming the warehouse", err)
	}
	wh.err = nil
	if n := apply(t, sink, b); n != 2 {
		t.Fatalf("after a failed write the retry stored %d, want 2 (the failure must not record the ids)", n)
	}
	if n := apply(t, sink, b); n != 0 {
		t.Fatalf("redelivery stored %d", n)
	}
	if len(wh.writes) != 1 || strings.Join(wh.writes[0], ",") != "a,b" {
		t.Errorf("warehouse writes = %v, want one write of a,b", wh.writes)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM warehouse.events`); n != 0 {
		t.Errorf("%d rows in the embedded warehouse while another is configured", n)
	}
	if n := queryInt(t, pool, `SELECT sum(event_count) FROM ingestion_hourly`); n != 2 {
		t.Errorf("hourly count %d, want 2", n)
	}
	// With an external warehouse the ids are kept in the ledger, in the same transaction.
	if n := queryInt(t, pool, `SELECT count(*) FROM warehouse.event_ids WHERE tenant_id = 1`); n != 2 {
		t.Errorf("ledger holds %d ids, want 2", n)
	}
}

// The sink skips users whose stored profile it knows covers their events (seenCache). The
// profiles it leaves must be the ones a sink without that memory writes. Random batches of a few
// users, at times picked from a small set (so that they meet: a microsecond apart, half a
// microsecond, around the minute the upsert rounds last_seen_at to), some with traits, are applied
// to one database by two long-lived sinks taking turns at random (two loaders, each knowing only
// what it wrote) and to another by a new sink for every batch.
func TestSinkSeenCacheChangesNothing(t *testing.T) {
	cached, fresh := openPool(t), openPool(t)
	loaders := []*load.Sink{newSink(cached), newSink(cached)}

	// First, the case of a sink that sends a time the upsert leaves alone (it is within the
	// minute of what the other sink stored): it must not remember that time as stored.
	a, b := loaders[0], loaders[1]
	apply(t, a, []warehouse.Event{whEvent(2, "x1", "x", "page_view", at(0), at(0), "")})
	apply(t, b, []warehouse.Event{whEvent(2, "x2", "x", "page_view", at(30*time.Second), at(0), "")})
	apply(t, b, []warehouse.Event{whEvent(2, "x3", "x", "page_view", at(80*time.Second), at(0), "")})
	if p, _ := readProfile(t, cached, 2, "x"); !p.last.Equal(at(80 * time.Second)) {
		t.Fatalf("last_seen_at = %v, want %v", p.last, at(80*time.Second))
	}

	rng := rand.New(rand.NewPCG(7, 8))
	times := []time.Duration{0, 500 * time.Nanosecond, time.Microsecond, 2 * time.Microsecond, 30 * time.Second,
		59 * time.Second, time.Minute, time.Minute + time.Microsecond, 61 * time.Second, 90 * time.Second,
		2 * time.Minute, 2*time.Minute + time.Microsecond, 3 * time.Minute}
	id := 0
	for batch := range 400 {
		var events []warehouse.Event
		for range 1 + rng.IntN(6) {
			id++
			user := fmt.Sprintf("u%d", rng.IntN(5))
			// Mostly later times as batches go on, sometimes any time of the set.
			k := min(batch/40+rng.IntN(3), len(times)-1)
			if rng.IntN(5) == 0 {
				k = rng.IntN(len(times))
			}
			occurred := at(times[k])
			typ, payload := "page_view", "{}"
			if rng.IntN(8) == 0 {
				typ, payload = ingest.ContextIdentified, fmt.Sprintf(`{"plan":"p%d"}`, id)
			}
			events = append(events, whEvent(1, fmt.Sprintf("e%d", id), user, typ, occurred, occurred, payload))
		}
		apply(t, loaders[rng.IntN(len(loaders))], events)
		apply(t, newSink(fresh), events)
		if a, b := profileRows(t, cached), profileRows(t, fresh); a != b {
			t.Fatalf("after batch %d the profiles differ:\nlong-lived sinks: %s\nnew sinks:        %s", batch, a, b)
		}
	}
}

// profileRows lists tenant 1's profiles without updated_at (the time each database wrote them).
func profileRows(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT user_id, traits::text, trait_times::text, first_seen_at, last_seen_at
		FROM profiles WHERE tenant_id = 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return b.String()
}
