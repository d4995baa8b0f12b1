// Package load is the consumer side of ingestion: the loader receives event messages from the bus
// and, through the Sink, stores each event once in the warehouse and keeps the profiles and the
// rollups (hourly counts, user sketches, the embedded warehouse's per-user segment rollups) in the
// same transaction. Stats reads those rollups for the API.
package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// defaultMaxBatchEvents bounds a batch unless LoaderConfig says otherwise: even with unbounded
// batches in BenchmarkLoad both with 20k and with 1M users (smaller batches cost Postgres the
// aggregation of a user's events; larger ones cost the loader bigger maps and sorts).
const defaultMaxBatchEvents = 20000

// LoaderConfig tunes the loader.
type LoaderConfig struct {
	// MaxBatchEvents bounds a batch: a partition is flushed when this many of its events are
	// pending, and a flush writes at most this many (whole messages; a backlog is written batch
	// after batch). Default 20000 (defaultMaxBatchEvents).
	MaxBatchEvents int
	MaxBatchDelay  time.Duration // or when its oldest pending message waited this long (default 200ms)
	MaxAttempts    int           // a message failing alone this often is dead-lettered (default 5)
	// Flushers is how many batches are written concurrently (default 2): the events are split
	// into this many partitions by user, each written by its own flusher, so concurrent batches
	// never update the same user's profile and rollup rows and do not wait for each other's locks.
	Flushers int
	// Streams is how many Pub/Sub StreamingPull streams receive (default 4): the Pub/Sub
	// emulator (pstest) hands each stream one message per delivery pass, so one stream caps a
	// loader's intake; with the service, more streams spread a large backlog's delivery over more
	// connections. NATS pulls on one subscription.
	Streams int
	// MaxOutstandingBytes bounds the messages received and not yet acked (default 64 MiB): a
	// backlog waits in the bus, not in this process's memory.
	MaxOutstandingBytes int
	// DrainTimeout bounds how long a stopping loader keeps storing what it holds (default 5s);
	// what is left then goes back to the bus, which delivers it again on the next start.
	DrainTimeout time.Duration
	// Metrics records batches, events stored, lag, redeliveries and dead letters (nil: none).
	Metrics *metrics.Metrics
}

// Loader receives event messages from the bus and applies them through the Sink, acking a
// message only after all its events are committed. A crash at any moment loses nothing (unacked
// messages are redelivered) and stores nothing twice (the Sink dedupes on event id).
type Loader struct {
	recv   bus.Receiver
	sink   *Sink
	pool   *pgxpool.Pool
	errlog *ingest.ErrorLog
	log    *slog.Logger
	cfg    LoaderConfig
	id     string

	mu       sync.Mutex
	parts    []*partition
	attempts map[string]int
}

// partition is the pending events of one flusher's share of the users.
type partition struct {
	pending []*delivery
	decoded [][]warehouse.Event // per pending message, its events in this partition
	nEvents int
	oldest  time.Time
	kick    chan struct{}
	// flushing is the batch being written (taken from pending, not yet settled): held for the lag.
	flushing []*delivery
}

// delivery is a received message whose events are split over one or more partitions: it is acked
// when every one of them has committed its share, and nacked (or dead-lettered) as soon as one
// fails. The fields are guarded by Loader.mu.
type delivery struct {
	m       *bus.Message
	left    int  // partitions that have yet to commit their share
	settled bool // acked, nacked or dead-lettered
}

