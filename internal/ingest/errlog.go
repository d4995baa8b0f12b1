package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Error types recorded in the ingestion error log.
const (
	ErrorValidation   = "validation"
	ErrorWebhookHMAC  = "webhook_signature"
	ErrorWebhook      = "webhook_payload"
	ErrorDeadLetter   = "dead_letter"
	ErrorSessionUser  = "session_user_mismatch"
	errorLogRetention = 1000 // newest records kept per tenant
)

// ErrorRecord is one entry of GET /api/ingestion/errors/.
type ErrorRecord struct {
	TS        time.Time `json:"ts"`
	ErrorType string    `json:"error_type"`
	Detail    string    `json:"detail"`
}

// ErrorLog records ingestion failures per tenant. Records are buffered and written in batches off
// the request path; when the buffer is full (a flood of bad traffic) records are dropped and
// counted rather than slowing ingestion down.
type ErrorLog struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	buf     []pendingError
	dropped int64
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  bool
}

type pendingError struct {
	tenantID int64
	rec      ErrorRecord
}

const errorLogBuffer = 10_000

// NewErrorLog starts the background writer; Close flushes and stops it.
func NewErrorLog(pool *pgxpool.Pool, logger *slog.Logger, now func() time.Time) *ErrorLog {
	l := &ErrorLog{pool: pool, log: logger, now: now, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// Record queues one error record. Details can carry client bytes (headers, ids): they are made
// valid UTF-8 and cut at 1,000 bytes on a character boundary, so the batch insert cannot fail.
func (l *ErrorLog) Record(tenantID int64, errorType, detail string) {
	detail = strings.ToValidUTF8(strings.ReplaceAll(detail, "\x00", ""), "\uFFFD")
	if len(detail) > 1000 {
		cut := 1000
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.buf) >= errorLogBuffer {
		l.dropped++
		return
	}
	l.buf = append(l.buf, pendingError{tenantID, ErrorRecord{TS: l.now().UTC(), ErrorType: errorType, Detail: detail}})
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Flush writes everything queued so far (tests and shutdown).
func (l *ErrorLog) Flush(ctx context.Context) error {
	l.mu.Lock()
	batch := l.buf
	l.buf = nil
	l.mu.Unlock()
	return l.write(ctx, batch)
}

func (l *ErrorLog) run() {
	defer close(l.done)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			time.Sleep(50 * time.Millisecond) // gather a few more
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := l.Flush(ctx); err != nil {
			l.log.Warn("write ingestion error log", "error", err)
		}
		cancel()
	}
}

// Close flushes and stops the writer.
func (l *ErrorLog) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	return l.Flush(ctx)
}

func (l *ErrorLog) write(ctx context.Context, batch []pendingError) error {
	if len(batch) == 0 {
		return nil
	}
	rows := make([][]any, len(batch))
	tenants := map[int64]bool{}
	for i, p := range batch {
		rows[i] = []any{p.tenantID, p.rec.TS, p.rec.ErrorType, p.rec.Detail}
		tenants[p.tenantID] = true
	}
	if _, err := l.pool.CopyFrom(ctx, pgx.Identifier{"ingestion_errors"}, []string{"tenant_id", "ts", "error_type", "detail"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("insert error records: %w", err)
	}
	for t := range tenants {
		if _, err := l.pool.Exec(ctx, `DELETE FROM ingestion_errors WHERE tenant_id = $1 AND id < (
			SELECT id FROM ingestion_errors WHERE tenant_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, t, errorLogRetention-1); err != nil {
			return fmt.Errorf("prune error records: %w", err)
		}
	}
	return nil
}

// Dropped reports how many records were dropped because the buffer was full.
func (l *ErrorLog) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// List returns the tenant's newest records, newest first.
func (l *ErrorLog) List(ctx context.Context, tenantID int64, limit int) ([]ErrorRecord, error) {
	rows, err := l.pool.Query(ctx, `SELECT ts, error_type, detail FROM ingestion_errors
		WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2`, tenantID, limit)
	if err != nil {
		return nil, fmt.Errorf("list error records: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ErrorRecord, error) {
		var e ErrorRecord
		err := r.Scan(&e.TS, &e.ErrorType, &e.Detail)
		e.TS = e.TS.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list error records: %w", err)
	}
	if out == nil {
		out = []ErrorRecord{}
	}
	return out, nil
}
