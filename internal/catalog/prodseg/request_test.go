package prodseg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// fakeStarter starts computes as a test scripts it; like a real Temporal client, a start on a
// cancelled context fails.
type fakeStarter struct {
	mu      sync.Mutex
	before  func()
	err     error
	started []int64
}

func (s *fakeStarter) StartCompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	if s.before != nil {
		s.before()
	}
	if s.err != nil {
		return "", s.err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, segmentID)
	return fmt.Sprintf("product-segment-compute:%d:%d", tenantID, segmentID), nil
}

func (s *fakeStarter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.started)
}

var errTemporalDown = fmt.Errorf("start product segment compute: %w: connection refused", errs.ErrUnavailable)

func TestRequestCompute(t *testing.T) {
	base := newFixture(t)
	a := base.tenant("acme")
	base.putSchema(a, catalog.Field{Name: "color", Type: "string"})
	redDef := `{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`

	cases := []struct {
		name string
		// before runs as the start begins; cancel is the caller's context's.
		before     func(cancel context.CancelFunc)
		err        error
		wantErr    error
		wantStatus string
		wantStarts int
	}{
		{name: "started", wantStatus: prodseg.StatusQueued, wantStarts: 1},
		{name: "the start fails: the record is undone", err: errTemporalDown, wantErr: errs.ErrUnavailable, wantStatus: prodseg.StatusError},
		{name: "the caller leaves during the start: the start goes on",
			before: func(cancel context.CancelFunc) { cancel() }, wantStatus: prodseg.StatusQueued, wantStarts: 1},
		{name: "the caller leaves and the start fails: the record is undone all the same",
			before: func(cancel context.CancelFunc) { cancel() }, err: errTemporalDown, wantErr: errs.ErrUnavailable, wantStatus: prodseg.StatusError},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := &fakeStarter{err: tc.err}
			if tc.before != nil {
				st.before = func() { tc.before(cancel) }
			}
			svc := prodseg.NewService(base.db.Pool, base.cat, st, base.clock.Now)
			seg := base.with(t).create(a, fmt.Sprintf("Reds %d", i), redDef)
			wf, err := svc.RequestCompute(ctx, a, seg.ID)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("RequestCompute: %v, want %v", err, tc.wantErr)
				}
			} else if err != nil || wf != fmt.Sprintf("product-segment-compute:%d:%d", a, seg.ID) {
				t.Fatalf("RequestCompute: %q, %v", wf, err)
			}
			got, err := base.svc.Get(context.Background(), a, seg.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.wantStatus || st.count() != tc.wantStarts {
				t.Errorf("segment %s with %d computes started, want %s with %d", got.Status, st.count(), tc.wantStatus, tc.wantStarts)
			}
			if tc.wantStatus == prodseg.StatusError && (got.LastError == nil || *got.LastError != "could not start the compute: the workflow service is unavailable") {
				t.Errorf("last_error %v, want why the compute did not start", got.LastError)
			}
		})
	}

	t.Run("a failed undo is returned with the start's error", func(t *testing.T) {
		seg := base.with(t).create(a, "Undo fails", redDef)
		for _, q := range []string{
			`CREATE FUNCTION refuse_error_status() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'injected: the error status cannot be written'; END $$`,
			`CREATE TRIGGER refuse_error_status BEFORE UPDATE ON product_segments FOR EACH ROW
				WHEN (NEW.status = 'error') EXECUTE FUNCTION refuse_error_status()`,
		} {
			if _, err := base.db.Pool.Exec(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			_, _ = base.db.Pool.Exec(context.Background(), `DROP TRIGGER refuse_error_status ON product_segments`)
		})
		svc := prodseg.NewService(base.db.Pool, base.cat, &fakeStarter{err: errTemporalDown}, base.clock.Now)
		_, err := svc.RequestCompute(context.Background(), a, seg.ID)
		if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "the error status cannot be written") {
			t.Errorf("RequestCompute: %v, want the start's error and the undo's", err)
		}
	})

	t.Run("no starter", func(t *testing.T) {
		seg := base.with(t).create(a, "No starter", redDef)
		if _, err := base.svc.RequestCompute(context.Background(), a, seg.ID); !errors.Is(err, errs.ErrUnavailable) {
			t.Errorf("RequestCompute without a starter: %v, want ErrUnavailable", err)
		}
	})

	t.Run("another tenant's segment", func(t *testing.T) {
		seg := base.with(t).create(a, "Mine", redDef)
		b := base.with(t).tenant("intruder")
		st := &fakeStarter{}
		svc := prodseg.NewService(base.db.Pool, base.cat, st, base.clock.Now)
		if _, err := svc.RequestCompute(context.Background(), b, seg.ID); !errors.Is(err, errs.ErrNotFound) || st.count() != 0 {
			t.Errorf("RequestCompute of another tenant's segment: %v (%d started), want not found", err, st.count())
		}
	})
}
