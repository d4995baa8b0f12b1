package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// fixtureStart is the clock's start: whole seconds, so it survives a timestamptz round trip.
var fixtureStart = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// segFixture is a fresh migrated database with a service over it.
type segFixture struct {
	t       *testing.T
	ctx     context.Context
	db      *store.DB
	svc     *segment.Service
	clock   *testenv.Clock
	starter *fakeStarter
}

func newSegFixture(t *testing.T) *segFixture {
	t.Helper()
	db := testenv.OpenDB(t)
	clock := testenv.NewClock(fixtureStart)
	starter := newFakeStarter()
	return &segFixture{t: t, ctx: context.Background(), db: db, svc: segment.NewService(db.Gorm, db.Pool, clock.Now, starter), clock: clock, starter: starter}
}

func (f *segFixture) exec(sql string, args ...any) {
	f.t.Helper()
	testenv.Exec(f.t, f.db, sql, args...)
}

func (f *segFixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	return testenv.Count(f.t, f.db, sql, args...)
}

func (f *segFixture) tenant(slug string) int64 {
	f.t.Helper()
	return testenv.Tenant(f.t, f.db, slug)
}

// profile upserts a user's profile with the given traits (a JSON object).
func (f *segFixture) profile(tenant int64, user, traits string) {
	f.t.Helper()
	f.exec(`INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at) VALUES ($1, $2, $3::jsonb, $4, $4)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET traits = EXCLUDED.traits`, tenant, user, traits, fixtureStart.Add(-48*time.Hour))
}

// event stores one event of the user, daysAgo days before the clock's current time.
func (f *segFixture) event(tenant int64, user, typ string, daysAgo float64, payload string) {
	f.t.Helper()
	at := f.clock.Now().Add(-time.Duration(daysAgo * float64(24*time.Hour)))
	f.exec(`INSERT INTO warehouse.events (tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload)
		VALUES ($1, gen_random_uuid()::text, $2, $3, $4, $4, $5::jsonb)`, tenant, user, typ, at, payload)
	f.rebuildStats(tenant)
}

// rebuildStats brings the warehouse's per-user rollups (which the loader maintains) up to date
// with events the test wrote directly.
func (f *segFixture) rebuildStats(tenant int64) {
	f.t.Helper()
	var exists bool
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT to_regprocedure('warehouse.rebuild_user_stats(bigint)') IS NOT NULL`).Scan(&exists); err != nil {
		f.t.Fatalf("look up the rollup function: %v", err)
	}
	if exists {
		f.exec(`SELECT warehouse.rebuild_user_stats($1)`, tenant)
	}
}

// segment creates a segment and, when def is not empty, sets its definition.
func (f *segFixture) segment(tenant int64, typ, name, def string) *segment.Segment {
	f.t.Helper()
	seg, err := f.svc.Create(f.ctx, tenant, segment.CreateInput{Name: name, Tenant: &tenant, SegmentType: typ})
	if err != nil {
		f.t.Fatalf("create segment %s: %v", name, err)
	}
	if def == "" {
		return seg
	}
	res, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: json.RawMessage(def)})
	if err != nil {
		f.t.Fatalf("set definition of %s: %v", name, err)
	}
	return res.Segment
}

// compute runs a whole compute of the segment on the Postgres warehouse.
func (f *segFixture) compute(tenant, id int64) segment.RunResult {
	f.t.Helper()
	run, err := f.svc.BeginRun(f.ctx, tenant, id, fmt.Sprintf("wf-%d", id))
	if err != nil {
		f.t.Fatalf("begin run of segment %d: %v", id, err)
	}
	res, err := f.svc.Materialize(f.ctx, tenant, run.ID, nil)
	if err != nil {
		f.t.Fatalf("materialize segment %d: %v", id, err)
	}
	return res
}

// members lists the segment's members in user id order, read directly from the table.
func (f *segFixture) members(tenant, id int64) []string {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, `SELECT user_id FROM segment_members WHERE tenant_id = $1 AND segment_id = $2 ORDER BY user_id`, tenant, id)
	if err != nil {
		f.t.Fatalf("list members: %v", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			f.t.Fatalf("list members: %v", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatalf("list members: %v", err)
	}
	return out
}

func (f *segFixture) get(tenant, id int64) *segment.Segment {
	f.t.Helper()
	seg, err := f.svc.Get(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatalf("get segment %d: %v", id, err)
	}
	return seg
}

// validationFields returns the field errors of an errs.ValidationError (nil for other errors).
func validationFields(err error) map[string]string {
	var ve *errs.ValidationError
	if errors.As(err, &ve) {
		return ve.Fields
	}
	return nil
}

const (
	defOrdered      = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}]}`
	defOrderedTwice = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":2}]}`
	defPro          = `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"pro"}]}`
	defMember       = `{"logic":"AND","conditions":[{"type":"trait","trait":"member","operator":"eq","value":true}]}`
)

func inSegmentDef(ids ...int64) string {
	conds := make([]string, len(ids))
	for i, id := range ids {
		conds[i] = fmt.Sprintf(`{"type":"in_segment","segment_id":%d}`, id)
	}
	return `{"logic":"AND","conditions":[` + strings.Join(conds, ",") + `]}`
}

