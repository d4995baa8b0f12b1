package ingest_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// BenchmarkLoad measures end-to-end loading into the embedded warehouse: events already on the
// bus (pstest) are pulled, deduplicated, stored, merged into profiles and rolled up. Each
// iteration loads 200,000 events of 20,000 users; the metric is events/s.
func BenchmarkLoad(b *testing.B) {
	const perIter, perMessage = 200_000, 500
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	tbus := startTestBus(b, "bench", "events", "loader", 0)
	bs, pub := tbus.bus, tbus.pub
	logger := slog.New(slog.DiscardHandler)
	errlog := ingest.NewErrorLog(pool, logger, time.Now)
	sink := ingest.NewSink(pool, whpg.New(pool))

	var loaded time.Duration
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		now := time.Now().UTC()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for m := 0; m < perIter/perMessage; m++ {
			events := make([]warehouse.Event, perMessage)
			for i := range events {
				n := it*perIter + m*perMessage + i
				events[i] = warehouse.Event{TenantID: 1, EventID: strconv.Itoa(n), UserID: "user-" + strconv.Itoa(n%20_000),
					EventType: []string{"page_viewed", "order_completed", "add_to_cart"}[n%3], OccurredAt: now.Add(-time.Duration(n%1000) * time.Minute),
					ReceivedAt: now, Payload: []byte(`{"amount":42.5,"currency":"EUR","sku":"SKU-123"}`)}
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := pub.Publish(ctx, 1, events); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		want := (it + 1) * perIter
		b.StartTimer()
		start := time.Now()
		lctx, cancel := context.WithCancel(ctx)
		l := ingest.NewLoader(bs.Client().Subscriber("loader"), sink, pool, errlog, logger, ingest.LoaderConfig{})
		done := make(chan error, 1)
		go func() { done <- l.Run(lctx) }()
		for {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM warehouse.events`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n >= want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		loaded += time.Since(start)
		b.StopTimer()
		cancel()
		<-done
	}
	b.ReportMetric(float64(perIter*b.N)/loaded.Seconds(), "events/s")
}
