package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

type segKey struct{ tenant, segment int64 }

// fakeStarter stands in for Temporal at the service's starter boundary: it keeps the refresh
// schedules it was asked for (as Temporal would) and records the starts; a test sets fail or
// during to make a call fail or to act while it runs (a client going away, say).
type fakeStarter struct {
	mu        sync.Mutex
	schedules map[segKey]time.Duration
	computes  []string // "compute"/"recompute" of each successful start
	exports   []int64
	drafts    int
	// fail makes the named call ("compute", "recompute", "export", "draft", "refresh") fail.
	fail map[string]error
	// during runs inside the named call before it answers; when it returns an error, so does
	// the call (the start did not reach Temporal).
	during map[string]func(ctx context.Context) error
}

func newFakeStarter() *fakeStarter {
	return &fakeStarter{schedules: map[segKey]time.Duration{}, fail: map[string]error{}, during: map[string]func(context.Context) error{}}
}

func (s *fakeStarter) call(ctx context.Context, name string) error {
	s.mu.Lock()
	err, during := s.fail[name], s.during[name]
	s.mu.Unlock()
	if during != nil {
		if derr := during(ctx); derr != nil {
			return fmt.Errorf("%s: %w: %w", name, errs.ErrUnavailable, derr)
		}
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", name, errs.ErrUnavailable, ctx.Err())
	}
	return nil
}

func (s *fakeStarter) Compute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	return s.start(ctx, "compute", tenantID, segmentID)
}

func (s *fakeStarter) Recompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	return s.start(ctx, "recompute", tenantID, segmentID)
}

func (s *fakeStarter) start(ctx context.Context, name string, tenantID, segmentID int64) (string, error) {
	id := fmt.Sprintf("segment-compute:%d:%d", tenantID, segmentID)
	if err := s.call(ctx, name); err != nil {
		return id, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.computes = append(s.computes, name)
	return id, nil
}

func (s *fakeStarter) Export(ctx context.Context, _, _, exportID int64) error {
	if err := s.call(ctx, "export"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports = append(s.exports, exportID)
	return nil
}

func (s *fakeStarter) Draft(ctx context.Context, _, _ int64) (*segment.Segment, error) {
	if err := s.call(ctx, "draft"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drafts++
	return &segment.Segment{}, nil
}

func (s *fakeStarter) SetRefresh(ctx context.Context, tenantID, segmentID int64, every time.Duration) error {
	if err := s.call(ctx, "refresh"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if every <= 0 {
		delete(s.schedules, segKey{tenantID, segmentID})
	} else {
		s.schedules[segKey{tenantID, segmentID}] = every
	}
	return nil
}

func (s *fakeStarter) schedule(tenantID, segmentID int64) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.schedules[segKey{tenantID, segmentID}]
	return d, ok
}

func (s *fakeStarter) set(name string, err error, during func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[name], s.during[name] = err, during
}

var errTemporalDown = fmt.Errorf("start: %w: connection refused", errs.ErrUnavailable)

// failCommits makes every later transaction that changes a segment row fail at COMMIT (a
// deferred constraint trigger), after everything before the commit succeeded.
func (f *segFixture) failCommits() {
	f.t.Helper()
	f.exec(`CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused'; END $$`)
	f.exec(`CREATE CONSTRAINT TRIGGER refuse_commit AFTER UPDATE OR DELETE ON segments DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION refuse_commit()`)
}

func TestComputeStart(t *testing.T) {
	cases := []struct {
		name string
		// fail or during make the start fail (nil, nil: it succeeds)
		fail       error
		during     func(cancel context.CancelFunc) func(context.Context) error
		wantStatus string
	}{
		{name: "started", wantStatus: segment.StatusQueued},
		{name: "temporal unreachable", fail: errTemporalDown, wantStatus: segment.StatusError},
		{
			// The client disconnects while the start is in flight: the request's context ends
			// and the start fails with it. The undo must not use that context.
			name: "client disconnects mid-start",
			during: func(cancel context.CancelFunc) func(context.Context) error {
				return func(ctx context.Context) error {
					cancel()
					<-ctx.Done()
					return ctx.Err()
				}
			},
			wantStatus: segment.StatusError,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newSegFixture(t)
			tenant := f.tenant("acme")
			seg := f.segment(tenant, "rule", "pros", defPro)
			ctx, cancel := context.WithCancel(f.ctx)
			defer cancel()
			var during func(context.Context) error
			if tc.during != nil {
				during = tc.during(cancel)
			}
			f.starter.set("compute", tc.fail, during)
			got, wf, err := f.svc.Compute(ctx, tenant, seg.ID)
			stored := f.get(tenant, seg.ID)
			if stored.Status != tc.wantStatus {
				t.Fatalf("status after the start = %s, want %s", stored.Status, tc.wantStatus)
			}
			if tc.wantStatus == segment.StatusQueued {
				if err != nil || got.Status != segment.StatusQueued || wf != fmt.Sprintf("segment-compute:%d:%d", tenant, seg.ID) {
					t.Fatalf("Compute = %+v, %q, %v", got, wf, err)
				}
				return
			}
			if !errors.Is(err, errs.ErrUnavailable) {
				t.Fatalf("error = %v, want ErrUnavailable", err)
			}
			if stored.LastError == nil || *stored.LastError == "" {
				t.Fatal("last_error does not say why the compute did not start")
			}
		})
	}
}

// A start that fails after the workflow already took the request (the answer was lost) must not
// overwrite what the workflow recorded.
func TestComputeUndoLeavesARunningCompute(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "pros", defPro)
	f.starter.set("compute", errTemporalDown, func(context.Context) error {
		f.exec(`UPDATE segments SET status = 'computing' WHERE id = $1`, seg.ID)
		return nil
	})
	if _, _, err := f.svc.Compute(f.ctx, tenant, seg.ID); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Compute: %v", err)
	}
	if s := f.get(tenant, seg.ID); s.Status != segment.StatusComputing || s.LastError != nil {
		t.Fatalf("status = %s, last_error = %v; want computing, none", s.Status, s.LastError)
	}
}