func TestCreateValidation(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	tests := []struct {
		name       string
		in         segment.CreateInput
		wantFields []string // ErrInvalid with these fields
		wantErr    error    // another error kind
		wantName   string
	}{
		{name: "rule", in: segment.CreateInput{Name: "Buyers", SegmentType: "rule"}, wantName: "Buyers"},
		{name: "ai", in: segment.CreateInput{Name: "Drafted", SegmentType: "ai", Description: "from a prompt"}, wantName: "Drafted"},
		{name: "lookalike", in: segment.CreateInput{Name: "Like buyers", SegmentType: "lookalike"}, wantName: "Like buyers"},
		{name: "name trimmed", in: segment.CreateInput{Name: "  Spaced  ", SegmentType: "rule"}, wantName: "Spaced"},
		{name: "name at the limit", in: segment.CreateInput{Name: strings.Repeat("n", segment.MaxNameLength), SegmentType: "rule"}, wantName: strings.Repeat("n", segment.MaxNameLength)},
		{name: "name missing", in: segment.CreateInput{SegmentType: "rule"}, wantFields: []string{"name"}},
		{name: "name blank", in: segment.CreateInput{Name: " \t ", SegmentType: "rule"}, wantFields: []string{"name"}},
		{name: "name too long", in: segment.CreateInput{Name: strings.Repeat("n", segment.MaxNameLength+1), SegmentType: "rule"}, wantFields: []string{"name"}},
		{name: "name invalid utf-8", in: segment.CreateInput{Name: "bad\xff", SegmentType: "rule"}, wantFields: []string{"name"}},
		{name: "description too long", in: segment.CreateInput{Name: "x", SegmentType: "rule", Description: strings.Repeat("d", segment.MaxDescriptionLength+1)}, wantFields: []string{"description"}},
		{name: "segment type missing", in: segment.CreateInput{Name: "x"}, wantFields: []string{"segment_type"}},
		{name: "segment type unknown", in: segment.CreateInput{Name: "x", SegmentType: "magic"}, wantFields: []string{"segment_type"}},
		{name: "segment type wrong case", in: segment.CreateInput{Name: "x", SegmentType: "Rule"}, wantFields: []string{"segment_type"}},
		{name: "every field wrong", in: segment.CreateInput{SegmentType: "magic"}, wantFields: []string{"name", "segment_type", "tenant"}},
		{name: "tenant of another", in: segment.CreateInput{Name: "x", SegmentType: "rule", Tenant: &other}, wantErr: errs.ErrForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Tenant == nil && !slices.Contains(tc.wantFields, "tenant") {
				in.Tenant = &tenant
			}
			seg, err := f.svc.Create(f.ctx, tenant, in)
			switch {
			case tc.wantFields != nil:
				testenv.WantFieldErrors(t, err, testenv.FieldNames(tc.wantFields...))
				return
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) || errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("create: %v", err)
			}
			if seg.ID == 0 || seg.TenantID != tenant || seg.Name != tc.wantName || seg.SegmentType != tc.in.SegmentType {
				t.Fatalf("segment = %+v", seg)
			}
			if seg.Status != segment.StatusDraft || seg.Version != 0 || string(seg.Definition) != "null" || seg.RefreshEvery != nil ||
				seg.ComputedVersion != nil || seg.LastComputedAt != nil || !seg.CreatedAt.Equal(fixtureStart) {
				t.Fatalf("new segment = %+v, want a draft at version 0 without definition", seg)
			}
			got := f.get(tenant, seg.ID)
			if got.Name != tc.wantName || got.Description != tc.in.Description || got.Status != segment.StatusDraft {
				t.Fatalf("stored segment = %+v", got)
			}
		})
	}
	if n := f.count(`SELECT count(*) FROM segments WHERE tenant_id = $1`, other); n != 0 {
		t.Fatalf("the other tenant got %d segments", n)
	}
}

func TestTenantScoping(t *testing.T) {
	f := newSegFixture(t)
	a, b, empty := f.tenant("tenant-a"), f.tenant("tenant-b"), f.tenant("tenant-c")
	a1 := f.segment(a, "rule", "a1", defPro)
	a2 := f.segment(a, "rule", "a2", "")
	b1 := f.segment(b, "rule", "b1", defPro)

	t.Run("list", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			tenant int64
			want   []int64
		}{
			{"tenant a oldest first", a, []int64{a1.ID, a2.ID}},
			{"tenant b", b, []int64{b1.ID}},
			{"tenant without segments", empty, []int64{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				list, err := f.svc.List(f.ctx, tc.tenant)
				if err != nil {
					t.Fatal(err)
				}
				if list == nil {
					t.Fatal("list is nil, want an empty slice")
				}
				ids := make([]int64, len(list))
				for i, s := range list {
					ids[i] = s.ID
					if s.TenantID != tc.tenant {
						t.Fatalf("segment %d of tenant %d listed for tenant %d", s.ID, s.TenantID, tc.tenant)
					}
				}
				if !slices.Equal(ids, tc.want) {
					t.Fatalf("ids = %v, want %v", ids, tc.want)
				}
			})
		}
	})

	// Every operation on another tenant's segment is ErrNotFound.
	ops := []struct {
		name string
		fn   func() error
	}{
		{"get", func() error { _, err := f.svc.Get(f.ctx, a, b1.ID); return err }},
		{"get missing id", func() error { _, err := f.svc.Get(f.ctx, a, 999999); return err }},
		{"update", func() error {
			_, err := f.svc.Update(f.ctx, a, b1.ID, segment.UpdateInput{Name: new("stolen")})
			return err
		}},
		{"delete", func() error { return f.svc.Delete(f.ctx, a, b1.ID) }},
		{"versions", func() error { _, err := f.svc.Versions(f.ctx, a, b1.ID); return err }},
		{"mark queued", func() error { _, err := f.svc.MarkQueued(f.ctx, a, b1.ID); return err }},
		{"begin run", func() error { _, err := f.svc.BeginRun(f.ctx, a, b1.ID, "wf"); return err }},
		{"members", func() error { _, err := f.svc.Members(f.ctx, a, b1.ID, 10, ""); return err }},
		{"export", func() error { _, err := f.svc.CreateExport(f.ctx, a, b1.ID, segment.ExportInput{}); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			if err := op.fn(); !errors.Is(err, errs.ErrNotFound) {
				t.Fatalf("error = %v, want errs.ErrNotFound", err)
			}
		})
	}
	if got := f.get(b, b1.ID); got.Name != "b1" || got.Version != 1 {
		t.Fatalf("tenant b's segment changed: %+v", got)
	}
}

