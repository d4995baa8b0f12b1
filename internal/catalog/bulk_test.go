package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestBulkMixed(t *testing.T) {
	f := newFixture(t)
	tn, other := f.tenant("bulk"), f.tenant("other")
	fields := []catalog.Field{fld("price", "price"), fld("color", "string"), fld("tags", "array"), fld("qty", "integer")}
	f.putSchema(tn, fields...)
	f.putSchema(other, fields...)
	ex1 := f.create(tn, "EX-1", "Existing", `{"price":10,"color":"red"}`)
	ex2 := f.create(tn, "EX-2", "Same", `{"price":5,"qty":3}`)
	ex3 := f.create(tn, "EX-3", "Colored", `{"color":"green","price":1}`)
	ex4 := f.create(tn, "ex-4", "Lower", `{}`)
	// The other tenant's NEW-1 must not be found, nor touched.
	otherNew := f.create(other, "NEW-1", "Other's", `{"price":99}`)
	f.clock.Advance(time.Hour)

	type want struct {
		status string
		sku    string
		id     int64 // -1: a new id
		fields map[string]string
	}
	tests := []struct {
		name    string
		product string
		want    want
	}{
		{name: "new product", product: `{"sku":"NEW-1","name":"New","price":1,"color":"blue","tags":["x"," y "]}`, want: want{status: "created", sku: "NEW-1", id: -1}},
		{name: "existing sku in another case updates", product: `{"sku":"ex-1","price":11}`, want: want{status: "updated", sku: "ex-1", id: ex1.ID}},
		{name: "nothing different is unchanged", product: `{"sku":"EX-2","price":5.0,"qty":3}`, want: want{status: "unchanged", sku: "EX-2", id: ex2.ID}},
		{name: "new sku without name fails", product: `{"sku":"NEW-2","price":3}`, want: want{status: "failed", sku: "NEW-2", fields: map[string]string{"name": "is required"}}},
		{name: "repeated sku fails the repeat", product: `{"sku":"new-1","name":"Dup"}`, want: want{status: "failed", sku: "new-1", fields: map[string]string{"sku": "repeats the sku of products[0]"}}},
		{name: "wrong value fails", product: `{"sku":"BAD-1","name":"Bad","price":"x"}`, want: want{status: "failed", sku: "BAD-1", fields: map[string]string{"price": "must be a number (price field)"}}},
		{name: "unknown field fails", product: `{"sku":"BAD-2","name":"Bad","colour":"x"}`, want: want{status: "failed", sku: "BAD-2", fields: map[string]string{"colour": "not a field of the product schema"}}},
		{name: "nested data form", product: `{"sku":"NEST-1","name":"Nested","data":{"price":7,"tags":["a"]}}`, want: want{status: "created", sku: "NEST-1", id: -1}},
		{name: "null removes a field", product: `{"sku":"EX-3","color":null}`, want: want{status: "updated", sku: "EX-3", id: ex3.ID}},
		{name: "no sku fails", product: `{"name":"No SKU"}`, want: want{status: "failed", sku: "", fields: map[string]string{"sku": "is required"}}},
		{name: "sku not a string fails", product: `{"sku":5,"name":"x"}`, want: want{status: "failed", sku: "", fields: map[string]string{"sku": "must be a string"}}},
		{name: "sku and name trimmed", product: `{"sku":"  SP-1  ","name":"  Spaced  "}`, want: want{status: "created", sku: "SP-1", id: -1}},
		{name: "empty name fails", product: `{"sku":"EX-1B","name":"  "}`, want: want{status: "failed", sku: "EX-1B", fields: map[string]string{"name": "must not be empty"}}},
		{name: "name not a string fails", product: `{"sku":"EX-1C","name":7}`, want: want{status: "failed", sku: "EX-1C", fields: map[string]string{"name": "must be a string"}}},
		{name: "rename by upper-cased sku", product: `{"sku":"EX-4","name":"Renamed"}`, want: want{status: "updated", sku: "EX-4", id: ex4.ID}},
		{name: "null product fails", product: `null`, want: want{status: "failed", sku: "", fields: map[string]string{"product": "must be an object"}}},
		{name: "several problems in one product", product: `{"sku":"BAD-3","name":"Bad","qty":1.5,"tags":"red","nope":1}`,
			want: want{status: "failed", sku: "BAD-3", fields: map[string]string{"qty": "whole number", "tags": "array of strings", "nope": "not a field"}}},
	}
	products := make([]string, len(tests))
	for i, tt := range tests {
		products[i] = tt.product
	}
	sum := f.bulk(tn, products...)
	if sum.Created != 3 || sum.Updated != 3 || sum.Unchanged != 1 || sum.Failed != 10 || len(sum.Results) != len(tests) {
		t.Fatalf("summary created %d updated %d unchanged %d failed %d results %d, want 3 3 1 10 %d",
			sum.Created, sum.Updated, sum.Unchanged, sum.Failed, len(sum.Results), len(tests))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			r := sum.Results[i]
			if r.Index != i || r.Status != tt.want.status || r.SKU != tt.want.sku {
				t.Errorf("result %+v, want index %d status %s sku %q", r, i, tt.want.status, tt.want.sku)
			}
			switch {
			case tt.want.status == "failed":
				if r.ID != 0 || r.Error == "" {
					t.Errorf("failed result %+v: want no id and an error", r)
				}
				testenv.WantFieldErrors(t, &errs.ValidationError{Fields: r.Fields}, tt.want.fields)
				for k := range tt.want.fields {
					if !strings.Contains(r.Error, k) {
						t.Errorf("error %q does not name %s", r.Error, k)
					}
				}
			case tt.want.id == -1:
				if r.ID == 0 || r.ID == otherNew.ID || r.Error != "" || r.Fields != nil {
					t.Errorf("created result %+v", r)
				}
				p, err := f.svc.Get(f.ctx, tn, r.ID)
				if err != nil || !strings.EqualFold(p.SKU, tt.want.sku) {
					t.Errorf("created id %d: %+v %v", r.ID, p, err)
				}
			default:
				if r.ID != tt.want.id || r.Error != "" || r.Fields != nil {
					t.Errorf("result %+v, want id %d", r, tt.want.id)
				}
			}
		})
	}

	// What was stored.
	stored := []struct {
		sku, name, data string
		updated         bool
	}{
		{"NEW-1", "New", `{"color":"blue","price":1,"tags":["x","y"]}`, true},
		{"EX-1", "Existing", `{"color":"red","price":11}`, true},
		{"EX-2", "Same", `{"price":5,"qty":3}`, false},
		{"NEST-1", "Nested", `{"price":7,"tags":["a"]}`, true},
		{"EX-3", "Colored", `{"price":1}`, true},
		{"SP-1", "Spaced", `{}`, true},
		{"ex-4", "Renamed", `{}`, true},
	}
	for _, s := range stored {
		var name string
		var updatedAt time.Time
		if err := f.db.Pool.QueryRow(f.ctx, "SELECT name, updated_at FROM products WHERE tenant_id = $1 AND sku = $2", tn, s.sku).Scan(&name, &updatedAt); err != nil {
			t.Errorf("%s: %v", s.sku, err)
			continue
		}
		if name != s.name || f.storedData(tn, s.sku) != canon(t, s.data) {
			t.Errorf("%s stored %q %s, want %q %s", s.sku, name, f.storedData(tn, s.sku), s.name, s.data)
		}
		wantAt := clockStart
		if s.updated {
			wantAt = clockStart.Add(time.Hour)
		}
		if !updatedAt.Equal(wantAt) {
			t.Errorf("%s updated_at %s, want %s", s.sku, updatedAt, wantAt)
		}
	}
	if n := f.count("SELECT count(*) FROM products WHERE tenant_id = $1", tn); n != 7 {
		t.Errorf("tenant has %d products, want 7", n)
	}
	if got, _ := f.svc.Get(f.ctx, other, otherNew.ID); got.Name != "Other's" || testenv.AsJSON(t, got.Data) != `{"price":99}` {
		t.Errorf("the other tenant's NEW-1 changed: %+v", got)
	}

	// The same call again: everything that was stored is unchanged now.
	again := f.bulk(tn, products...)
	if again.Created != 0 || again.Updated != 0 || again.Unchanged != 7 || again.Failed != 10 {
		t.Errorf("second run: created %d updated %d unchanged %d failed %d, want 0 0 7 10", again.Created, again.Updated, again.Unchanged, again.Failed)
	}
	for i, r := range again.Results {
		if r.Status == "unchanged" && r.ID != sum.Results[i].ID {
			t.Errorf("second run result %d id %d, first run %d", i, r.ID, sum.Results[i].ID)
		}
	}
}

