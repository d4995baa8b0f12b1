package connector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/platformfake"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ---- sync run lifecycle ------------------------------------------------------------------

func TestBeginSync(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	runs := func(id int64) int64 {
		return f.count(`SELECT count(*) FROM activation_sync_runs WHERE connector_id = $1`, id)
	}

	t.Run("recompute of an inactive connector is skipped", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "inactive", cfg)
		_, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: tenant, ConnectorID: c.ID, SegmentRunID: 5,
			Trigger: connector.TriggerRecompute, WorkflowID: "wf-inactive", TemporalRunID: "r1"})
		if !errors.Is(err, connector.ErrSkip) {
			t.Fatalf("BeginSync: %v, want ErrSkip", err)
		}
		if n := runs(c.ID); n != 0 {
			t.Errorf("%d runs recorded for a skipped sync", n)
		}
	})

	t.Run("recompute of an error connector is skipped", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "error", cfg)
		f.exec(`UPDATE activation_connectors SET status = 'error', last_error = 'x' WHERE id = $1`, c.ID)
		_, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: tenant, ConnectorID: c.ID, SegmentRunID: 5,
			Trigger: connector.TriggerRecompute, WorkflowID: "wf-error", TemporalRunID: "r1"})
		if !errors.Is(err, connector.ErrSkip) {
			t.Fatalf("BeginSync: %v, want ErrSkip", err)
		}
	})

	t.Run("recompute of an active connector, retried, then reset", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "active", cfg)
		f.setStatus(tenant, c.ID, connector.StatusActive)
		f.clock.Advance(time.Minute)
		in := connector.BeginInput{TenantID: tenant, ConnectorID: c.ID, SegmentRunID: 77,
			Trigger: connector.TriggerRecompute, WorkflowID: "wf-active", TemporalRunID: "r1"}
		run, err := f.svc.BeginSync(f.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != connector.RunRunning || run.Trigger != connector.TriggerRecompute || run.ConnectorID != c.ID ||
			run.WorkflowID != "wf-active" || run.SegmentRunID == nil || *run.SegmentRunID != 77 ||
			run.TemporalRunID == nil || *run.TemporalRunID != "r1" || run.StartedAt == nil || !run.StartedAt.Equal(f.clock.Now()) ||
			run.FinishedAt != nil || run.Error != nil {
			t.Fatalf("run %+v: want running recompute run of segment run 77 started now", run)
		}
		if stored := f.run(tenant, run.ID); stored.Status != connector.RunRunning || stored.Trigger != connector.TriggerRecompute {
			t.Errorf("stored run %+v", stored)
		}

		// The activity is retried: the same execution gets the same run, even though the
		// connector was paused meanwhile.
		f.setStatus(tenant, c.ID, connector.StatusInactive)
		again, err := f.svc.BeginSync(f.ctx, in)
		if err != nil {
			t.Fatalf("retried BeginSync: %v", err)
		}
		if again.ID != run.ID || runs(c.ID) != 1 {
			t.Errorf("retry got run %d (%d runs), want the same run %d", again.ID, runs(c.ID), run.ID)
		}

		// The workflow is reset: a new execution of the same workflow id is a replay run, even
		// though the connector is in error.
		f.exec(`UPDATE activation_connectors SET status = 'error', last_error = 'boom' WHERE id = $1`, c.ID)
		in.TemporalRunID = "r2"
		replay, err := f.svc.BeginSync(f.ctx, in)
		if err != nil {
			t.Fatalf("replayed BeginSync: %v", err)
		}
		if replay.ID == run.ID || replay.Trigger != connector.TriggerReplay || replay.Status != connector.RunRunning ||
			replay.WorkflowID != "wf-active" || *replay.TemporalRunID != "r2" {
			t.Errorf("replay run %+v, want a new running replay run", replay)
		}
		if n := runs(c.ID); n != 2 {
			t.Errorf("%d runs, want 2", n)
		}
		// And the reset execution's own retry gets its run back.
		if again, err := f.svc.BeginSync(f.ctx, in); err != nil || again.ID != replay.ID {
			t.Errorf("retry of the replay: run %v, %v; want %d", again, err, replay.ID)
		}
	})

	t.Run("manual sync of an inactive connector runs", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "manual", cfg)
		run, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: tenant, ConnectorID: c.ID,
			Trigger: connector.TriggerManual, WorkflowID: "wf-manual", TemporalRunID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if run.Trigger != connector.TriggerManual || run.Status != connector.RunRunning || run.SegmentRunID != nil {
			t.Errorf("run %+v, want a running manual run without segment run", run)
		}
	})

	t.Run("queued manual sync is claimed by its workflow", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "queued", cfg)
		queued, err := f.withStarter(&fakeSyncStarter{}).RequestSync(f.ctx, tenant, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantWF := fmt.Sprintf("activation-sync:%d:%d:%d", tenant, c.ID, queued.ID)
		if queued.Status != connector.RunQueued || queued.Trigger != connector.TriggerManual || queued.WorkflowID != wantWF ||
			queued.StartedAt != nil || queued.TemporalRunID != nil {
			t.Fatalf("queued run %+v, want queued manual run named %s", queued, wantWF)
		}
		if stored := f.run(tenant, queued.ID); stored.WorkflowID != wantWF || stored.Status != connector.RunQueued {
			t.Errorf("stored queued run %+v", stored)
		}
		f.clock.Advance(time.Second)
		in := connector.BeginInput{TenantID: tenant, ConnectorID: c.ID, SyncRunID: queued.ID, Trigger: connector.TriggerManual,
			WorkflowID: wantWF, TemporalRunID: "exec-1"}
		claimed, err := f.svc.BeginSync(f.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if claimed.ID != queued.ID || claimed.Status != connector.RunRunning || claimed.StartedAt == nil ||
			!claimed.StartedAt.Equal(f.clock.Now()) || *claimed.TemporalRunID != "exec-1" {
			t.Errorf("claimed run %+v, want the queued run %d running since now", claimed, queued.ID)
		}
		if stored := f.run(tenant, queued.ID); stored.Status != connector.RunRunning || stored.TemporalRunID == nil || *stored.TemporalRunID != "exec-1" {
			t.Errorf("stored claimed run %+v", stored)
		}
		if again, err := f.svc.BeginSync(f.ctx, in); err != nil || again.ID != queued.ID {
			t.Errorf("retried claim: %v %v, want run %d", again, err, queued.ID)
		}
		if n := runs(c.ID); n != 1 {
			t.Errorf("%d runs, want 1", n)
		}
	})

	t.Run("a failed start fails only a queued run", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "failqueued", cfg)
		_, err := f.withStarter(&fakeSyncStarter{err: errWorkflowsDown}).RequestSync(f.ctx, tenant, c.ID)
		if !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("RequestSync: %v, want the start's error", err)
		}
		rs, _ := f.svc.Runs(f.ctx, tenant, c.ID, 10)
		if len(rs) != 1 || rs[0].Status != connector.RunFailed || rs[0].Error == nil ||
			*rs[0].Error != "the sync could not be started: workflows unavailable" || rs[0].FinishedAt == nil {
			t.Errorf("runs %+v, want one failed with the reason", rs)
		}
		// The start reports a failure although the workflow got the request and claimed the run:
		// the run is its workflow's.
		c2 := f.create(tenant, seg, connector.KindKlaviyo, "claimed", cfg)
		st := &fakeSyncStarter{err: errWorkflowsDown}
		st.during = func(runID int64) {
			if _, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: tenant, ConnectorID: c2.ID, SyncRunID: runID,
				Trigger: connector.TriggerManual, WorkflowID: st.SyncWorkflowID(tenant, c2.ID, runID), TemporalRunID: "exec-1"}); err != nil {
				t.Errorf("claim: %v", err)
			}
		}
		if _, err := f.withStarter(st).RequestSync(f.ctx, tenant, c2.ID); !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("RequestSync: %v, want the start's error", err)
		}
		if rs, _ := f.svc.Runs(f.ctx, tenant, c2.ID, 10); len(rs) != 1 || rs[0].Status != connector.RunRunning || rs[0].Error != nil {
			t.Errorf("runs %+v, want the claimed run left running", rs)
		}
	})

	t.Run("deleted connector", func(t *testing.T) {
		c := f.create(tenant, seg, connector.KindKlaviyo, "deleted", cfg)
		if err := f.svc.Delete(f.ctx, tenant, c.ID); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: tenant, ConnectorID: c.ID, Trigger: connector.TriggerManual, WorkflowID: "wf-d", TemporalRunID: "r"})
		if !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("BeginSync of a deleted connector: %v, want ErrNotFound", err)
		}
	})
}