func TestUpdateDefinitionValidation(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	rule := f.segment(tenant, "rule", "rule", "")
	ai := f.segment(tenant, "ai", "ai", "")
	look := f.segment(tenant, "lookalike", "look", "")
	tests := []struct {
		name       string
		seg        *segment.Segment
		def        string
		wantFields []string // nil: accepted
	}{
		{name: "rule definition on a rule segment", seg: rule, def: defOrdered},
		{name: "rule definition on an ai segment", seg: ai, def: defPro},
		{name: "lookalike definition on a lookalike segment", seg: look, def: fmt.Sprintf(`{"seed_segment_id":%d,"size":10}`, rule.ID)},
		{name: "lookalike min similarity", seg: look, def: fmt.Sprintf(`{"seed_segment_id":%d,"min_similarity":0.5}`, rule.ID)},
		{name: "lookalike definition on a rule segment", seg: rule, def: fmt.Sprintf(`{"seed_segment_id":%d,"size":10}`, rule.ID),
			wantFields: []string{"conditions", "seed_segment_id", "size"}},
		{name: "rule definition on a lookalike segment", seg: look, def: defOrdered,
			wantFields: []string{"definition", "definition.conditions", "definition.logic", "definition.seed_segment_id"}},
		{name: "bad operator", seg: rule, def: `{"logic":"AND","conditions":[{"type":"frequency","event_type":"e","operator":"bigger","value":1}]}`,
			wantFields: []string{"conditions[0].operator"}},
		{name: "nested bad value", seg: rule, def: `{"logic":"OR","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"pro"},{"logic":"AND","conditions":[{"type":"frequency","event_type":"e","operator":"gt","value":-1}]}]}`,
			wantFields: []string{"conditions[1].conditions[0].value"}},
		{name: "several problems at their paths", seg: rule, def: `{"logic":"XOR","conditions":[{"type":"nope"},{"type":"trait","trait":"","operator":"eq","value":1}]}`,
			wantFields: []string{"logic", "conditions[0].type", "conditions[1].trait"}},
		{name: "empty conditions", seg: rule, def: `{"logic":"AND","conditions":[]}`, wantFields: []string{"conditions"}},
		{name: "not an object", seg: rule, def: `[1,2]`, wantFields: []string{"definition"}},
		{name: "lookalike seed itself", seg: look, def: fmt.Sprintf(`{"seed_segment_id":%d,"size":10}`, look.ID), wantFields: []string{"definition.seed_segment_id"}},
		{name: "lookalike seed missing", seg: look, def: `{"seed_segment_id":999999,"size":10}`, wantFields: []string{"definition.seed_segment_id"}},
		{name: "lookalike size and min similarity", seg: look, def: fmt.Sprintf(`{"seed_segment_id":%d,"size":10,"min_similarity":0.5}`, rule.ID), wantFields: []string{"definition"}},
		{name: "lookalike size zero", seg: look, def: fmt.Sprintf(`{"seed_segment_id":%d,"size":0}`, rule.ID), wantFields: []string{"definition.size"}},
		{name: "lookalike min similarity above one", seg: look, def: fmt.Sprintf(`{"seed_segment_id":%d,"min_similarity":1.5}`, rule.ID), wantFields: []string{"definition.min_similarity"}},
		{name: "null definition", seg: rule, def: `null`, wantFields: []string{"definition"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.get(tenant, tc.seg.ID)
			res, err := f.svc.Update(f.ctx, tenant, tc.seg.ID, segment.UpdateInput{Definition: json.RawMessage(tc.def)})
			if tc.wantFields != nil {
				testenv.WantFieldErrors(t, err, testenv.FieldNames(tc.wantFields...))
				after := f.get(tenant, tc.seg.ID)
				if after.Version != before.Version || string(after.Definition) != string(before.Definition) {
					t.Fatalf("a rejected definition changed the segment: version %d -> %d", before.Version, after.Version)
				}
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if !res.DefinitionChanged || res.Segment.Version != before.Version+1 {
				t.Fatalf("result = %+v (version %d), want a new version after %d", res, res.Segment.Version, before.Version)
			}
		})
	}
}

func TestUpdateVersions(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "buyers", "")
	look := f.segment(tenant, "lookalike", "look", "")
	steps := []struct {
		name        string
		seg         *segment.Segment
		def         string
		wantChanged bool
		wantVersion int
	}{
		{"first definition", seg, defOrdered, true, 1},
		{"same definition again", seg, defOrdered, false, 1},
		{"same definition, other layout", seg, `{ "conditions": [ {"value": 1, "operator": "gte", "event_type": "order_completed", "type": "frequency"} ], "logic": "and" }`, false, 1},
		{"default logic spelled out or not", seg, `{"conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":1.0}]}`, false, 1},
		{"new definition", seg, defOrderedTwice, true, 2},
		{"back to the first", seg, defOrdered, true, 3},
		{"lookalike first", look, fmt.Sprintf(`{"seed_segment_id":%d,"size":50}`, seg.ID), true, 1},
		{"lookalike again, other layout", look, fmt.Sprintf(`{ "size": 50, "seed_segment_id": %d }`, seg.ID), false, 1},
		{"lookalike new size", look, fmt.Sprintf(`{"seed_segment_id":%d,"size":60}`, seg.ID), true, 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			f.clock.Advance(time.Minute)
			res, err := f.svc.Update(f.ctx, tenant, st.seg.ID, segment.UpdateInput{Definition: json.RawMessage(st.def)})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if res.DefinitionChanged != st.wantChanged || res.Segment.Version != st.wantVersion {
				t.Fatalf("changed = %v, version = %d; want %v, %d", res.DefinitionChanged, res.Segment.Version, st.wantChanged, st.wantVersion)
			}
			versions, err := f.svc.Versions(f.ctx, tenant, st.seg.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(versions) != st.wantVersion {
				t.Fatalf("%d versions stored, want %d", len(versions), st.wantVersion)
			}
			for i, v := range versions {
				if v.Version != st.wantVersion-i {
					t.Fatalf("versions out of order: %d at %d", v.Version, i)
				}
			}
			if !jsonEqual(t, versions[0].Definition, res.Segment.Definition) {
				t.Fatalf("newest version %s differs from the segment's definition %s", versions[0].Definition, res.Segment.Definition)
			}
		})
	}
	versions, err := f.svc.Versions(f.ctx, tenant, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, versions[0].Definition, json.RawMessage(defOrdered)) || !jsonEqual(t, versions[1].Definition, json.RawMessage(defOrderedTwice)) ||
		!jsonEqual(t, versions[2].Definition, json.RawMessage(defOrdered)) {
		t.Fatalf("version definitions = %s | %s | %s", versions[0].Definition, versions[1].Definition, versions[2].Definition)
	}
	if !versions[0].CreatedAt.After(versions[2].CreatedAt) || versions[0].ComputedCountAtVersion != nil {
		t.Fatalf("newest version = %+v, oldest = %+v", versions[0], versions[2])
	}
	// Name and description alone never add a version.
	res, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{Name: new(" Renamed "), Description: new("about")})
	if err != nil {
		t.Fatal(err)
	}
	if res.DefinitionChanged || res.Segment.Version != 3 || res.Segment.Name != "Renamed" || res.Segment.Description != "about" {
		t.Fatalf("rename = %+v", res)
	}
	if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{Name: new("")}); !errors.Is(err, errs.ErrInvalid) || validationFields(err)["name"] == "" {
		t.Fatalf("empty name: %v", err)
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestUpdateSegmentReferences(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	a := f.segment(tenant, "rule", "a", "")
	b := f.segment(tenant, "rule", "b", "")
	c := f.segment(tenant, "rule", "c", "")
	look := f.segment(tenant, "lookalike", "look", "")
	foreign := f.segment(other, "rule", "foreign", defPro)

	steps := []struct {
		name    string
		seg     *segment.Segment
		def     string
		wantErr bool
	}{
		{"unknown segment", a, inSegmentDef(999999), true},
		{"another tenant's segment", a, inSegmentDef(foreign.ID), true},
		{"self", a, inSegmentDef(a.ID), true},
		{"self nested and negated", a, fmt.Sprintf(`{"logic":"OR","conditions":[{"type":"trait","trait":"plan","operator":"exists"},{"logic":"AND","conditions":[{"type":"in_segment","segment_id":%d,"negate":true}]}]}`, a.ID), true},
		{"a refers to b", a, inSegmentDef(b.ID), false},
		{"b refers back to a", b, inSegmentDef(a.ID), true},
		{"b refers to c", b, inSegmentDef(c.ID), false},
		{"c closes a -> b -> c -> a", c, inSegmentDef(a.ID), true},
		{"c refers to nothing", c, defPro, false},
		{"lookalike seeded by a", look, fmt.Sprintf(`{"seed_segment_id":%d,"size":5}`, a.ID), false},
		{"c refers to the lookalike seeded by a", c, inSegmentDef(look.ID), true},
		{"a diamond is no cycle", a, inSegmentDef(b.ID, c.ID), false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := f.get(tenant, st.seg.ID).Version
			res, err := f.svc.Update(f.ctx, tenant, st.seg.ID, segment.UpdateInput{Definition: json.RawMessage(st.def)})
			if st.wantErr {
				if !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("error = %v, want errs.ErrInvalid", err)
				}
				if v := f.get(tenant, st.seg.ID).Version; v != before {
					t.Fatalf("rejected definition stored: version %d -> %d", before, v)
				}
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if !res.DefinitionChanged {
				t.Fatalf("definition not changed")
			}
		})
	}

	// The preview checks references the same way.
	if _, err := f.svc.Preview(f.ctx, tenant, json.RawMessage(inSegmentDef(foreign.ID)), 10, nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("preview with another tenant's segment: %v", err)
	}
}

