package load_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// BenchmarkLoad measures end-to-end loading into the embedded warehouse, from each bus in turn
// (bus=pubsub: pstest; bus=nats: embedded NATS JetStream with file storage, as cohort dev runs
// it), each into a database of its own: events already on the bus are pulled, deduplicated, stored, merged into profiles and rolled up. Each
// iteration publishes COHORT_BENCH_EVENTS events (default 200,000) of COHORT_BENCH_USERS users
// (default a tenth of the events) and loads them into the same tables, so -benchtime Nx loads N
// times as many in all. The metrics are events/s over the loading time (publishing is not
// timed) and the CPU time per event of this process and of the database's Postgres backends.
// COHORT_BENCH_BATCH, COHORT_BENCH_FLUSHERS and COHORT_BENCH_STREAMS override the loader's defaults.
//
// Issue 3's 10M events (task bench:ingest:10m): COHORT_BENCH_EVENTS=1000000 COHORT_BENCH_USERS=1000000 -benchtime 10x
// (10M events of 1M users into one database; what pstest keeps is cleared between iterations), or
// COHORT_BENCH_EVENTS=10000000 -benchtime 1x in one go, where pstest holds 20,000 messages (about
// 5 GB) and spends much of the process's CPU scanning its backlog on every delivery.
// COHORT_BENCH_BUS=pubsub or nats runs one bus only.
func BenchmarkLoad(b *testing.B) {
	for _, kind := range busKinds {
		if only := os.Getenv("COHORT_BENCH_BUS"); only != "" && only != kind {
			continue
		}
		b.Run("bus="+kind, func(b *testing.B) { benchLoad(b, kind) })
	}
}