func TestComputeWithoutStarter(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "pros", defPro)
	svc := segment.NewService(f.db.Gorm, f.db.Pool, f.clock.Now, nil)
	if _, _, err := svc.Compute(f.ctx, tenant, seg.ID); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Compute without a starter: %v", err)
	}
	if s := f.get(tenant, seg.ID); s.Status == segment.StatusQueued {
		t.Fatal("a compute that could not start left the segment queued")
	}
}

func TestPatchQueuesRecompute(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "pros", defPro)
	if _, err := f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Name: new("renamed")}); err != nil {
		t.Fatal(err)
	}
	if len(f.starter.computes) != 0 {
		t.Fatalf("a rename started %v", f.starter.computes)
	}
	newDef := `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"free"}]}`
	got, err := f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: json.RawMessage(newDef)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != segment.StatusQueued || len(f.starter.computes) != 1 || f.starter.computes[0] != "recompute" {
		t.Fatalf("status %s, starts %v; want queued, one recompute", got.Status, f.starter.computes)
	}
	f.starter.set("recompute", errTemporalDown, nil)
	newDef = `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"team"}]}`
	if _, err := f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: json.RawMessage(newDef)}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Patch with Temporal down: %v", err)
	}
	if s := f.get(tenant, seg.ID); s.Status != segment.StatusError || s.Version != 3 {
		t.Fatalf("status %s version %d; want error (the definition is saved, its compute did not start), 3", s.Status, s.Version)
	}
}

// A PATCH whose compute could not start (503) stored the definition and left the segment in
// error; sending the same PATCH again starts the compute, where it used to change nothing. Once
// a compute of that version began (a run recorded), the same PATCH is a no-op again.
func TestPatchResentAfterFailedStartStartsCompute(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "pros", defPro)
	newDef := json.RawMessage(`{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"team"}]}`)
	f.starter.set("recompute", errTemporalDown, nil)
	if _, err := f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: newDef}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Patch with Temporal down: %v", err)
	}
	if s := f.get(tenant, seg.ID); s.Status != segment.StatusError {
		t.Fatalf("status %s after the failed start, want error", s.Status)
	}
	before := len(f.starter.computes)

	f.starter.set("recompute", nil, nil)
	// The same PATCH again, the definition laid out differently (same canonical form).
	resent := json.RawMessage(`{"conditions":[{"value":"team","operator":"eq","trait":"plan","type":"trait"}],"logic":"AND"}`)
	got, err := f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: resent})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != segment.StatusQueued || len(f.starter.computes) != before+1 || f.starter.computes[before] != "recompute" {
		t.Fatalf("status %s, starts %v; want queued and one more recompute", got.Status, f.starter.computes)
	}
	if s := f.get(tenant, seg.ID); s.Version != got.Version || s.Status != segment.StatusQueued {
		t.Fatalf("stored status %s version %d", s.Status, s.Version)
	}

	// The compute begins and fails: the same PATCH no longer restarts it (POST compute does).
	run, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "segment-compute:x")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.FailRun(f.ctx, tenant, run.ID, "warehouse said no"); err != nil {
		t.Fatal(err)
	}
	got, err = f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: resent})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != segment.StatusError || len(f.starter.computes) != before+1 {
		t.Fatalf("status %s, starts %v; the same PATCH after a failed run should change nothing", got.Status, f.starter.computes)
	}
	// A PATCH without a definition (a rename) never starts one.
	f.exec(`DELETE FROM segment_runs`)
	if _, err := f.svc.Patch(f.ctx, tenant, seg.ID, segment.UpdateInput{Name: new("renamed")}); err != nil || len(f.starter.computes) != before+1 {
		t.Fatalf("rename: %v, starts %v", err, f.starter.computes)
	}
}