// A lookalike seeded by a segment that refers to the lookalike closes a cycle too.
func TestUpdateLookalikeCycle(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	look := f.segment(tenant, "lookalike", "look", "")
	rule := f.segment(tenant, "rule", "rule", inSegmentDef(look.ID))
	_, err := f.svc.Update(f.ctx, tenant, look.ID, segment.UpdateInput{Definition: json.RawMessage(fmt.Sprintf(`{"seed_segment_id":%d,"size":5}`, rule.ID))})
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("lookalike seeded by a segment that refers back to it: error = %v, want errs.ErrInvalid", err)
	}
}

func TestUpdateRefreshEvery(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "rule", "refresh", defPro)
	steps := []struct {
		name        string
		in          string
		wantErr     bool
		wantChanged bool
		wantEvery   string // "" for off
		wantSecs    int
	}{
		{name: "off while off", in: "off", wantChanged: false},
		{name: "empty while off", in: "", wantChanged: false},
		{name: "one hour", in: "1h", wantChanged: true, wantEvery: "1h", wantSecs: 3600},
		{name: "one hour again", in: "1h", wantChanged: false, wantEvery: "1h", wantSecs: 3600},
		{name: "sixty minutes is one hour", in: "60m", wantChanged: false, wantEvery: "1h", wantSecs: 3600},
		{name: "thirty minutes", in: "30m", wantChanged: true, wantEvery: "30m", wantSecs: 1800},
		{name: "one day upper case", in: " 1D ", wantChanged: true, wantEvery: "1d", wantSecs: 86400},
		{name: "too short", in: "2m", wantErr: true, wantEvery: "1d", wantSecs: 86400},
		{name: "too long", in: "40d", wantErr: true, wantEvery: "1d", wantSecs: 86400},
		{name: "zero", in: "0h", wantErr: true, wantEvery: "1d", wantSecs: 86400},
		{name: "no unit", in: "10", wantErr: true, wantEvery: "1d", wantSecs: 86400},
		{name: "seconds", in: "600s", wantErr: true, wantEvery: "1d", wantSecs: 86400},
		{name: "words", in: "hourly", wantErr: true, wantEvery: "1d", wantSecs: 86400},
		{name: "the maximum", in: "31d", wantChanged: true, wantEvery: "31d", wantSecs: 31 * 86400},
		{name: "the minimum", in: "5m", wantChanged: true, wantEvery: "5m", wantSecs: 300},
		{name: "ninety minutes", in: "90m", wantChanged: true, wantEvery: "90m", wantSecs: 5400},
		{name: "off", in: "off", wantChanged: true},
		{name: "empty after off", in: "", wantChanged: false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			res, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{RefreshEvery: new(st.in)})
			if st.wantErr {
				testenv.WantFieldErrors(t, err, testenv.FieldNames("refresh_every"))
			} else {
				if err != nil {
					t.Fatalf("update: %v", err)
				}
				if res.RefreshChanged != st.wantChanged || res.DefinitionChanged {
					t.Fatalf("RefreshChanged = %v, DefinitionChanged = %v; want %v, false", res.RefreshChanged, res.DefinitionChanged, st.wantChanged)
				}
			}
			got := f.get(tenant, seg.ID)
			switch {
			case st.wantEvery == "" && (got.RefreshEvery != nil || got.RefreshEverySecs != nil):
				t.Fatalf("refresh_every = %v, want off", *got.RefreshEvery)
			case st.wantEvery != "" && (got.RefreshEvery == nil || *got.RefreshEvery != st.wantEvery || *got.RefreshEverySecs != st.wantSecs):
				t.Fatalf("refresh_every = %v (%v), want %s (%d s)", got.RefreshEvery, got.RefreshEverySecs, st.wantEvery, st.wantSecs)
			}
		})
	}
}