func TestBulkRequiredField(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("required")
	f.putSchema(tn, catalog.Field{Name: "brand", Type: "string", Required: true}, fld("color", "string"))
	f.create(tn, "OLD-1", "Old", `{"brand":"Acme"}`)
	sum := f.bulk(tn,
		`{"sku":"N-1","name":"No brand","color":"red"}`,
		`{"sku":"N-2","name":"Branded","brand":"Acme"}`,
		`{"sku":"N-3","name":"Null brand","brand":null}`,
		`{"sku":"OLD-1","color":"blue"}`,
		`{"sku":"old-1","brand":null}`, // a repeat: fails on the repeat before the required check
		`{"sku":"N-4","name":"nested","data":{"color":"x"}}`,
	)
	want := []struct {
		status string
		fields map[string]string
	}{
		{"failed", map[string]string{"brand": "is required by the product schema"}},
		{"created", nil},
		{"failed", map[string]string{"brand": "is required"}},
		{"updated", nil},
		{"failed", map[string]string{"sku": "repeats"}},
		{"failed", map[string]string{"brand": "is required"}},
	}
	for i, w := range want {
		r := sum.Results[i]
		if r.Status != w.status {
			t.Errorf("result %d %+v, want %s", i, r, w.status)
			continue
		}
		if w.fields != nil {
			testenv.WantFieldErrors(t, &errs.ValidationError{Fields: r.Fields}, w.fields)
		}
	}
	if sum.Created != 1 || sum.Updated != 1 || sum.Failed != 4 {
		t.Errorf("summary %+v", sum)
	}
	// Removing the required field of an existing product fails.
	sum = f.bulk(tn, `{"sku":"OLD-1","brand":null}`)
	if r := sum.Results[0]; r.Status != "failed" || r.Fields["brand"] == "" {
		t.Errorf("removing a required field: %+v", r)
	}
	if got := f.storedData(tn, "OLD-1"); got != `{"brand":"Acme","color":"blue"}` {
		t.Errorf("OLD-1 %s", got)
	}
}

