package page

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// lostAckDB begins flush transactions on the real pool; while lose is above zero a commit is
// carried out and then reported failed (and lose counted down), as when the connection breaks
// after the server committed and before its answer arrives.
type lostAckDB struct {
	inner txBeginner
	lose  atomic.Int32
	// commits counts the commits carried out.
	commits atomic.Int32
}

var errAckLost = errors.New("read tcp 127.0.0.1:5432: connection reset by peer")

func (d *lostAckDB) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.inner.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &lostAckTx{Tx: tx, db: d}, nil
}

type lostAckTx struct {
	pgx.Tx
	db *lostAckDB
}

func (t *lostAckTx) Commit(ctx context.Context) error {
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	t.db.commits.Add(1)
	if t.db.lose.Add(-1) >= 0 {
		return errAckLost
	}
	return nil
}

// TestFlushLostAcknowledgementCountsOnce: a flush whose commit happened but whose answer was lost
// fails, keeps its batch, and its retry (the next flush) adds nothing more; reads counted
// between the two are written once by the retry.
func TestFlushLostAcknowledgementCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failRetry bool // the first retry fails too (its context is cancelled)
	}{
		{"lost acknowledgement", false},
		{"lost acknowledgement then a failed retry", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			db := &lostAckDB{inner: e.svc.pool}
			e.svc.flushDB = db
			q := e.query(e.a, "ack")
			p := e.page(e.a, CreateInput{Query: &q.ID})
			for range 5 {
				e.svc.counter.record(e.a, p.ID, 0, time.Now()) // GPTBot
			}
			db.lose.Store(1)
			if err := e.svc.Flush(e.ctx); !errors.Is(err, errAckLost) {
				t.Fatalf("flush: %v, want the lost acknowledgement", err)
			}
			// Committed, and still pending here: the counter does not know it was written.
			if n := e.svc.counter.pending(p.ID); n != 5 {
				t.Fatalf("pending %d after the lost acknowledgement", n)
			}
			failed := int64(1)
			if tc.failRetry {
				cctx, cancel := context.WithCancel(e.ctx)
				cancel()
				if err := e.svc.Flush(cctx); err == nil {
					t.Fatal("flush on a cancelled context succeeded")
				}
				failed++
			}
			if n := testenv.Count(t, e.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 5 {
				t.Fatalf("view_count %d after the lost acknowledgement, want 5 (the commit happened)", n)
			}
			for range 2 { // counted while the batch was held
				e.svc.counter.record(e.a, p.ID, -1, time.Now())
			}
			if err := e.svc.Flush(e.ctx); err != nil {
				t.Fatal(err)
			}
			if n := testenv.Count(t, e.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 7 {
				t.Fatalf("view_count %d after the retry, want 7 (5 once, 2 counted meanwhile)", n)
			}
			if n := testenv.Count(t, e.db, `SELECT count FROM page_ai_crawls WHERE page_id = $1 AND crawler = $2`, p.ID, Crawlers[0]); n != 5 {
				t.Fatalf("crawls %d, want 5", n)
			}
			if n := e.svc.counter.pending(p.ID); n != 0 {
				t.Fatalf("pending %d after the retry", n)
			}
			st := e.svc.CounterStats()
			if st.Replayed != 1 || st.Failed != failed || st.Written != 1 || st.PendingPages != 0 || st.PendingViews != 0 {
				t.Fatalf("stats %+v", st)
			}
			// One ledger row per batch written: the retried one and the one counted meanwhile.
			if n := testenv.Count(t, e.db, `SELECT count(*) FROM page_view_flushes`); n != 2 {
				t.Fatalf("ledger rows %d, want 2", n)
			}
			if err := e.svc.Flush(e.ctx); err != nil { // nothing counted: nothing written
				t.Fatal(err)
			}
			if n := testenv.Count(t, e.db, `SELECT count(*) FROM page_view_flushes`); n != 2 {
				t.Fatalf("ledger rows %d after an empty flush, want 2", n)
			}
			if n := db.commits.Load(); n != 2 {
				t.Fatalf("%d commits, want 2 (the replayed batch commits nothing)", n)
			}
		})
	}
}

