package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// LoaderConfig tunes the loader.
type LoaderConfig struct {
	MaxBatchEvents int           // flush when this many events are pending (default 5000)
	MaxBatchDelay  time.Duration // or when the oldest pending message waited this long (default 200ms)
	MaxAttempts    int           // a message failing alone this often is dead-lettered (default 5)
	Flushers       int           // batches written concurrently (default 2)
	// Streams is how many StreamingPull streams receive (default 4). The Pub/Sub emulator (pstest)
	// hands each stream one message per 10 ms delivery pass, so one stream caps a loader at 100
	// messages (50k events of full batches) a second; with the service, more streams spread a
	// large backlog's delivery over more connections.
	Streams int
}

// Loader pulls event messages from the subscription and applies them through the Sink, acking a
// message only after its events are committed. A crash at any moment loses nothing (unacked
// messages are redelivered) and stores nothing twice (the Sink dedupes on event id).
type Loader struct {
	sub    *pubsub.Subscriber
	sink   *Sink
	pool   *pgxpool.Pool
	errlog *ErrorLog
	log    *slog.Logger
	cfg    LoaderConfig
	id     string

	mu       sync.Mutex
	pending  []*pubsub.Message
	decoded  [][]warehouse.Event
	nEvents  int
	oldest   time.Time
	kick     chan struct{}
	attempts map[string]int
}

// NewLoader builds a loader over sub.
func NewLoader(sub *pubsub.Subscriber, sink *Sink, pool *pgxpool.Pool, errlog *ErrorLog, logger *slog.Logger, cfg LoaderConfig) *Loader {
	if cfg.MaxBatchEvents <= 0 {
		cfg.MaxBatchEvents = 5000
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
	host, _ := os.Hostname()
	sub.ReceiveSettings.NumGoroutines = cfg.Streams
	sub.ReceiveSettings.MaxOutstandingMessages = 4 * cfg.MaxBatchEvents
	sub.ReceiveSettings.MaxOutstandingBytes = 256 << 20
	return &Loader{
		sub: sub, sink: sink, pool: pool, errlog: errlog, log: logger, cfg: cfg,
		id:       "loader-" + host + "-" + strconv.Itoa(os.Getpid()),
		kick:     make(chan struct{}, 1),
		attempts: map[string]int{},
	}
}

func (l *Loader) Name() string { return "event loader" }

// Run receives until ctx ends; pending messages at shutdown are flushed or left unacked.
func (l *Loader) Run(ctx context.Context) error {
	flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFlush()
	var wg sync.WaitGroup
	wg.Go(func() { l.flushLoop(ctx, flushCtx) })
	wg.Go(func() { l.heartbeat(ctx) })
	err := l.sub.Receive(ctx, func(_ context.Context, m *pubsub.Message) { l.add(m) })
	wg.Wait()
	l.flush(flushCtx) // what Receive handed us before it returned
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("receive: %w", err)
	}
	return nil
}

func (l *Loader) add(m *pubsub.Message) {
	var msg Message
	if err := decodeMessage(m.Data, &msg); err != nil || msg.V != MessageVersion {
		reason := "undecodable message"
		if err != nil {
			reason += ": " + err.Error()
		} else {
			reason += ": unknown version " + strconv.Itoa(msg.V)
		}
		l.deadLetter(context.Background(), m, msg.TenantID, reason, 1)
		return
	}
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.oldest = time.Now()
	}
	l.pending = append(l.pending, m)
	l.decoded = append(l.decoded, msg.Events)
	l.nEvents += len(msg.Events)
	full := l.nEvents >= l.cfg.MaxBatchEvents
	l.mu.Unlock()
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// flushLoop writes batches as they fill up or age, up to Flushers at a time, so Postgres work
// of one batch overlaps with decoding and writing the next.
func (l *Loader) flushLoop(ctx, flushCtx context.Context) {
	t := time.NewTicker(l.cfg.MaxBatchDelay / 4)
	defer t.Stop()
	slots := make(chan struct{}, l.cfg.Flushers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-t.C:
			l.mu.Lock()
			due := len(l.pending) > 0 && time.Since(l.oldest) >= l.cfg.MaxBatchDelay
			l.mu.Unlock()
			if !due {
				continue
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			l.flush(flushCtx)
		})
	}
}

// take hands over the pending messages, their events and how many events they hold.
func (l *Loader) take() ([]*pubsub.Message, [][]warehouse.Event, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs, evs, n := l.pending, l.decoded, l.nEvents
	l.pending, l.decoded, l.nEvents = nil, nil, 0
	return msgs, evs, n
}

func (l *Loader) flush(ctx context.Context) {
	msgs, evs, n := l.take()
	if len(msgs) == 0 {
		return
	}
	all := make([]warehouse.Event, 0, n)
	for _, e := range evs {
		all = append(all, e...)
	}
	_, err := l.sink.Apply(ctx, all)
	if err == nil {
		l.ack(msgs...)
		return
	}
	if len(msgs) == 1 {
		l.failed(ctx, msgs[0], evs[0], err)
		return
	}
	l.log.Warn("batch failed; retrying its messages one by one", "messages", len(msgs), "error", err)
	// Isolate the message that fails so one poison message cannot hold the others back.
	for i, m := range msgs {
		if _, err := l.sink.Apply(ctx, evs[i]); err != nil {
			l.failed(ctx, m, evs[i], err)
			continue
		}
		l.ack(m)
	}
}

func (l *Loader) ack(msgs ...*pubsub.Message) {
	l.mu.Lock()
	if len(l.attempts) > 0 {
		for _, m := range msgs {
			delete(l.attempts, m.ID)
		}
	}
	l.mu.Unlock()
	for _, m := range msgs {
		m.Ack()
	}
}

func (l *Loader) failed(ctx context.Context, m *pubsub.Message, events []warehouse.Event, err error) {
	if ctx.Err() != nil {
		m.Nack()
		return
	}
	l.mu.Lock()
	l.attempts[m.ID]++
	n := l.attempts[m.ID]
	l.mu.Unlock()
	if n < l.cfg.MaxAttempts {
		l.log.Warn("message failed; it will be redelivered", "message_id", m.ID, "attempt", n, "error", err)
		m.Nack()
		return
	}
	var tenant int64
	if len(events) > 0 {
		tenant = events[0].TenantID
	}
	l.deadLetter(ctx, m, tenant, err.Error(), n)
}

func (l *Loader) deadLetter(ctx context.Context, m *pubsub.Message, tenantID int64, reason string, attempts int) {
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
		l.errlog.Record(tenantID, ErrorDeadLetter, "message "+m.ID+" dead-lettered after "+strconv.Itoa(attempts)+" attempt(s): "+reason)
	}
	l.log.Error("message dead-lettered", "message_id", m.ID, "attempts", attempts, "reason", reason)
	l.mu.Lock()
	delete(l.attempts, m.ID)
	l.mu.Unlock()
	m.Ack()
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