func TestStartExport(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "pros", defPro)
	e, err := f.svc.StartExport(f.ctx, tenant, seg.ID, segment.ExportInput{Format: "csv"})
	if err != nil || e.Status != "queued" || len(f.starter.exports) != 1 || f.starter.exports[0] != e.ID {
		t.Fatalf("StartExport = %+v, %v; exports started %v", e, err, f.starter.exports)
	}
	// A client that disconnects mid-start: the export is recorded as failed, not left queued.
	ctx, cancel := context.WithCancel(f.ctx)
	f.starter.set("export", nil, func(ctx context.Context) error { cancel(); return ctx.Err() })
	if _, err := f.svc.StartExport(ctx, tenant, seg.ID, segment.ExportInput{Format: "csv"}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("StartExport cancelled: %v", err)
	}
	var status, msg string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT status, coalesce(error, '') FROM segment_exports WHERE tenant_id = $1 ORDER BY id DESC LIMIT 1`, tenant).Scan(&status, &msg); err != nil {
		t.Fatal(err)
	}
	if status != "error" || msg == "" {
		t.Fatalf("export after a failed start: %s %q, want error with a reason", status, msg)
	}
	if _, err := f.svc.StartExport(f.ctx, f.tenant("other"), seg.ID, segment.ExportInput{}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("another tenant's segment: %v", err)
	}
}

func TestDraft(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	ai := f.segment(tenant, "ai", "drafted", "")
	if _, err := f.svc.Draft(f.ctx, tenant, ai.ID); err != nil || f.starter.drafts != 1 {
		t.Fatalf("Draft: %v (%d drafts)", err, f.starter.drafts)
	}
	if _, err := f.svc.Draft(f.ctx, f.tenant("other"), ai.ID); !errors.Is(err, errs.ErrNotFound) || f.starter.drafts != 1 {
		t.Fatalf("another tenant's segment: %v (%d drafts)", err, f.starter.drafts)
	}
}

func TestDraftable(t *testing.T) {
	cases := []struct {
		name     string
		seg      segment.Segment
		wantCode string
	}{
		{"ai with a description", segment.Segment{SegmentType: segment.KindAI, Description: "churn risks"}, ""},
		{"rule", segment.Segment{SegmentType: segment.KindRule, Description: "x"}, "not_ai_segment"},
		{"ai without a description", segment.Segment{SegmentType: segment.KindAI}, "no_description"},
		{"ai with only spaces", segment.Segment{SegmentType: segment.KindAI, Description: " \n\t "}, "no_description"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.seg.Draftable()
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("Draftable: %v", err)
				}
				return
			}
			var ce *errs.CodedError
			if !errors.Is(err, errs.ErrInvalid) || !errors.As(err, &ce) || ce.Code != tc.wantCode {
				t.Fatalf("Draftable = %v, want %s", err, tc.wantCode)
			}
		})
	}
}

func TestUpdateRefreshKeepsScheduleAndRecordTogether(t *testing.T) {
	hour := "1h"
	cases := []struct {
		name string
		// breaks makes the change fail: the schedule change, or the commit after it
		scheduleFails bool
		commitFails   bool
		in            string
		wantSecs      int // stored after the call
		wantEvery     time.Duration
		wantErr       error
	}{
		{name: "changed", in: "30m", wantSecs: 1800, wantEvery: 30 * time.Minute},
		{name: "turned off", in: "off", wantSecs: 0, wantEvery: 0},
		{name: "schedule change fails", scheduleFails: true, in: "30m", wantSecs: 3600, wantEvery: time.Hour, wantErr: errs.ErrUnavailable},
		{name: "commit fails after the schedule changed", commitFails: true, in: "30m", wantSecs: 3600, wantEvery: time.Hour},
		{name: "commit fails after the schedule was deleted", commitFails: true, in: "off", wantSecs: 3600, wantEvery: time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newSegFixture(t)
			tenant := f.tenant("acme")
			seg := f.segment(tenant, "rule", "pros", defPro)
			if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{RefreshEvery: &hour}); err != nil {
				t.Fatal(err)
			}
			if tc.scheduleFails {
				f.starter.set("refresh", errTemporalDown, nil)
			}
			if tc.commitFails {
				f.failCommits()
			}
			_, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{RefreshEvery: &tc.in})
			switch {
			case tc.commitFails && err == nil:
				t.Fatal("the update succeeded although its commit was refused")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			case !tc.commitFails && tc.wantErr == nil && err != nil:
				t.Fatal(err)
			}
			stored := f.get(tenant, seg.ID)
			secs := 0
			if stored.RefreshEverySecs != nil {
				secs = *stored.RefreshEverySecs
			}
			every, _ := f.starter.schedule(tenant, seg.ID)
			if secs != tc.wantSecs || every != tc.wantEvery {
				t.Fatalf("stored %d s, schedule every %s; want %d s, %s", secs, every, tc.wantSecs, tc.wantEvery)
			}
		})
	}
}

// A client that disconnects while the schedule changes: the change may have reached Temporal,
// the transaction rolls back, so the schedule is put back.
func TestUpdateRefreshClientGone(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "pros", defPro)
	hour, half := "1h", "30m"
	if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{RefreshEvery: &hour}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.starter.set("refresh", nil, func(context.Context) error {
		// Temporal applies the change, then the client goes away before the answer.
		f.starter.mu.Lock()
		f.starter.schedules[segKey{tenant, seg.ID}] = 30 * time.Minute
		f.starter.mu.Unlock()
		cancel()
		return nil
	})
	if _, err := f.svc.Update(ctx, tenant, seg.ID, segment.UpdateInput{RefreshEvery: &half}); err == nil {
		t.Fatal("the update succeeded on a cancelled context")
	}
	f.starter.set("refresh", nil, nil)
	if s := f.get(tenant, seg.ID); s.RefreshEverySecs == nil || *s.RefreshEverySecs != 3600 {
		t.Fatalf("stored refresh = %v, want 3600 s", s.RefreshEverySecs)
	}
	if every, _ := f.starter.schedule(tenant, seg.ID); every != time.Hour {
		t.Fatalf("schedule every %s, want 1h", every)
	}
}

func TestDeleteKeepsScheduleAndRecordTogether(t *testing.T) {
	cases := []struct {
		name          string
		scheduleFails bool
		commitFails   bool
		inUse         bool
		wantErr       error
		wantGone      bool
	}{
		{name: "deleted", wantGone: true},
		{name: "schedule deletion fails", scheduleFails: true, wantErr: errs.ErrUnavailable},
		{name: "segment in use", inUse: true, wantErr: errs.ErrConflict},
		{name: "commit fails after the schedule was deleted", commitFails: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newSegFixture(t)
			tenant := f.tenant("acme")
			seg := f.segment(tenant, "rule", "pros", defPro)
			hour := "1h"
			if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{RefreshEvery: &hour}); err != nil {
				t.Fatal(err)
			}
			if tc.inUse {
				f.segment(tenant, "rule", "user", fmt.Sprintf(`{"logic":"AND","conditions":[{"type":"in_segment","segment_id":%d}]}`, seg.ID))
			}
			if tc.scheduleFails {
				f.starter.set("refresh", errTemporalDown, nil)
			}
			if tc.commitFails {
				f.failCommits()
			}
			err := f.svc.Delete(f.ctx, tenant, seg.ID)
			switch {
			case tc.wantGone && err != nil:
				t.Fatal(err)
			case !tc.wantGone && err == nil:
				t.Fatal("the deletion succeeded")
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			exists := f.count(`SELECT count(*) FROM segments WHERE id = $1`, seg.ID) == 1
			every, scheduled := f.starter.schedule(tenant, seg.ID)
			if tc.wantGone {
				if exists || scheduled {
					t.Fatalf("after the deletion: row %v, schedule %v", exists, scheduled)
				}
				return
			}
			if !exists || every != time.Hour {
				t.Fatalf("after a failed deletion: row %v, schedule every %s; want the row and its 1h schedule", exists, every)
			}
		})
	}
}
