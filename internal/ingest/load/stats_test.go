package load_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

func TestStats(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	// The stats clock: 15:30 on 10 May. The 24h window is the hours 16:00 on 9 May .. 15:00 on
	// 10 May (the current, partial hour last); 7d is 4 May .. 10 May.
	now := time.Date(2024, 5, 10, 15, 30, 0, 0, time.UTC)
	day := func(d, h, m int) time.Time { return time.Date(2024, 5, d, h, m, 0, 0, time.UTC) }
	n := 0
	e := func(tenant int64, user, typ string, received time.Time) warehouse.Event {
		n++
		// occurred_at is far from received_at: stats count by receipt
		return whEvent(tenant, fmt.Sprint("e", n), user, typ, received.Add(-72*time.Hour), received, "")
	}
	apply(t, sink, []warehouse.Event{
		e(1, "ana", "page_view", day(10, 15, 10)), // current hour
		e(1, "ana", "page_view", day(10, 15, 29)),
		e(1, "bob", "signup", day(10, 15, 20)),
		e(1, "ana", "purchase", day(10, 3, 0)),      // 10 May 03:00
		e(1, "cid", "page_view", day(9, 16, 0)),     // first hour of the 24h window
		e(1, "cid", "signup", day(9, 15, 59)),       // just before the 24h window
		e(1, "dee", "page_view", day(4, 0, 30)),     // first day of the 7d window
		e(1, "eve", "page_view", day(3, 23, 59)),    // before the 7d window
		e(1, "fay", "page_view", day(10, 16, 0)),    // the next hour: in the future
		e(1, "ana", "signup", day(7, 12, 0)),        // mid-week
		e(2, "zed", "secret_event", day(10, 15, 0)), // another tenant
		e(2, "zed", "page_view", day(10, 15, 0)),
	})
	stats := load.NewStats(pool, func() time.Time { return now.In(time.FixedZone("CEST", 2*3600)) })

	type bucketWant struct {
		at           time.Time
		events, uniq int64
	}
	// Tenant 1's 24h window, asked for by name and by default.
	types24h := []load.TypeCount{{EventType: "page_view", Count: 3}, {EventType: "purchase", Count: 1}, {EventType: "signup", Count: 1}}
	buckets24h := []bucketWant{
		{day(9, 16, 0), 1, 1},
		{day(10, 3, 0), 1, 1},
		{day(10, 15, 0), 3, 2},
	}
	cases := []struct {
		name      string
		tenant    int64
		window    string
		wantName  string
		n         int
		step      time.Duration
		first     time.Time
		total     int64
		users     int64
		types     []load.TypeCount
		nonZero   []bucketWant
		wantIsErr error
	}{
		{
			name: "24h", tenant: 1, window: "24h", wantName: "24h", n: 24, step: time.Hour, first: day(9, 16, 0),
			total: 5, users: 3, types: types24h, nonZero: buckets24h,
		},
		{
			name: "default window is 24h", tenant: 1, window: "", wantName: "24h", n: 24, step: time.Hour, first: day(9, 16, 0),
			total: 5, users: 3, types: types24h, nonZero: buckets24h,
		},
		{
			name: "7d", tenant: 1, window: "7d", wantName: "7d", n: 7, step: 24 * time.Hour, first: day(4, 0, 0),
			total: 9, users: 5, // fay's event (16:00) is in the current day's bucket
			types: []load.TypeCount{{EventType: "page_view", Count: 5}, {EventType: "signup", Count: 3}, {EventType: "purchase", Count: 1}},
			nonZero: []bucketWant{
				{day(4, 0, 0), 1, 1},
				{day(7, 0, 0), 1, 1},
				{day(9, 0, 0), 2, 1},
				{day(10, 0, 0), 5, 3},
			},
		},
		{
			name: "other tenant sees only its own", tenant: 2, window: "24h", wantName: "24h", n: 24, step: time.Hour, first: day(9, 16, 0),
			total: 2, users: 1,
			types:   []load.TypeCount{{EventType: "page_view", Count: 1}, {EventType: "secret_event", Count: 1}},
			nonZero: []bucketWant{{day(10, 15, 0), 2, 1}},
		},
		{
			name: "tenant without events", tenant: 3, window: "7d", wantName: "7d", n: 7, step: 24 * time.Hour, first: day(4, 0, 0),
			types: []load.TypeCount{},
		},
		{name: "bad window 1h", tenant: 1, window: "1h", wantIsErr: errs.ErrInvalid},
		{name: "bad window 30d", tenant: 1, window: "30d", wantIsErr: errs.ErrInvalid},
		{name: "bad window case", tenant: 1, window: "24H", wantIsErr: errs.ErrInvalid},
		{name: "bad window 1w", tenant: 1, window: "1w", wantIsErr: errs.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := stats.Get(context.Background(), tc.tenant, tc.window)
			if tc.wantIsErr != nil {
				if !errors.Is(err, tc.wantIsErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantIsErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Window != tc.wantName {
				t.Errorf("window = %q, want %q", res.Window, tc.wantName)
			}
			if len(res.Timeseries) != tc.n {
				t.Fatalf("%d buckets, want %d", len(res.Timeseries), tc.n)
			}
			want := map[time.Time]bucketWant{}
			for _, b := range tc.nonZero {
				want[b.at] = b
			}
			var sum int64
			for i, b := range res.Timeseries {
				if at := tc.first.Add(time.Duration(i) * tc.step); !b.Bucket.Equal(at) || b.Bucket.Location() != time.UTC {
					t.Errorf("bucket %d at %v, want %v UTC", i, b.Bucket, at)
				}
				w := want[b.Bucket.UTC()]
				if b.EventCount != w.events || b.UniqueUsers != w.uniq {
					t.Errorf("bucket %s: %d events / %d users, want %d / %d", b.Bucket.Format(time.RFC3339), b.EventCount, b.UniqueUsers, w.events, w.uniq)
				}
				sum += b.EventCount
			}
			if res.TotalEvents != tc.total || sum != tc.total {
				t.Errorf("total_events = %d (buckets sum to %d), want %d", res.TotalEvents, sum, tc.total)
			}
			if res.UniqueUsers != tc.users {
				t.Errorf("unique_users = %d, want %d", res.UniqueUsers, tc.users)
			}
			if res.EventTypes == nil || fmt.Sprint(res.EventTypes) != fmt.Sprint(tc.types) {
				t.Errorf("event_types = %v, want %v", res.EventTypes, tc.types)
			}
		})
	}
}

// Window parsing on its own.
func TestWindow(t *testing.T) {
	cases := []struct {
		in         string
		name       string
		span, step time.Duration
		ok         bool
	}{
		{"", "24h", 24 * time.Hour, time.Hour, true},
		{"24h", "24h", 24 * time.Hour, time.Hour, true},
		{"7d", "7d", 7 * 24 * time.Hour, 24 * time.Hour, true},
		{"7D", "", 0, 0, false},
		{" 24h", "", 0, 0, false},
		{"168h", "", 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			name, span, step, err := load.Window(tc.in)
			if !tc.ok {
				var ve *errs.ValidationError
				if !errors.As(err, &ve) || ve.Fields["window"] == "" {
					t.Fatalf("err = %v, want a validation error on window", err)
				}
				return
			}
			if err != nil || name != tc.name || span != tc.span || step != tc.step {
				t.Errorf("Window(%q) = %s %s %s %v", tc.in, name, span, step, err)
			}
		})
	}
}