// NewLoader builds a loader that receives from recv.
func NewLoader(recv bus.Receiver, sink *Sink, pool *pgxpool.Pool, errlog *ingest.ErrorLog, logger *slog.Logger, cfg LoaderConfig) *Loader {
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = defaultMaxBatchEvents
	}
	if cfg.MaxBatchDelay <= 0 {
		cfg.MaxBatchDelay = 200 * time.Millisecond
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Flushers <= 0 {
		cfg.Flushers = 2
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 4
	}
	if cfg.MaxOutstandingBytes <= 0 {
		cfg.MaxOutstandingBytes = 64 << 20
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	host, _ := os.Hostname()
	l := &Loader{
		recv: recv, sink: sink, pool: pool, errlog: errlog, log: logger, cfg: cfg,
		id:       "loader-" + host + "-" + strconv.Itoa(os.Getpid()),
		attempts: map[string]int{},
	}
	for range cfg.Flushers {
		l.parts = append(l.parts, &partition{kick: make(chan struct{}, 1)})
	}
	return l
}

func (l *Loader) Name() string { return "event loader" }

// Run receives until ctx ends. Then it stores what it holds for at most DrainTimeout and hands
// the rest back to the bus (nack), which delivers it again: nothing accepted is lost either way.
func (l *Loader) Run(ctx context.Context) error {
	flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFlush()
	var wg sync.WaitGroup
	for _, p := range l.parts {
		wg.Go(func() { l.flushLoop(ctx, flushCtx, p) })
	}
	wg.Go(func() { l.heartbeat(ctx) })
	if l.cfg.Metrics != nil {
		wg.Go(func() { l.reportLag(ctx) })
	}
	settings := bus.ReceiveSettings{
		MaxOutstandingMessages: 4 * l.cfg.MaxBatchEvents,
		MaxOutstandingBytes:    l.cfg.MaxOutstandingBytes,
		Streams:                l.cfg.Streams,
	}
	err := l.recv.Receive(ctx, settings, func(m *bus.Message) { l.add(ctx, m) })
	wg.Wait()
	// What Receive handed us before it returned, within the drain budget.
	drainCtx, cancel := context.WithTimeout(flushCtx, l.cfg.DrainTimeout)
	defer cancel()
	for _, p := range l.parts {
		wg.Go(func() {
			for drainCtx.Err() == nil && l.flush(drainCtx, p) > 0 {
			}
		})
	}
	wg.Wait()
	if n := l.handBack(); n > 0 {
		l.log.Info("loader stopped with messages left; the bus delivers them again", "messages", n)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("receive: %w", err)
	}
	return nil
}

// handBack nacks every pending message that is not settled yet and returns how many it nacked.
func (l *Loader) handBack() int {
	var back []*delivery
	l.mu.Lock()
	for _, p := range l.parts {
		for _, d := range p.pending {
			if !d.settled {
				d.settled = true
				back = append(back, d)
			}
		}
		p.pending, p.decoded, p.nEvents = nil, nil, 0
	}
	l.mu.Unlock()
	for _, d := range back {
		d.m.Nack()
	}
	return len(back)
}

// add takes a received message; ctx is the receiving context, so a stopping loader does not wait
// for a dead-letter write (the message is then delivered again).
func (l *Loader) add(ctx context.Context, m *bus.Message) {
	var msg wire.Message
	if err := wire.DecodeMessage(m.Data, &msg); err != nil || msg.V != wire.MessageVersion {
		reason := "undecodable message"
		if err != nil {
			reason += ": " + err.Error()
		} else {
			reason += ": unknown version " + strconv.Itoa(msg.V)
		}
		l.deadLetter(ctx, m, msg.TenantID, reason, 1, metrics.DeadLetterUndecodable)
		return
	}
	if len(msg.Events) == 0 { // nothing to store
		l.mu.Lock()
		delete(l.attempts, m.ID)
		l.mu.Unlock()
		m.Ack()
		return
	}
	shares := l.split(msg.Events)
	d := &delivery{m: m}
	var full []*partition
	l.mu.Lock() // held until every share is queued, so no flush can ack d before d.left is whole
	if m.Deliveries > 1 || l.attempts[m.ID] > 0 {
		l.cfg.Metrics.Redelivered()
	}
	for i, events := range shares {
		if len(events) == 0 {
			continue
		}
		p := l.parts[i]
		d.left++
		p.queue(d, events)
		if p.nEvents >= l.cfg.MaxBatchEvents {
			full = append(full, p)
		}
	}
	l.mu.Unlock()
	for _, p := range full {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// split shares the events out to the partitions by user, keeping their order.
func (l *Loader) split(events []warehouse.Event) [][]warehouse.Event {
	n := len(l.parts)
	if n == 1 {
		return [][]warehouse.Event{events}
	}
	shares := make([][]warehouse.Event, n)
	first := partitionOf(&events[0], n) // usually a message is one user's, or one partition's
	for i := range events {
		if partitionOf(&events[i], n) != first {
			for j := range events {
				p := partitionOf(&events[j], n)
				shares[p] = append(shares[p], events[j])
			}
			return shares
		}
	}
	shares[first] = events
	return shares
}

// partitionOf is the partition of an event's user (by user id: every tenant's user of that id
// lands in the same one, which only matters for balance). An event that carries an anonymous id
// goes by that id instead, so an identify that links it is written after, not beside, the
// anonymous events of the same visitor that this loader holds, whose rollups the link merges.
func partitionOf(e *warehouse.Event, n int) int {
	if e.AnonymousID != "" {
		return int(hash64(e.AnonymousID) % uint64(n))
	}
	return int(hash64(e.UserID) % uint64(n))
}

// queue adds a message's share of events; the caller holds Loader.mu.
func (p *partition) queue(d *delivery, events []warehouse.Event) {
	if len(p.pending) == 0 {
		p.oldest = time.Now()
	}
	p.pending = append(p.pending, d)
	p.decoded = append(p.decoded, events)
	p.nEvents += len(events)
}

// flushLoop writes the partition's batches as they fill up or age, one at a time; the other
// partitions' flushers run beside it, so Postgres writes as many batches at once as there are
// partitions while this process decodes the next messages.
func (l *Loader) flushLoop(ctx, flushCtx context.Context, p *partition) {
	t := time.NewTicker(l.cfg.MaxBatchDelay / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-t.C:
			l.mu.Lock()
			due := len(p.pending) > 0 && time.Since(p.oldest) >= l.cfg.MaxBatchDelay
			l.mu.Unlock()
			if !due {
				continue
			}
		}
		// A backlog (Postgres slower than delivery) is written a batch at a time, back to back:
		// bounded transactions, rather than one that grows with the backlog.
		for l.flush(flushCtx, p) >= l.cfg.MaxBatchEvents && ctx.Err() == nil {
		}
	}
}

// take hands over the partition's oldest pending messages, their events and how many events they
// hold: whole messages up to MaxBatchEvents (at least one message), and how many events stay
// pending. Those keep the partition's oldest time, so they are flushed no later than MaxBatchDelay
// after it was.
func (l *Loader) take(p *partition) (ds []*delivery, evs [][]warehouse.Event, n, left int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := 0
	for k < len(p.pending) && (k == 0 || n+len(p.decoded[k]) <= l.cfg.MaxBatchEvents) {
		n += len(p.decoded[k])
		k++
	}
	ds, evs = p.pending[:k:k], p.decoded[:k:k]
	p.flushing = ds
	if k == len(p.pending) {
		p.pending, p.decoded = nil, nil
	} else {
		p.pending, p.decoded = p.pending[k:], p.decoded[k:]
	}
	p.nEvents -= n
	return ds, evs, n, p.nEvents
}

// flush writes one batch of the partition and returns how many of its events stay pending.
func (l *Loader) flush(ctx context.Context, p *partition) int {
	ds, evs, n, left := l.take(p)
	if len(ds) == 0 {
		return 0
	}
	defer func() {
		l.mu.Lock()
		p.flushing = nil
		l.mu.Unlock()
	}()
	all := make([]warehouse.Event, 0, n)
	for _, e := range evs {
		all = append(all, e...)
	}
	ctx, span := batchSpan(ctx, ds, len(all))
	defer span.End()
	stored, err := l.sink.Apply(ctx, all)
	l.cfg.Metrics.LoaderBatch(len(all), stored, err)
	if err == nil {
		l.stored(ds...)
		return left
	}
	if len(ds) == 1 {
		l.failed(ctx, ds[0], evs[0], err)
		return left
	}
	l.log.Warn("batch failed; retrying its messages one by one", "messages", len(ds), "error", err)
	// Isolate the message that fails so one poison message cannot hold the others back.
	for i, d := range ds {
		stored, err := l.sink.Apply(ctx, evs[i])
		l.cfg.Metrics.LoaderBatch(len(evs[i]), stored, err)
		if err != nil {
			l.failed(ctx, d, evs[i], err)
			continue
		}
		l.stored(d)
	}
	return left
}

// stored records that a partition committed its share of the messages, and acks those that are
// now stored whole.
func (l *Loader) stored(ds ...*delivery) {
	var done []*delivery
	l.mu.Lock()
	for _, d := range ds {
		d.left--
		if d.left == 0 && !d.settled {
			d.settled = true
			delete(l.attempts, d.m.ID)
			done = append(done, d)
		}
	}
	l.mu.Unlock()
	for _, d := range done {
		d.m.Ack()
	}
}

// failed handles a message whose share of events a partition could not store: it is redelivered
// (the shares other partitions stored are then skipped as stored) or, after MaxAttempts, dead-
// lettered whole.
func (l *Loader) failed(ctx context.Context, d *delivery, events []warehouse.Event, err error) {
	m := d.m
	stopping := ctx.Err() != nil
	l.mu.Lock()
	if d.settled { // another partition's share failed already
		l.mu.Unlock()
		return
	}
	d.settled = true
	var n int
	if !stopping {
		l.attempts[m.ID]++
		n = l.attempts[m.ID]
	}
	l.mu.Unlock()
	if stopping {
		m.Nack()
		return
	}
	if n < l.cfg.MaxAttempts {
		l.log.Warn("message failed; it will be redelivered", "message_id", m.ID, "attempt", n, "error", err)
		m.Nack()
		return
	}
	var tenant int64
	if len(events) > 0 {
		tenant = events[0].TenantID
	}
	l.deadLetter(ctx, m, tenant, err.Error(), n, metrics.DeadLetterStoreFailed)
}

// deadLetter stores the message in ingestion_dead_letters and acks it; kind is the reason's class
// in metrics (metrics.DeadLetterUndecodable, metrics.DeadLetterStoreFailed).
func (l *Loader) deadLetter(ctx context.Context, m *bus.Message, tenantID int64, reason string, attempts int, kind string) {
	var tenant any
	if tenantID > 0 {
		tenant = tenantID
	}
	if _, err := l.pool.Exec(ctx, `INSERT INTO ingestion_dead_letters (tenant_id, message_id, reason, attempts, data)
		VALUES ($1, $2, $3, $4, $5)`, tenant, m.ID, reason, attempts, m.Data); err != nil {
		l.log.Error("dead-letter message; leaving it for redelivery", "message_id", m.ID, "error", err)
		m.Nack()
		return
	}
	if tenantID > 0 {
		l.errlog.Record(tenantID, ingest.ErrorDeadLetter, "message "+m.ID+" dead-lettered after "+strconv.Itoa(attempts)+" attempt(s): "+reason)
	}
	l.log.Error("message dead-lettered", "message_id", m.ID, "attempts", attempts, "reason", reason)
	l.cfg.Metrics.DeadLettered(kind)
	l.mu.Lock()
	delete(l.attempts, m.ID)
	l.mu.Unlock()
	m.Ack()
}

// lagInterval is how often the loader measures its lag.
const lagInterval = time.Second

// reportLag sets the lag gauge every lagInterval until ctx ends, then to 0 (this loader holds
// nothing any more).
func (l *Loader) reportLag(ctx context.Context) {
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.cfg.Metrics.LoaderLag(0)
			return
		case now := <-t.C:
			var lag time.Duration
			if oldest := l.oldestHeld(); !oldest.IsZero() {
				lag = now.Sub(oldest)
			}
			l.cfg.Metrics.LoaderLag(lag)
		}
	}
}

