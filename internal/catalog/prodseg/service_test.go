package prodseg_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

const redDef = `{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`

func TestProdsegCreateAndRead(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("crud")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString}, catalog.Field{Name: "price", Type: catalog.TypePrice})

	seg, err := f.svc.Create(f.ctx, a, prodseg.CreateInput{Name: "  Red things ", Description: "all red",
		Definition: json.RawMessage(`{"conditions":[{"value":"red","operator":"eq","field":"color"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := prodseg.Segment{ID: seg.ID, Name: "Red things", Description: "all red", Definition: json.RawMessage(`{"logic":"AND","conditions":[{"field":"color","operator":"eq","value":"red"}]}`),
		Version: 1, Status: prodseg.StatusDraft, CreatedAt: clockStart, UpdatedAt: clockStart}
	if got, w := testenv.AsJSON(t, seg), testenv.AsJSON(t, want); got != w {
		t.Errorf("created\n %s\nwant\n %s", got, w)
	}
	got, err := f.svc.Get(f.ctx, a, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.AsJSON(t, got) != testenv.AsJSON(t, want) {
		t.Errorf("get\n %s\nwant\n %s", testenv.AsJSON(t, got), testenv.AsJSON(t, want))
	}
	f.clock.Advance(time.Minute)
	second := f.create(a, "Cheap", `{"conditions":[{"field":"price","operator":"lt","value":10}]}`)
	list, err := f.svc.List(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != seg.ID || list[1].ID != second.ID || !list[1].CreatedAt.Equal(clockStart.Add(time.Minute)) {
		t.Errorf("list %s", testenv.AsJSON(t, list))
	}
	other := f.tenant("crud-other")
	if list, err := f.svc.List(f.ctx, other); err != nil || len(list) != 0 || list == nil {
		t.Errorf("another tenant's list %v %v, want an empty list", list, err)
	}

	tests := []struct {
		name  string
		in    prodseg.CreateInput
		want  map[string]string
		code  string // a coded error instead of field errors
		other bool   // as the other tenant
	}{
		{name: "no name", in: prodseg.CreateInput{Name: " ", Definition: json.RawMessage(redDef)}, want: map[string]string{"name": "is required"}},
		{name: "long name", in: prodseg.CreateInput{Name: strings.Repeat("n", 201), Definition: json.RawMessage(redDef)}, want: map[string]string{"name": "longer than 200"}},
		{name: "long description", in: prodseg.CreateInput{Name: "x", Description: strings.Repeat("d", 4001), Definition: json.RawMessage(redDef)}, want: map[string]string{"description": "longer than 4000"}},
		{name: "no definition", in: prodseg.CreateInput{Name: "x"}, want: map[string]string{"definition": "is required"}},
		{name: "null definition", in: prodseg.CreateInput{Name: "x", Definition: json.RawMessage(`null`)}, want: map[string]string{"definition": "is required"}},
		{name: "definition not an object", in: prodseg.CreateInput{Name: "x", Definition: json.RawMessage(`"red"`)}, want: map[string]string{"definition": "must be a JSON object"}},
		{name: "structural error under definition", in: prodseg.CreateInput{Name: "x", Definition: json.RawMessage(`{"conditions":[{"field":"color","operator":"eq"}]}`)},
			want: map[string]string{"definition.conditions[0].value": "is required"}},
		{name: "unknown field under definition", in: prodseg.CreateInput{Name: "x", Definition: json.RawMessage(`{"conditions":[{"field":"size","operator":"eq","value":"M"}]}`)},
			want: map[string]string{"definition.conditions[0].field": "fields: sku, name, color, price"}},
		{name: "type error under definition", in: prodseg.CreateInput{Name: "x", Definition: json.RawMessage(`{"conditions":[{"field":"price","operator":"gt","value":"10"}]}`)},
			want: map[string]string{"definition.conditions[0].value": "must be a number (price field)"}},
		{name: "name taken", in: prodseg.CreateInput{Name: "red THINGS", Definition: json.RawMessage(redDef)}, code: "name_exists"},
		{name: "a field another tenant's schema has", in: prodseg.CreateInput{Name: "x", Definition: json.RawMessage(redDef)}, other: true,
			want: map[string]string{"definition.conditions[0].field": "(fields: sku, name)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant := a
			if tt.other {
				tenant = other
			}
			_, err := f.svc.Create(f.ctx, tenant, tt.in)
			if tt.code != "" {
				coded(t, err, errs.ErrConflict, tt.code)
				return
			}
			testenv.WantFieldErrors(t, err, tt.want)
		})
	}
	// The same name in another tenant is fine.
	if _, err := f.svc.Create(f.ctx, other, prodseg.CreateInput{Name: "Red things", Definition: json.RawMessage(`{"conditions":[{"field":"sku","operator":"contains","value":"r"}]}`)}); err != nil {
		t.Errorf("same name in another tenant: %v", err)
	}
	if n := f.count("SELECT count(*) FROM product_segments WHERE tenant_id = $1", a); n != 2 {
		t.Errorf("tenant A has %d segments after the refused creates, want 2", n)
	}
}

func TestProdsegUpdate(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("update")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString})
	f.bulk(a, `{"sku":"R1","name":"one","color":"red"}`, `{"sku":"B1","name":"two","color":"blue"}`)
	seg := f.create(a, "Reds", redDef)
	f.create(a, "Blues", `{"conditions":[{"field":"color","operator":"eq","value":"blue"}]}`)
	if _, err := f.svc.Compute(f.ctx, a, seg.ID); err != nil {
		t.Fatal(err)
	}
	computedAt := clockStart

	type step struct {
		name    string
		in      prodseg.UpdateInput
		want    map[string]string // field errors
		code    string
		check   func(t *testing.T, s *prodseg.Segment)
		advance bool
	}
	steps := []step{
		{name: "rename keeps the definition and status", in: prodseg.UpdateInput{Name: new(" Red ones ")}, advance: true, check: func(t *testing.T, s *prodseg.Segment) {
			if s.Name != "Red ones" || s.Version != 1 || s.Status != prodseg.StatusReady || !s.UpdatedAt.Equal(clockStart.Add(time.Minute)) {
				t.Errorf("after rename %s", testenv.AsJSON(t, s))
			}
		}},
		{name: "same definition differently written changes nothing", in: prodseg.UpdateInput{Definition: json.RawMessage(`{ "logic": "and", "conditions": [ {"value":"red","field":"color","operator":"eq","negate":false} ] }`)},
			advance: true, check: func(t *testing.T, s *prodseg.Segment) {
				if s.Version != 1 || s.Status != prodseg.StatusReady || !s.UpdatedAt.Equal(clockStart.Add(time.Minute)) {
					t.Errorf("after an equal definition %s", testenv.AsJSON(t, s))
				}
			}},
		{name: "new definition makes it stale", in: prodseg.UpdateInput{Description: new("reds and blues"), Definition: json.RawMessage(`{"logic":"OR","conditions":[{"field":"color","operator":"eq","value":"red"},{"field":"color","operator":"eq","value":"blue"}]}`)},
			advance: true, check: func(t *testing.T, s *prodseg.Segment) {
				if s.Version != 2 || s.Status != prodseg.StatusDraft || s.Description != "reds and blues" || s.ComputedCount != 1 ||
					s.ComputedVersion == nil || *s.ComputedVersion != 1 || s.LastComputedAt == nil || !s.LastComputedAt.Equal(computedAt) {
					t.Errorf("after a new definition %s", testenv.AsJSON(t, s))
				}
				if !strings.Contains(string(s.Definition), `"logic":"OR"`) {
					t.Errorf("definition %s", s.Definition)
				}
			}},
		{name: "name of another segment in other case", in: prodseg.UpdateInput{Name: new("BLUES")}, code: "name_exists"},
		{name: "empty name", in: prodseg.UpdateInput{Name: new("")}, want: map[string]string{"name": "is required"}},
		{name: "null definition", in: prodseg.UpdateInput{Definition: json.RawMessage(`null`)}, want: map[string]string{"definition": "cannot be removed"}},
		{name: "bad definition", in: prodseg.UpdateInput{Definition: json.RawMessage(`{"conditions":[{"field":"colour","operator":"eq","value":"red"}]}`)},
			want: map[string]string{"definition.conditions[0].field": "not a field"}},
		{name: "rename to own name in other case", in: prodseg.UpdateInput{Name: new("RED ONES")}, check: func(t *testing.T, s *prodseg.Segment) {
			if s.Name != "RED ONES" || s.Version != 2 {
				t.Errorf("after a case change %s", testenv.AsJSON(t, s))
			}
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.advance {
				f.clock.Advance(time.Minute)
			}
			out, err := f.svc.Update(f.ctx, a, seg.ID, st.in)
			switch {
			case st.code != "":
				coded(t, err, errs.ErrConflict, st.code)
			case st.want != nil:
				testenv.WantFieldErrors(t, err, st.want)
			case err != nil:
				t.Fatal(err)
			default:
				st.check(t, out)
				again, _ := f.svc.Get(f.ctx, a, seg.ID)
				if testenv.AsJSON(t, again) != testenv.AsJSON(t, out) {
					t.Errorf("stored %s\nanswered %s", testenv.AsJSON(t, again), testenv.AsJSON(t, out))
				}
			}
		})
	}
	// The stale segment still serves the members of version 1 until the next compute.
	if skus, _ := f.memberSKUs(a, seg.ID, 50); !slices.Equal(skus, []string{"R1"}) {
		t.Errorf("members of the stale segment %v", skus)
	}
	res, err := f.svc.Compute(f.ctx, a, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Matched != 2 || res.Added != 1 || res.Removed != 0 || res.Version != 2 {
		t.Errorf("recompute %+v", res)
	}
	if s, _ := f.svc.Get(f.ctx, a, seg.ID); s.Status != prodseg.StatusReady || *s.ComputedVersion != 2 || s.ComputedCount != 2 {
		t.Errorf("after the recompute %s", testenv.AsJSON(t, s))
	}
}

// TestProdsegIsolation: another tenant's segment is not found by any method, and nothing of it
// changes.
func TestProdsegIsolation(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("iso-a"), f.tenant("iso-b")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString})
	f.putSchema(b, catalog.Field{Name: "color", Type: catalog.TypeString})
	f.bulk(a, `{"sku":"A1","name":"a","color":"red"}`)
	f.bulk(b, `{"sku":"B1","name":"b","color":"red"}`)
	seg := f.create(a, "Reds", redDef)
	if _, err := f.svc.Compute(f.ctx, a, seg.ID); err != nil {
		t.Fatal(err)
	}
	before := testenv.AsJSON(t, mustGet(t, f, a, seg.ID))
	calls := []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := f.svc.Get(f.ctx, b, seg.ID); return err }},
		{"update", func() error {
			_, err := f.svc.Update(f.ctx, b, seg.ID, prodseg.UpdateInput{Name: new("mine")})
			return err
		}},
		{"update definition", func() error {
			_, err := f.svc.Update(f.ctx, b, seg.ID, prodseg.UpdateInput{Definition: json.RawMessage(redDef)})
			return err
		}},
		{"delete", func() error { return f.svc.Delete(f.ctx, b, seg.ID) }},
		{"mark queued", func() error { _, err := f.svc.MarkQueued(f.ctx, b, seg.ID); return err }},
		{"begin compute", func() error { return f.svc.BeginCompute(f.ctx, b, seg.ID) }},
		{"compute", func() error { _, err := f.svc.Compute(f.ctx, b, seg.ID); return err }},
		{"members", func() error { _, err := f.svc.Members(f.ctx, b, seg.ID, 0, 50); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) { notFound(t, c.call()) })
	}
	if err := f.svc.MarkError(f.ctx, b, seg.ID, "not yours"); err != nil {
		t.Fatal(err)
	}
	if after := testenv.AsJSON(t, mustGet(t, f, a, seg.ID)); after != before {
		t.Errorf("another tenant's calls changed the segment:\n %s\n %s", before, after)
	}
	if skus, _ := f.memberSKUs(a, seg.ID, 50); !slices.Equal(skus, []string{"A1"}) {
		t.Errorf("members %v", skus)
	}
}

func mustGet(t *testing.T, f *fixture, tenant, id int64) *prodseg.Segment {
	t.Helper()
	s, err := f.svc.Get(f.ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func skuList(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// TestProdsegComputeLifecycle: statuses through a compute, the membership diff when products
// change, deleted products, a definition the schema no longer accepts, and delete.
func TestProdsegComputeLifecycle(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("lifecycle")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString}, catalog.Field{Name: "price", Type: catalog.TypePrice})
	var products []string
	for i := 1; i <= 12; i++ {
		color := "red"
		if i%3 == 0 {
			color = "blue"
		}
		products = append(products, fmt.Sprintf(`{"sku":"P%02d","name":"product %d","color":%q,"price":%d}`, i, i, color, i))
	}
	f.bulk(a, products...)
	seg := f.create(a, "Reds", redDef)

	// Before the first compute: no members, draft.
	page, err := f.svc.Members(f.ctx, a, seg.ID, 0, 50)
	if err != nil || len(page.Results) != 0 || page.NextCursor != nil {
		t.Fatalf("members before a compute: %+v %v", page, err)
	}
	q, err := f.svc.MarkQueued(f.ctx, a, seg.ID)
	if err != nil || q.Status != prodseg.StatusQueued {
		t.Fatalf("mark queued: %+v %v", q, err)
	}
	if err := f.svc.BeginCompute(f.ctx, a, seg.ID); err != nil {
		t.Fatal(err)
	}
	// A request while computing leaves it computing.
	if q, err := f.svc.MarkQueued(f.ctx, a, seg.ID); err != nil || q.Status != prodseg.StatusComputing {
		t.Fatalf("mark queued while computing: %+v %v", q, err)
	}
	f.clock.Advance(time.Hour)
	res, err := f.svc.Compute(f.ctx, a, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	reds := []string{"P01", "P02", "P04", "P05", "P07", "P08", "P10", "P11"}
	if res != (prodseg.ComputeResult{Matched: 8, Added: 8, Version: 1}) {
		t.Errorf("first compute %+v", res)
	}
	s := mustGet(t, f, a, seg.ID)
	if s.Status != prodseg.StatusReady || s.ComputedCount != 8 || *s.ComputedVersion != 1 || !s.LastComputedAt.Equal(clockStart.Add(time.Hour)) || s.LastError != nil {
		t.Errorf("after compute %s", testenv.AsJSON(t, s))
	}
	skus, cursors := f.memberSKUs(a, seg.ID, 3)
	if !slices.Equal(skus, reds) || !slices.Equal(cursors, []int64{3, 6}) {
		t.Errorf("members %v cursors %v", skus, cursors)
	}

	// P01 turns blue, P03 turns red, P13 is new and red, P02 is deleted.
	f.bulk(a, `{"sku":"P01","color":"blue"}`, `{"sku":"p03","color":"red"}`, `{"sku":"P13","name":"new","color":"red","price":1}`)
	if _, err := f.db.Pool.Exec(f.ctx, "DELETE FROM products WHERE tenant_id = $1 AND sku = 'P02'", a); err != nil {
		t.Fatal(err)
	}
	// A deleted product leaves the member pages at once (its page is one short; offsets stay the
	// snapshot's); the count is the snapshot's.
	if skus, cursors := f.memberSKUs(a, seg.ID, 3); !slices.Equal(skus, []string{"P01", "P04", "P05", "P07", "P08", "P10", "P11"}) || !slices.Equal(cursors, []int64{3, 6}) {
		t.Errorf("members after a delete %v, cursors %v", skus, cursors)
	}
	if page, err := f.svc.Members(f.ctx, a, seg.ID, 0, 3); err != nil || len(page.Results) != 2 || page.NextCursor == nil || *page.NextCursor != 3 {
		t.Errorf("first page after a delete: %+v %v", page, err)
	}
	if s := mustGet(t, f, a, seg.ID); s.ComputedCount != 8 {
		t.Errorf("computed_count after a delete %d", s.ComputedCount)
	}
	f.clock.Advance(time.Hour)
	res, err = f.svc.Compute(f.ctx, a, seg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res != (prodseg.ComputeResult{Matched: 8, Added: 2, Removed: 2, Version: 1}) {
		t.Errorf("second compute %+v, want 8 matched, P03 and P13 added, P01 and P02 removed", res)
	}
	want := []string{"P03", "P04", "P05", "P07", "P08", "P10", "P11", "P13"}
	if skus, _ := f.memberSKUs(a, seg.ID, 8); !slices.Equal(skus, want) {
		t.Errorf("members %v, want %v", skus, want)
	}
	if n := f.count("SELECT count(*) FROM product_segment_members WHERE tenant_id = $1 AND segment_id = $2", a, seg.ID); n != 8 {
		t.Errorf("%d member rows, want 8", n)
	}

	// The schema drops color: the stored definition no longer compiles; the members stay.
	f.putSchema(a, catalog.Field{Name: "price", Type: catalog.TypePrice})
	_, err = f.svc.Compute(f.ctx, a, seg.ID)
	ve := validation(t, err)
	if ve.Msg != "the definition no longer fits the product schema" || !strings.Contains(ve.Fields["conditions[0].field"], "not a field") {
		t.Errorf("compute after the schema change: %v", err)
	}
	if err := f.svc.MarkError(f.ctx, a, seg.ID, err.Error()); err != nil {
		t.Fatal(err)
	}
	s = mustGet(t, f, a, seg.ID)
	if s.Status != prodseg.StatusError || s.LastError == nil || !strings.Contains(*s.LastError, "conditions[0].field: is not a field") || s.ComputedCount != 8 {
		t.Errorf("after the failure %s", testenv.AsJSON(t, s))
	}
	if skus, _ := f.memberSKUs(a, seg.ID, 50); len(skus) != 8 {
		t.Errorf("members after a failed compute %v", skus)
	}
	// A new definition clears the error; its compute succeeds.
	if _, err := f.svc.Update(f.ctx, a, seg.ID, prodseg.UpdateInput{Definition: json.RawMessage(`{"conditions":[{"field":"price","operator":"lte","value":2}]}`)}); err != nil {
		t.Fatal(err)
	}
	if s := mustGet(t, f, a, seg.ID); s.Status != prodseg.StatusDraft || s.LastError != nil {
		t.Errorf("after the new definition %s", testenv.AsJSON(t, s))
	}
	res, err = f.svc.Compute(f.ctx, a, seg.ID)
	if err != nil || res != (prodseg.ComputeResult{Matched: 2, Added: 1, Removed: 7, Version: 2}) {
		t.Errorf("compute of version 2: %+v %v", res, err)
	}

	// Delete takes the members with it.
	if err := f.svc.Delete(f.ctx, a, seg.ID); err != nil {
		t.Fatal(err)
	}
	notFound(t, f.svc.Delete(f.ctx, a, seg.ID))
	if _, err := f.svc.Get(f.ctx, a, seg.ID); err == nil {
		t.Error("deleted segment still found")
	}
	if n := f.count("SELECT count(*) FROM product_segment_members WHERE segment_id = $1", seg.ID); n != 0 {
		t.Errorf("%d member rows of a deleted segment", n)
	}
	_, err = f.svc.Compute(f.ctx, a, seg.ID)
	notFound(t, err)
}

// TestProdsegComputeStale: a definition changed while a compute runs leaves the segment draft
// with the members of the version the compute read.
func TestProdsegComputeStale(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("stale")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString})
	f.bulk(a, `{"sku":"R","name":"r","color":"red"}`, `{"sku":"B","name":"b","color":"blue"}`)
	seg := f.create(a, "Reds", redDef)

	// Another writer holds the segment row, as a PATCH does in its transaction (which must not
	// hold up the compute's member writes: they lock the row KEY SHARE for their foreign key).
	tx, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, "SELECT 1 FROM product_segments WHERE id = $1 FOR NO KEY UPDATE", seg.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res prodseg.ComputeResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := f.svc.Compute(f.ctx, a, seg.ID)
		done <- result{res, err}
	}()
	// Wait until the compute has read version 1, stored its members and waits for the row.
	deadline := time.Now().Add(10 * time.Second)
	for f.count(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE product_segments SET computed_count%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the compute never waited for the segment row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := tx.Exec(f.ctx, `UPDATE product_segments SET definition = $2, version = version + 1, status = 'draft' WHERE id = $1`,
		seg.ID, `{"logic":"AND","conditions":[{"field":"color","operator":"eq","value":"blue"}]}`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res != (prodseg.ComputeResult{Matched: 1, Added: 1, Version: 1, Stale: true}) {
		t.Fatalf("compute %+v %v", r.res, r.err)
	}
	s := mustGet(t, f, a, seg.ID)
	if s.Status != prodseg.StatusDraft || s.Version != 2 || *s.ComputedVersion != 1 || s.ComputedCount != 1 {
		t.Errorf("after a stale compute %s", testenv.AsJSON(t, s))
	}
	if skus, _ := f.memberSKUs(a, seg.ID, 50); !slices.Equal(skus, []string{"R"}) {
		t.Errorf("members %v", skus)
	}
}

func TestProdsegMembersPages(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("pages")
	f.putSchema(a, catalog.Field{Name: "n", Type: catalog.TypeInteger})
	var products []string
	for i := 1; i <= 7; i++ {
		products = append(products, fmt.Sprintf(`{"sku":"M%02d","name":"m %d","n":%d}`, i, i, i))
	}
	f.bulk(a, products...)
	seg := f.create(a, "All", `{"conditions":[{"field":"n","operator":"gte","value":1}]}`)
	if _, err := f.svc.Compute(f.ctx, a, seg.ID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cursor int64
		limit  int
		skus   []string
		next   *int64
		errKey string
	}{
		{name: "first page", cursor: 0, limit: 3, skus: skuList("M", 1, 3), next: new(int64(3))},
		{name: "middle page", cursor: 3, limit: 3, skus: skuList("M", 4, 6), next: new(int64(6))},
		{name: "last page", cursor: 6, limit: 3, skus: skuList("M", 7, 7)},
		{name: "exactly all", cursor: 0, limit: 7, skus: skuList("M", 1, 7)},
		{name: "odd offset", cursor: 5, limit: 1, skus: skuList("M", 6, 6), next: new(int64(6))},
		{name: "past the end", cursor: 100, limit: 50, skus: nil},
		{name: "max limit", cursor: 0, limit: 200, skus: skuList("M", 1, 7)},
		{name: "limit over max", cursor: 0, limit: 201, errKey: "limit"},
		{name: "limit zero", cursor: 0, limit: 0, errKey: "limit"},
		{name: "negative cursor", cursor: -1, limit: 10, errKey: "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := f.svc.Members(f.ctx, a, seg.ID, tt.cursor, tt.limit)
			if tt.errKey != "" {
				testenv.WantFieldErrors(t, err, map[string]string{tt.errKey: "must be"})
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var skus []string
			for _, p := range page.Results {
				skus = append(skus, p.SKU)
			}
			if !slices.Equal(skus, tt.skus) {
				t.Errorf("skus %v, want %v", skus, tt.skus)
			}
			if (page.NextCursor == nil) != (tt.next == nil) || (tt.next != nil && *page.NextCursor != *tt.next) {
				t.Errorf("next_cursor %v, want %v", testenv.Deref(page.NextCursor), testenv.Deref(tt.next))
			}
		})
	}
	// Full products: id, sku, name, data, timestamps.
	page, _ := f.svc.Members(f.ctx, a, seg.ID, 0, 1)
	p := page.Results[0]
	if p.ID == 0 || p.Name != "m 1" || testenv.AsJSON(t, p.Data) != `{"n":1}` || !p.CreatedAt.Equal(clockStart) || !p.UpdatedAt.Equal(clockStart) {
		t.Errorf("member %s", testenv.AsJSON(t, p))
	}
}

func TestProdsegPreview(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("preview")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString})
	var products []string
	for i := 1; i <= 15; i++ {
		products = append(products, fmt.Sprintf(`{"sku":"S%02d","name":"s","color":"red"}`, i))
	}
	f.bulk(a, products...)
	pv := f.preview(a, redDef)
	if pv.MatchedCount != 15 || !slices.Equal(pv.SampleSKUs, skuList("S", 1, 10)) {
		t.Errorf("preview %d %v", pv.MatchedCount, pv.SampleSKUs)
	}
	if pv.SQL != "SELECT p.id FROM products p WHERE p.tenant_id = $1 AND (p.data @> $2::jsonb) ORDER BY p.id" {
		t.Errorf("sql %s", pv.SQL)
	}
	if got := testenv.AsJSON(t, pv.Params); got != fmt.Sprintf(`[%d,"{\"color\":\"red\"}"]`, a) {
		t.Errorf("params %s", got)
	}
	// Nothing is stored by a preview.
	if n := f.count("SELECT count(*) FROM product_segments") + f.count("SELECT count(*) FROM product_segment_members"); n != 0 {
		t.Errorf("preview stored %d rows", n)
	}
	// Errors are keyed by their path in the definition itself (the wrapped form: see
	// TestProdsegPreviewRequestForms).
	tests := []struct {
		name string
		def  string
		want map[string]string
	}{
		{name: "empty body", def: ``, want: map[string]string{"definition": "is required"}},
		{name: "unknown field", def: cond("size", "eq", `"M"`), want: map[string]string{"conditions[0].field": "not a field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Preview(f.ctx, a, []byte(tt.def))
			testenv.WantFieldErrors(t, err, tt.want)
		})
	}
}
