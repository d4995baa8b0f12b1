package segment_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// cacheReplica is one API replica: its own pool over the shared database, its own service and
// membership cache.
type cacheReplica struct {
	name  string
	svc   *segment.Service
	cache *segment.MembershipCache
	stop  func() // cancels Run and waits for it to return
}

func openReplica(t *testing.T, name, dsn string, clock *testenv.Clock, opts segment.CacheOptions, run bool) (*cacheReplica, *store.DB) {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open replica %s: %v", name, err)
	}
	t.Cleanup(db.Close)
	svc := segment.NewService(db.Gorm, db.Pool, clock.Now, nil)
	r := &cacheReplica{name: name, svc: svc, cache: segment.NewMembershipCache(svc, db.Pool, slog.New(slog.DiscardHandler), opts), stop: func() {}}
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.cache.Run(ctx) }()
		var once sync.Once
		r.stop = func() {
			once.Do(func() {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("replica %s: Run returned %v", name, err)
					}
				case <-time.After(10 * time.Second):
					t.Errorf("replica %s: Run did not return after cancel", name)
				}
			})
		}
		t.Cleanup(r.stop) // before the pool closes (cleanups run last in, first out)
	}
	return r, db
}

func (r *cacheReplica) lookup(t *testing.T, tenant int64, user string) ([]int64, bool) {
	t.Helper()
	m, cached, err := r.cache.Lookup(context.Background(), tenant, user)
	if err != nil {
		t.Fatalf("replica %s: lookup %s: %v", r.name, user, err)
	}
	ids := m.SegmentIDs
	if ids == nil {
		t.Fatalf("replica %s: lookup %s returned nil, want a list", r.name, user)
	}
	return ids, cached
}