func TestFinishSync(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	const msg = "talon_one: HTTP 404: audience 9 not found"
	cases := []struct {
		status     string // the connector's status when the run finishes
		msg        string
		wantStatus string
	}{
		{connector.StatusActive, "", connector.StatusActive},
		{connector.StatusError, "", connector.StatusActive},
		{connector.StatusInactive, "", connector.StatusInactive},
		{connector.StatusActive, msg, connector.StatusError},
		{connector.StatusError, msg, connector.StatusError},
		{connector.StatusInactive, msg, connector.StatusInactive},
	}
	for _, tc := range cases {
		outcome := "success"
		if tc.msg != "" {
			outcome = "failure"
		}
		t.Run(tc.status+" "+outcome, func(t *testing.T) {
			c := f.create(tenant, seg, connector.KindKlaviyo, tc.status+" "+outcome, cfg)
			var oldError *string
			if tc.status != connector.StatusInactive {
				f.setStatus(tenant, c.ID, connector.StatusActive)
			}
			if tc.status == connector.StatusError {
				f.exec(`UPDATE activation_connectors SET status = 'error', last_error = 'previous failure' WHERE id = $1`, c.ID)
				oldError = new("previous failure")
			}
			run := f.begin(tenant, c.ID, "wf-finish-"+tc.status+"-"+outcome)
			f.clock.Advance(90 * time.Second)
			now := f.clock.Now()
			if err := f.svc.FinishSync(f.ctx, tenant, run.ID, tc.msg); err != nil {
				t.Fatal(err)
			}
			r := f.run(tenant, run.ID)
			got := f.get(tenant, c.ID)
			if got.Status != tc.wantStatus {
				t.Errorf("connector status %q, want %q", got.Status, tc.wantStatus)
			}
			if r.FinishedAt == nil || !r.FinishedAt.Equal(now) {
				t.Errorf("run finished_at %v, want %v", r.FinishedAt, now)
			}
			if !got.UpdatedAt.Equal(now) {
				t.Errorf("connector updated_at %v, want %v", got.UpdatedAt, now)
			}
			if tc.msg == "" {
				if r.Status != connector.RunSucceeded || r.Error != nil {
					t.Errorf("run %q error %v, want succeeded without error", r.Status, r.Error)
				}
				if got.LastSyncedAt == nil || !got.LastSyncedAt.Equal(now) {
					t.Errorf("last_synced_at %v, want %v", got.LastSyncedAt, now)
				}
				if got.LastError != nil {
					t.Errorf("last_error %q, want cleared", *got.LastError)
				}
				return
			}
			if r.Status != connector.RunFailed || r.Error == nil || *r.Error != tc.msg {
				t.Errorf("run %q error %v, want failed with %q", r.Status, r.Error, tc.msg)
			}
			if got.LastError == nil || *got.LastError != tc.msg {
				t.Errorf("last_error %v, want %q (was %v)", got.LastError, tc.msg, oldError)
			}
			if got.LastSyncedAt != nil {
				t.Errorf("last_synced_at %v moved on a failure", got.LastSyncedAt)
			}
		})
	}
	if err := f.svc.FinishSync(f.ctx, tenant, 987654, ""); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("FinishSync of an unknown run: %v, want ErrNotFound", err)
	}
}

func TestRunsNewestFirst(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	c := f.create(tenant, seg, connector.KindKlaviyo, "c", cfg)
	other := f.create(tenant, seg, connector.KindKlaviyo, "other", cfg)
	var ids []int64
	for i := range 5 {
		ids = append(ids, f.begin(tenant, c.ID, fmt.Sprintf("wf-%d", i)).ID)
		f.begin(tenant, other.ID, fmt.Sprintf("wf-other-%d", i))
	}
	slices.Reverse(ids)
	for _, tc := range []struct {
		limit int
		want  []int64
	}{{10, ids}, {5, ids}, {2, ids[:2]}, {1, ids[:1]}} {
		got, err := f.svc.Runs(f.ctx, tenant, c.ID, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []int64
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
			if r.ConnectorID != c.ID {
				t.Errorf("run %d of connector %d listed", r.ID, r.ConnectorID)
			}
		}
		if !slices.Equal(gotIDs, tc.want) {
			t.Errorf("limit %d: runs %v, want %v", tc.limit, gotIDs, tc.want)
		}
	}
	fresh := f.create(tenant, seg, connector.KindKlaviyo, "fresh", cfg)
	if got, err := f.svc.Runs(f.ctx, tenant, fresh.ID, 10); err != nil || got == nil || len(got) != 0 {
		t.Errorf("runs of a connector without runs: %v %v, want an empty list", got, err)
	}
}

// ---- the sync engine against an in-memory platform ---------------------------------------

type memCall struct {
	op    string // "add" or "remove"
	users []string
}