// oldestHeld is the earliest publish time of the messages the loader holds unacked: pending in a
// partition or in a batch being written (zero: none, or the bus gives no publish times).
func (l *Loader) oldestHeld() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var oldest time.Time
	for _, p := range l.parts {
		for _, ds := range [2][]*delivery{p.pending, p.flushing} {
			for _, d := range ds {
				if t := d.m.PublishTime; !d.settled && !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
					oldest = t
				}
			}
		}
	}
	return oldest
}

// heartbeat lets /api/ingestion/health/ see that a loader is alive.
func (l *Loader) heartbeat(ctx context.Context) {
	beat := func() {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := l.pool.Exec(c, `INSERT INTO worker_heartbeats (worker_id, role, last_seen_at) VALUES ($1, 'loader', now())
			ON CONFLICT (worker_id) DO UPDATE SET last_seen_at = now()`, l.id); err != nil && ctx.Err() == nil {
			l.log.Warn("heartbeat", "error", err)
		}
	}
	beat()
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = l.pool.Exec(c, `DELETE FROM worker_heartbeats WHERE worker_id = $1`, l.id)
			cancel()
			return
		case <-t.C:
			beat()
		}
	}
}

// HeartbeatInterval is how often a loader reports; health calls a loader dead after 3 missed beats.
const HeartbeatInterval = 5 * time.Second

// maxBatchLinks bounds the span links of one batch (a batch holds about 80 messages at the
// default shape; OpenTelemetry's default span limit is 128 links).
const maxBatchLinks = 128

var loadTracer = otel.Tracer("github.com/cohort-dev/cohort/internal/ingest/load")

// batchSpan starts the span of one warehouse write. A batch stores the events of many messages,
// each published in its own trace, so the span is linked to (up to maxBatchLinks of) the
// messages' delivery spans rather than a child of one: from an API request's trace, the link
// leads to the write that stored its events, and the write's Postgres spans are its children.
// Without tracing (the default) the tracer is a no-op; collecting the links costs a loop over
// the batch's messages, nothing beside the write itself.
func batchSpan(ctx context.Context, ds []*delivery, events int) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, min(len(ds), maxBatchLinks))
	for _, d := range ds {
		if len(links) == maxBatchLinks {
			break
		}
		if sc := trace.SpanContextFromContext(d.m.Context()); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return loadTracer.Start(ctx, "load warehouse batch", trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("cohort.events", events), attribute.Int("cohort.messages", len(ds))))
}
