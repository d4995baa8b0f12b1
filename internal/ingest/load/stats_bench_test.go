package load_test

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// BenchmarkStats reads stats of a tenant whose rollups hold 10M events from 1M users over the
// last 7 days (168 hourly rows of 20 event types and 168 user sketches), next to 50 other
// tenants' rollups. The read cost depends on the rollups, not on the raw event count.
func BenchmarkStats(b *testing.B) {
	ctx := context.Background()
	db := testenv.OpenDB(b)
	now := time.Now().UTC()
	end := now.Truncate(time.Hour)
	var counts [][]any
	var sketches [][]any
	for tenant := int64(1); tenant <= 51; tenant++ {
		for h := 0; h < 24*8; h++ {
			bucket := end.Add(-time.Duration(h) * time.Hour)
			for et := 0; et < 20; et++ {
				counts = append(counts, []any{tenant, bucket, "event_type_" + strconv.Itoa(et), int64(10_000_000 / (24 * 7 * 20))})
			}
			sk := load.NewSketch()
			for u := 0; u < 6000; u++ { // ~6k users an hour, 1M over the week
				sk.Add("user-" + strconv.Itoa((h*6000+u)%1_000_000))
			}
			sketches = append(sketches, []any{tenant, bucket, []byte(sk)})
		}
	}
	if _, err := db.Pool.CopyFrom(ctx, pgx.Identifier{"ingestion_hourly"}, []string{"tenant_id", "bucket", "event_type", "event_count"}, pgx.CopyFromRows(counts)); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.CopyFrom(ctx, pgx.Identifier{"ingestion_hourly_users"}, []string{"tenant_id", "bucket", "sketch"}, pgx.CopyFromRows(sketches)); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE ingestion_hourly; ANALYZE ingestion_hourly_users`); err != nil {
		b.Fatal(err)
	}
	stats := load.NewStats(db.Pool, func() time.Time { return now })
	for _, window := range []string{"24h", "7d"} {
		b.Run(window, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				res, err := stats.Get(ctx, 7, window)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if res.TotalEvents == 0 {
					b.Fatal("no events counted")
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}