// memPlatform is a scripted platform: it records every call, holds the members it was told
// about, rejects or skips chosen users and fails chosen calls.
type memPlatform struct {
	mu                    sync.Mutex
	addChunk, removeChunk int
	calls                 []memCall
	held                  map[string]bool
	reject, skip          map[string]bool
	failCall              int // the 1-based call number that fails retryable (0: none)
	n                     int
}

func (p *memPlatform) AddChunk() int    { return p.addChunk }
func (p *memPlatform) RemoveChunk() int { return p.removeChunk }
func (p *memPlatform) Add(ctx context.Context, ms []platform.Member) (platform.Outcome, error) {
	return p.apply("add", ms)
}
func (p *memPlatform) Remove(ctx context.Context, ms []platform.Member) (platform.Outcome, error) {
	return p.apply("remove", ms)
}

func (p *memPlatform) apply(op string, ms []platform.Member) (platform.Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.n == p.failCall {
		return platform.Outcome{}, &platform.Error{Platform: "mem", Status: 503, Message: "unavailable", Retryable: true}
	}
	if p.held == nil {
		p.held = map[string]bool{}
	}
	var out platform.Outcome
	call := memCall{op: op}
	for _, m := range ms {
		call.users = append(call.users, m.UserID)
		switch {
		case p.skip[m.UserID]:
			out.Skipped++
		case p.reject[m.UserID]:
			out.Failed++
			out.FailedMembers = append(out.FailedMembers, m)
		default:
			p.held[m.UserID] = op == "add"
			out.Done = append(out.Done, m)
		}
	}
	p.calls = append(p.calls, call)
	return out, nil
}

func (p *memPlatform) holds() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []string{}
	for u, in := range p.held {
		if in {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

func (p *memPlatform) takeCalls() []memCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

// syncOnce begins a fresh manual run and pushes it.
func (f *fixture) syncOnce(tenant, id int64, p platform.Platform, wf string) (connector.Counts, *connector.SyncRun, int) {
	f.t.Helper()
	run := f.begin(tenant, id, wf)
	progress := 0
	c, err := f.svc.Push(f.ctx, tenant, run.ID, p, func() { progress++ })
	if err != nil {
		f.t.Fatalf("push %s: %v", wf, err)
	}
	return c, f.run(tenant, run.ID), progress
}

func TestPushEngine(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "mem", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	p := &memPlatform{addChunk: 3, removeChunk: 2}
	u := users("u", 1, 12) // u00001 .. u00012
	f.addMembers(tenant, seg, u[:7]...)

	type step struct {
		name       string
		change     func()
		wantCalls  []memCall
		wantCounts connector.Counts
	}
	steps := []step{
		{name: "first sync sends everyone in chunks",
			wantCalls:  []memCall{{"add", u[0:3]}, {"add", u[3:6]}, {"add", u[6:7]}},
			wantCounts: connector.Counts{Added: 7}},
		{name: "nothing changed, nothing sent",
			wantCalls: nil, wantCounts: connector.Counts{}},
		{name: "removes first, then an exact chunk of adds",
			change: func() {
				f.removeMembers(tenant, seg, u[1], u[4], u[6])
				f.addMembers(tenant, seg, u[7], u[8], u[9])
			},
			wantCalls:  []memCall{{"remove", []string{u[1], u[4]}}, {"remove", []string{u[6]}}, {"add", u[7:10]}},
			wantCounts: connector.Counts{Added: 3, Removed: 3}},
		{name: "a removed member re-enters",
			change:     func() { f.addMembers(tenant, seg, u[4]) },
			wantCalls:  []memCall{{"add", []string{u[4]}}},
			wantCounts: connector.Counts{Added: 1}},
		{name: "rejected and skipped members stay pending",
			change: func() {
				p.reject = map[string]bool{u[10]: true}
				p.skip = map[string]bool{u[11]: true}
				f.addMembers(tenant, seg, u[10], u[11])
			},
			wantCalls:  []memCall{{"add", []string{u[10], u[11]}}},
			wantCounts: connector.Counts{Skipped: 1, Failed: 1}},
		{name: "and are sent again by the next sync",
			change: func() {
				p.reject = nil
			},
			wantCalls:  []memCall{{"add", []string{u[10], u[11]}}},
			wantCounts: connector.Counts{Added: 1, Skipped: 1}},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.change != nil {
				s.change()
			}
			counts, run, progress := f.syncOnce(tenant, c.ID, p, fmt.Sprintf("wf-engine-%d", i))
			calls := p.takeCalls()
			if fmt.Sprint(calls) != fmt.Sprint(s.wantCalls) {
				t.Errorf("calls %v, want %v", calls, s.wantCalls)
			}
			if counts != s.wantCounts {
				t.Errorf("counts %+v, want %+v", counts, s.wantCounts)
			}
			if got := (connector.Counts{Added: run.Added, Removed: run.Removed, Skipped: run.Skipped, Failed: run.Failed}); got != s.wantCounts {
				t.Errorf("run counts %+v, want %+v", got, s.wantCounts)
			}
			if progress != len(s.wantCalls) {
				t.Errorf("progress called %d times, want once per chunk (%d)", progress, len(s.wantCalls))
			}
			// What the record says the platform holds is what it holds (minus the skipped).
			want := slices.DeleteFunc(f.segmentMembers(tenant, seg), func(u string) bool { return p.skip[u] || p.reject[u] })
			if got := f.present(c.ID); !slices.Equal(got, want) {
				t.Errorf("recorded present %v, want %v", got, want)
			}
			if got := p.holds(); !slices.Equal(got, want) {
				t.Errorf("platform holds %v, want %v", got, want)
			}
		})
	}
}

// TestPushResumesAfterAFailedChunk: a chunk fails; the retried Push does not resend what was
// acknowledged, and the run's counts add up.
func TestPushResumesAfterAFailedChunk(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "mem", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	u := users("u", 1, 7)
	f.addMembers(tenant, seg, u...)
	p := &memPlatform{addChunk: 3, removeChunk: 3, failCall: 2}
	run := f.begin(tenant, c.ID, "wf-resume")

	counts, err := f.svc.Push(f.ctx, tenant, run.ID, p, nil)
	var pe *platform.Error
	if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 503 {
		t.Fatalf("first attempt: %v, want the retryable platform error", err)
	}
	if counts != (connector.Counts{Added: 3}) {
		t.Errorf("first attempt counts %+v, want 3 added", counts)
	}
	if r := f.run(tenant, run.ID); r.Added != 3 {
		t.Errorf("run added %d after the failed attempt, want 3", r.Added)
	}
	if got := f.present(c.ID); !slices.Equal(got, u[:3]) {
		t.Errorf("present after the failed attempt %v, want %v", got, u[:3])
	}
	p.takeCalls()

	counts, err = f.svc.Push(f.ctx, tenant, run.ID, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls := p.takeCalls(); fmt.Sprint(calls) != fmt.Sprint([]memCall{{"add", u[3:6]}, {"add", u[6:7]}}) {
		t.Errorf("second attempt calls %v, want only the rest", calls)
	}
	if counts != (connector.Counts{Added: 7}) {
		t.Errorf("second attempt counts %+v, want the run's total of 7 added", counts)
	}
	if got := p.holds(); !slices.Equal(got, u) {
		t.Errorf("platform holds %v, want %v", got, u)
	}
}

// ---- the sync engine against the platform fakes ------------------------------------------

const fakeKey = "fake-key-SECRET-9f8e7d6c5b4a"

// postBodies returns the decoded JSON bodies of the successful requests with method and path.
func postBodies(t *testing.T, reqs []platformfake.Request, method, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range reqs {
		if r.Method != method || r.Path != path || r.Status >= 300 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("request body %s: %v", r.Body, err)
		}
		out = append(out, m)
	}
	return out
}

