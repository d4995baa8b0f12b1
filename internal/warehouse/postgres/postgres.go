// Package postgres is the embedded warehouse: schema "warehouse" in the metadata Postgres, with the
// same columns as the BigQuery table, bulk-loaded with COPY.
package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Writer implements warehouse.Writer.
type Writer struct {
	pool *pgxpool.Pool
}

func New(pool *pgxpool.Pool) *Writer { return &Writer{pool: pool} }

func (w *Writer) Name() string { return "postgres" }

func (w *Writer) Check(ctx context.Context) error {
	var one int
	if err := w.pool.QueryRow(ctx, `SELECT 1 FROM warehouse.event_ids LIMIT 1`).Scan(&one); err != nil && err != pgx.ErrNoRows {
		return fmt.Errorf("warehouse: %w", err)
	}
	return nil
}

// Write stores the events not stored before, in one transaction.
func (w *Writer) Write(ctx context.Context, events []warehouse.Event) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		fresh, err := Dedupe(ctx, tx, events)
		if err != nil {
			return err
		}
		n = len(fresh)
		return Insert(ctx, tx, fresh)
	})
	return n, err
}

// Dedupe records the events' ids in warehouse.event_ids and returns the events whose ids were not
// there yet (and the first of any duplicates inside the batch). Call it in the transaction that
// also stores whatever the events produce, so a redelivered batch produces nothing twice.
func Dedupe(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	tenants := make([]int64, len(events))
	ids := make([]string, len(events))
	received := make([]any, len(events))
	for i, e := range events {
		tenants[i], ids[i], received[i] = e.TenantID, e.EventID, e.ReceivedAt
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO warehouse.event_ids (tenant_id, event_id, received_at)
		SELECT t, e, r FROM unnest($1::bigint[], $2::text[], $3::timestamptz[]) AS u(t, e, r)
		ORDER BY t, e
		ON CONFLICT DO NOTHING
		RETURNING tenant_id, event_id`, tenants, ids, received)
	if err != nil {
		return nil, fmt.Errorf("record event ids: %w", err)
	}
	type key struct {
		t int64
		e string
	}
	fresh := make(map[key]bool, len(events))
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.t, &k.e); err != nil {
			rows.Close()
			return nil, fmt.Errorf("record event ids: %w", err)
		}
		fresh[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record event ids: %w", err)
	}
	out := make([]warehouse.Event, 0, len(fresh))
	for _, e := range events {
		k := key{e.TenantID, e.EventID}
		if fresh[k] {
			out = append(out, e)
			delete(fresh, k) // a duplicate inside the batch is stored once
		}
	}
	return out, nil
}

var columns = []string{"tenant_id", "event_id", "user_id", "event_type", "occurred_at", "received_at", "payload"}

// Insert copies events into warehouse.events (no dedupe: see Dedupe).
func Insert(ctx context.Context, tx pgx.Tx, events []warehouse.Event) error {
	if len(events) == 0 {
		return nil
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"warehouse", "events"}, columns, pgx.CopyFromSlice(len(events), func(i int) ([]any, error) {
		e := events[i]
		return []any{e.TenantID, e.EventID, e.UserID, e.EventType, e.OccurredAt, e.ReceivedAt, string(e.Payload)}, nil
	}))
	if err != nil {
		return fmt.Errorf("copy events: %w", err)
	}
	return nil
}
