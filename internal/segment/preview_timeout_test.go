package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

// TestPreviewTimeout runs a preview that cannot finish in time on real Postgres (the tables it
// reads are locked by another transaction) and checks it answers preview_timeout (503), soon
// after its timeout, and leaves nothing behind: the next preview works.
func TestPreviewTimeout(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	f.event(tenant, "u1", "order_completed", 1, `{}`)
	const timeout = 300 * time.Millisecond
	svc := f.svc.WithPreviewTimeout(timeout)
	for _, def := range []string{defOrdered, defPro} {
		locker, err := f.db.Pool.Begin(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := locker.Exec(f.ctx, `LOCK TABLE warehouse.events, warehouse.user_event_stats, warehouse.user_property_stats, profiles IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = svc.Preview(f.ctx, tenant, json.RawMessage(def), 10, nil)
		took := time.Since(t0)
		_ = locker.Rollback(context.Background())
		var ce *errs.CodedError
		if !errors.Is(err, errs.ErrUnavailable) || !errors.As(err, &ce) || ce.Code != "preview_timeout" {
			t.Fatalf("preview of %s while its tables are locked: %v, want preview_timeout", def, err)
		}
		if took < timeout || took > timeout+5*time.Second {
			t.Fatalf("preview answered after %s, want soon after its %s timeout", took, timeout)
		}
		out, err := svc.Preview(f.ctx, tenant, json.RawMessage(def), 10, nil)
		if err != nil || out.MatchedUsers != 1 {
			t.Fatalf("preview after the lock was released: %+v, %v", out, err)
		}
	}
}
