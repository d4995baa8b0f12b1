package segment

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// The identity benchmark (task bench:segments) compares segment computes over the same events
// with and without an identity graph: by default 1M events of 100k users (override with
// COHORT_BENCH_ID_EVENTS / COHORT_BENCH_ID_USERS), where 20% of the events were sent by
// anonymous ids (two per user) of 10% of the users. Three tenants hold them:
//   - no-links: the anonymous events' subjects replaced by their users (the baseline);
//   - linked: the events as sent, every anonymous id linked to its user, rollups and profiles
//     merged under the users (the state after the loader's merge on link);
//   - linked-unmerged: the same, but every rollup row and profile of an anonymous id left under
//     it (the worst case: links made after all the data, with no merge).
var benchIdentity struct {
	once    sync.Once
	db      *store.DB
	tenants map[string]int64
	err     error
}

var benchIdentityKinds = []string{"no-links", "linked", "linked-unmerged"}

func benchIdentityWarehouse(b *testing.B) (*store.DB, map[string]int64) {
	benchIdentity.once.Do(func() {
		events, users := testenv.EnvInt(b, "COHORT_BENCH_ID_EVENTS", 1_000_000), testenv.EnvInt(b, "COHORT_BENCH_ID_USERS", 100_000)
		ctx := context.Background()
		db, err := store.Open(ctx, testenv.Database(b), store.Options{})
		if err != nil {
			benchIdentity.err = err
			return
		}
		start := time.Now()
		tenants := map[string]int64{}
		run := func(sql string, args ...any) {
			if err == nil {
				_, err = db.Pool.Exec(ctx, sql, args...)
			}
		}
		for _, kind := range benchIdentityKinds {
			var id int64
			if err = db.Pool.QueryRow(ctx, `INSERT INTO tenants (slug, name, webhook_secret_sealed, identity_secret_sealed)
				VALUES ($1, $1, 'x', 'x') RETURNING id`, "bench-"+kind).Scan(&id); err != nil {
				benchIdentity.err = err
				return
			}
			tenants[kind] = id
			// One clock for every tenant, so the tenants' events are the same. Every fifth event is anonymous: one of the two anonymous ids of a user among the
			// tenth u0, u10, u20, ... (the user itself in the baseline).
			run(`INSERT INTO warehouse.events (tenant_id, event_id, user_id, anonymous_id, event_type, occurred_at, received_at, payload)
				SELECT $1, 'e' || g, s.subject, CASE WHEN g % 5 = 0 AND NOT $4 THEN s.subject ELSE '' END,
					CASE WHEN g % 10 < 5 THEN 'page_view' WHEN g % 10 < 7 THEN 'product_viewed' WHEN g % 10 < 8 THEN 'add_to_cart'
					     WHEN g % 10 < 9 THEN 'order_completed' ELSE 'signup_step' END,
					$5::timestamptz - ((hashint4(g * 7) & 2147483647) % (365 * 86400)) * interval '1 second', $5::timestamptz,
					CASE WHEN g % 10 = 8 THEN jsonb_build_object('amount', ((hashint4(g * 3) & 65535) % 30000) / 100.0, 'currency', 'EUR')
					     ELSE jsonb_build_object('path', '/p/' || (g % 500)) END
				FROM generate_series(1, $2::int) g,
				LATERAL (SELECT CASE
					WHEN g % 5 <> 0 THEN 'u' || ((hashint4(g) & 2147483647) % $3)
					WHEN $4 THEN 'u' || (((hashint4(g * 11) & 2147483647) % ($3 / 10)) * 10)
					ELSE 'a' || (((hashint4(g * 11) & 2147483647) % ($3 / 10)) * 10) || '-' || (g / 5 % 2) END AS subject) s`,
				id, events, users, kind == "no-links", start)
			if kind != "no-links" {
				run(`INSERT INTO identity_links (tenant_id, anonymous_id, user_id, source, linked_at)
					SELECT $1, 'a' || (k * 10) || '-' || d, 'u' || (k * 10), 'identify', now()
					FROM generate_series(0, $2::int / 10 - 1) k, generate_series(0, 1) d`, id, users)
			}
			if kind == "linked" {
				continue // its rollups and profiles are the baseline's (below)
			}
			run(`INSERT INTO profiles (tenant_id, user_id, traits, trait_times, first_seen_at, last_seen_at)
				SELECT $1, user_id, jsonb_build_object('plan', CASE WHEN hashtext(user_id) % 3 = 0 THEN 'pro' ELSE 'free' END), '{}', min(occurred_at), max(occurred_at)
				FROM warehouse.events WHERE tenant_id = $1 GROUP BY user_id`, id)
			run(`SELECT warehouse.rebuild_user_stats($1)`, id)
		}
		// Merged: every row under the canonical user, which is the baseline's rows.
		run(`INSERT INTO warehouse.user_event_stats (tenant_id, event_type, user_id, events, first_at, last_at)
			SELECT $1, event_type, user_id, events, first_at, last_at FROM warehouse.user_event_stats WHERE tenant_id = $2`, tenants["linked"], tenants["no-links"])
		run(`INSERT INTO warehouse.user_property_stats (tenant_id, event_type, property, user_id, n, total, min, max)
			SELECT $1, event_type, property, user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = $2`, tenants["linked"], tenants["no-links"])
		run(`INSERT INTO profiles (tenant_id, user_id, traits, trait_times, first_seen_at, last_seen_at)
			SELECT $1, user_id, traits, trait_times, first_seen_at, last_seen_at FROM profiles WHERE tenant_id = $2`, tenants["linked"], tenants["no-links"])
		for _, t := range []string{"warehouse.events", "profiles", "identity_links", "warehouse.user_event_stats", "warehouse.user_property_stats"} {
			run(`VACUUM ANALYZE ` + t)
		}
		if err != nil {
			benchIdentity.err = err
			return
		}
		b.Logf("generated %d events of %d users for %d tenants in %s", events, users, len(tenants), time.Since(start).Round(time.Second))
		benchIdentity.db, benchIdentity.tenants = db, tenants
	})
	if benchIdentity.err != nil {
		b.Fatal(benchIdentity.err)
	}
	return benchIdentity.db, benchIdentity.tenants
}

