package connector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
)

// fakeSyncStarter starts manual syncs as a test scripts it: during runs as the start begins
// (with the run's id), err fails the start, and like a real Temporal client a start on a
// cancelled context fails.
type fakeSyncStarter struct {
	mu      sync.Mutex
	during  func(runID int64)
	err     error
	started []int64 // run ids
}

func (s *fakeSyncStarter) SyncWorkflowID(tenantID, connectorID, syncRunID int64) string {
	return fmt.Sprintf("activation-sync:%d:%d:%d", tenantID, connectorID, syncRunID)
}

func (s *fakeSyncStarter) StartSync(ctx context.Context, tenantID, segmentID, connectorID, syncRunID int64) error {
	if s.during != nil {
		s.during(syncRunID)
	}
	if s.err != nil {
		return s.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, syncRunID)
	return nil
}

func (s *fakeSyncStarter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.started)
}

var errWorkflowsDown = fmt.Errorf("start sync: %w: connection refused", errs.ErrUnavailable)

// withStarter is a service over the fixture's database that starts manual syncs with st.
func (f *fixture) withStarter(st connector.SyncStarter) *connector.Service {
	return connector.NewService(f.db.Gorm, f.db.Pool, f.box, f.clock.Now, connector.Options{Starter: st})
}

// TestRequestSync: a manual sync request records a queued run and starts its workflow; a start
// that fails leaves the run failed (never queued without a workflow), also when the caller went
// away meanwhile, and an undo that fails too is returned with the start's error.
func TestRequestSync(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`

	cases := []struct {
		name       string
		leave      bool // the caller's context is cancelled as the start begins
		err        error
		wantStatus string
		wantStarts int
	}{
		{name: "started", wantStatus: connector.RunQueued, wantStarts: 1},
		{name: "the start fails: the run is failed", err: errWorkflowsDown, wantStatus: connector.RunFailed},
		{name: "the caller leaves during the start: the start goes on", leave: true, wantStatus: connector.RunQueued, wantStarts: 1},
		{name: "the caller leaves and the start fails: the run is failed all the same", leave: true, err: errWorkflowsDown, wantStatus: connector.RunFailed},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := f.create(tenant, seg, connector.KindKlaviyo, fmt.Sprintf("K%d", i), cfg)
			ctx, cancel := context.WithCancel(f.ctx)
			defer cancel()
			st := &fakeSyncStarter{err: tc.err}
			if tc.leave {
				st.during = func(int64) { cancel() }
			}
			run, err := f.withStarter(st).RequestSync(ctx, tenant, c.ID)
			if tc.err != nil {
				if !errors.Is(err, errs.ErrUnavailable) || run != nil {
					t.Fatalf("RequestSync: %v, %v; want the start's error", run, err)
				}
			} else if err != nil || run.Status != connector.RunQueued || run.Trigger != connector.TriggerManual ||
				run.WorkflowID != st.SyncWorkflowID(tenant, c.ID, run.ID) || run.SegmentID != seg {
				t.Fatalf("RequestSync: %+v, %v; want a queued manual run named by the starter", run, err)
			}
			rs, err := f.svc.Runs(f.ctx, tenant, c.ID, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Status != tc.wantStatus || st.count() != tc.wantStarts {
				t.Fatalf("runs %+v with %d workflows started, want one %s run and %d started", rs, st.count(), tc.wantStatus, tc.wantStarts)
			}
			if tc.wantStatus == connector.RunFailed && (rs[0].Error == nil || *rs[0].Error != "the sync could not be started: workflows unavailable") {
				t.Errorf("run error %v, want why the sync did not start", rs[0].Error)
			}
		})
	}

	t.Run("a failed undo is returned with the start's error", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "undo fails", cfg)
		f.exec(`CREATE FUNCTION refuse_failed_run() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'injected: the failed status cannot be written'; END $$`)
		f.exec(`CREATE TRIGGER refuse_failed_run BEFORE UPDATE ON activation_sync_runs FOR EACH ROW
			WHEN (NEW.status = 'failed') EXECUTE FUNCTION refuse_failed_run()`)
		defer f.exec(`DROP TRIGGER refuse_failed_run ON activation_sync_runs`)
		_, err := f.withStarter(&fakeSyncStarter{err: errWorkflowsDown}).RequestSync(f.ctx, tenant, c.ID)
		if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "the failed status cannot be written") {
			t.Errorf("RequestSync: %v, want the start's error and the undo's", err)
		}
	})

	t.Run("no starter", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "no starter", cfg)
		if _, err := f.svc.RequestSync(f.ctx, tenant, c.ID); !errors.Is(err, errs.ErrUnavailable) {
			t.Errorf("RequestSync without a starter: %v, want ErrUnavailable", err)
		}
		if n := f.count(`SELECT count(*) FROM activation_sync_runs WHERE connector_id = $1`, c.ID); n != 0 {
			t.Errorf("%d runs recorded without a starter", n)
		}
	})
}
