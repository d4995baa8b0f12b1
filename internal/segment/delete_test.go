package segment_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
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