// talonItems returns the profile ids of each request's items with action, request by request.
func talonItems(t *testing.T, reqs []platformfake.Request, action string) [][]string {
	t.Helper()
	var out [][]string
	for _, body := range postBodies(t, reqs, http.MethodPost, "/v2/customer_audiences") {
		var ids []string
		for _, it := range body["data"].([]any) {
			m := it.(map[string]any)
			if m["action"] == action {
				ids = append(ids, m["profileIntegrationId"].(string))
			}
		}
		if len(ids) > 0 {
			out = append(out, ids)
		}
	}
	return out
}

func flatten(chunks [][]string) []string {
	var out []string
	for _, c := range chunks {
		out = append(out, c...)
	}
	sort.Strings(out)
	return out
}

func chunkSizes(chunks [][]string) []int {
	out := []int{}
	for _, c := range chunks {
		out = append(out, len(c))
	}
	return out
}

func TestPushTalonOne(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	fake := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: fakeKey, PerSecond: 20})
	t.Cleanup(fake.Close)
	fake.CreateAudience(748)
	c := f.create(tenant, seg, connector.KindTalonOne, "Talon", fmt.Sprintf(`{"base_url":%q,"api_key":%q,"audience_id":"748"}`, fake.URL(), fakeKey))
	p := f.adapter(platformsFor(""), tenant, c.ID)
	all := users("t", 1, 2600)
	f.addMembers(tenant, seg, all[:2500]...)

	// First sync: everyone, in the fewest requests.
	counts, run, progress := f.syncOnce(tenant, c.ID, p, "wf-t1-1")
	if counts != (connector.Counts{Added: 2500}) || run.Added != 2500 {
		t.Errorf("first sync counts %+v (run added %d), want 2500 added", counts, run.Added)
	}
	if got := fake.AudienceMembers(748); !slices.Equal(got, f.segmentMembers(tenant, seg)) {
		t.Errorf("audience holds %d members, want the segment's %d", len(got), len(f.segmentMembers(tenant, seg)))
	}
	adds := talonItems(t, fake.Requests(), "add")
	if n := fake.RequestCount(http.MethodPost, "/v2/customer_audiences"); n != 3 || progress != 3 {
		t.Errorf("%d requests, %d progress calls, want 3 (2,500 members in chunks of 1,000)", n, progress)
	}
	if !slices.Equal(chunkSizes(adds), []int{1000, 1000, 500}) || !slices.Equal(flatten(adds), all[:2500]) {
		t.Errorf("add chunks %v", chunkSizes(adds))
	}
	for _, r := range fake.Requests() {
		if got := r.Header.Get("Authorization"); got != "ApiKey-v1 "+fakeKey {
			t.Errorf("Authorization %q", got)
		}
	}

	// Some leave, some enter: exactly those are sent.
	left := []string{all[0], all[999], all[1000], all[2499]}
	entered := all[2500:2550]
	f.removeMembers(tenant, seg, left...)
	f.addMembers(tenant, seg, entered...)
	fake.Reset()
	counts, run, _ = f.syncOnce(tenant, c.ID, p, "wf-t1-2")
	if counts != (connector.Counts{Added: 50, Removed: 4}) || run.Added != 50 || run.Removed != 4 {
		t.Errorf("second sync counts %+v, want 50 added 4 removed", counts)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Errorf("%d requests, want 2 (one remove, one add)", len(reqs))
	}
	if got := flatten(talonItems(t, reqs, "delete")); !slices.Equal(got, sorted(left)) {
		t.Errorf("deleted %v, want %v", got, left)
	}
	if got := flatten(talonItems(t, reqs, "add")); !slices.Equal(got, entered) {
		t.Errorf("added %v, want %v", got, entered)
	}
	if got := fake.AudienceMembers(748); !slices.Equal(got, f.segmentMembers(tenant, seg)) {
		t.Errorf("audience differs from the segment after the second sync")
	}

	// A removed member re-enters.
	f.addMembers(tenant, seg, all[999])
	fake.Reset()
	counts, _, _ = f.syncOnce(tenant, c.ID, p, "wf-t1-3")
	if counts != (connector.Counts{Added: 1}) {
		t.Errorf("third sync counts %+v, want 1 added", counts)
	}
	if got := talonItems(t, fake.Requests(), "add"); fmt.Sprint(got) != fmt.Sprint([][]string{{all[999]}}) {
		t.Errorf("third sync sent %v, want only %s", got, all[999])
	}
	if got := fake.AudienceMembers(748); !slices.Equal(got, f.segmentMembers(tenant, seg)) {
		t.Errorf("audience differs from the segment after the re-entry")
	}
	if v := fake.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// brazeUsers returns the external ids of each request's attribute objects with value v.
func brazeUsers(t *testing.T, reqs []platformfake.Request, attr string, v bool) [][]string {
	t.Helper()
	var out [][]string
	for _, body := range postBodies(t, reqs, http.MethodPost, "/users/track") {
		var ids []string
		for _, it := range body["attributes"].([]any) {
			m := it.(map[string]any)
			if m[attr] == v {
				ids = append(ids, m["external_id"].(string))
			}
		}
		if len(ids) > 0 {
			out = append(out, ids)
		}
	}
	return out
}