func TestDeleteSegment(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	for _, u := range []string{"u1", "u2", "u3"} {
		f.profile(tenant, u, `{"plan":"pro"}`)
		f.profile(other, u, `{"plan":"pro"}`)
	}
	doomed := f.segment(tenant, "rule", "doomed", defPro)
	kept := f.segment(tenant, "rule", "kept", defPro)
	otherSeg := f.segment(other, "rule", "theirs", defPro)
	for _, s := range []struct{ tenant, id int64 }{{tenant, doomed.ID}, {tenant, kept.ID}, {other, otherSeg.ID}} {
		f.compute(s.tenant, s.id)
	}
	version := func(tn int64) int64 {
		return f.count(`SELECT COALESCE((SELECT version FROM segment_cache_versions WHERE tenant_id = $1), 0)`, tn)
	}
	before, otherBefore := version(tenant), version(other)
	if before == 0 {
		t.Fatal("computes did not bump the cache version")
	}
	if _, err := f.svc.CreateExport(f.ctx, tenant, doomed.ID, segment.ExportInput{Format: "csv"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		tenant  int64
		id      int64
		wantErr error
	}{
		{"another tenant cannot delete", other, doomed.ID, errs.ErrNotFound},
		{"delete", tenant, doomed.ID, nil},
		{"delete twice", tenant, doomed.ID, errs.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := f.svc.Delete(f.ctx, tc.tenant, tc.id)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := f.svc.Get(f.ctx, tenant, doomed.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	checks := []struct {
		name string
		sql  string
		args []any
		want int64
	}{
		{"members of the deleted segment", `SELECT count(*) FROM segment_members WHERE segment_id = $1`, []any{doomed.ID}, 0},
		{"versions of the deleted segment", `SELECT count(*) FROM segment_versions WHERE segment_id = $1`, []any{doomed.ID}, 0},
		{"runs of the deleted segment", `SELECT count(*) FROM segment_runs WHERE segment_id = $1`, []any{doomed.ID}, 0},
		{"changes of the deleted segment", `SELECT count(*) FROM segment_member_changes WHERE segment_id = $1`, []any{doomed.ID}, 0},
		{"exports of the deleted segment", `SELECT count(*) FROM segment_exports WHERE segment_id = $1`, []any{doomed.ID}, 0},
		{"members of the kept segment", `SELECT count(*) FROM segment_members WHERE segment_id = $1`, []any{kept.ID}, 3},
		{"members of the other tenant", `SELECT count(*) FROM segment_members WHERE segment_id = $1`, []any{otherSeg.ID}, 3},
		{"cache version bumped once", `SELECT version FROM segment_cache_versions WHERE tenant_id = $1`, []any{tenant}, before + 1},
		{"other tenant's cache version kept", `SELECT version FROM segment_cache_versions WHERE tenant_id = $1`, []any{other}, otherBefore},
	}
	for _, c := range checks {
		if got := f.count(c.sql, c.args...); got != c.want {
			t.Errorf("%s = %d, want %d", c.name, got, c.want)
		}
	}
	if m, err := f.svc.Membership(f.ctx, tenant, "u1"); err != nil || !slices.Equal(m.SegmentIDs, []int64{kept.ID}) {
		t.Fatalf("membership after delete = %v, %v; want [%d]", m.SegmentIDs, err, kept.ID)
	}
}

func TestMarkQueued(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	bare := f.segment(tenant, "rule", "bare", "")
	defined := f.segment(tenant, "rule", "defined", defPro)
	computing := f.segment(tenant, "rule", "computing", defPro)
	if _, err := f.svc.BeginRun(f.ctx, tenant, computing.ID, "wf"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		id         int64
		wantErr    error
		wantStatus string
	}{
		{"no definition", bare.ID, errs.ErrConflict, ""},
		{"draft with definition", defined.ID, nil, segment.StatusQueued},
		{"queued again", defined.ID, nil, segment.StatusQueued},
		{"already computing stays computing", computing.ID, nil, segment.StatusComputing},
		{"missing", 999999, errs.ErrNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seg, err := f.svc.MarkQueued(f.ctx, tenant, tc.id)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if seg.Status != tc.wantStatus {
				t.Fatalf("status = %s, want %s", seg.Status, tc.wantStatus)
			}
		})
	}
	if s := f.get(tenant, bare.ID); s.Status != segment.StatusDraft {
		t.Fatalf("segment without definition got status %s", s.Status)
	}
	if err := f.svc.MarkError(f.ctx, tenant, defined.ID, "could not start: "+strings.Repeat("x", 3000)); err != nil {
		t.Fatal(err)
	}
	if s := f.get(tenant, defined.ID); s.Status != segment.StatusError || s.LastError == nil || !strings.HasPrefix(*s.LastError, "could not start: ") || len(*s.LastError) > 2003 {
		t.Fatalf("after MarkError: %+v", s)
	}
}

func TestComputeLifecycle(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	seg := f.segment(tenant, "rule", "buyers", "")

	if _, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "wf-0"); !errors.Is(err, segment.ErrNoDefinition) {
		t.Fatalf("BeginRun without definition: %v, want ErrNoDefinition", err)
	}
	if n := f.count(`SELECT count(*) FROM segment_runs`); n != 0 {
		t.Fatalf("%d runs recorded without a definition", n)
	}
	if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: json.RawMessage(defOrdered)}); err != nil {
		t.Fatal(err)
	}
	f.event(tenant, "u1", "order_completed", 1, `{"amount":10}`)
	f.event(tenant, "u1", "order_completed", 2, `{"amount":20}`)
	f.event(tenant, "u2", "order_completed", 3, `{"amount":5}`)
	f.event(tenant, "u3", "page_view", 1, `{}`)
	f.event(tenant, "u5", "order_completed", 400, `{}`)
	// The same users in another tenant must not leak in.
	f.event(other, "u3", "order_completed", 1, `{}`)
	f.event(other, "u4", "order_completed", 1, `{}`)

	t0 := f.clock.Now()
	run, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "wf-1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Version != 1 || run.Status != "running" || run.WorkflowID != "wf-1" || !run.StartedAt.Equal(t0) {
		t.Fatalf("run = %+v", run)
	}
	if s := f.get(tenant, seg.ID); s.Status != segment.StatusComputing {
		t.Fatalf("status while computing = %s", s.Status)
	}
	res, err := f.svc.Materialize(f.ctx, tenant, run.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (segment.RunResult{RunID: run.ID, Version: 1, LatestVersion: 1, Matched: 3, Entered: 3, Exited: 0}); res != want {
		t.Fatalf("first run = %+v, want %+v", res, want)
	}
	s := f.get(tenant, seg.ID)
	if s.Status != segment.StatusReady || s.ComputedCount != 3 || s.ComputedVersion == nil || *s.ComputedVersion != 1 ||
		s.LastComputedAt == nil || !s.LastComputedAt.Equal(t0) || s.LastError != nil {
		t.Fatalf("segment after compute = %+v", s)
	}
	versions, err := f.svc.Versions(f.ctx, tenant, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if versions[0].ComputedCountAtVersion == nil || *versions[0].ComputedCountAtVersion != 3 {
		t.Fatalf("computed_count_at_version = %v, want 3", versions[0].ComputedCountAtVersion)
	}
	if got := f.members(tenant, seg.ID); !slices.Equal(got, []string{"u1", "u2", "u5"}) {
		t.Fatalf("members = %v", got)
	}
	entered, exited, err := f.svc.Changes(f.ctx, tenant, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(entered, []string{"u1", "u2", "u5"}) || len(exited) != 0 {
		t.Fatalf("changes of the first run: entered %v exited %v", entered, exited)
	}
	var status string
	var matched, ent, exi int64
	var finished time.Time
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT status, matched, entered, exited, finished_at FROM segment_runs WHERE id = $1`, run.ID).
		Scan(&status, &matched, &ent, &exi, &finished); err != nil {
		t.Fatal(err)
	}
	if status != "ready" || matched != 3 || ent != 3 || exi != 0 || !finished.Equal(t0) {
		t.Fatalf("run row: %s %d %d %d %v", status, matched, ent, exi, finished)
	}
	if m, err := f.svc.Membership(f.ctx, tenant, "u1"); err != nil || !slices.Equal(m.SegmentIDs, []int64{seg.ID}) {
		t.Fatalf("membership of u1 = %v %v", m.SegmentIDs, err)
	}
	if m, err := f.svc.Membership(f.ctx, other, "u1"); err != nil || len(m.SegmentIDs) != 0 || m.SegmentIDs == nil {
		t.Fatalf("membership of u1 in the other tenant = %#v %v, want []", m.SegmentIDs, err)
	}

	// The data changes: u2's order goes away, u3 and u4 order.
	f.clock.Advance(time.Hour)
	t1 := f.clock.Now()
	f.exec(`DELETE FROM warehouse.events WHERE tenant_id = $1 AND user_id = 'u2'`, tenant)
	f.rebuildStats(tenant)
	f.event(tenant, "u3", "order_completed", 0.5, `{}`)
	f.event(tenant, "u4", "order_completed", 0.5, `{}`)
	res2 := f.compute(tenant, seg.ID)
	if res2.Matched != 4 || res2.Entered != 2 || res2.Exited != 1 || res2.Version != 1 || res2.RunID == run.ID {
		t.Fatalf("second run = %+v", res2)
	}
	entered, exited, err = f.svc.Changes(f.ctx, tenant, res2.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(entered, []string{"u3", "u4"}) || !slices.Equal(exited, []string{"u2"}) {
		t.Fatalf("changes of the second run: entered %v exited %v", entered, exited)
	}
	page, err := f.svc.Members(f.ctx, tenant, seg.ID, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	wantAt := map[string]time.Time{"u1": t0, "u3": t1, "u4": t1, "u5": t0}
	if len(page.Results) != len(wantAt) || page.Count != 4 || page.NextCursor != nil {
		t.Fatalf("members page = %+v", page)
	}
	for _, m := range page.Results {
		if at, ok := wantAt[m.UserID]; !ok || !m.ComputedAt.Equal(at) || m.Score != nil {
			t.Errorf("member %s computed at %v (score %v), want %v", m.UserID, m.ComputedAt, m.Score, wantAt[m.UserID])
		}
	}
	if s := f.get(tenant, seg.ID); s.ComputedCount != 4 || !s.LastComputedAt.Equal(t1) {
		t.Fatalf("segment after the second run = %+v", s)
	}

	// A new version is computed against the current members.
	if _, err := f.svc.Update(f.ctx, tenant, seg.ID, segment.UpdateInput{Definition: json.RawMessage(defOrderedTwice)}); err != nil {
		t.Fatal(err)
	}
	res3 := f.compute(tenant, seg.ID)
	if res3.Version != 2 || res3.Matched != 1 || res3.Exited != 3 || res3.Entered != 0 {
		t.Fatalf("run of version 2 = %+v", res3)
	}
	if got := f.members(tenant, seg.ID); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("members of version 2 = %v", got)
	}
	versions, err = f.svc.Versions(f.ctx, tenant, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *versions[0].ComputedCountAtVersion != 1 || *versions[1].ComputedCountAtVersion != 4 {
		t.Fatalf("computed counts at versions 2, 1 = %d, %d", *versions[0].ComputedCountAtVersion, *versions[1].ComputedCountAtVersion)
	}
}

func TestMaterializeIdempotent(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	for _, u := range []string{"u1", "u2", "u3"} {
		f.profile(tenant, u, `{"plan":"pro"}`)
	}
	seg := f.segment(tenant, "rule", "pro", defPro)
	run, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "wf")
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.svc.Materialize(f.ctx, tenant, run.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The data changes; a retry of the same run must not compute again.
	f.profile(tenant, "u1", `{"plan":"free"}`)
	f.profile(tenant, "u4", `{"plan":"pro"}`)
	f.clock.Advance(time.Hour)
	cacheVersion := f.count(`SELECT version FROM segment_cache_versions WHERE tenant_id = $1`, tenant)
	for i := range 2 {
		again, err := f.svc.Materialize(f.ctx, tenant, run.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Fatalf("retry %d = %+v, want %+v", i, again, first)
		}
	}
	if got := f.members(tenant, seg.ID); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Fatalf("members after retries = %v", got)
	}
	// The first run of a segment is initial: its diff is the members it brought in.
	if entered, exited, err := f.svc.Changes(f.ctx, tenant, run.ID); err != nil || len(entered) != 3 || len(exited) != 0 {
		t.Fatalf("changes of the initial run: %v %v %v, want 3 entered", entered, exited, err)
	}
	if v := f.count(`SELECT version FROM segment_cache_versions WHERE tenant_id = $1`, tenant); v != cacheVersion {
		t.Fatalf("a retry bumped the cache version %d -> %d", cacheVersion, v)
	}
	if s := f.get(tenant, seg.ID); !s.LastComputedAt.Equal(fixtureStart) {
		t.Fatalf("a retry moved last_computed_at to %v", s.LastComputedAt)
	}
	if _, err := f.svc.Materialize(f.ctx, tenant, 999999, nil); err == nil {
		t.Fatal("materialize of a missing run succeeded")
	}
	other := f.tenant("other")
	if _, err := f.svc.Materialize(f.ctx, other, run.ID, nil); err == nil {
		t.Fatal("another tenant materialized the run")
	}
}

// Two attempts of the same run at once (a retried activity whose first attempt is still going)
// compute it once: both get the same result and the run keeps its diff.
func TestMaterializeConcurrentAttempts(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	for _, u := range []string{"u1", "u2", "u3"} {
		f.profile(tenant, u, `{"plan":"pro"}`)
	}
	seg := f.segment(tenant, "rule", "pro", defPro)
	run, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "wf")
	if err != nil {
		t.Fatal(err)
	}
	// Hold the segment's compute lock so both attempts get past their start before either runs.
	tx, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	key, err := store.LockKey(store.LockSegmentCompute, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]segment.RunResult, 2)
	errsOut := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { results[i], errsOut[i] = f.svc.Materialize(f.ctx, tenant, run.ID, nil) })
	}
	deadline := time.Now().Add(10 * time.Second)
	// Only this segment's compute lock in this database: other tests hold and wait for their own.
	for f.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND objsubid = 1
		AND (classid::bigint << 32 | objid::bigint) = $1`, key) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the attempts never waited for the compute lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	want := segment.RunResult{RunID: run.ID, Version: 1, LatestVersion: 1, Matched: 3, Entered: 3}
	for i := range 2 {
		if errsOut[i] != nil {
			t.Fatalf("attempt %d: %v", i, errsOut[i])
		}
		if results[i] != want {
			t.Errorf("attempt %d = %+v, want %+v", i, results[i], want)
		}
	}
	var entered int64
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT entered FROM segment_runs WHERE id = $1`, run.ID).Scan(&entered); err != nil {
		t.Fatal(err)
	}
	if entered != 3 {
		t.Fatalf("run records %d entered, want 3", entered)
	}
}

func TestFailRun(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	f.profile(tenant, "u1", `{"plan":"pro"}`)
	seg := f.segment(tenant, "rule", "pro", defPro)
	run, err := f.svc.BeginRun(f.ctx, tenant, seg.ID, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.FailRun(f.ctx, other, run.ID, "not yours"); err == nil {
		t.Fatal("another tenant failed the run")
	}
	if err := f.svc.FailRun(f.ctx, tenant, run.ID, "warehouse unavailable"); err != nil {
		t.Fatal(err)
	}
	s := f.get(tenant, seg.ID)
	if s.Status != segment.StatusError || s.LastError == nil || *s.LastError != "warehouse unavailable" {
		t.Fatalf("segment after FailRun = %+v", s)
	}
	var status, msg string
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT status, error FROM segment_runs WHERE id = $1`, run.ID).Scan(&status, &msg); err != nil {
		t.Fatal(err)
	}
	if status != "error" || msg != "warehouse unavailable" {
		t.Fatalf("run = %s %q", status, msg)
	}
	// The next successful compute clears the error.
	res := f.compute(tenant, seg.ID)
	if res.Matched != 1 {
		t.Fatalf("recompute = %+v", res)
	}
	if s := f.get(tenant, seg.ID); s.Status != segment.StatusReady || s.LastError != nil {
		t.Fatalf("segment after recovery = %+v", s)
	}
}

