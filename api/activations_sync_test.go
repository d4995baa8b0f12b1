package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
)

// scriptedSyncStarter starts manual syncs as a test scripts it: before runs when the start
// begins (e.g. the client leaves), err fails the start, and like a real Temporal client a start
// on a cancelled context fails.
type scriptedSyncStarter struct {
	mu      sync.Mutex
	before  func()
	err     error
	started int
}

func (s *scriptedSyncStarter) SyncWorkflowID(tenantID, connectorID, syncRunID int64) string {
	return fmt.Sprintf("activation-sync:%d:%d:manual-%d", tenantID, connectorID, syncRunID)
}

func (s *scriptedSyncStarter) StartSync(ctx context.Context, tenantID, segmentID, connectorID, syncRunID int64) error {
	if s.before != nil {
		s.before()
	}
	if s.err != nil {
		return s.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start sync of connector %d: %w", connectorID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	return nil
}

func (s *scriptedSyncStarter) Started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

type syncEnv struct {
	f         *fixture
	srv       *Server
	ts        *httptest.Server
	svc       *connector.Service
	log       *lockedBuffer
	connector int64
}

// newSyncEnv is the real API over a fresh database whose connector service starts manual syncs
// with st; tenant A has a segment and a Talon.One connector of it.
func newSyncEnv(t *testing.T, st connector.SyncStarter) *syncEnv {
	t.Helper()
	f := newFixture(t)
	key := make([]byte, secretbox.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.New(map[string][]byte{"k1": key}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	svc := connector.NewService(f.db.Gorm, f.db.Pool, box, time.Now, connector.Options{Starter: st})
	logs := &lockedBuffer{}
	srv := f.newServer(t, func(d *Deps) {
		d.Activations = &ActivationsDeps{Service: svc}
		d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ts := serve(t, srv)
	var seg int64
	if err := f.db.Pool.QueryRow(context.Background(), `INSERT INTO segments (tenant_id, name, segment_type, status)
		VALUES ($1, 'vip', 'rule', 'ready') RETURNING id`, f.A.T.ID).Scan(&seg); err != nil {
		t.Fatal(err)
	}
	var c connector.Connector
	ok(t, jsonCall(t, ts, http.MethodPost, "/api/activations/", bearer(f.A), fmt.Sprintf(
		`{"segment_id":%d,"kind":"talon_one","name":"T","config":{"base_url":"https://x.talon.one","api_key":"t1-key-0123","audience_id":1}}`, seg)),
		http.StatusCreated, &c)
	return &syncEnv{f: f, srv: srv, ts: ts, svc: svc, log: logs, connector: c.ID}
}

func (e *syncEnv) runs(t *testing.T) []connector.SyncRun {
	t.Helper()
	rs, err := e.svc.Runs(context.Background(), e.f.A.T.ID, e.connector, 10)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestActivationSyncRequest(t *testing.T) {
	t.Run("started", func(t *testing.T) {
		st := &scriptedSyncStarter{}
		e := newSyncEnv(t, st)
		var q SyncQueued
		ok(t, send(t, e.ts, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", e.connector), bearer(e.f.A), nil), http.StatusAccepted, &q)
		rs := e.runs(t)
		if q.Status != "queued" || len(rs) != 1 || q.RunID != rs[0].ID || q.WorkflowID != st.SyncWorkflowID(e.f.A.T.ID, e.connector, q.RunID) ||
			rs[0].WorkflowID != q.WorkflowID || st.Started() != 1 {
			t.Errorf("answer %+v, runs %+v, %d started", q, rs, st.Started())
		}
		// Another tenant's connector: 404, nothing recorded or started.
		wantError(t, send(t, e.ts, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", e.connector), bearer(e.f.B), nil), http.StatusNotFound, "not_found")
		if len(e.runs(t)) != 1 || st.Started() != 1 {
			t.Errorf("another tenant's request changed something: runs %+v, %d started", e.runs(t), st.Started())
		}
	})

	t.Run("the start fails: 503 and the run is failed", func(t *testing.T) {
		e := newSyncEnv(t, &scriptedSyncStarter{err: fmt.Errorf("start sync: %w: connection refused", errs.ErrUnavailable)})
		wantError(t, send(t, e.ts, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", e.connector), bearer(e.f.A), nil),
			http.StatusServiceUnavailable, "unavailable")
		if rs := e.runs(t); len(rs) != 1 || rs[0].Status != connector.RunFailed || rs[0].Error == nil {
			t.Errorf("runs %+v, want one failed run saying why", rs)
		}
	})

	for _, tc := range []struct {
		name     string
		startErr error
	}{
		{"the start fails after the client left", fmt.Errorf("start sync: %w: connection refused", errs.ErrUnavailable)},
		{"the start proceeds after the client left", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &scriptedSyncStarter{before: cancel, err: tc.startErr}
			e := newSyncEnv(t, st)
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", e.connector), nil)
			req.Header = bearer(e.f.A)
			rec := httptest.NewRecorder()
			e.srv.Handler().ServeHTTP(rec, req)
			rs := e.runs(t)
			if len(rs) != 1 {
				t.Fatalf("runs %+v, want one", rs)
			}
			switch {
			case st.Started() == 1 && rs[0].Status == connector.RunQueued:
				var q SyncQueued
				if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &q) != nil || q.RunID != rs[0].ID {
					t.Errorf("sync started but answered %d %s", rec.Code, rec.Body)
				}
			case st.Started() == 0 && rs[0].Status == connector.RunFailed:
			default:
				t.Errorf("half state: %d workflows started, run %s; answered %d %s", st.Started(), rs[0].Status, rec.Code, rec.Body)
			}
			if tc.startErr == nil && st.Started() != 1 {
				t.Errorf("the client's leaving stopped a start that would have succeeded (run %s)", rs[0].Status)
			}
		})
	}

	t.Run("a failed undo is logged", func(t *testing.T) {
		e := newSyncEnv(t, &scriptedSyncStarter{err: fmt.Errorf("start sync: %w: connection refused", errs.ErrUnavailable)})
		for _, q := range []string{
			`CREATE FUNCTION refuse_failed_run() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'injected: the failed status cannot be written'; END $$`,
			`CREATE TRIGGER refuse_failed_run BEFORE UPDATE ON activation_sync_runs FOR EACH ROW
				WHEN (NEW.status = 'failed') EXECUTE FUNCTION refuse_failed_run()`,
		} {
			if _, err := e.f.db.Pool.Exec(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		wantError(t, send(t, e.ts, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", e.connector), bearer(e.f.A), nil),
			http.StatusServiceUnavailable, "unavailable")
		if log := e.log.String(); !strings.Contains(log, "connection refused") || !strings.Contains(log, "the failed status cannot be written") {
			t.Errorf("server log %q, want the start's failure and the failure to record it", log)
		}
	})
}
