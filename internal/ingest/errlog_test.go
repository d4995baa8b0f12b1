package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestErrorLogRetention(t *testing.T) {
	pool := openPool(t)
	clock := &stepClock{t: recv, step: time.Millisecond}
	elog := ingest.NewErrorLog(pool, discard(), clock.Now)
	for i := range 5 {
		elog.Record(2, ingest.ErrorWebhookHMAC, fmt.Sprintf("other-%d", i))
	}
	for i := range 1100 {
		elog.Record(1, ingest.ErrorValidation, fmt.Sprintf("rec-%04d", i))
	}
	if err := elog.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	cases := []struct {
		name   string
		tenant int64
		limit  int
		first  string // detail of the first record returned
		last   string // detail of the last record returned
		n      int
	}{
		{name: "100 newest, newest first", tenant: 1, limit: 100, first: "rec-1099", last: "rec-1000", n: 100},
		{name: "limit 1", tenant: 1, limit: 1, first: "rec-1099", last: "rec-1099", n: 1},
		{name: "limit 20", tenant: 1, limit: 20, first: "rec-1099", last: "rec-1080", n: 20},
		{name: "other tenant untouched by pruning", tenant: 2, limit: 100, first: "other-4", last: "other-0", n: 5},
		{name: "unknown tenant", tenant: 3, limit: 100, n: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := elog.List(ctx, tc.tenant, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if recs == nil {
				t.Fatal("List returned nil; want an empty slice (JSON [])")
			}
			if len(recs) != tc.n {
				t.Fatalf("got %d records, want %d", len(recs), tc.n)
			}
			if tc.n == 0 {
				return
			}
			if recs[0].Detail != tc.first || recs[len(recs)-1].Detail != tc.last {
				t.Errorf("records run %s..%s, want %s..%s", recs[0].Detail, recs[len(recs)-1].Detail, tc.first, tc.last)
			}
			for i := 1; i < len(recs); i++ {
				if !recs[i].TS.Before(recs[i-1].TS) {
					t.Errorf("record %d (%v) is not older than record %d (%v)", i, recs[i].TS, i-1, recs[i-1].TS)
				}
			}
		})
	}

	if n := queryInt(t, pool, `SELECT count(*) FROM ingestion_errors WHERE tenant_id = 1`); n != 1000 {
		t.Errorf("tenant 1 keeps %d records, want the newest 1000", n)
	}
	var oldest string
	if err := pool.QueryRow(ctx, `SELECT detail FROM ingestion_errors WHERE tenant_id = 1 ORDER BY id LIMIT 1`).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	if oldest != "rec-0100" {
		t.Errorf("oldest kept record = %s, want rec-0100", oldest)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM ingestion_errors WHERE tenant_id = 2`); n != 5 {
		t.Errorf("tenant 2 keeps %d records, want 5", n)
	}
}

// Retention holds across many flushes, not just within one batch.
func TestErrorLogRetentionAcrossFlushes(t *testing.T) {
	pool := openPool(t)
	elog := ingest.NewErrorLog(pool, discard(), time.Now)
	for round := range 6 {
		for i := range 250 {
			elog.Record(8, ingest.ErrorValidation, fmt.Sprintf("r%d-%d", round, i))
		}
		if round%2 == 1 {
			time.Sleep(600 * time.Millisecond) // let the background writer flush
		}
	}
	if err := elog.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM ingestion_errors WHERE tenant_id = 8`); n != 1000 {
		t.Errorf("tenant keeps %d records, want 1000", n)
	}
	recs, err := elog.List(context.Background(), 8, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 100 || recs[0].Detail != "r5-249" {
		t.Errorf("got %d records starting %+v", len(recs), recs[0])
	}
}

func TestErrorLogTenantIsolation(t *testing.T) {
	pool := openPool(t)
	elog := newErrorLog(t, pool, time.Now)
	for i := range 50 {
		elog.Record(10, ingest.ErrorValidation, fmt.Sprintf("tenant-10-%d", i))
		elog.Record(11, ingest.ErrorDeadLetter, fmt.Sprintf("tenant-11-%d", i))
	}
	if err := elog.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		tenant   int64
		prefix   string
		wantType string
	}{
		{name: "tenant 10", tenant: 10, prefix: "tenant-10-", wantType: ingest.ErrorValidation},
		{name: "tenant 11", tenant: 11, prefix: "tenant-11-", wantType: ingest.ErrorDeadLetter},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, 5*time.Second, "50 records", func() (bool, string) {
				recs, err := elog.List(context.Background(), tc.tenant, 100)
				if err != nil {
					return false, err.Error()
				}
				for _, r := range recs {
					if !strings.HasPrefix(r.Detail, tc.prefix) || r.ErrorType != tc.wantType {
						t.Fatalf("tenant %d sees %+v", tc.tenant, r)
					}
				}
				return len(recs) == 50, fmt.Sprintf("%d records", len(recs))
			})
		})
	}
}

// A record is written by the background writer without an explicit Flush.
func TestErrorLogBackgroundWriter(t *testing.T) {
	pool := openPool(t)
	elog := newErrorLog(t, pool, time.Now)
	elog.Record(5, ingest.ErrorWebhook, "written in the background")
	eventually(t, 5*time.Second, "the background write", func() (bool, string) {
		recs, err := elog.List(context.Background(), 5, 10)
		if err != nil {
			return false, err.Error()
		}
		return len(recs) == 1 && recs[0].Detail == "written in the background", fmt.Sprintf("%+v", recs)
	})
}

