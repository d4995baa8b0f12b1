// Package postgres is the embedded warehouse: schema "warehouse" in the metadata Postgres, with the
// same columns as the BigQuery table. A batch is written with COPY (binary), which the unique key
// (tenant_id, event_id) makes fail as a whole when any event is stored already; only then is it
// written again row by row with INSERT ... ON CONFLICT DO NOTHING, which skips the stored ones.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	write := func(insert func(context.Context, pgx.Tx, []warehouse.Event) ([]warehouse.Event, error)) error {
		return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			fresh, err := insert(ctx, tx, events)
			n = len(fresh)
			return err
		})
	}
	err := write(CopyNew)
	if Retryable(err) {
		err = write(InsertNew)
	}
	return n, err
}

// CopyNew stores the events with COPY, each (tenant_id, event_id) once (the first of any
// duplicates inside the batch), and returns what it stored. It is the fast path of InsertNew for
// batches of events that are all new, which is nearly every batch: when one of them is stored
// already (a redelivery) the COPY fails with a unique violation (Retryable) and the transaction
// must be rolled back and the batch written again with InsertNew. Use it in the transaction that
// also stores whatever the events produce.
func CopyNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	return copyNew(ctx, tx, events, "events", "copy events",
		[]string{"tenant_id", "event_id", "user_id", "event_type", "occurred_at", "received_at", "payload", "anonymous_id"},
		func(e *warehouse.Event) []any {
			return []any{e.TenantID, e.EventID, e.UserID, e.EventType, e.OccurredAt, e.ReceivedAt, []byte(e.Payload), e.AnonymousID}
		})
}

// CopyNewIDs is CopyNew for the ledger warehouse.event_ids (the fast path of Dedupe).
func CopyNewIDs(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	return copyNew(ctx, tx, events, "event_ids", "record event ids", []string{"tenant_id", "event_id", "received_at"},
		func(e *warehouse.Event) []any { return []any{e.TenantID, e.EventID, e.ReceivedAt} })
}

// copyNew copies the distinct events into warehouse.<table>, in key order, as columns.
func copyNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event, table, what string, columns []string, row func(*warehouse.Event) []any) ([]warehouse.Event, error) {
	events = Distinct(events)
	if len(events) == 0 {
		return nil, nil
	}
	rows := sortedByID(events)
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"warehouse", table}, columns,
		pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) { return row(rows[i]), nil }))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return events, nil
}

// Retryable reports whether err is a conflict that writing the batch again on the row-by-row path
// resolves: a unique violation (an event, or its id, stored already, maybe by a concurrent
// writer), a deadlock or a serialization failure.
func Retryable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "23505" || pg.Code == "40P01" || pg.Code == "40001")
}

// Distinct returns the events with the first of any duplicate (tenant_id, event_id) kept, in
// their order; it returns events itself when they are distinct.
func Distinct(events []warehouse.Event) []warehouse.Event {
	type key struct {
		t int64
		e string
	}
	seen := make(map[key]struct{}, len(events))
	for i, e := range events {
		k := key{e.TenantID, e.EventID}
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			continue
		}
		// A duplicate: copy what is distinct so far and filter the rest.
		out := make([]warehouse.Event, i, len(events)-1)
		copy(out, events[:i])
		for _, e := range events[i+1:] {
			k := key{e.TenantID, e.EventID}
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				out = append(out, e)
			}
		}
		return out
	}
	return events
}

// sortedByID returns the events ordered by (tenant_id, event_id): one key order for every writer,
// so concurrent batches that overlap wait for each other instead of deadlocking.
func sortedByID(events []warehouse.Event) []*warehouse.Event {
	rows := make([]*warehouse.Event, len(events))
	for i := range events {
		rows[i] = &events[i]
	}
	slices.SortFunc(rows, func(a, b *warehouse.Event) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), strings.Compare(a.EventID, b.EventID))
	})
	return rows
}

// InsertNew inserts the events whose (tenant_id, event_id) is not stored yet (and the first of
// any duplicates inside the batch) and returns them. Call it in the transaction that also stores
// whatever the events produce, so a redelivered batch produces nothing twice.
func InsertNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	// Duplicates are dropped here, so which one is stored does not depend on Postgres's sort.
	events = Distinct(events)
	if len(events) == 0 {
		return nil, nil
	}
	n := len(events)
	tenants, ids, users, types := make([]int64, n), make([]string, n), make([]string, n), make([]string, n)
	occurred, received, payloads := make([]time.Time, n), make([]time.Time, n), make([]string, n)
	anons := make([]string, n)
	for i, e := range events {
		tenants[i], ids[i], users[i], types[i] = e.TenantID, e.EventID, e.UserID, e.EventType
		occurred[i], received[i], payloads[i], anons[i] = e.OccurredAt, e.ReceivedAt, string(e.Payload), e.AnonymousID
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO warehouse.events (tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload, anonymous_id)
		SELECT t, e, u, ty, o, r, p::jsonb, a
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::text[], $8::text[])
			AS x(t, e, u, ty, o, r, p, a)
		-- One key order for every writer, so concurrent overlapping batches cannot deadlock.
		ORDER BY t, e
		ON CONFLICT (tenant_id, event_id) DO NOTHING
		RETURNING tenant_id, event_id`, tenants, ids, users, types, occurred, received, payloads, anons)
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	return keep(rows, events)
}

// Dedupe records the events' ids in the ledger warehouse.event_ids (used when the warehouse is
// BigQuery) and returns the events whose ids were not there yet, each once. Call it in the
// transaction that also stores whatever the events produce.
func Dedupe(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	events = Distinct(events)
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
		if fresh[k] { // events are distinct (Distinct ran before the insert)
			out = append(out, e)
		}
	}
	return out, nil
}