// Unique users over a window come from merged sketches, so a user active in many hours counts once.
func TestStatsUniqueUsersAcrossBuckets(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	now := time.Date(2024, 5, 10, 23, 59, 0, 0, time.UTC)
	var evs []warehouse.Event
	for h := range 24 {
		for u := range 500 {
			received := time.Date(2024, 5, 10, h, 0, 0, 0, time.UTC)
			evs = append(evs, whEvent(1, fmt.Sprintf("%d-%d", h, u), fmt.Sprintf("user-%d", u), "page_view", received, received, ""))
		}
	}
	apply(t, sink, evs)
	res, err := load.NewStats(pool, func() time.Time { return now }).Get(context.Background(), 1, "24h")
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalEvents != 24*500 {
		t.Errorf("total = %d", res.TotalEvents)
	}
	if relErr(res.UniqueUsers, 500) > 0.02 {
		t.Errorf("unique_users = %d, want about 500", res.UniqueUsers)
	}
	for _, b := range res.Timeseries {
		if b.EventCount != 500 || relErr(b.UniqueUsers, 500) > 0.02 {
			t.Errorf("bucket %v: %d events, %d users", b.Bucket, b.EventCount, b.UniqueUsers)
		}
	}
}

func TestLoaderAlive(t *testing.T) {
	pool := openPool(t)
	ctx := context.Background()
	if err := load.LoaderAlive(ctx, pool, time.Now()); err == nil {
		t.Fatal("no heartbeat at all reported alive")
	}
	var dbNow time.Time
	if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO worker_heartbeats (worker_id, role, last_seen_at) VALUES
		('old', 'loader', $1), ('other-role', 'temporal', $2)`, dbNow.Add(-time.Hour), dbNow); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		beat  time.Time // the newest loader heartbeat
		now   time.Time
		alive bool
	}{
		{name: "fresh", beat: dbNow, now: dbNow.Add(time.Second), alive: true},
		{name: "14s old", beat: dbNow, now: dbNow.Add(14 * time.Second), alive: true},
		{name: "exactly 15s old", beat: dbNow, now: dbNow.Add(15 * time.Second), alive: true},
		{name: "16s old", beat: dbNow, now: dbNow.Add(16 * time.Second), alive: false},
		{name: "an hour old", beat: dbNow, now: dbNow.Add(time.Hour), alive: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `INSERT INTO worker_heartbeats (worker_id, role, last_seen_at) VALUES ('w1', 'loader', $1)
				ON CONFLICT (worker_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at`, tc.beat); err != nil {
				t.Fatal(err)
			}
			err := load.LoaderAlive(ctx, pool, tc.now)
			if tc.alive && err != nil {
				t.Errorf("LoaderAlive = %v, want ok", err)
			}
			if !tc.alive && err == nil {
				t.Error("LoaderAlive = ok, want an error")
			}
		})
	}
}