func TestInSegmentCompute(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	for u, traits := range map[string]string{
		"u1": `{"plan":"pro","country":"fr"}`,
		"u2": `{"plan":"pro","country":"de"}`,
		"u3": `{"plan":"free","country":"fr"}`,
		"u4": `{"country":"fr"}`,
	} {
		f.profile(tenant, u, traits)
		f.profile(other, u, `{"plan":"pro","country":"fr"}`)
	}
	pro := f.segment(tenant, "rule", "pro", defPro)
	f.compute(tenant, pro.ID)
	otherPro := f.segment(other, "rule", "pro", defPro)
	f.compute(other, otherPro.ID)
	french := `{"type":"trait","trait":"country","operator":"eq","value":"fr"}`
	tests := []struct {
		name string
		def  string
		want []string
	}{
		{"member of pro and french", fmt.Sprintf(`{"logic":"AND","conditions":[{"type":"in_segment","segment_id":%d},%s]}`, pro.ID, french), []string{"u1"}},
		{"french not in pro", fmt.Sprintf(`{"logic":"AND","conditions":[{"type":"in_segment","segment_id":%d,"negate":true},%s]}`, pro.ID, french), []string{"u3", "u4"}},
		{"pro or french", fmt.Sprintf(`{"logic":"OR","conditions":[{"type":"in_segment","segment_id":%d},%s]}`, pro.ID, french), []string{"u1", "u2", "u3", "u4"}},
		{"only pro", inSegmentDef(pro.ID), []string{"u1", "u2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seg := f.segment(tenant, "rule", tc.name, tc.def)
			res := f.compute(tenant, seg.ID)
			if got := f.members(tenant, seg.ID); !slices.Equal(got, tc.want) || res.Matched != int64(len(tc.want)) {
				t.Fatalf("members = %v (matched %d), want %v", got, res.Matched, tc.want)
			}
			p, err := f.svc.Preview(f.ctx, tenant, json.RawMessage(tc.def), 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.SampleUserIDs, tc.want) {
				t.Fatalf("preview = %v, want %v", p.SampleUserIDs, tc.want)
			}
		})
	}
	// The referenced segment's membership is read at compute time.
	dependent := f.segment(tenant, "rule", "dependent", inSegmentDef(pro.ID))
	f.compute(tenant, dependent.ID)
	f.profile(tenant, "u2", `{"plan":"free"}`)
	f.compute(tenant, pro.ID)
	res := f.compute(tenant, dependent.ID)
	if got := f.members(tenant, dependent.ID); !slices.Equal(got, []string{"u1"}) || res.Exited != 1 {
		t.Fatalf("dependent after pro changed = %v (%+v)", got, res)
	}
}

