// Package ingesttest holds the test helpers the ingest packages share (ingest and ingest/load):
// database handles, stored events and polling. Only tests import it.
package ingesttest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// OpenPool returns the pool of a fresh migrated database.
func OpenPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return testenv.OpenDB(t).Pool
}

// NewErrorLog starts an error log on pool; it is closed when the test ends.
func NewErrorLog(t testing.TB, pool *pgxpool.Pool, now func() time.Time) *ingest.ErrorLog {
	t.Helper()
	l := ingest.NewErrorLog(pool, slog.New(slog.DiscardHandler), now)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// QueryInt runs a query that returns one integer.
func QueryInt(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Event builds a stored event.
func Event(tenant int64, id, user, typ string, occurred, received time.Time, payload string) warehouse.Event {
	if payload == "" {
		payload = "{}"
	}
	return warehouse.Event{TenantID: tenant, EventID: id, UserID: user, EventType: typ,
		OccurredAt: occurred.UTC(), ReceivedAt: received.UTC(), Payload: json.RawMessage(payload)}
}

// Eventually polls cond until it reports true or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// IDs lists the events' ids.
func IDs(events []warehouse.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventID
	}
	return out
}

// FmtIDs makes n ids prefix-0 ... prefix-(n-1).
func FmtIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
