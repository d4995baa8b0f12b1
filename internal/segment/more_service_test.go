package segment_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

// A segment another segment refers to (in_segment, or as a lookalike seed) cannot be deleted.
func TestDeleteSegmentInUse(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	base := f.segment(tenant, "rule", "base", defPro)
	user := f.segment(tenant, "rule", "uses base", inSegmentDef(base.ID))
	seed := f.segment(tenant, "rule", "seed", defPro)
	f.segment(tenant, "lookalike", "like seed", fmt.Sprintf(`{"seed_segment_id":%d,"size":10}`, seed.ID))
	for _, id := range []int64{base.ID, seed.ID} {
		err := f.svc.Delete(f.ctx, tenant, id)
		if !errors.Is(err, errs.ErrConflict) {
			t.Fatalf("delete segment %d in use: %v, want a conflict", id, err)
		}
	}
	if err := f.svc.Delete(f.ctx, tenant, user.ID); err != nil {
		t.Fatalf("delete the user of base: %v", err)
	}
	if err := f.svc.Delete(f.ctx, tenant, base.ID); err != nil {
		t.Fatalf("delete base once unused: %v", err)
	}
}

// Only the last KeepRunDiffs runs of a segment keep their diff.
func TestRunDiffsArePruned(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	f.profile(tenant, "u2", `{"plan":"pro"}`) // keeps the segment from emptying (an empty segment's next run is initial)
	seg := f.segment(tenant, "rule", "pro", defPro)
	f.compute(tenant, seg.ID) // initial: no change rows
	runs := segment.KeepRunDiffs + 5
	for i := range runs {
		plan := "free"
		if i%2 == 1 {
			plan = "pro"
		}
		f.profile(tenant, "u1", `{"plan":"`+plan+`"}`) // u1 exits, enters, exits, ...
		f.compute(tenant, seg.ID)
	}
	if n := f.count(`SELECT count(DISTINCT run_id) FROM segment_member_changes WHERE segment_id = $1`, seg.ID); n != int64(segment.KeepRunDiffs) {
		t.Fatalf("%d runs keep a diff, want %d", n, segment.KeepRunDiffs)
	}
	if n := f.count(`SELECT count(*) FROM segment_runs WHERE segment_id = $1`, seg.ID); n != int64(runs+1) {
		t.Fatalf("%d runs recorded, want %d", n, runs+1)
	}
}

// A definition change between BeginRun and Materialize: the run loads the version it began with,
// reports the newer one, and leaves the segment queued for the next run.
func TestMaterializeReportsNewerVersion(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	seg := f.segment(tenant, "rule", "pro", defPro)
	run, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	newDef := `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"free"}]}`
	if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: json.RawMessage(newDef)}); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.Materialize(f.ctx, tenant, run.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || res.LatestVersion != 2 || res.Matched != 1 {
		t.Fatalf("result %+v, want version 1 of latest 2 with 1 member", res)
	}
	if got := f.get(tenant, seg.ID); got.Status != segment.StatusQueued || got.ComputedVersion == nil || *got.ComputedVersion != 1 {
		t.Fatalf("segment after a stale run: status %s, computed version %v", got.Status, got.ComputedVersion)
	}
}
