// Package postgres is the embedded warehouse: schema "warehouse" in the metadata Postgres, with the
// same columns as the BigQuery table, bulk-inserted from arrays (INSERT ... SELECT FROM unnest).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if err := w.pool.QueryRow(ctx, `SELECT 1 FROM warehouse.events LIMIT 1`).Scan(&one); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("warehouse: %w", err)
	}
	return nil
}

// Write stores the events not stored before.
func (w *Writer) Write(ctx context.Context, events []warehouse.Event) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		fresh, err := InsertNew(ctx, tx, events)
		n = len(fresh)
		return err
	})
	return n, err
}

// InsertNew inserts the events whose (tenant_id, event_id) is not stored yet (and the first of
// any duplicates inside the batch) and returns them. Call it in the transaction that also stores
// whatever the events produce, so a redelivered batch produces nothing twice.
func InsertNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	n := len(events)
	tenants, ids, users, types := make([]int64, n), make([]string, n), make([]string, n), make([]string, n)
	occurred, received, payloads := make([]time.Time, n), make([]time.Time, n), make([]string, n)
	for i, e := range events {
		tenants[i], ids[i], users[i], types[i] = e.TenantID, e.EventID, e.UserID, e.EventType
		occurred[i], received[i], payloads[i] = e.OccurredAt, e.ReceivedAt, string(e.Payload)
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO warehouse.events (tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload)
		SELECT t, e, u, ty, o, r, p::jsonb
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[])
			AS x(t, e, u, ty, o, r, p)
		-- One key order for every writer, so concurrent overlapping batches cannot deadlock.
		ORDER BY t, e
		ON CONFLICT (tenant_id, event_id) DO NOTHING
		RETURNING tenant_id, event_id`, tenants, ids, users, types, occurred, received, payloads)
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	return keep(rows, events)
}

// Dedupe records the events' ids in the ledger warehouse.event_ids (used when the warehouse is
// BigQuery) and returns the events whose ids were not there yet, each once. Call it in the
// transaction that also stores whatever the events produce.
func Dedupe(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	tenants := make([]int64, len(events))
	ids := make([]string, len(events))
	received := make([]time.Time, len(events))
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
	return keep(rows, events)
}

// keep returns the events whose (tenant_id, event_id) the query returned, each once.
func keep(rows pgx.Rows, events []warehouse.Event) ([]warehouse.Event, error) {
	type key struct {
		t int64
		e string
	}
	fresh := make(map[key]bool, len(events))
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.t, &k.e); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read stored ids: %w", err)
		}
		fresh[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stored ids: %w", err)
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
