package segment_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/segment"
)

// anonEvent stores one event sent by an anonymous visitor (user_id is the subject it was sent as:
// the anonymous id).
func (f *segFixture) anonEvent(tenant int64, anon, typ string, daysAgo float64, payload string) {
	f.t.Helper()
	at := f.clock.Now().Add(-time.Duration(daysAgo * float64(24*time.Hour)))
	f.exec(`INSERT INTO warehouse.events (tenant_id, event_id, user_id, anonymous_id, event_type, occurred_at, received_at, payload)
		VALUES ($1, gen_random_uuid()::text, $2, $2, $3, $4, $4, $5::jsonb)`, tenant, anon, typ, at, payload)
	f.rebuildStats(tenant)
}

// link records that anon belongs to user in the tenant's identity graph.
func (f *segFixture) link(tenant int64, anon, user string) {
	f.t.Helper()
	f.exec(`INSERT INTO identity_links (tenant_id, anonymous_id, user_id, source, linked_at) VALUES ($1, $2, $3, 'identify', $4)`,
		tenant, anon, user, f.clock.Now())
}

// identityWorld: ada browsed anonymously (anon-ada: page views, an order of 50, a profile) and
// then signed up and ordered for 60 as ada; rollups and the profile of anon-ada were left under
// the anonymous id (as before a merge). anon-bob was never linked. anon-cy is linked to cy, who
// has no profile of his own yet (the link raced the profile's merge). The other tenant links
// anon-bob to ada: that must not change anything in the first.
func identityWorld(t *testing.T) (*segFixture, int64, int64) {
	f := newSegFixture(t)
	tenant, other := f.tenant("acme"), f.tenant("other")
	f.profile(tenant, "ada", `{"plan":"free"}`)
	f.profile(tenant, "anon-ada", `{}`)
	f.profile(tenant, "anon-bob", `{}`)
	f.profile(tenant, "anon-cy", `{"plan":"pro"}`)
	f.profile(tenant, "dan", `{"plan":"free"}`)
	f.anonEvent(tenant, "anon-ada", "page_view", 10, `{"path":"/pricing"}`)
	f.anonEvent(tenant, "anon-ada", "page_view", 9, `{"path":"/shoes"}`)
	f.anonEvent(tenant, "anon-ada", "order_completed", 8, `{"amount":50}`)
	f.event(tenant, "ada", "order_completed", 2, `{"amount":60}`)
	f.anonEvent(tenant, "anon-bob", "page_view", 3, `{"path":"/"}`)
	f.anonEvent(tenant, "anon-bob", "order_completed", 3, `{"amount":5}`)
	f.anonEvent(tenant, "anon-cy", "page_view", 40, `{"path":"/"}`)
	f.event(tenant, "dan", "order_completed", 1, `{"amount":500}`)
	f.link(tenant, "anon-ada", "ada")
	f.link(tenant, "anon-cy", "cy")

	f.profile(other, "ada", `{}`)
	f.profile(other, "anon-bob", `{}`)
	f.event(other, "ada", "order_completed", 1, `{"amount":1}`)
	f.anonEvent(other, "anon-bob", "page_view", 1, `{"path":"/"}`)
	f.link(other, "anon-bob", "ada")
	return f, tenant, other
}

