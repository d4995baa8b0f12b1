package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/metrics"
)

// failingScheduler fails the kicks of one tenant and records the others.
type failingScheduler struct {
	recordingScheduler
	mu      sync.Mutex
	failFor int64
}

func (s *failingScheduler) ScheduleEmbeddings(ctx context.Context, tenantID int64) error {
	s.mu.Lock()
	fail := tenantID == s.failFor
	s.mu.Unlock()
	if fail {
		return errors.New("temporal is down")
	}
	return s.recordingScheduler.ScheduleEmbeddings(ctx, tenantID)
}

func (s *failingScheduler) setFailFor(tenantID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failFor = tenantID
}

func (r *recordingScheduler) snapshot() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.kicks)
}

// syncWriter is a log destination the test reads while the loop writes.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestEmbeddingSweep(t *testing.T) {
	f := newFixture(t)
	a, b, idle := f.tenant("sweep-a"), f.tenant("sweep-b"), f.tenant("sweep-idle")
	f.create(a, "A1", "Shirt", "")
	f.create(b, "B1", "Dress", "")
	e := newFakeEmbedder(t)
	f.drain(idle, e, 0) // nothing queued
	if q := len(f.queue(idle)); q != 0 {
		t.Fatalf("idle tenant has %d queued", q)
	}

	sched := &recordingScheduler{}
	sw := catalog.NewEmbeddingSweeper(f.svc, sched, nil, 0, slog.New(slog.DiscardHandler))
	n, err := sw.Sweep(f.ctx)
	if err != nil || n != 2 || !slices.Equal(sched.snapshot(), []int64{a, b}) {
		t.Fatalf("sweep kicked %d (%v): %v, want %d and %d", n, err, sched.snapshot(), a, b)
	}

	failing := &failingScheduler{failFor: a}
	sw = catalog.NewEmbeddingSweeper(f.svc, failing, nil, 0, slog.New(slog.DiscardHandler))
	n, err = sw.Sweep(f.ctx)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "temporal is down") || len(failing.snapshot()) != 0 {
		t.Fatalf("sweep with a failing kick: %d kicked, %v, kicks %v; want it to stop at the first", n, err, failing.snapshot())
	}

	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, err := sw.Sweep(ctx); err == nil {
		t.Fatal("no error when the queue cannot be read")
	}
}

// TestEmbeddingSweeperRun runs the loop as the worker role does: at start it queues the products
// of another model, then kicks every queued tenant every interval, logs a failed sweep and goes
// on, and returns nil when its context ends.
func TestEmbeddingSweeperRun(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("run-a"), f.tenant("run-b")
	f.create(a, "A1", "Shirt", "")
	f.create(b, "B1", "Dress", "")
	e := newFakeEmbedder(t)
	f.drain(a, e, 0)
	f.drain(b, e, 0)
	if q := len(f.queue(a)) + len(f.queue(b)); q != 0 {
		t.Fatalf("%d products queued after the drains", q)
	}
	v2 := newFakeEmbedder(t)
	v2.model = "local-ngram-v2"
	sched := &failingScheduler{failFor: a}
	logs := &syncWriter{}
	sw := catalog.NewEmbeddingSweeper(f.svc, sched, v2, 20*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "temporal is down") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("kicks %v, log %q after 10s", sched.snapshot(), logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(f.queue(a)) != 1 || len(f.queue(b)) != 1 {
		t.Errorf("queues %v %v: want each product queued for the new model", f.queue(a), f.queue(b))
	}
	// a's kick fails every time, so b is never reached: the sweep stops at the first failure.
	// Once a's kick works again, both are kicked at a later tick.
	if kicks := sched.snapshot(); len(kicks) != 0 {
		t.Fatalf("kicks %v while the first tenant's kick fails, want none", kicks)
	}
	sched.setFailFor(-1)
	for k := sched.snapshot(); !slices.Contains(k, a) || !slices.Contains(k, b); k = sched.snapshot() {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("b not kicked after the failure ended: %v", sched.snapshot())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil when its context ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}

	if err := catalog.NewEmbeddingSweeper(f.svc, nil, nil, 0, slog.New(slog.DiscardHandler)).Run(f.ctx); err == nil {
		t.Fatal("a sweeper without a scheduler ran")
	}
}

// TestEmbeddingSweepMeasuresBacklog: with metrics, each sweep sets the backlog (products queued
// and still tried, of every tenant) and the age of its oldest product; a parked product (refused
// MaxEmbedAttempts times) is not waited for, so it counts in neither; an empty backlog is 0 and 0.
func TestEmbeddingSweepMeasuresBacklog(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("backlog-a"), f.tenant("backlog-b")
	parked := f.create(a, "OLD", "Refused text", "")
	f.exec("UPDATE product_embedding_queue SET attempts = $2, last_error = 'refused' WHERE product_id = $1", parked.ID, catalog.MaxEmbedAttempts)
	f.clock.Advance(time.Hour)
	f.create(a, "A1", "Shirt", "")
	f.clock.Advance(30 * time.Second)
	f.create(b, "B1", "Dress", "")
	f.create(b, "B2", "Skirt", "")
	f.clock.Advance(15 * time.Second)

	reg := prometheus.NewRegistry()
	sw := catalog.NewEmbeddingSweeper(f.svc, &recordingScheduler{}, nil, 0, slog.New(slog.DiscardHandler)).WithMetrics(metrics.New(reg))
	if _, err := sw.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n, age := backlogGauges(t, reg); n != 3 || age != 45 {
		t.Errorf("backlog %v products, oldest %vs; want 3 and 45s (A1's wait; the parked one is not counted)", n, age)
	}

	e := newFakeEmbedder(t)
	f.drain(a, e, 0)
	f.drain(b, e, 0)
	if _, err := sw.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n, age := backlogGauges(t, reg); n != 0 || age != 0 {
		t.Errorf("after the drains: backlog %v products, oldest %vs; want 0 and 0", n, age)
	}
}

func backlogGauges(t *testing.T, reg *prometheus.Registry) (products, age float64) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		switch fam.GetName() {
		case "cohort_embedding_backlog_products":
			products = fam.GetMetric()[0].GetGauge().GetValue()
		case "cohort_embedding_backlog_age_seconds":
			age = fam.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return products, age
}
