package segment_test

import (
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