// benchViewedAndOrdered: viewed a page and ordered in the last 90 days (the raw-event scan).
const benchViewedAndOrdered = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"page_view","operator":"gte","value":1,"window_days":90},{"type":"frequency","event_type":"order_completed","operator":"gte","value":1,"window_days":90}]}`

// BenchmarkSegmentsIdentity: recomputes (query + empty diff) of the seed's definition (rollups)
// and of "viewed a page and ordered in 90 days" (raw events) on each tenant, taken in turn in
// every iteration so that load from elsewhere on the machine falls on all of them alike. It
// reports each tenant's median and the linked tenants' medians over no-links' (the cost of
// resolving ids). Every tenant must find the same members (same users, same canonical ids).
func BenchmarkSegmentsIdentity(b *testing.B) {
	db, tenants := benchIdentityWarehouse(b)
	svc := NewService(db.Gorm, db.Pool, time.Now, nil)
	for _, c := range []struct{ name, def string }{{"seed-rollups", benchSeedDefinition}, {"viewed-and-ordered-90d", benchViewedAndOrdered}} {
		b.Run(c.name, func(b *testing.B) {
			segs := map[string]int64{}
			for _, kind := range benchIdentityKinds {
				segs[kind] = benchSegment(b, svc, tenants[kind], c.def).ID
				benchCompute(b, svc, tenants[kind], segs[kind])
			}
			took := map[string][]time.Duration{}
			for b.Loop() {
				matched := map[string]int64{}
				for _, kind := range benchIdentityKinds {
					start := time.Now()
					matched[kind] = benchCompute(b, svc, tenants[kind], segs[kind]).Matched
					took[kind] = append(took[kind], time.Since(start))
				}
				if matched["linked"] != matched["no-links"] || matched["linked-unmerged"] != matched["no-links"] {
					b.Fatalf("members %v differ between tenants", fmt.Sprint(matched))
				}
			}
			median := func(kind string) float64 {
				d := slices.Clone(took[kind])
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds()) / 1000
			}
			for _, kind := range benchIdentityKinds {
				b.ReportMetric(median(kind), kind+"-ms")
			}
			b.ReportMetric(median("linked")/median("no-links"), "linked/no-links")
			b.ReportMetric(median("linked-unmerged")/median("no-links"), "unmerged/no-links")
		})
	}
}