func TestBulkLimits(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("limits")
	f.putSchema(tn, fld("n", "integer"))
	products := make([]map[string]any, catalog.MaxBulk+1)
	for i := range products {
		products[i] = map[string]any{"sku": fmt.Sprintf("L-%04d", i), "name": "n", "n": float64(i)}
	}
	out, err := f.svc.Bulk(f.ctx, tn, products)
	if out != nil {
		t.Errorf("summary %+v with 1001 products", out)
	}
	ce := coded(t, err, errs.ErrInvalid, "batch_too_large")
	if ce.Msg != "at most 1000 products per call, got 1001" {
		t.Errorf("message %q", ce.Msg)
	}
	if n := f.count("SELECT count(*) FROM products WHERE tenant_id = $1", tn); n != 0 {
		t.Errorf("%d products stored", n)
	}
	// 1,000 is fine; every result has its own id, in request order.
	out, err = f.svc.Bulk(f.ctx, tn, products[:catalog.MaxBulk])
	if err != nil {
		t.Fatal(err)
	}
	if out.Created != 1000 || len(out.Results) != 1000 {
		t.Fatalf("created %d results %d", out.Created, len(out.Results))
	}
	ids := map[int64]bool{}
	for i, r := range out.Results {
		if r.Index != i || r.Status != "created" || r.SKU != fmt.Sprintf("L-%04d", i) || ids[r.ID] {
			t.Fatalf("result %d %+v", i, r)
		}
		ids[r.ID] = true
	}
	var mismatched int64
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM products p JOIN unnest($2::bigint[], $3::text[]) u(id, sku) ON p.id = u.id
		WHERE p.tenant_id = $1 AND (p.sku <> u.sku OR (p.data->>'n')::int <> substr(u.sku, 3)::int)`, tn, resultIDs(out), resultSKUs(out)).Scan(&mismatched); err != nil {
		t.Fatal(err)
	}
	if mismatched != 0 {
		t.Errorf("%d result ids point at another product", mismatched)
	}
	// Nothing and an empty list.
	for _, in := range [][]map[string]any{nil, {}} {
		out, err := f.svc.Bulk(f.ctx, tn, in)
		if err != nil || out.Created+out.Updated+out.Unchanged+out.Failed != 0 || out.Results == nil || len(out.Results) != 0 {
			t.Errorf("empty bulk %+v %v", out, err)
		}
	}
}

func resultIDs(s *catalog.BulkSummary) []int64 {
	out := make([]int64, len(s.Results))
	for i, r := range s.Results {
		out[i] = r.ID
	}
	return out
}

func resultSKUs(s *catalog.BulkSummary) []string {
	out := make([]string, len(s.Results))
	for i, r := range s.Results {
		out[i] = r.SKU
	}
	return out
}

// TestBulkAllFailed: a call whose products all fail stores nothing and is no error.
func TestBulkAllFailed(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("allfailed")
	sum := f.bulk(tn, `{"sku":"A","name":"n","x":1}`, `{"sku":"B"}`)
	if sum.Failed != 2 || sum.Created != 0 {
		t.Errorf("summary %+v", sum)
	}
	if r := sum.Results[0]; r.Fields["x"] == "" {
		t.Errorf("result 0 %+v: want x named (the tenant has no schema)", r)
	}
}

// TestBulkConcurrentCreate: a product created by another writer after the bulk looked the SKUs
// up must not fail the whole call (nor be reported as a SKU named "in this call").
func TestBulkConcurrentCreate(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("race")
	tx, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(f.ctx, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key) VALUES ($1, 'RACE-1', 'other writer', 'race-1', 'other writer')`, tn); err != nil {
		t.Fatal(err)
	}
	type res struct {
		sum *catalog.BulkSummary
		err error
	}
	done := make(chan res, 1)
	go func() {
		sum, err := f.svc.Bulk(f.ctx, tn, []map[string]any{{"sku": "OTHER-1", "name": "x"}, {"sku": "race-1", "name": "mine"}})
		done <- res{sum, err}
	}()
	// Wait until the bulk insert waits on the uncommitted row's unique-index entry.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if f.count(`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND l.locktype = 'transactionid' AND a.datname = current_database()`) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bulk call never waited on the other writer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		var ce *errs.CodedError
		if errors.As(r.err, &ce) && strings.Contains(ce.Msg, `"in this call"`) {
			t.Errorf("BUG: the whole bulk call failed with %q (code %s): the message names a SKU \"in this call\"", ce.Msg, ce.Code)
		}
		t.Fatalf("BUG: a concurrent create of one SKU failed the whole bulk call: %v", r.err)
	}
	if r.sum.Results[0].Status != "created" {
		t.Errorf("OTHER-1 %+v", r.sum.Results[0])
	}
}