// waitLive waits until the replica serves from memory (its listener is up).
func (r *cacheReplica) waitLive(t *testing.T, tenant int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, cached := r.lookup(t, tenant, "warm-up-probe"); cached {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s never served from memory", r.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// eventually polls the replica until the user's membership is want, and returns how long it took.
func (r *cacheReplica) eventually(t *testing.T, tenant int64, user string, want []int64) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ids, _ := r.lookup(t, tenant, user)
		if slices.Equal(ids, want) {
			return time.Since(start)
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("replica %s: membership of %s is %v after %s, want %v", r.name, user, ids, time.Since(start), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// steady checks that the next lookups of the user never answer stale and end up from memory.
func (r *cacheReplica) steady(t *testing.T, tenant int64, user string, want []int64) {
	t.Helper()
	cachedOnce := false
	for range 20 {
		ids, cached := r.lookup(t, tenant, user)
		if !slices.Equal(ids, want) {
			t.Fatalf("replica %s: membership of %s went back to %v, want %v", r.name, user, ids, want)
		}
		cachedOnce = cachedOnce || cached
	}
	if !cachedOnce {
		t.Fatalf("replica %s: membership of %s never served from memory", r.name, user)
	}
}

func TestMembershipCacheReplicas(t *testing.T) {
	dsn := testenv.Database(t)
	clock := testenv.NewClock(fixtureStart)
	// A long poll: invalidation must come from the notifications.
	opts := segment.CacheOptions{PollEvery: time.Minute}
	a, dbA := openReplica(t, "a", dsn, clock, opts, true)
	b, _ := openReplica(t, "b", dsn, clock, opts, true)
	f := &segFixture{t: t, ctx: context.Background(), db: dbA, svc: a.svc, clock: clock}
	t1, t2 := f.tenant("tenant-one"), f.tenant("tenant-two")
	for _, tn := range []int64{t1, t2} {
		f.profile(tn, "u1", `{"plan":"pro"}`)
		f.profile(tn, "u2", `{"plan":"free"}`)
	}
	pro1 := f.segment(t1, "rule", "pro", defPro)
	f.compute(t1, pro1.ID)
	pro2 := f.segment(t2, "rule", "pro", defPro)
	f.compute(t2, pro2.ID)
	replicas := []*cacheReplica{a, b}
	for _, r := range replicas {
		r.waitLive(t, t1)
	}

	t.Run("first lookup from the database, then from memory", func(t *testing.T) {
		for _, r := range replicas {
			for _, tc := range []struct {
				name   string
				tenant int64
				user   string
				want   []int64
			}{
				{"member", t1, "u1", []int64{pro1.ID}},
				{"not a member", t1, "u2", []int64{}},
				{"unknown user", t1, "nobody", []int64{}},
				{"member in the other tenant", t2, "u1", []int64{pro2.ID}},
			} {
				ids, cached := r.lookup(t, tc.tenant, tc.user)
				if cached || !slices.Equal(ids, tc.want) {
					t.Fatalf("replica %s, %s: first lookup = %v cached=%v, want %v from the database", r.name, tc.name, ids, cached, tc.want)
				}
				ids, cached = r.lookup(t, tc.tenant, tc.user)
				if !cached || !slices.Equal(ids, tc.want) {
					t.Fatalf("replica %s, %s: second lookup = %v cached=%v, want %v from memory", r.name, tc.name, ids, cached, tc.want)
				}
			}
		}
	})

	steps := []struct {
		name   string
		via    *cacheReplica // the replica whose service computes
		change func()
		want   map[string][]int64 // tenant one's users
	}{
		{
			name: "compute on replica a",
			via:  a,
			change: func() {
				f.profile(t1, "u1", `{"plan":"free"}`)
				f.profile(t1, "u2", `{"plan":"pro"}`)
			},
			want: map[string][]int64{"u1": {}, "u2": {pro1.ID}, "nobody": {}},
		},
		{
			name: "compute on replica b",
			via:  b,
			change: func() {
				f.profile(t1, "u1", `{"plan":"pro"}`)
				f.profile(t1, "nobody", `{"plan":"pro"}`)
			},
			want: map[string][]int64{"u1": {pro1.ID}, "u2": {pro1.ID}, "nobody": {pro1.ID}},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			// Every replica holds tenant one's old answers and tenant two's in memory.
			for _, r := range replicas {
				for u := range st.want {
					r.lookup(t, t1, u)
				}
				if ids, cached := r.lookup(t, t2, "u1"); !cached || !slices.Equal(ids, []int64{pro2.ID}) {
					t.Fatalf("replica %s: tenant two's entry = %v cached=%v before the compute", r.name, ids, cached)
				}
			}
			st.change()
			run, err := st.via.svc.BeginRun(context.Background(), t1, pro1.ID, "wf")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.via.svc.Materialize(context.Background(), t1, run.ID, nil); err != nil {
				t.Fatal(err)
			}
			for _, r := range replicas {
				for _, u := range []string{"u1", "u2", "nobody"} {
					took := r.eventually(t, t1, u, st.want[u])
					t.Logf("replica %s: %s fresh after %s", r.name, u, took)
					r.steady(t, t1, u, st.want[u])
				}
				// Tenant one's invalidation kept tenant two's entries.
				if ids, cached := r.lookup(t, t2, "u1"); !cached || !slices.Equal(ids, []int64{pro2.ID}) {
					t.Fatalf("replica %s: tenant two's entry = %v cached=%v after tenant one's compute, want it still in memory", r.name, ids, cached)
				}
			}
		})
	}

	t.Run("delete drops memberships", func(t *testing.T) {
		for _, r := range replicas {
			if ids, _ := r.lookup(t, t1, "u2"); !slices.Equal(ids, []int64{pro1.ID}) {
				t.Fatalf("replica %s: u2 = %v before the delete", r.name, ids)
			}
		}
		if err := b.svc.Delete(context.Background(), t1, pro1.ID); err != nil {
			t.Fatal(err)
		}
		for _, r := range replicas {
			r.eventually(t, t1, "u2", []int64{})
			r.steady(t, t1, "u2", []int64{})
			if _, cached := r.lookup(t, t2, "u1"); !cached {
				t.Fatalf("replica %s: tenant two's entry dropped by tenant one's delete", r.name)
			}
		}
	})

	t.Run("a stopped listener serves from the database", func(t *testing.T) {
		b.stop()
		for range 5 {
			ids, cached := b.lookup(t, t2, "u1")
			if cached || !slices.Equal(ids, []int64{pro2.ID}) {
				t.Fatalf("replica b after Run stopped: %v cached=%v, want from the database", ids, cached)
			}
		}
		f.profile(t2, "u1", `{"plan":"free"}`)
		f.compute(t2, pro2.ID)
		if ids, cached := b.lookup(t, t2, "u1"); cached || len(ids) != 0 {
			t.Fatalf("replica b after Run stopped: %v cached=%v, want [] from the database", ids, cached)
		}
		// Replica a still listens.
		a.eventually(t, t2, "u1", []int64{})
	})
}

func TestMembershipCacheWithoutRun(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	seg := f.segment(tenant, "rule", "pro", defPro)
	f.compute(tenant, seg.ID)
	cache := segment.NewMembershipCache(f.svc, f.db.Pool, slog.New(slog.DiscardHandler), segment.CacheOptions{})
	tests := []struct {
		name string
		user string
		want []int64
	}{
		{"member", "u1", []int64{seg.ID}},
		{"member again", "u1", []int64{seg.ID}},
		{"unknown", "ghost", []int64{}},
		{"unknown again", "ghost", []int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, cached, err := cache.Lookup(f.ctx, tenant, tc.user)
			ids := m.SegmentIDs
			if err != nil {
				t.Fatal(err)
			}
			if cached || ids == nil || !slices.Equal(ids, tc.want) {
				t.Fatalf("lookup = %#v cached=%v, want %v from the database", ids, cached, tc.want)
			}
		})
	}
	// Without a listener a change shows at once.
	f.profile(tenant, "u1", `{"plan":"free"}`)
	f.compute(tenant, seg.ID)
	if m, cached, err := cache.Lookup(f.ctx, tenant, "u1"); err != nil || cached || len(m.SegmentIDs) != 0 {
		t.Fatalf("lookup after the change = %v cached=%v err=%v", m.SegmentIDs, cached, err)
	}
}

// The version poll is the safety net: a version moved without a notification still drops the
// tenant's entries within PollEvery.
func TestMembershipCachePoll(t *testing.T) {
	dsn := testenv.Database(t)
	clock := testenv.NewClock(fixtureStart)
	r, db := openReplica(t, "polling", dsn, clock, segment.CacheOptions{PollEvery: 50 * time.Millisecond}, true)
	f := &segFixture{t: t, ctx: context.Background(), db: db, svc: r.svc, clock: clock}
	tenant, other := f.tenant("acme"), f.tenant("other")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	f.profile(other, "u1", `{"plan":"pro"}`)
	seg := f.segment(tenant, "rule", "pro", defPro)
	f.compute(tenant, seg.ID)
	otherSeg := f.segment(other, "rule", "pro", defPro)
	f.compute(other, otherSeg.ID)
	r.waitLive(t, tenant)
	r.eventually(t, tenant, "u1", []int64{seg.ID})
	r.steady(t, tenant, "u1", []int64{seg.ID})
	r.steady(t, other, "u1", []int64{otherSeg.ID})
	// Membership and version change behind the service's back: no NOTIFY.
	f.exec(`DELETE FROM segment_members WHERE tenant_id = $1`, tenant)
	f.exec(`UPDATE segment_cache_versions SET version = version + 1 WHERE tenant_id = $1`, tenant)
	took := r.eventually(t, tenant, "u1", []int64{})
	t.Logf("fresh after %s", took)
	r.steady(t, tenant, "u1", []int64{})
	if ids, cached := r.lookup(t, other, "u1"); !cached || !slices.Equal(ids, []int64{otherSeg.ID}) {
		t.Fatalf("other tenant = %v cached=%v, want it kept in memory", ids, cached)
	}
}

// TestMembershipCacheListenerReconnects kills the listener's connection from the server side (as
// a Postgres restart or failover would) and checks the cache notices, answers from the database
// meanwhile, listens again, and is invalidated by the notifications that follow.
func TestMembershipCacheListenerReconnects(t *testing.T) {
	dsn := testenv.Database(t)
	clock := testenv.NewClock(fixtureStart)
	// A long poll: after the reconnect, invalidation must come from the notifications.
	r, db := openReplica(t, "a", dsn, clock, segment.CacheOptions{PollEvery: time.Minute}, true)
	f := &segFixture{t: t, ctx: context.Background(), db: db, svc: r.svc, clock: clock}
	tn := f.tenant("acme")
	f.profile(tn, "u1", `{"plan":"pro"}`)
	pro := f.segment(tn, "rule", "pro", defPro)
	f.compute(tn, pro.ID)
	r.waitLive(t, tn)
	r.lookup(t, tn, "u1")
	if ids, cached := r.lookup(t, tn, "u1"); !cached || !slices.Equal(ids, []int64{pro.ID}) {
		t.Fatalf("before the kill: %v cached=%v", ids, cached)
	}

	// The listening connection's last statement is its LISTEN.
	killed := f.count(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`)
	if killed != 1 {
		t.Fatalf("terminated %d listening connections, want 1", killed)
	}
	// Until it listens again nothing may be served from memory: a notification could be missed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, cached := r.lookup(t, tn, "u1"); !cached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache kept serving from memory after its listener died")
		}
		time.Sleep(time.Millisecond)
	}
	r.waitLive(t, tn)
	r.lookup(t, tn, "u1")
	if ids, cached := r.lookup(t, tn, "u1"); !cached || !slices.Equal(ids, []int64{pro.ID}) {
		t.Fatalf("after the reconnect: %v cached=%v, want %v from memory", ids, cached, []int64{pro.ID})
	}
	f.profile(tn, "u1", `{"plan":"free"}`)
	f.compute(tn, pro.ID)
	r.eventually(t, tn, "u1", []int64{})
	r.steady(t, tn, "u1", []int64{})
}

// TestMembershipCacheIdentity: a lookup by a linked id answers its user's segments; an id linked after its own answer was cached is answered for its user on every
// replica as soon as the link's notice arrives (not at the next poll, a minute away here).
func TestMembershipCacheIdentity(t *testing.T) {
	dsn := testenv.Database(t)
	clock := testenv.NewClock(fixtureStart)
	opts := segment.CacheOptions{PollEvery: time.Minute}
	a, dbA := openReplica(t, "a", dsn, clock, opts, true)
	b, _ := openReplica(t, "b", dsn, clock, opts, true)
	f := &segFixture{t: t, ctx: context.Background(), db: dbA, svc: a.svc, clock: clock}
	tenant, other := f.tenant("acme"), f.tenant("other")
	f.profile(tenant, "ada", `{"plan":"pro"}`)
	f.profile(tenant, "anon-bob", `{"plan":"free"}`)
	f.link(tenant, "anon-ada", "ada")
	pro := f.segment(tenant, "rule", "pro", defPro)
	f.compute(tenant, pro.ID)
	free := f.segment(tenant, "rule", "free", `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"free"}]}`)
	f.compute(tenant, free.ID)
	replicas := []*cacheReplica{a, b}
	for _, r := range replicas {
		r.waitLive(t, tenant)
	}
	lookup := func(t *testing.T, r *cacheReplica, tn int64, id string) (segment.Membership, bool) {
		t.Helper()
		m, cached, err := r.cache.Lookup(f.ctx, tn, id)
		if err != nil {
			t.Fatalf("replica %s: lookup %s: %v", r.name, id, err)
		}
		return m, cached
	}

	t.Run("a linked id shares its user's entry", func(t *testing.T) {
		for _, r := range replicas {
			if m, _ := lookup(t, r, tenant, "ada"); m.UserID != "ada" || !slices.Equal(m.SegmentIDs, []int64{pro.ID}) {
				t.Fatalf("replica %s: ada = %+v", r.name, m)
			}
			// The first lookup learns the link from the database; the next is from memory.
			lookup(t, r, tenant, "anon-ada")
			m, cached := lookup(t, r, tenant, "anon-ada")
			if m.UserID != "ada" || !slices.Equal(m.SegmentIDs, []int64{pro.ID}) || !cached {
				t.Fatalf("replica %s: anon-ada = %+v cached=%v, want ada's [%d] from memory", r.name, m, cached, pro.ID)
			}
		}
	})
	t.Run("the link is the tenant's", func(t *testing.T) {
		if m, _ := lookup(t, a, other, "anon-ada"); m.UserID != "anon-ada" || len(m.SegmentIDs) != 0 {
			t.Fatalf("anon-ada in the other tenant = %+v", m)
		}
	})
	t.Run("a new link replaces a cached answer on every replica", func(t *testing.T) {
		for _, r := range replicas {
			r.steady(t, tenant, "anon-bob", []int64{free.ID})
		}
		tx, err := dbA.Pool.Begin(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(f.ctx, `INSERT INTO identity_links (tenant_id, anonymous_id, user_id, source, linked_at) VALUES ($1, 'anon-bob', 'ada', 'identify', now())`, tenant); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(f.ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range replicas {
			took := r.eventually(t, tenant, "anon-bob", []int64{pro.ID})
			t.Logf("replica %s answered for the link after %s", r.name, took)
			r.steady(t, tenant, "anon-bob", []int64{pro.ID})
			if m, _ := lookup(t, r, tenant, "anon-bob"); m.UserID != "ada" {
				t.Fatalf("replica %s: anon-bob resolves to %q, want ada", r.name, m.UserID)
			}
		}
	})
}