func benchLoad(b *testing.B, kind string) {
	const perMessage = 500
	ctx := context.Background()
	perIter, users, pool := loadSetup(b, perMessage)
	tbus := startBus(b, kind, 0)
	pub := tbus.pub
	logger := slog.New(slog.DiscardHandler)
	errlog := ingest.NewErrorLog(pool, logger, time.Now)
	sink := load.NewSink(pool, whpg.New(pool))

	var loaded, goCPU, pgCPU time.Duration
	writes0 := rollupWrites(ctx, b, pool)
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		now := time.Now().UTC()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for m := 0; m < perIter/perMessage; m++ {
			events := benchEvents(it*perIter+m*perMessage, perMessage, users, now)
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
		cpu0 := sampleCPU(ctx, b, pool)
		start := time.Now()
		lctx, cancel := context.WithCancel(ctx)
		l := load.NewLoader(tbus.recv, sink, pool, errlog, logger, load.LoaderConfig{
			MaxBatchEvents: testenv.EnvInt(b, "COHORT_BENCH_BATCH", 0), Flushers: testenv.EnvInt(b, "COHORT_BENCH_FLUSHERS", 0),
			Streams: testenv.EnvInt(b, "COHORT_BENCH_STREAMS", 0)})
		done := make(chan error, 1)
		go func() { done <- l.Run(lctx) }()
		for {
			// The hourly rollup commits with the events and is a few rows: polling it costs
			// nothing, where count(*) over the events would scan millions of rows 50 times a second.
			var n int
			if err := pool.QueryRow(ctx, `SELECT coalesce(sum(event_count), 0) FROM ingestion_hourly WHERE tenant_id = 1`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n >= want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		loaded += time.Since(start)
		b.StopTimer()
		cpu1 := sampleCPU(ctx, b, pool)
		goCPU += cpu1.self - cpu0.self
		for pid, t := range cpu1.pg {
			pgCPU += t - cpu0.pg[pid]
		}
		cancel()
		<-done
		// Every message is acknowledged and the loader stopped: drop what pstest keeps of them
		// (it holds every published message for the life of the process), so the next
		// iterations do not pay the garbage collection of all the earlier ones.
		if tbus.emb != nil {
			tbus.emb.Server().ClearMessages()
		}
		var stored int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM warehouse.events`).Scan(&stored); err != nil {
			b.Fatal(err)
		}
		if stored != want {
			b.Fatalf("stored %d events, want %d", stored, want)
		}
	}
	b.ReportMetric(float64(perIter*b.N)/loaded.Seconds(), "events/s")
	// CPU per event of the loader (this process, with pstest) and of the database's Postgres
	// backends: what the machine's cores are spent on, less noisy than wall time on a shared box.
	// (WAL writing by the walwriter and checkpoints are not included; commit flushes are.)
	b.ReportMetric(float64(goCPU.Microseconds())/float64(perIter*b.N), "go-cpu-µs/event")
	b.ReportMetric(float64(pgCPU.Microseconds())/float64(perIter*b.N), "pg-cpu-µs/event")
	time.Sleep(1500 * time.Millisecond) // the statistics of the last commits
	b.ReportMetric(float64(rollupWrites(ctx, b, pool)-writes0)/float64(perIter*b.N), "rollup-writes/event")
}

// loadSetup reads the load benchmarks' sizes (events per iteration, a multiple of unit, and users)
// and opens a pool on a new database, closed when the benchmark ends.
func loadSetup(b *testing.B, unit int) (perIter, users int, pool *pgxpool.Pool) {
	perIter = testenv.EnvInt(b, "COHORT_BENCH_EVENTS", 200_000)
	users = testenv.EnvInt(b, "COHORT_BENCH_USERS", max(perIter/10, 1))
	perIter -= perIter % unit
	pool, err := pgxpool.New(context.Background(), testenv.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return perIter, users, pool
}

// benchEvents returns the benchmark's events number from to from+n-1: one tenant, users users, three
// event types, one numeric payload property.
func benchEvents(from, n, users int, now time.Time) []warehouse.Event {
	events := make([]warehouse.Event, n)
	for i := range events {
		k := from + i
		events[i] = warehouse.Event{TenantID: 1, EventID: strconv.Itoa(k), UserID: "user-" + strconv.Itoa(benchUser(k, users)),
			EventType: []string{"page_viewed", "order_completed", "add_to_cart"}[k%3], OccurredAt: now.Add(-time.Duration(k%1000) * time.Minute),
			ReceivedAt: now, Payload: []byte(`{"amount":42.5,"currency":"EUR","sku":"SKU-123"}`)}
	}
	return events
}

// benchUser is event k's user: spread over the users pseudo-randomly (splitmix64), as in real
// traffic. Users assigned in turn (k % users) made consecutive messages cover consecutive user
// ranges, so how many distinct users a loader batch touched, and with it how many profile and
// rollup rows Postgres upserted, depended on the order the bus delivered messages in: JetStream
// delivers in publish order (each 20,000-event batch: 20,000 distinct users), pstest shuffles
// (fewer), and for the same 200k events the rollup tables saw 138k updates under NATS and 92k
// under Pub/Sub. With spread users every delivery order gives batches the same mix; the
// benchmark reports the rollup writes per event to show it.
func benchUser(k, users int) int {
	x := uint64(k) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(users))
}

// rollupWrites is how many rows the per-user rollup table has had inserted or updated (the
// statistics lag commits by up to a second: call it with the loader idle, after a pause).
func rollupWrites(ctx context.Context, b *testing.B, pool *pgxpool.Pool) int64 {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_user_tables
		WHERE schemaname = 'warehouse' AND relname = 'user_event_stats'`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkLoadCeiling is BenchmarkLoad's baseline on the same machine and Postgres: the same
// events written with the loader's COPY into warehouse.events, in batches of the loader's default
// size by as many writers as it has flushers, one transaction per batch, and nothing else (no
// Pub/Sub, no decoding, no deduplication retries, no profiles or rollups). No loader that stores
// every event in the embedded warehouse can go faster on this machine.
func BenchmarkLoadCeiling(b *testing.B) {
	const batch, writers = load.DefaultMaxBatchEvents, 2
	ctx := context.Background()
	perIter, users, pool := loadSetup(b, batch)
	var loaded, pgCPU time.Duration
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		now := time.Now().UTC()
		batches := make(chan []warehouse.Event, perIter/batch)
		for m := 0; m < perIter/batch; m++ {
			batches <- benchEvents(it*perIter+m*batch, batch, users, now)
		}
		close(batches)
		b.StartTimer()
		cpu0 := sampleCPU(ctx, b, pool)
		start := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for events := range batches {
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						_, err := whpg.CopyNew(ctx, tx, events)
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		loaded += time.Since(start)
		b.StopTimer()
		cpu1 := sampleCPU(ctx, b, pool)
		for pid, t := range cpu1.pg {
			pgCPU += t - cpu0.pg[pid]
		}
		var stored int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM warehouse.events`).Scan(&stored); err != nil {
			b.Fatal(err)
		}
		if want := (it + 1) * perIter; stored != want {
			b.Fatalf("stored %d events, want %d", stored, want)
		}
	}
	b.ReportMetric(float64(perIter*b.N)/loaded.Seconds(), "events/s")
	b.ReportMetric(float64(pgCPU.Microseconds())/float64(perIter*b.N), "pg-cpu-µs/event")
}

type cpuSample struct {
	self time.Duration
	pg   map[int]time.Duration // by backend pid
}

// sampleCPU reads from /proc the CPU time used so far by this process and by the Postgres
// backends connected to pool's database (zero where /proc cannot tell, e.g. a remote server).
func sampleCPU(ctx context.Context, b *testing.B, pool *pgxpool.Pool) cpuSample {
	s := cpuSample{self: procCPU(os.Getpid()), pg: map[int]time.Duration{}}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		b.Fatal(err)
	}
	for _, pid := range pids {
		s.pg[pid] = procCPU(pid)
	}
	return s
}

// procCPU is a process's user plus system time from /proc/<pid>/stat (clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
