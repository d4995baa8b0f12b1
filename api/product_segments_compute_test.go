package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// lockedBuffer is a log sink the server writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// scriptedComputeStarter starts product segment computes as a test scripts it: before runs when
// the start begins (e.g. the client leaves), err fails the start, and like a real Temporal
// client a start on a cancelled context fails.
type scriptedComputeStarter struct {
	mu      sync.Mutex
	before  func()
	err     error
	started int
}

func (s *scriptedComputeStarter) StartCompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	if s.before != nil {
		s.before()
	}
	if s.err != nil {
		return "", s.err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("start product segment compute: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	return fmt.Sprintf("product-segment-compute:%d:%d", tenantID, segmentID), nil
}

func (s *scriptedComputeStarter) Started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

type computeEnv struct {
	f   *fixture
	srv *Server
	ts  *httptest.Server
	svc *prodseg.Service
	log *lockedBuffer
}

// newComputeEnv is the real API over a fresh database whose product segment service starts
// computes with st; tenant A has a schema.
func newComputeEnv(t *testing.T, st prodseg.ComputeStarter) *computeEnv {
	t.Helper()
	f := newFixture(t)
	cat := catalog.NewService(f.db.Pool, time.Now)
	svc := prodseg.NewService(f.db.Pool, cat, st, time.Now)
	logs := &lockedBuffer{}
	srv := f.newServer(t, func(d *Deps) {
		d.Catalog = &CatalogDeps{Service: cat}
		d.ProductSegments = &ProductSegmentsDeps{Service: svc}
		d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ts := serve(t, srv)
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/pim/schema/", xAPIKey(f.A), `{"fields":[{"name":"color","type":"string"}]}`), http.StatusOK, nil)
	return &computeEnv{f: f, srv: srv, ts: ts, svc: svc, log: logs}
}

func (e *computeEnv) newSegment(t *testing.T, name string) *prodseg.Segment {
	t.Helper()
	var seg prodseg.Segment
	ok(t, jsonCall(t, e.ts, http.MethodPost, "/api/product-segments/", bearer(e.f.A),
		`{"name":"`+name+`","definition":{"conditions":[{"field":"color","operator":"eq","value":"red"}]}}`), http.StatusCreated, &seg)
	return &seg
}

func (e *computeEnv) segment(t *testing.T, id int64) *prodseg.Segment {
	t.Helper()
	seg, err := e.svc.Get(context.Background(), e.f.A.T.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

// TestProductSegmentComputeStartFailureUndoes: a start that fails leaves the segment in error
// with the reason, not queued, and answers 503.
func TestProductSegmentComputeStartFailureUndoes(t *testing.T) {
	st := &scriptedComputeStarter{err: fmt.Errorf("start product segment compute: %w: connection refused", errs.ErrUnavailable)}
	e := newComputeEnv(t, st)
	seg := e.newSegment(t, "Reds")
	wantError(t, send(t, e.ts, http.MethodPost, fmt.Sprintf("/api/product-segments/%d/compute/", seg.ID), bearer(e.f.A), nil),
		http.StatusServiceUnavailable, "unavailable")
	if got := e.segment(t, seg.ID); got.Status != prodseg.StatusError || got.LastError == nil ||
		*got.LastError != "could not start the compute: the workflow service is unavailable" {
		t.Errorf("after a failed start: status %s, last_error %v", got.Status, got.LastError)
	}
}

// TestProductSegmentComputeClientLeaves: the client disconnects while the compute is being
// started. Whatever the start does, the segment never stays queued without a started compute.
func TestProductSegmentComputeClientLeaves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		startErr error
	}{
		{"the start fails after the client left", fmt.Errorf("start product segment compute: %w: connection refused", errs.ErrUnavailable)},
		{"the start proceeds after the client left", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &scriptedComputeStarter{before: cancel, err: tc.startErr}
			e := newComputeEnv(t, st)
			seg := e.newSegment(t, "Reds")
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("/api/product-segments/%d/compute/", seg.ID), nil)
			req.Header = bearer(e.f.A)
			rec := httptest.NewRecorder()
			e.srv.Handler().ServeHTTP(rec, req)

			got := e.segment(t, seg.ID)
			switch {
			case st.Started() == 1 && got.Status == prodseg.StatusQueued:
				if rec.Code != http.StatusOK {
					t.Errorf("compute started but answered %d %s", rec.Code, rec.Body)
				}
			case st.Started() == 0 && got.Status == prodseg.StatusError:
			default:
				t.Errorf("half state: %d computes started, segment %s (last_error %v); answered %d %s",
					st.Started(), got.Status, got.LastError, rec.Code, rec.Body)
			}
			if tc.startErr != nil && (got.Status != prodseg.StatusError || got.LastError == nil) {
				t.Errorf("a failed start left the segment %s, last_error %v", got.Status, got.LastError)
			}
		})
	}
}

// TestProductSegmentComputeUndoFailureIsReported: when recording a failed start fails too, that
// second failure is not dropped: the server log has it.
func TestProductSegmentComputeUndoFailureIsReported(t *testing.T) {
	st := &scriptedComputeStarter{err: fmt.Errorf("start product segment compute: %w: connection refused", errs.ErrUnavailable)}
	e := newComputeEnv(t, st)
	seg := e.newSegment(t, "Reds")
	ctx := context.Background()
	for _, q := range []string{
		`CREATE FUNCTION refuse_error_status() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'injected: the error status cannot be written'; END $$`,
		`CREATE TRIGGER refuse_error_status BEFORE UPDATE ON product_segments FOR EACH ROW
			WHEN (NEW.status = 'error') EXECUTE FUNCTION refuse_error_status()`,
	} {
		if _, err := e.f.db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, send(t, e.ts, http.MethodPost, fmt.Sprintf("/api/product-segments/%d/compute/", seg.ID), bearer(e.f.A), nil),
		http.StatusServiceUnavailable, "unavailable")
	if log := e.log.String(); !strings.Contains(log, "connection refused") || !strings.Contains(log, "the error status cannot be written") {
		t.Errorf("server log %q, want the start's failure and the failure to record it", log)
	}
}