func TestPushBraze(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	fake := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: fakeKey, PerThreeSeconds: 3000})
	t.Cleanup(fake.Close)
	c := f.create(tenant, seg, connector.KindBraze, "Braze", fmt.Sprintf(`{"rest_endpoint":%q,"api_key":%q}`, fake.URL()+"/", fakeKey))
	attr := connector.DefaultBrazeAttribute(seg)
	p := f.adapter(platformsFor(""), tenant, c.ID)
	all := users("b", 1, 260)
	f.addMembers(tenant, seg, all[:200]...)

	counts, _, progress := f.syncOnce(tenant, c.ID, p, "wf-bz-1")
	if counts != (connector.Counts{Added: 200}) {
		t.Errorf("first sync counts %+v, want 200 added", counts)
	}
	if got := fake.UsersWith(attr, true); !slices.Equal(got, all[:200]) {
		t.Errorf("%d users with %s=true, want 200", len(got), attr)
	}
	sent := brazeUsers(t, fake.Requests(), attr, true)
	if n := fake.RequestCount(http.MethodPost, "/users/track"); n != 3 || progress != 3 || !slices.Equal(chunkSizes(sent), []int{75, 75, 50}) {
		t.Errorf("%d requests (%v), %d progress calls, want 3 of 75, 75, 50", n, chunkSizes(sent), progress)
	}

	left := []string{all[0], all[74], all[75], all[199]}
	entered := all[200:210]
	f.removeMembers(tenant, seg, left...)
	f.addMembers(tenant, seg, entered...)
	fake.Reset()
	counts, _, _ = f.syncOnce(tenant, c.ID, p, "wf-bz-2")
	if counts != (connector.Counts{Added: 10, Removed: 4}) {
		t.Errorf("second sync counts %+v, want 10 added 4 removed", counts)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Errorf("%d requests, want 2", len(reqs))
	}
	if got := flatten(brazeUsers(t, reqs, attr, false)); !slices.Equal(got, sorted(left)) {
		t.Errorf("set false for %v, want %v", got, left)
	}
	if got := flatten(brazeUsers(t, reqs, attr, true)); !slices.Equal(got, entered) {
		t.Errorf("set true for %v, want %v", got, entered)
	}
	if got := fake.UsersWith(attr, true); !slices.Equal(got, f.segmentMembers(tenant, seg)) {
		t.Errorf("users with the attribute differ from the segment")
	}
	if got := fake.UsersWith(attr, false); !slices.Equal(got, sorted(left)) {
		t.Errorf("users with the attribute false %v, want %v", got, left)
	}

	f.addMembers(tenant, seg, all[74])
	fake.Reset()
	if counts, _, _ := f.syncOnce(tenant, c.ID, p, "wf-bz-3"); counts != (connector.Counts{Added: 1}) {
		t.Errorf("re-entry counts %+v", counts)
	}
	if v, _ := fake.Attribute(all[74], attr); v != true || fake.RequestCount("", "/") != 1 {
		t.Errorf("re-entered user attribute %v after %d requests, want true after 1", v, fake.RequestCount("", "/"))
	}
	if v := fake.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

