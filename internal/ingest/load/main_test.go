package load_test

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

func TestMain(m *testing.M) { testenv.Main(m) }

// recv is the receipt time used by the validation tests.
var recv = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openPool returns the pool of a fresh migrated database.
func openPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testenv.OpenDB(t).Pool
}

// newErrorLog starts an error log on pool; it is closed when the test ends.
func newErrorLog(t *testing.T, pool *pgxpool.Pool, now func() time.Time) *ingest.ErrorLog {
	t.Helper()
	l := ingest.NewErrorLog(pool, discard(), now)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func queryInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// whEvent builds a stored event.
func whEvent(tenant int64, id, user, typ string, occurred, received time.Time, payload string) warehouse.Event {
	if payload == "" {
		payload = "{}"
	}
	return warehouse.Event{TenantID: tenant, EventID: id, UserID: user, EventType: typ,
		OccurredAt: occurred.UTC(), ReceivedAt: received.UTC(), Payload: json.RawMessage(payload)}
}

// eventually polls cond until it reports true or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
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

func ids(events []warehouse.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventID
	}
	return out
}

func fmtIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