func conds(c ...string) string {
	out := `{"logic":"AND","conditions":[`
	for i, s := range c {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out + "]}"
}

// TestCompileIdentity: every kind of condition counts a user's anonymous history (events and
// rollup rows stored under a linked id), an unlinked anonymous id is a subject of its own, and a
// linked id is never a user of its own, on the raw-event path (windows) and the rollup path.
func TestCompileIdentity(t *testing.T) {
	f, tenant, other := identityWorld(t)
	const (
		viewed       = `{"type":"frequency","event_type":"page_view","operator":"gte","value":1}`
		ordered      = `{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}`
		viewed30     = `{"type":"frequency","event_type":"page_view","operator":"gte","value":1,"window_days":30}`
		ordered30    = `{"type":"frequency","event_type":"order_completed","operator":"gte","value":1,"window_days":30}`
		spent100     = `{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100}`
		spent100in30 = `{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100,"window_days":30}`
	)
	tests := []struct {
		name   string
		tenant int64
		def    string
		want   []string
	}{
		{"viewed a page and ordered (rollups)", tenant, conds(viewed, ordered), []string{"ada", "anon-bob"}},
		{"viewed a page and ordered (raw events)", tenant, conds(viewed30, ordered30), []string{"ada", "anon-bob"}},
		{"two orders: one anonymous, one identified (rollups)", tenant, conds(`{"type":"frequency","event_type":"order_completed","operator":"eq","value":2}`), []string{"ada"}},
		{"sum over both ids (rollups)", tenant, conds(spent100), []string{"ada", "dan"}},
		{"sum over both ids (raw events)", tenant, conds(spent100in30), []string{"ada", "dan"}},
		{"min over both ids", tenant, conds(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"min","operator":"eq","value":50}`), []string{"ada"}},
		{"max over both ids", tenant, conds(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"max","operator":"eq","value":60}`), []string{"ada"}},
		{"avg over both ids", tenant, conds(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"avg","operator":"eq","value":55}`), []string{"ada"}},
		{"latest view of the linked id", tenant, conds(`{"type":"recency","event_type":"page_view","operator":"gt","window_days":30}`), []string{"cy"}},
		{"event property of the anonymous history", tenant, conds(`{"type":"event_property","event_type":"page_view","property":"path","operator":"eq","value":"/shoes"}`), []string{"ada"}},
		{"never viewed: linked ids are not users of their own", tenant, conds(`{"type":"frequency","event_type":"page_view","operator":"eq","value":0}`), []string{"dan"}},
		{"never ordered: the universe resolves", tenant, conds(`{"type":"frequency","event_type":"order_completed","operator":"eq","value":0,"window_days":30}`), []string{"cy"}},
		{"trait of a user without a profile of their own", tenant, conds(`{"type":"trait","trait":"plan","operator":"eq","value":"pro"}`), []string{"cy"}},
		{"trait from the user's own profile", tenant, conds(`{"type":"trait","trait":"plan","operator":"eq","value":"free"}`), []string{"ada", "dan"}},
		{"every user once", tenant, conds(`{"type":"trait","trait":"plan","operator":"neq","value":"x"}`), []string{"ada", "anon-bob", "cy", "dan"}},
		{"the other tenant's graph", other, conds(viewed, ordered), []string{"ada"}},
		{"the other tenant's graph (raw events)", other, conds(viewed30, ordered30), []string{"ada"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def, err := segment.ParseDefinition(json.RawMessage(tc.def))
			if err != nil {
				t.Fatal(err)
			}
			q, err := segment.Compile(def, segment.Postgres, segment.CompileOptions{TenantID: tc.tenant, Now: f.clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if got := runUsers(t, f.db.Pool, q); !slices.Equal(got, tc.want) {
				t.Fatalf("users %v, want %v\n%s", got, tc.want, q.Display())
			}
		})
	}
}

// TestPreviewIdentity: the preview counts an identified user once, with their anonymous history.
func TestPreviewIdentity(t *testing.T) {
	f, tenant, _ := identityWorld(t)
	p, err := f.svc.Preview(f.ctx, tenant, json.RawMessage(conds(
		`{"type":"frequency","event_type":"page_view","operator":"gte","value":1}`,
		`{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}`)), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.MatchedUsers != 2 || !slices.Equal(p.SampleUserIDs, []string{"ada", "anon-bob"}) {
		t.Fatalf("preview = %d %v, want 2 [ada anon-bob]", p.MatchedUsers, p.SampleUserIDs)
	}
}

// TestComputeIdentity: a computed segment's members (what member lists, exports and activation
// syncs read) are canonical ids: the user, never the anonymous id the history was stored under.
func TestComputeIdentity(t *testing.T) {
	f, tenant, _ := identityWorld(t)
	seg := f.segment(tenant, segment.KindRule, "viewed and ordered", conds(
		`{"type":"frequency","event_type":"page_view","operator":"gte","value":1}`,
		`{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}`))
	res := f.compute(tenant, seg.ID)
	if got := f.members(tenant, seg.ID); res.Matched != 2 || !slices.Equal(got, []string{"ada", "anon-bob"}) {
		t.Fatalf("members %v (matched %d), want [ada anon-bob]", got, res.Matched)
	}
	// anon-bob signs up as bob: the next compute moves the membership to bob.
	f.link(tenant, "anon-bob", "bob")
	f.compute(tenant, seg.ID)
	if got := f.members(tenant, seg.ID); !slices.Equal(got, []string{"ada", "bob"}) {
		t.Fatalf("members after the link %v, want [ada bob]", got)
	}
	page, err := f.svc.Members(f.ctx, tenant, seg.ID, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Results {
		ids = append(ids, m.UserID)
	}
	if !slices.Equal(ids, []string{"ada", "bob"}) {
		t.Fatalf("member list %v, want [ada bob]", ids)
	}
}

// TestCompileIdentityBigQuery: the BigQuery query resolves subjects through the identity_links
// table of the events table's dataset (or the one named), and refuses a links table name that is
// not one.
func TestCompileIdentityBigQuery(t *testing.T) {
	def, err := segment.ParseDefinition(json.RawMessage(conds(`{"type":"frequency","event_type":"page_view","operator":"gte","value":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, table, links string
		want               string // the links table the SQL reads; "" for an error
	}{
		{"project.dataset.events", "proj.analytics.events", "", "`proj.analytics.identity_links`"},
		{"dataset.events", "analytics.events", "", "`analytics.identity_links`"},
		{"named links table", "proj.analytics.events", "proj.graph.links", "`proj.graph.links`"},
		{"links table with a backtick", "proj.analytics.events", "p.d.l`; DROP TABLE x; --", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := segment.Compile(def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow, Table: tc.table, LinksTable: tc.links})
			if tc.want == "" {
				if err == nil {
					t.Fatalf("compiled %s", q.SQL)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"FROM " + tc.want + "\n  WHERE tenant_id = @p0", "COALESCE(l.user_id, r.user_id) AS user_id", "LEFT JOIN l ON l.anonymous_id = r.user_id"} {
				if !strings.Contains(q.SQL, s) {
					t.Fatalf("sql lacks %q:\n%s", s, q.SQL)
				}
			}
		})
	}
}

// TestWriteExportIdentity: an export lists canonical users, with the traits segments see: a user
// without a profile of their own has their linked id's.
func TestWriteExportIdentity(t *testing.T) {
	f, tenant, _ := identityWorld(t)
	seg := f.segment(tenant, segment.KindRule, "everyone", conds(`{"type":"trait","trait":"plan","operator":"neq","value":"x"}`))
	f.compute(tenant, seg.ID)
	st := newExportStore(t)
	e, err := f.svc.CreateExport(f.ctx, tenant, seg.ID, segment.ExportInput{Format: "jsonl", Traits: []string{"plan"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := f.svc.WriteExport(f.ctx, tenant, e.ID, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range decodeLines(t, readBlob(t, st, *done.BlobKey)) {
		got = append(got, fmt.Sprintf("%v=%v", line["user_id"], line["traits"].(map[string]any)["plan"]))
	}
	if want := []string{"ada=free", "anon-bob=<nil>", "cy=pro", "dan=free"}; !slices.Equal(got, want) {
		t.Fatalf("export %v, want %v", got, want)
	}
}