func TestPushKlaviyo(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	fake := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: fakeKey})
	t.Cleanup(fake.Close)
	fake.CreateList("Xy7Abc")
	c := f.create(tenant, seg, connector.KindKlaviyo, "Klaviyo", `{"list_id":"Xy7Abc","api_key":"`+fakeKey+`"}`)
	p := f.adapter(platformsFor(fake.URL()), tenant, c.ID)

	emails := map[string]string{}
	for i, u := range users("k", 1, 8) {
		emails[u] = fmt.Sprintf("user%d@example.com", i+1)
	}
	emails["k00009"] = ""              // a profile without an email trait
	emails["k00010"] = "not-an-e-mail" // an email trait Klaviyo cannot import
	f.profiles(tenant, emails)
	members := append(users("k", 1, 10), "k00011") // k00011 has no profile at all
	f.addMembers(tenant, seg, members...)
	listOf := func(us ...string) []string {
		var out []string
		for _, u := range us {
			out = append(out, emails[u])
		}
		return sorted(out)
	}
	profileLookups := func() int { return fake.RequestCount(http.MethodGet, "/api/profiles") }

	// First sync: one import job with the 8 members that have an e-mail; 3 skipped.
	counts, run, _ := f.syncOnce(tenant, c.ID, p, "wf-kl-1")
	if counts != (connector.Counts{Added: 8, Skipped: 3}) || run.Skipped != 3 {
		t.Errorf("first sync counts %+v (run skipped %d), want 8 added 3 skipped", counts, run.Skipped)
	}
	if got, want := fake.ListMembers("Xy7Abc"), listOf(users("k", 1, 8)...); !slices.Equal(got, want) {
		t.Errorf("list holds %v, want %v", got, want)
	}
	if fake.Jobs() != 1 || fake.RequestCount(http.MethodPost, "/api/profile-bulk-import-jobs") != 1 {
		t.Errorf("%d import jobs, want 1", fake.Jobs())
	}
	if n := profileLookups(); n != 0 {
		t.Errorf("%d profile lookups on a first sync, want 0", n)
	}
	if got := f.present(c.ID); !slices.Equal(got, users("k", 1, 8)) {
		t.Errorf("present %v", got)
	}

	// Two leave (and the member without an e-mail leaves too): their profile ids are looked up
	// by e-mail in one request and remembered.
	f.removeMembers(tenant, seg, "k00002", "k00003", "k00009")
	fake.Reset()
	counts, _, _ = f.syncOnce(tenant, c.ID, p, "wf-kl-2")
	if counts != (connector.Counts{Removed: 2, Skipped: 2}) {
		t.Errorf("second sync counts %+v, want 2 removed (and the 2 without a usable e-mail skipped)", counts)
	}
	if n := profileLookups(); n != 1 {
		t.Errorf("%d profile lookups, want 1", n)
	}
	if n := fake.RequestCount(http.MethodDelete, "/api/lists/Xy7Abc/relationships/profiles"); n != 1 {
		t.Errorf("%d list deletes, want 1", n)
	}
	if got, want := fake.ListMembers("Xy7Abc"), listOf("k00001", "k00004", "k00005", "k00006", "k00007", "k00008"); !slices.Equal(got, want) {
		t.Errorf("list holds %v, want %v", got, want)
	}
	for _, u := range []string{"k00002", "k00003"} {
		id, ok := fake.ProfileID(emails[u])
		var stored string
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT coalesce(platform_id, '') FROM activation_members WHERE connector_id = $1 AND user_id = $2`, c.ID, u).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !ok || stored != id {
			t.Errorf("%s: stored platform id %q, want the profile id %q", u, stored, id)
		}
	}

	// k00002 re-enters (imported again, platform id kept), then leaves again: no lookup.
	f.addMembers(tenant, seg, "k00002")
	fake.Reset()
	if counts, _, _ := f.syncOnce(tenant, c.ID, p, "wf-kl-3"); counts != (connector.Counts{Added: 1, Skipped: 2}) {
		t.Errorf("re-entry counts %+v, want 1 added", counts)
	}
	if !slices.Contains(fake.ListMembers("Xy7Abc"), emails["k00002"]) {
		t.Errorf("re-entered member not on the list")
	}
	f.removeMembers(tenant, seg, "k00002")
	fake.Reset()
	if counts, _, _ := f.syncOnce(tenant, c.ID, p, "wf-kl-4"); counts != (connector.Counts{Removed: 1, Skipped: 2}) {
		t.Errorf("second removal counts %+v, want 1 removed", counts)
	}
	if n := profileLookups(); n != 0 {
		t.Errorf("%d profile lookups for a member whose profile id is known, want 0", n)
	}
	if n := fake.RequestCount(http.MethodDelete, "/api/lists/"); n != 1 {
		t.Errorf("%d list deletes, want 1", n)
	}
	if got, want := fake.ListMembers("Xy7Abc"), listOf("k00001", "k00004", "k00005", "k00006", "k00007", "k00008"); !slices.Equal(got, want) {
		t.Errorf("list holds %v, want %v", got, want)
	}
	if v := fake.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// TestPushResumesAgainstTheFakes: a 500 after the first chunk fails the attempt retryable; the
// retry on the same run sends only what was not acknowledged, in the fewest requests overall.
func TestPushResumesAgainstTheFakes(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")

	type fake interface {
		Inject(platformfake.Fault)
		ClearFaults()
		Requests() []platformfake.Request
		Violations() []string
		Reset()
	}
	talon := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: fakeKey})
	t.Cleanup(talon.Close)
	talon.CreateAudience(9)
	talon.CreateAudience(10)
	braze := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: fakeKey})
	t.Cleanup(braze.Close)
	talonCfg := func(audience int) string {
		return fmt.Sprintf(`{"base_url":%q,"api_key":%q,"audience_id":%d}`, talon.URL(), fakeKey, audience)
	}
	brazeAttr := func(seg int64) string { return connector.DefaultBrazeAttribute(seg) }

	cases := []struct {
		name      string
		kind      string
		config    string
		members   int
		removes   bool // the run removes every member (after a first sync added them)
		fake      fake
		minimum   int
		sentUsers func(reqs []platformfake.Request, seg int64) [][]string
		holds     func(seg int64) []string
	}{
		{"talon_one adds", connector.KindTalonOne, talonCfg(9), 2500, false, talon, 3,
			func(reqs []platformfake.Request, _ int64) [][]string { return talonItems(t, reqs, "add") },
			func(int64) []string { return talon.AudienceMembers(9) }},
		{"talon_one removes", connector.KindTalonOne, talonCfg(10), 2500, true, talon, 3,
			func(reqs []platformfake.Request, _ int64) [][]string { return talonItems(t, reqs, "delete") },
			func(int64) []string { return talon.AudienceMembers(10) }},
		{"braze adds", connector.KindBraze, fmt.Sprintf(`{"rest_endpoint":%q,"api_key":%q}`, braze.URL(), fakeKey), 200, false, braze, 3,
			func(reqs []platformfake.Request, seg int64) [][]string {
				return brazeUsers(t, reqs, brazeAttr(seg), true)
			},
			func(seg int64) []string { return braze.UsersWith(brazeAttr(seg), true) }},
		{"braze removes", connector.KindBraze, fmt.Sprintf(`{"rest_endpoint":%q,"api_key":%q}`, braze.URL(), fakeKey), 200, true, braze, 3,
			func(reqs []platformfake.Request, seg int64) [][]string {
				return brazeUsers(t, reqs, brazeAttr(seg), false)
			},
			func(seg int64) []string { return braze.UsersWith(brazeAttr(seg), true) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seg := f.segment(tenant, tc.name)
			c := f.create(tenant, seg, tc.kind, tc.name, tc.config)
			p := f.adapter(platformsFor(""), tenant, c.ID)
			members := users(strings.ReplaceAll(tc.name, " ", "-")+"-", 1, tc.members)
			f.addMembers(tenant, seg, members...)
			want := members // what the platform holds in the end
			if tc.removes {
				f.syncOnce(tenant, c.ID, p, "wf-resume-setup-"+tc.name)
				f.removeMembers(tenant, seg, members...)
				want = []string{}
			}
			tc.fake.Reset()
			run := f.begin(tenant, c.ID, "wf-resume-"+tc.name)

			// The fault starts once the first chunk is acknowledged.
			chunks := 0
			_, err := f.svc.Push(f.ctx, tenant, run.ID, p, func() {
				chunks++
				if chunks == 1 {
					tc.fake.Inject(platformfake.Fault{Status: 500, Count: -1})
				}
			})
			var pe *platform.Error
			if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 500 {
				t.Fatalf("first attempt: %v, want a retryable *platform.Error with status 500", err)
			}
			if strings.Contains(err.Error(), fakeKey) {
				t.Errorf("error %q carries the key", err)
			}
			first := tc.sentUsers(tc.fake.Requests(), seg)
			if len(first) != 1 {
				t.Fatalf("%d acknowledged chunks in the failed attempt, want 1", len(first))
			}
			wantPresent := sorted(first[0])
			if tc.removes {
				wantPresent = slices.DeleteFunc(slices.Clone(members), func(u string) bool { return slices.Contains(first[0], u) })
			}
			if got := f.present(c.ID); !slices.Equal(got, wantPresent) {
				t.Errorf("recorded %d present after the failed attempt, want %d", len(got), len(wantPresent))
			}
			failedAttempt := len(tc.fake.Requests())

			tc.fake.ClearFaults()
			counts, err := f.svc.Push(f.ctx, tenant, run.ID, p, nil)
			if err != nil {
				t.Fatalf("second attempt: %v", err)
			}
			reqs := tc.fake.Requests()
			second := tc.sentUsers(reqs[failedAttempt:], seg)
			for _, chunk := range second {
				for _, u := range chunk {
					if slices.Contains(first[0], u) {
						t.Fatalf("the second attempt resent %s of the acknowledged chunk", u)
					}
				}
			}
			if got := flatten(append(second, first[0])); !slices.Equal(got, members) {
				t.Errorf("sent %d members over both attempts, want each of the %d once", len(got), len(members))
			}
			if got := tc.holds(seg); !slices.Equal(got, want) {
				t.Errorf("platform holds %d members, want %d", len(got), len(want))
			}
			if got := f.present(c.ID); !slices.Equal(got, want) {
				t.Errorf("recorded %d present, want %d", len(got), len(want))
			}
			ok := 0
			for _, r := range reqs {
				if r.Status < 300 {
					ok++
				}
			}
			if ok != tc.minimum || len(reqs) != tc.minimum+1 {
				t.Errorf("%d successful of %d requests, want the minimum %d plus the one that failed", ok, len(reqs), tc.minimum)
			}
			wantCounts := connector.Counts{Added: int64(tc.members)}
			if tc.removes {
				wantCounts = connector.Counts{Removed: int64(tc.members)}
			}
			if counts != wantCounts {
				t.Errorf("run counts %+v, want %+v", counts, wantCounts)
			}
			if v := tc.fake.Violations(); len(v) > 0 {
				t.Errorf("violations: %v", v)
			}
		})
	}
}

// TestConcurrentPushesOfOneConnector: two runs of one connector pushed at once (say a recompute
// sync and a manual one) never send a member twice.
func TestConcurrentPushesOfOneConnector(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	fake := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: fakeKey})
	t.Cleanup(fake.Close)
	fake.CreateAudience(1)
	c := f.create(tenant, seg, connector.KindTalonOne, "Talon", fmt.Sprintf(`{"base_url":%q,"api_key":%q,"audience_id":1}`, fake.URL(), fakeKey))
	members := users("c", 1, 2500)
	f.addMembers(tenant, seg, members...)
	platforms := platformsFor("")
	r1 := f.begin(tenant, c.ID, "wf-concurrent-1")
	r2 := f.begin(tenant, c.ID, "wf-concurrent-2")

	var wg sync.WaitGroup
	results := make([]connector.Counts, 2)
	pushErrs := make([]error, 2)
	for i, run := range []*connector.SyncRun{r1, r2} {
		p := f.adapter(platforms, tenant, c.ID)
		wg.Go(func() { results[i], pushErrs[i] = f.svc.Push(f.ctx, tenant, run.ID, p, nil) })
	}
	wg.Wait()
	for i, err := range pushErrs {
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if total := results[0].Added + results[1].Added; total != 2500 {
		t.Errorf("added %d + %d, want 2500 in total", results[0].Added, results[1].Added)
	}
	if n := fake.RequestCount(http.MethodPost, "/"); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if got := flatten(talonItems(t, fake.Requests(), "add")); !slices.Equal(got, members) {
		t.Errorf("sent %d member adds, want each of the 2500 once", len(got))
	}
}

// TestPlatformsNew checks the adapter factory's refusals.
func TestPlatformsNew(t *testing.T) {
	p := platformsFor("")
	cases := []struct {
		name  string
		creds connector.Credentials
	}{
		{"no api key", connector.Credentials{ConnectorID: 1, Kind: connector.KindBraze, Config: map[string]any{"rest_endpoint": "https://x"}, Secrets: map[string]string{}}},
		{"no audience", connector.Credentials{ConnectorID: 1, Kind: connector.KindTalonOne, Config: map[string]any{"base_url": "https://x"}, Secrets: map[string]string{"api_key": "k"}}},
		{"unknown kind", connector.Credentials{ConnectorID: 1, Kind: "mailchimp", Config: map[string]any{}, Secrets: map[string]string{"api_key": "k"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.New(&tc.creds); !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("New: %v, want ErrInvalid", err)
			}
		})
	}
	for _, audience := range []any{json.Number("12"), float64(12)} {
		creds := connector.Credentials{ConnectorID: 1, Kind: connector.KindTalonOne, Config: map[string]any{"base_url": "https://x", "audience_id": audience}, Secrets: map[string]string{"api_key": "k"}}
		if a, err := p.New(&creds); err != nil || a.AddChunk() != 1000 {
			t.Errorf("audience_id %T: %v %v", audience, a, err)
		}
	}
}

// TestChangingTheDestinationResendsEveryMember: after a PATCH that points the connector at
// another audience, list or attribute, the next sync must bring the new destination to the
// segment's membership.
//
// Update forgets activation_members (the record of what the old destination holds) when a
// destination field changes, so the next sync sends every member to the new destination.
func TestChangingTheDestinationResendsEveryMember(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	talon := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: fakeKey})
	t.Cleanup(talon.Close)
	talon.CreateAudience(1)
	talon.CreateAudience(2)
	braze := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: fakeKey})
	t.Cleanup(braze.Close)
	kl := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: fakeKey})
	t.Cleanup(kl.Close)
	kl.CreateList("OLD")
	kl.CreateList("NEW")

	cases := []struct {
		name   string
		kind   string
		config string
		patch  string
		holds  func() []string // what the new destination holds (user ids or e-mails)
		want   func(members []string) []string
	}{
		{"talon_one audience_id", connector.KindTalonOne, fmt.Sprintf(`{"base_url":%q,"api_key":%q,"audience_id":1}`, talon.URL(), fakeKey),
			`{"audience_id":2}`, func() []string { return talon.AudienceMembers(2) }, func(m []string) []string { return m }},
		{"braze attribute", connector.KindBraze, fmt.Sprintf(`{"rest_endpoint":%q,"api_key":%q,"attribute":"old_attr"}`, braze.URL(), fakeKey),
			`{"attribute":"new_attr"}`, func() []string { return braze.UsersWith("new_attr", true) }, func(m []string) []string { return m }},
		{"klaviyo list_id", connector.KindKlaviyo, fmt.Sprintf(`{"list_id":"OLD","api_key":%q}`, fakeKey),
			`{"list_id":"NEW"}`, func() []string { return kl.ListMembers("NEW") },
			func(m []string) []string {
				var out []string
				for _, u := range m {
					out = append(out, u+"@example.com")
				}
				return sorted(out)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seg := f.segment(tenant, tc.name)
			members := users(strings.ReplaceAll(tc.name, " ", "-")+"-", 1, 5)
			f.addMembers(tenant, seg, members...)
			emails := map[string]string{}
			for _, u := range members {
				emails[u] = u + "@example.com"
			}
			f.profiles(tenant, emails)
			c := f.create(tenant, seg, tc.kind, tc.name, tc.config)
			platforms := platformsFor(kl.URL())
			if counts, _, _ := f.syncOnce(tenant, c.ID, f.adapter(platforms, tenant, c.ID), "wf-dest-1-"+tc.name); counts.Added != 5 {
				t.Fatalf("first sync added %d, want 5", counts.Added)
			}
			if _, err := f.svc.Update(f.ctx, tenant, c.ID, connector.UpdateInput{Config: new(json.RawMessage(tc.patch))}); err != nil {
				t.Fatal(err)
			}
			counts, _, _ := f.syncOnce(tenant, c.ID, f.adapter(platforms, tenant, c.ID), "wf-dest-2-"+tc.name)
			if got, want := tc.holds(), tc.want(members); !slices.Equal(got, want) {
				t.Errorf("after %s the new destination holds %v, want the segment's members %v (the sync added %d)", tc.patch, got, want, counts.Added)
			}
		})
	}
}

// TestKlaviyoMemberWhoseProfileIsGone: a member the record says Klaviyo holds, but whose profile
// Klaviyo no longer has (deleted in Klaviyo, e.g. a privacy request), leaves the segment and
// later comes back.
//
// klaviyo.Remove reports a member without a profile in Outcome.Gone, which the engine records
// as no longer present: the profile is looked up once, not at every sync, and a member who
// re-enters is imported again.
func TestKlaviyoMemberWhoseProfileIsGone(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	fake := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: fakeKey})
	t.Cleanup(fake.Close)
	fake.CreateList("L1")
	c := f.create(tenant, seg, connector.KindKlaviyo, "Klaviyo", `{"list_id":"L1","api_key":"`+fakeKey+`"}`)
	p := f.adapter(platformsFor(fake.URL()), tenant, c.ID)
	f.profiles(tenant, map[string]string{"ghost": "ghost@example.com", "alice": "alice@example.com"})
	f.addMembers(tenant, seg, "alice")
	f.syncOnce(tenant, c.ID, p, "wf-ghost-0")
	// The record says Klaviyo holds ghost (synced earlier); Klaviyo has since deleted the profile.
	f.exec(`INSERT INTO activation_members (tenant_id, connector_id, user_id, email, present, synced_at)
		VALUES ($1, $2, 'ghost', 'ghost@example.com', true, now())`, tenant, c.ID)

	// ghost is not a segment member: the sync removes it, finds no profile.
	fake.Reset()
	f.syncOnce(tenant, c.ID, p, "wf-ghost-1")
	if n := fake.RequestCount(http.MethodGet, "/api/profiles"); n != 1 {
		t.Errorf("%d lookups, want 1", n)
	}
	fake.Reset()
	f.syncOnce(tenant, c.ID, p, "wf-ghost-2")
	if n := fake.RequestCount(http.MethodGet, "/api/profiles"); n != 0 {
		t.Errorf("the next sync looked the vanished profile up again (%d requests): it stays pending forever", n)
	}
	// ghost comes back: it must be imported again.
	f.addMembers(tenant, seg, "ghost")
	f.syncOnce(tenant, c.ID, p, "wf-ghost-3")
	if got, want := fake.ListMembers("L1"), []string{"alice@example.com", "ghost@example.com"}; !slices.Equal(got, want) {
		t.Errorf("list holds %v, want %v", got, want)
	}
}

// TestKlaviyoEmailChangedWhileOutsideTheSegment: a member leaves (its profile id is learned),
// changes e-mail, re-enters (imported under the new e-mail: a new profile) and leaves again:
// the new profile must leave the list.
//
// pendingAdds hands the adapter the learned platform_id only while the profile's e-mail is the
// one it was learned for, so the re-entry is imported under the new e-mail without the old
// profile's id, and the second removal takes the new profile off the list.
func TestKlaviyoEmailChangedWhileOutsideTheSegment(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	fake := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: fakeKey})
	t.Cleanup(fake.Close)
	fake.CreateList("L1")
	c := f.create(tenant, seg, connector.KindKlaviyo, "Klaviyo", `{"list_id":"L1","api_key":"`+fakeKey+`"}`)
	p := f.adapter(platformsFor(fake.URL()), tenant, c.ID)

	f.profiles(tenant, map[string]string{"x": "old@example.com", "y": "y@example.com"})
	f.addMembers(tenant, seg, "x", "y")
	f.syncOnce(tenant, c.ID, p, "wf-mail-1")
	f.removeMembers(tenant, seg, "x")
	f.syncOnce(tenant, c.ID, p, "wf-mail-2") // learns old@'s profile id
	f.profiles(tenant, map[string]string{"x": "new@example.com"})
	f.addMembers(tenant, seg, "x")
	f.syncOnce(tenant, c.ID, p, "wf-mail-3")
	if got, want := fake.ListMembers("L1"), []string{"new@example.com", "y@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("after re-entering with a new e-mail the list holds %v, want %v", got, want)
	}
	f.removeMembers(tenant, seg, "x")
	f.syncOnce(tenant, c.ID, p, "wf-mail-4")
	if got, want := fake.ListMembers("L1"), []string{"y@example.com"}; !slices.Equal(got, want) {
		t.Errorf("after x left again the list holds %v, want %v", got, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var errBlockedAddress = errors.New("blocked address")

// TestPlatformsPassPermanentNetworkErrors: Platforms.Permanent reaches every adapter's caller, so
// a blocked address fails the sync for good instead of being retried.
func TestPlatformsPassPermanentNetworkErrors(t *testing.T) {
	for _, blocked := range []bool{true, false} {
		p := platformsFor("https://klaviyo.invalid")
		p.Permanent = []error{errBlockedAddress}
		p.HTTP = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if blocked {
				return nil, fmt.Errorf("dial %s: %w", r.URL.Host, errBlockedAddress)
			}
			return nil, errors.New("connection reset by peer")
		})}
		for _, creds := range []connector.Credentials{
			{ConnectorID: 1, SegmentID: 2, Kind: connector.KindKlaviyo, Config: map[string]any{"list_id": "L1"}, Secrets: map[string]string{"api_key": fakeKey}},
			{ConnectorID: 2, SegmentID: 2, Kind: connector.KindBraze, Config: map[string]any{"rest_endpoint": "https://10.0.0.1"}, Secrets: map[string]string{"api_key": fakeKey}},
			{ConnectorID: 3, SegmentID: 2, Kind: connector.KindTalonOne, Config: map[string]any{"base_url": "https://10.0.0.1", "audience_id": json.Number("4")}, Secrets: map[string]string{"api_key": fakeKey}},
		} {
			t.Run(fmt.Sprintf("%s blocked=%v", creds.Kind, blocked), func(t *testing.T) {
				a, err := p.New(&creds)
				if err != nil {
					t.Fatal(err)
				}
				_, err = a.Add(context.Background(), []platform.Member{{UserID: "u1", Email: "u1@example.com"}})
				var pe *platform.Error
				if !errors.As(err, &pe) || pe.Retryable == blocked || pe.Platform != creds.Kind {
					t.Errorf("error %v, want a %s *platform.Error with retryable=%v", err, creds.Kind, !blocked)
				}
			})
		}
	}
}

// TestPlatformsBrazeAttributeDefault: credentials without an attribute push the segment's
// default attribute.
func TestPlatformsBrazeAttributeDefault(t *testing.T) {
	fake := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: fakeKey})
	t.Cleanup(fake.Close)
	creds := connector.Credentials{ConnectorID: 1, SegmentID: 31, Kind: connector.KindBraze,
		Config: map[string]any{"rest_endpoint": fake.URL()}, Secrets: map[string]string{"api_key": fakeKey}}
	a, err := platformsFor("").New(&creds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Add(context.Background(), []platform.Member{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	if got := fake.UsersWith("cohort_segment_31", true); !slices.Equal(got, []string{"u1"}) {
		t.Errorf("users with cohort_segment_31: %v", got)
	}
}