// When the writer cannot keep up (here: the only connection is held), Record neither blocks nor
// grows without bound; it drops and counts.
func TestErrorLogDropsWhenBufferFull(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	held, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	elog := ingest.NewErrorLog(pool, discard(), time.Now)
	const n = 30_000
	for i := range n {
		elog.Record(1, ingest.ErrorValidation, fmt.Sprintf("flood-%d", i))
	}
	// The buffer holds 10,000; the writer may have taken one buffer-full before it blocked.
	dropped := elog.Dropped()
	if dropped < n-20_000 || dropped > n-10_000 {
		t.Errorf("Dropped() = %d, want between %d and %d", dropped, n-20_000, n-10_000)
	}
	held.Release()
	if err := elog.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	elog.Record(1, ingest.ErrorValidation, "after close")
	if got := elog.Dropped(); got != dropped+1 {
		t.Errorf("Record after Close: Dropped() = %d, want %d", got, dropped+1)
	}
	recs, err := elog.List(context.Background(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// n-dropped records were kept; whichever they were, the newest of them is at least that far in.
	var newest int64
	if len(recs) != 1 {
		t.Fatalf("records = %+v", recs)
	}
	if _, err := fmt.Sscanf(recs[0].Detail, "flood-%d", &newest); err != nil || newest < n-dropped-1 || newest >= n {
		t.Errorf("newest record = %q, want flood-N with %d <= N < %d (the buffered records are written once the pool frees up)", recs[0].Detail, n-dropped-1, n)
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM ingestion_errors WHERE tenant_id = 1`); got != 1000 {
		t.Errorf("stored %d records, want 1000 (retention)", got)
	}
}

// Details are capped at 1000 bytes. The cap must not split a UTF-8 sequence: Postgres refuses
// invalid UTF-8 in text, and the whole flush (every tenant's records in it) would be lost.
func TestErrorLogLongDetail(t *testing.T) {
	pool := openPool(t)
	cases := []struct {
		name   string
		detail string
	}{
		{name: "ascii over the cap", detail: strings.Repeat("a", 1500)},
		{name: "two-byte runes ending on the cap", detail: strings.Repeat("é", 600)},
		{name: "two-byte rune straddling the cap", detail: "a" + strings.Repeat("é", 600)},
		{name: "four-byte rune straddling the cap", detail: "ab" + strings.Repeat("😀", 300)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenant, neighbour := int64(300+2*i), int64(301+2*i)
			elog := ingest.NewErrorLog(pool, discard(), time.Now)
			elog.Record(tenant, ingest.ErrorWebhookHMAC, tc.detail)
			elog.Record(neighbour, ingest.ErrorValidation, "neighbour record")
			_ = elog.Close(context.Background()) // the error, if any, shows as missing records below
			recs, err := elog.List(context.Background(), tenant, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				t.Fatalf("tenant's long record was not stored (%d records)", len(recs))
			}
			d := recs[0].Detail
			if len(d) > 1000 || !utf8.ValidString(d) || !strings.HasPrefix(tc.detail, d) || len(d) < 996 {
				t.Errorf("stored detail of %d bytes (valid UTF-8: %v); want a prefix of at most 1000 bytes cut on a rune boundary", len(d), utf8.ValidString(d))
			}
			recs, err = elog.List(context.Background(), neighbour, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				t.Errorf("another tenant's record in the same flush was lost (%d records)", len(recs))
			}
		})
	}
}

// The storefront signature failure detail carries the X-Shopify-Topic header, which comes from an
// unauthenticated request: a long non-ASCII topic must still be logged.
func TestShopifySignatureFailureWithLongTopicIsLogged(t *testing.T) {
	pool := openPool(t)
	elog := ingest.NewErrorLog(pool, discard(), time.Now)
	svc := ingest.NewService(&fakePublisher{}, elog, time.Now)
	secrets := func(context.Context, string) (int64, []byte, error) { return 77, []byte("secret"), nil }
	r := ingest.NewShopifyReceiver(secrets, svc, time.Now)
	_, err := r.Receive(context.Background(), ingest.ShopifyDelivery{
		TenantSlug: "acme", Topic: "x" + strings.Repeat("é", 600), WebhookID: "w1",
		HMAC: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", Body: []byte(`{}`),
	})
	if !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("err = %v, want unauthenticated", err)
	}
	_ = elog.Close(context.Background())
	recs, err := elog.List(context.Background(), 77, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ErrorType != ingest.ErrorWebhookHMAC {
		t.Fatalf("records = %d, want the webhook_signature record", len(recs))
	}
}

// Record may be called by request handlers while the process shuts down and closes the log: it
// must count the record as dropped, never panic (send on the closed kick channel). The race is run
// in a child process so a panic fails this test instead of killing the package's test binary.
func TestErrorLogRecordDuringClose(t *testing.T) {
	if os.Getenv("COHORT_ERRLOG_CLOSE_RACE") == "1" {
		recordDuringClose()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestErrorLogRecordDuringClose$", "-test.count=1")
	cmd.Env = append(os.Environ(), "COHORT_ERRLOG_CLOSE_RACE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s := string(out)
		if i := strings.Index(s, "panic:"); i >= 0 {
			s = s[i:min(len(s), i+600)]
		}
		t.Fatalf("Record racing Close crashed the process: %v\n%s", err, s)
	}
}

func recordDuringClose() {
	// Record never touches the pool; Close's final flush fails fast against a closed port.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	deadline := time.Now().Add(5 * time.Second)
	for iter := 0; iter < 1500 && time.Now().Before(deadline); iter++ {
		elog := ingest.NewErrorLog(pool, discard(), time.Now)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for !stop.Load() {
					elog.Record(1, ingest.ErrorValidation, "x")
				}
			})
		}
		time.Sleep(2 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_ = elog.Close(ctx)
		cancel()
		stop.Store(true)
		wg.Wait()
	}
}