func TestMembersPagination(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.exec(`INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at)
		SELECT $1, 'u' || lpad(g::text, 5, '0'), '{"member":true}', now(), now() FROM generate_series(0, 2499) g`, tenant)
	seg := f.segment(tenant, "rule", "everyone", defMember)
	if res := f.compute(tenant, seg.ID); res.Matched != 2500 {
		t.Fatalf("matched %d, want 2500", res.Matched)
	}
	tests := []struct {
		name      string
		limit     int
		wantPages []int
	}{
		{"limit 1000", 1000, []int{1000, 1000, 500}},
		{"limit 500 divides evenly", 500, []int{500, 500, 500, 500, 500}},
		{"limit 999", 999, []int{999, 999, 502}},
		{"limits above the maximum are clamped to 1000", 2500, []int{1000, 1000, 500}},
		{"limit 1", 1, nil}, // checked by count only
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sizes []int
			seen := map[string]bool{}
			last := ""
			cursor := ""
			for {
				page, err := f.svc.Members(f.ctx, tenant, seg.ID, tc.limit, cursor)
				if err != nil {
					t.Fatal(err)
				}
				if page.Count != 2500 {
					t.Fatalf("count = %d", page.Count)
				}
				sizes = append(sizes, len(page.Results))
				for _, m := range page.Results {
					if seen[m.UserID] {
						t.Fatalf("%s listed twice", m.UserID)
					}
					if m.UserID <= last {
						t.Fatalf("%s after %s: not in order", m.UserID, last)
					}
					seen[m.UserID], last = true, m.UserID
				}
				if page.NextCursor == nil {
					break
				}
				if len(page.Results) != min(tc.limit, segment.MaxMembersLimit) {
					t.Fatalf("a page of %d with a next cursor", len(page.Results))
				}
				cursor = *page.NextCursor
			}
			if len(seen) != 2500 {
				t.Fatalf("%d distinct members listed, want 2500", len(seen))
			}
			if tc.wantPages != nil && !slices.Equal(sizes, tc.wantPages) {
				t.Fatalf("page sizes = %v, want %v", sizes, tc.wantPages)
			}
		})
	}
	t.Run("bad cursors", func(t *testing.T) {
		for _, c := range []string{"!!!", "dTp1MDAwMDE=", "eDp1MDAwMDE", "dQ", "not a cursor"} {
			if _, err := f.svc.Members(f.ctx, tenant, seg.ID, 10, c); !errors.Is(err, errs.ErrInvalid) || validationFields(err)["cursor"] == "" {
				t.Errorf("cursor %q: error = %v, want a cursor field error", c, err)
			}
		}
	})
	t.Run("empty segment", func(t *testing.T) {
		empty := f.segment(tenant, "rule", "nobody", defPro)
		page, err := f.svc.Members(f.ctx, tenant, empty.ID, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if page.Results == nil || len(page.Results) != 0 || page.NextCursor != nil || page.Count != 0 {
			t.Fatalf("page of a segment never computed = %+v", page)
		}
	})
}

