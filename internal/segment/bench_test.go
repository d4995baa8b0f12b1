package segment

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// The segment benchmarks (task bench:segments) run on a generated warehouse: by default 10M events
// of 1M users over the last year (50% page_view, 20% product_viewed, 10% add_to_cart, 10%
// order_completed with an amount of 0-300, 10% signup_step), one profile per user. Override the
// size with COHORT_BENCH_EVENTS / COHORT_BENCH_USERS. Generation takes a few minutes and happens
// once per process.
var benchData struct {
	once   sync.Once
	db     *store.DB
	tenant int64
	err    error
}

const (
	// The seed's two examples: lifetime spend of 100 or more, no page view for over 30 days.
	benchSeedDefinition = `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100},{"type":"recency","event_type":"page_view","operator":"gt","window_days":30}]}`
	// About every user: the membership load of ~1M members.
	benchWideDefinition = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"page_view","operator":"gte","value":1}]}`
)

func benchWarehouse(b *testing.B) (*store.DB, int64) {
	benchData.once.Do(func() {
		events, users := testenv.EnvInt(b, "COHORT_BENCH_EVENTS", 10_000_000), testenv.EnvInt(b, "COHORT_BENCH_USERS", 1_000_000)
		ctx := context.Background()
		// Open for the whole process (not closed with the first benchmark), so -count reuses the data.
		db, err := store.Open(ctx, testenv.Database(b), store.Options{})
		if err != nil {
			benchData.err = err
			return
		}
		start := time.Now()
		var tenant int64
		if err := db.Pool.QueryRow(ctx, `INSERT INTO tenants (slug, name, webhook_secret_sealed, identity_secret_sealed)
			VALUES ('bench', 'bench', 'x', 'x') RETURNING id`).Scan(&tenant); err != nil {
			benchData.err = err
			return
		}
		_, err = db.Pool.Exec(ctx, `INSERT INTO warehouse.events (tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload)
			SELECT $1, 'e' || g, 'u' || ((hashint4(g) & 2147483647) % $3),
				CASE WHEN g % 10 < 5 THEN 'page_view' WHEN g % 10 < 7 THEN 'product_viewed' WHEN g % 10 < 8 THEN 'add_to_cart'
				     WHEN g % 10 < 9 THEN 'order_completed' ELSE 'signup_step' END,
				now() - ((hashint4(g * 7) & 2147483647) % (365 * 86400)) * interval '1 second', now(),
				CASE WHEN g % 10 = 8 THEN jsonb_build_object('amount', ((hashint4(g * 3) & 65535) % 30000) / 100.0, 'currency', 'EUR')
				     ELSE jsonb_build_object('path', '/p/' || (g % 500)) END
			FROM generate_series(1, $2::int) g`, tenant, events, users)
		if err == nil {
			_, err = db.Pool.Exec(ctx, `INSERT INTO profiles (tenant_id, user_id, traits, trait_times, first_seen_at, last_seen_at)
				SELECT $1, user_id, jsonb_build_object('plan', CASE WHEN hashtext(user_id) % 3 = 0 THEN 'pro' ELSE 'free' END), '{}', min(occurred_at), max(occurred_at)
				FROM warehouse.events WHERE tenant_id = $1 GROUP BY user_id`, tenant)
		}
		for _, sql := range []string{`SELECT warehouse.rebuild_user_stats($1)`, `VACUUM ANALYZE warehouse.events`, `VACUUM ANALYZE profiles`,
			`VACUUM ANALYZE warehouse.user_event_stats`, `VACUUM ANALYZE warehouse.user_property_stats`} {
			if err != nil {
				break
			}
			if strings.Contains(sql, "$1") {
				_, err = db.Pool.Exec(ctx, sql, tenant)
			} else {
				_, err = db.Pool.Exec(ctx, sql)
			}
		}
		if err != nil {
			benchData.err = err
			return
		}
		b.Logf("generated %d events of %d users in %s", events, users, time.Since(start).Round(time.Second))
		benchData.db, benchData.tenant = db, tenant
	})
	if benchData.err != nil {
		b.Fatal(benchData.err)
	}
	return benchData.db, benchData.tenant
}

func benchSegment(b *testing.B, svc *Service, tenant int64, def string) *Segment {
	ctx := context.Background()
	seg, err := svc.Create(ctx, tenant, CreateInput{Name: "bench", Tenant: &tenant, SegmentType: KindRule})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Update(ctx, tenant, seg.ID, UpdateInput{Definition: json.RawMessage(def)}); err != nil {
		b.Fatal(err)
	}
	return seg
}

func benchCompute(b *testing.B, svc *Service, tenant, segID int64) RunResult {
	ctx := context.Background()
	run, err := svc.BeginRun(ctx, tenant, segID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	res, err := svc.Materialize(ctx, tenant, run.ID, nil)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkSegments runs every segment benchmark on one generated warehouse (a database lives as
// long as the benchmark that opened it).
func BenchmarkSegments(b *testing.B) {
	benchWarehouse(b)
	b.Run("compute", benchSegmentCompute)
	b.Run("preview", benchSegmentPreview)
	b.Run("members-page", benchMembersPage)
}

// naiveMembers is each benchmark definition written by hand as plain SQL over the raw events (no
// rollups, no compiler): the users it selects, for the naive baseline.
var naiveMembers = map[string]string{
	// monetary sum(amount) of order_completed >= 100 AND the last page_view over 30 days ago
	benchSeedDefinition: `SELECT user_id FROM warehouse.events
		WHERE tenant_id = $1 AND event_type IN ('order_completed', 'page_view')
		GROUP BY user_id
		HAVING COALESCE(SUM((payload->>'amount')::numeric) FILTER (WHERE event_type = 'order_completed'), 0) >= 100
			AND MAX(occurred_at) FILTER (WHERE event_type = 'page_view') < now() - interval '30 days'`,
	// frequency of page_view >= 1
	benchWideDefinition: `SELECT user_id FROM warehouse.events
		WHERE tenant_id = $1 AND event_type = 'page_view'
		GROUP BY user_id HAVING COUNT(*) >= 1`,
}

// benchSegmentCompute: a first compute (query + load of every member) and a recompute (query
// + empty diff) of the seed's definition and of the ~1M-member one, each beside its naive
// baseline: the same definition as plain SQL over the raw events, its members stored the same
// way (rows of segment_members of a new segment, in one transaction).
func benchSegmentCompute(b *testing.B) {
	db, tenant := benchWarehouse(b)
	svc := NewService(db.Gorm, db.Pool, time.Now, nil)
	ctx := context.Background()
	for _, c := range []struct{ name, def string }{{"seed", benchSeedDefinition}, {"wide-1M", benchWideDefinition}} {
		b.Run(c.name+"/baseline-naive-sql", func(b *testing.B) {
			var n int64
			for b.Loop() {
				b.StopTimer()
				seg := benchSegment(b, svc, tenant, c.def)
				b.StartTimer()
				tag, err := db.Pool.Exec(ctx, `INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at)
					SELECT $1, `+strconv.FormatInt(seg.ID, 10)+`, user_id, now() FROM (`+naiveMembers[c.def]+`) m`, tenant)
				if err != nil {
					b.Fatal(err)
				}
				n = tag.RowsAffected()
				b.StopTimer()
				if err := svc.Delete(ctx, tenant, seg.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n), "members")
		})
		b.Run(c.name+"/first-compute", func(b *testing.B) {
			var res RunResult
			for b.Loop() {
				b.StopTimer()
				seg := benchSegment(b, svc, tenant, c.def)
				b.StartTimer()
				res = benchCompute(b, svc, tenant, seg.ID)
				b.StopTimer()
				if err := svc.Delete(ctx, tenant, seg.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(res.Matched), "members")
		})
		b.Run(c.name+"/recompute", func(b *testing.B) {
			seg := benchSegment(b, svc, tenant, c.def)
			benchCompute(b, svc, tenant, seg.ID)
			var res RunResult
			for b.Loop() {
				res = benchCompute(b, svc, tenant, seg.ID)
			}
			b.ReportMetric(float64(res.Matched), "members")
		})
	}
}

// benchSegmentPreview: preview of the seed's definition (count + 10 sorted ids + SQL).
func benchSegmentPreview(b *testing.B) {
	db, tenant := benchWarehouse(b)
	svc := NewService(db.Gorm, db.Pool, time.Now, nil)
	var p *Preview
	for b.Loop() {
		var err error
		if p, err = svc.Preview(context.Background(), tenant, json.RawMessage(benchSeedDefinition), 10, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.MatchedUsers), "matched")
}

// benchMembersPage: pages of 1000 members at random depths of a ~1M-member segment; reports
// the p95 latency.
func benchMembersPage(b *testing.B) {
	db, tenant := benchWarehouse(b)
	svc := NewService(db.Gorm, db.Pool, time.Now, nil)
	seg := benchSegment(b, svc, tenant, benchWideDefinition)
	benchCompute(b, svc, tenant, seg.ID)
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		// Cursor at a depth spread over the whole list: "u<k>" ids sort as text.
		cursor := ""
		if i%10 != 0 {
			cursor = encodeCursor(fmt.Sprintf("u%d", (i*7919)%1_000_000))
		}
		i++
		start := time.Now()
		page, err := svc.Members(ctx, tenant, seg.ID, 1000, cursor)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if len(page.Results) == 0 {
			b.Fatal("empty page")
		}
	}
	sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}