// TestFlushFailureHoldsBatch: a flush that fails before committing keeps its batch and id; the
// retry writes it once, and pending counts (what responses show) never drop meanwhile.
func TestFlushFailureHoldsBatch(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "held")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	for range 4 {
		e.svc.counter.record(e.a, p.ID, -1, time.Now())
	}
	cctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := e.svc.Flush(cctx); err == nil {
		t.Fatal("flush on a cancelled context succeeded")
	}
	held := e.svc.counter.held.Load()
	if held == nil || held.id == "" {
		t.Fatal("the failed batch is not held")
	}
	e.svc.counter.record(e.a, p.ID, -1, time.Now())
	if n := e.svc.counter.pending(p.ID); n != 5 {
		t.Fatalf("pending %d, want 5", n)
	}
	if st := e.svc.CounterStats(); st.PendingPages != 2 || st.PendingViews != 5 {
		t.Fatalf("stats %+v, want 2 pages (held and current batch) and 5 views", st)
	}
	if err := e.svc.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, e.db, `SELECT count(*) FROM page_view_flushes WHERE flush_id = $1::uuid`, held.id); n != 1 {
		t.Fatalf("the held batch's id %s is not in the ledger", held.id)
	}
	if n := testenv.Count(t, e.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 5 {
		t.Fatalf("view_count %d, want 5", n)
	}
}

// TestSweepFlushLedger: ids older than a day are deleted, younger ones kept.
func TestSweepFlushLedger(t *testing.T) {
	e := newEnv(t, Options{})
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	e.svc.now = func() time.Time { return now }
	testenv.Exec(t, e.db, `INSERT INTO page_view_flushes (flush_id, flushed_at)
		SELECT gen_random_uuid(), $1::timestamptz - make_interval(mins => i) FROM generate_series(1, 12005) i`, now.Add(-flushLedgerKeep))
	testenv.Exec(t, e.db, `INSERT INTO page_view_flushes (flush_id, flushed_at)
		SELECT gen_random_uuid(), $1::timestamptz + make_interval(secs => i) FROM generate_series(1, 3) i`, now.Add(-flushLedgerKeep))
	n, err := e.svc.SweepFlushLedger(e.ctx)
	if err != nil || n != 12005 {
		t.Fatalf("swept %d, %v; want 12005", n, err)
	}
	if left := testenv.Count(t, e.db, `SELECT count(*) FROM page_view_flushes`); left != 3 {
		t.Fatalf("%d ids left, want the 3 younger than a day", left)
	}
}

func TestNewFlushID(t *testing.T) {
	a, b := newFlushID(), newFlushID()
	if a == b || len(a) != 36 || a[14] != '4' || a[8] != '-' {
		t.Fatalf("flush ids %q %q", a, b)
	}
}

// TestCounterCollector: the metrics show the reads pending in memory and the flush outcomes.
func TestCounterCollector(t *testing.T) {
	e := newEnv(t, Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCounterCollector(e.svc))
	q := e.query(e.a, "metrics")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	for range 3 {
		e.svc.counter.record(e.a, p.ID, -1, time.Now())
	}
	for _, step := range []struct {
		name  string
		flush bool
		want  map[string]float64
	}{
		{"three reads counted", false, map[string]float64{"cohort_page_views_pending_pages": 1, "cohort_page_views_pending": 3, "written": 0}},
		{"flushed", true, map[string]float64{"cohort_page_views_pending_pages": 0, "cohort_page_views_pending": 0, "written": 1, "failed": 0}},
	} {
		if step.flush {
			if err := e.svc.Flush(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		got := gather(t, reg)
		for k, v := range step.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v (all: %v)", step.name, k, got[k], v, got)
			}
		}
	}
}

// gather returns the registry's series: gauges by name, flush counters by outcome.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