// Paging through members while a recompute changes the membership between pages: users who stay
// members appear exactly once, in order; users who left after the cursor no longer appear.
func TestMembersStableAcrossRecompute(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	f.exec(`INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at)
		SELECT $1, 'u' || lpad(g::text, 5, '0'), '{"member":true}', now(), now() FROM generate_series(0, 2499) g`, tenant)
	seg := f.segment(tenant, "rule", "everyone", defMember)
	f.compute(tenant, seg.ID)
	before := f.members(tenant, seg.ID)

	var listed []string
	page, err := f.svc.Members(f.ctx, tenant, seg.ID, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Results {
		listed = append(listed, m.UserID)
	}
	cursor := *page.NextCursor

	// Between pages: users leave on both sides of the cursor, others join on both sides.
	f.exec(`UPDATE profiles SET traits = '{"member":false}' WHERE tenant_id = $1 AND (user_id BETWEEN 'u00500' AND 'u00599' OR user_id BETWEEN 'u01500' AND 'u01599' OR user_id = 'u01000')`, tenant)
	for _, u := range []string{"u00250a", "u00999a", "u01250a", "u02600"} {
		f.profile(tenant, u, `{"member":true}`)
	}
	f.clock.Advance(time.Minute)
	res := f.compute(tenant, seg.ID)
	if res.Exited != 201 || res.Entered != 4 {
		t.Fatalf("recompute = %+v", res)
	}
	after := f.members(tenant, seg.ID)

	for {
		page, err = f.svc.Members(f.ctx, tenant, seg.ID, 1000, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if page.Count != int64(len(after)) {
			t.Fatalf("count = %d, want %d", page.Count, len(after))
		}
		for _, m := range page.Results {
			listed = append(listed, m.UserID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}

	times := map[string]int{}
	for i, u := range listed {
		times[u]++
		if i > 0 && u <= listed[i-1] {
			t.Fatalf("%s listed after %s", u, listed[i-1])
		}
	}
	inAfter := map[string]bool{}
	for _, u := range after {
		inAfter[u] = true
	}
	stayed := 0
	for _, u := range before {
		if inAfter[u] {
			stayed++
			if times[u] != 1 {
				t.Errorf("member %s who stayed was listed %d times", u, times[u])
			}
		}
	}
	if stayed != 2500-201 {
		t.Fatalf("%d stayed, want %d", stayed, 2500-201)
	}
	for _, tc := range []struct {
		user string
		want int
	}{
		{"u00550", 1},  // left after its page was read
		{"u01000", 0},  // left before its page was read
		{"u01550", 0},  // left before its page was read
		{"u00250a", 0}, // joined before the cursor
		{"u00999a", 1}, // joined just after the cursor (u00999)
		{"u01250a", 1}, // joined after the cursor
		{"u02600", 1},  // joined at the end
	} {
		if times[tc.user] != tc.want {
			t.Errorf("%s listed %d times, want %d", tc.user, times[tc.user], tc.want)
		}
	}
}

func TestPreview(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	// Inserted out of order: the sample is sorted by user id.
	for _, u := range []string{"u3", "u1", "u5", "u2"} {
		f.profile(tenant, u, `{"plan":"pro"}`)
	}
	f.profile(tenant, "u4", `{"plan":"free"}`)
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7"} {
		f.profile(other, u, `{"plan":"pro"}`)
	}
	f.event(tenant, "u1", "order_completed", 1, `{"amount":"12.50"}`)
	f.event(tenant, "u4", "order_completed", 1, `{"amount":99}`)
	f.event(other, "u2", "order_completed", 1, `{"amount":99}`)
	tests := []struct {
		name        string
		tenant      int64
		def         string
		limit       int
		wantMatched int64
		wantSample  []string
		wantErr     error
	}{
		{name: "count and sorted sample", tenant: tenant, def: defPro, limit: 10, wantMatched: 4, wantSample: []string{"u1", "u2", "u3", "u5"}},
		{name: "sample cut at the limit", tenant: tenant, def: defPro, limit: 2, wantMatched: 4, wantSample: []string{"u1", "u2"}},
		{name: "limit 0 still counts", tenant: tenant, def: defPro, limit: 0, wantMatched: 4, wantSample: []string{}},
		{name: "other tenant's users", tenant: other, def: defPro, limit: 3, wantMatched: 7, wantSample: []string{"u1", "u2", "u3"}},
		{name: "events of the tenant only", tenant: tenant, def: defOrdered, limit: 10, wantMatched: 2, wantSample: []string{"u1", "u4"}},
		{name: "no match", tenant: tenant, def: `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"gold"}]}`, limit: 10, wantMatched: 0, wantSample: []string{}},
		{name: "no match limit 0", tenant: tenant, def: `{"logic":"AND","conditions":[{"type":"trait","trait":"plan","operator":"eq","value":"gold"}]}`, limit: 0, wantMatched: 0, wantSample: []string{}},
		{name: "monetary on a numeric string", tenant: tenant, def: `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":12},{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"lt","value":50}]}`, limit: 10, wantMatched: 1, wantSample: []string{"u1"}},
		{name: "a sum below includes users who never ordered", tenant: tenant, def: `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"lt","value":50}]}`, limit: 10, wantMatched: 4, wantSample: []string{"u1", "u2", "u3", "u5"}},
		{name: "invalid definition", tenant: tenant, def: `{"logic":"AND","conditions":[{"type":"trait"}]}`, limit: 10, wantErr: errs.ErrInvalid},
		{name: "unknown segment", tenant: tenant, def: inSegmentDef(424242), limit: 10, wantErr: errs.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := f.svc.Preview(f.ctx, tc.tenant, json.RawMessage(tc.def), tc.limit, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.MatchedUsers != tc.wantMatched || !slices.Equal(p.SampleUserIDs, tc.wantSample) || p.SampleUserIDs == nil {
				t.Fatalf("preview = %d %#v, want %d %v", p.MatchedUsers, p.SampleUserIDs, tc.wantMatched, tc.wantSample)
			}
			if !strings.Contains(p.SQL, "SELECT") || strings.Contains(p.SQL, "$1") {
				t.Fatalf("sql is not the displayed query: %s", p.SQL)
			}
		})
	}
	if n := f.count(`SELECT count(*) FROM segments`); n != 0 {
		t.Fatalf("preview stored %d segments", n)
	}
}