// TestBulkNonASCIISKUOnCCollation: with a C collation (testenv's private cluster, initdb
// --locale=C) Postgres' lower() folds only ASCII, while Bulk looks SKUs up by Go's
// strings.ToLower: an existing "ÄB-1" is not found, the insert hits the unique index and the
// whole call fails.
func TestBulkNonASCIISKUOnCCollation(t *testing.T) {
	f := newFixture(t)
	f.exec(`ALTER TABLE products ALTER COLUMN name TYPE text COLLATE "C", ALTER COLUMN sku TYPE text COLLATE "C"`)
	tn := f.tenant("c-sku")
	p := f.create(tn, "ÄB-1", "Umlaut", "")
	out, err := f.svc.Bulk(f.ctx, tn, []map[string]any{{"sku": "ÄB-1", "name": "Renamed"}, {"sku": "OK-1", "name": "ok"}})
	if err != nil {
		t.Fatalf("BUG: bulk update of existing SKU ÄB-1 failed the whole call: %v", err)
	}
	if r := out.Results[0]; r.Status != "updated" || r.ID != p.ID {
		t.Errorf("ÄB-1 result %+v, want updated id %d", r, p.ID)
	}
}

// Reason names the products by the caller's own ids (rows, positions), field problems in order.
func TestBulkResultReason(t *testing.T) {
	r := catalog.BulkResult{Fields: map[string]string{"price": "products[1] price must be a number", "name": "is required"}}
	if got, want := r.Reason("row", []int{7, 12}), "name: is required; price: row 12 price must be a number"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r = catalog.BulkResult{Error: "duplicate sku in products[0] and products[5]"}
	if got, want := r.Reason("the item at position", []int{3}), "duplicate sku in the item at position 3 and products[5]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
