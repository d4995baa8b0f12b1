package connector_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
)

// TestPushReadsAndWritesOnlyItsTenantsRecord: rows of activation_members that carry the
// connector's id but another tenant's id (inserted directly: connector ids are global, so only a
// bug or a hand edit makes them) are neither read nor changed by the connector's sync. The
// pending adds must not take another tenant's "present" row for the platform holding the member,
// and recording the chunk must not overwrite that row.
func TestPushReadsAndWritesOnlyItsTenantsRecord(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	other := f.tenant("other")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "mem", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	f.addMembers(tenant, seg, "u1", "u2", "u3")
	f.profiles(tenant, map[string]string{"u1": "u1@example.com", "u2": "u2@example.com", "u3": "u3@example.com"})

	// The other tenant's rows under the same connector id: u2 (a member of acme's segment) and
	// u9 (not one), both present.
	otherSynced := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f.exec(`INSERT INTO activation_members (tenant_id, connector_id, user_id, email, platform_id, present, synced_at)
		VALUES ($1, $2, 'u2', 'theirs@example.com', 'THEIR-PID', true, $3), ($1, $2, 'u9', 'u9@example.com', 'PID-9', true, $3)`,
		other, c.ID, otherSynced)
	otherRows := func() string {
		t.Helper()
		rows := f.strings(`SELECT concat_ws('|', user_id, email, platform_id, present, synced_at AT TIME ZONE 'UTC')
			FROM activation_members WHERE tenant_id = $1`, other)
		return fmt.Sprint(rows)
	}
	before := otherRows()

	p := &memPlatform{addChunk: 10, removeChunk: 10}
	counts, run, _ := f.syncOnce(tenant, c.ID, p, "wf-tenancy-1")
	calls := p.takeCalls()
	if want := []memCall{{"add", []string{"u1", "u2", "u3"}}}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v: another tenant's record must not hide a member of this one", calls, want)
	}
	if counts.Added != 3 || run.Added != 3 || counts.Removed != 0 {
		t.Errorf("counts %+v (run added %d), want 3 added and nothing removed", counts, run.Added)
	}
	if got := otherRows(); got != before {
		t.Errorf("the other tenant's rows changed:\n got %s\nwant %s", got, before)
	}
	if got := f.strings(`SELECT user_id FROM activation_members WHERE tenant_id = $1 AND present`, tenant); !slices.Contains(got, "u1") || !slices.Contains(got, "u3") {
		t.Errorf("acme's record holds %v, want u1 and u3 at least", got)
	}

	// The members leave: the removes read only acme's rows (u9 is not acme's to remove).
	f.removeMembers(tenant, seg, "u1", "u2", "u3")
	f.syncOnce(tenant, c.ID, p, "wf-tenancy-2")
	for _, call := range p.takeCalls() {
		if call.op == "remove" && slices.Contains(call.users, "u9") {
			t.Errorf("removed another tenant's member: %v", call)
		}
	}
	if got := otherRows(); got != before {
		t.Errorf("the other tenant's rows changed by the removes:\n got %s\nwant %s", got, before)
	}
}
