package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestClientLibraryAgainstDev runs the client library's end-to-end tests (sdk/js/test/e2e, Node's
// test runner) against a real cohort dev: the library itself with a secret and with a public key,
// a connection killed mid-flush, and the real @segment/analytics-node package pointed at the
// Segment-compatible endpoints. The Node tests read what the warehouse stored through a small
// inspector this test serves (GET /events?user_id=...), so they assert exactly-once storage
// themselves.
func TestClientLibraryAgainstDev(t *testing.T) {
	node := nodeTool(t)
	s := startDev(t)
	pool, err := pgxpool.New(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	inspector := httptest.NewServer(warehouseInspector(pool, s.tenantID))
	t.Cleanup(inspector.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "--test-concurrency=1", "test/e2e/")
	cmd.Dir = testenv.SDKDir(t)
	cmd.Env = append(os.Environ(),
		"COHORT_E2E_API_URL="+s.base,
		"COHORT_E2E_SECRET_KEY="+s.secret,
		"COHORT_E2E_PUBLIC_KEY="+s.public,
		"COHORT_E2E_TOKEN="+s.token,
		"COHORT_E2E_INSPECT_URL="+inspector.URL,
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node --test test/e2e/:\n%s", out.String())
	if err != nil {
		t.Fatalf("the client library's end-to-end tests failed: %v", err)
	}
}

// storedEvent is one warehouse row as the inspector reports it.
type storedEvent struct {
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	OccurredAt time.Time       `json:"occurred_at"`
	Payload    json.RawMessage `json:"payload"`
}

// warehouseInspector answers GET /events?user_id=u with the tenant's stored events of user u, in
// the order they occurred.
func warehouseInspector(pool *pgxpool.Pool, tenantID int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rows, err := pool.Query(r.Context(), `SELECT event_id, event_type, occurred_at, payload FROM warehouse.events
			WHERE tenant_id = $1 AND user_id = $2 ORDER BY occurred_at, event_id`, tenantID, r.URL.Query().Get("user_id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer rows.Close()
		out := []storedEvent{}
		for rows.Next() {
			var e storedEvent
			if err := rows.Scan(&e.EventID, &e.EventType, &e.OccurredAt, &e.Payload); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out = append(out, e)
		}
		if err := rows.Err(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// nodeTool returns the node binary, with the client library's npm packages installed from its
// lockfile (testenv.NodeTools runs npm ci when they are missing or older than the lockfile).
func nodeTool(t *testing.T) string {
	t.Helper()
	testenv.NodeTools(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (>= 18) is needed for the client library's tests: install Node.js")
	}
	return node
}
