package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var clockStart = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// fixture is a fresh migrated database and a catalogue service over it.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	db    *store.DB
	svc   *catalog.Service
	clock *testenv.Clock
}

var slugRE = regexp.MustCompile(`[^a-z0-9]+`)

// tenantSeq makes tenant slugs unique.
var tenantSeq atomic.Int64

// with is the fixture reporting to t (a subtest).
func (f *fixture) with(t *testing.T) *fixture {
	g := *f
	g.t = t
	return &g
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.OpenDB(t)
	clock := testenv.NewClock(clockStart)
	return &fixture{t: t, ctx: context.Background(), db: db, svc: catalog.NewService(db.Pool, clock.Now), clock: clock}
}

func (f *fixture) exec(sql string, args ...any) { f.t.Helper(); testenv.Exec(f.t, f.db, sql, args...) }

func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	return testenv.Count(f.t, f.db, sql, args...)
}

// tenant creates a tenant with plain SQL; the slug is made unique within the fixture.
func (f *fixture) tenant(slug string) int64 {
	f.t.Helper()
	n := tenantSeq.Add(1)
	slug = strings.Trim(slugRE.ReplaceAllString(strings.ToLower(slug), "-"), "-")
	if len(slug) > 40 {
		slug = slug[:40]
	}
	slug = fmt.Sprintf("t%d-%s", n, slug)
	return testenv.Tenant(f.t, f.db, slug)
}

// putSchema stores a schema of the given fields (USD, en) and fails the test on an error.
func (f *fixture) putSchema(tenant int64, fields ...catalog.Field) *catalog.Schema {
	f.t.Helper()
	sc, err := f.svc.PutSchema(f.ctx, tenant, catalog.Schema{Fields: fields})
	if err != nil {
		f.t.Fatalf("put schema %+v: %v", fields, err)
	}
	return sc
}

func fld(name, typ string) catalog.Field { return catalog.Field{Name: name, Type: typ} }

// create stores a product with data given as JSON (empty: no data) and fails the test on an error.
func (f *fixture) create(tenant int64, sku, name, data string) *catalog.Product {
	f.t.Helper()
	in := catalog.ProductInput{SKU: sku, Name: name}
	if data != "" {
		in.Data = json.RawMessage(data)
	}
	p, err := f.svc.Create(f.ctx, tenant, in)
	if err != nil {
		f.t.Fatalf("create %s %s: %v", sku, data, err)
	}
	return p
}

// bulk runs a bulk upsert of products given as JSON objects and fails the test on an error.
func (f *fixture) bulk(tenant int64, products ...string) *catalog.BulkSummary {
	f.t.Helper()
	in := make([]map[string]any, len(products))
	for i, p := range products {
		if err := json.Unmarshal([]byte(p), &in[i]); err != nil {
			f.t.Fatalf("bulk product %d %s: %v", i, p, err)
		}
	}
	out, err := f.svc.Bulk(f.ctx, tenant, in)
	if err != nil {
		f.t.Fatalf("bulk: %v", err)
	}
	return out
}

// storedData is the product's data column as stored, read with plain SQL, as canonical JSON.
func (f *fixture) storedData(tenant int64, sku string) string {
	f.t.Helper()
	var raw []byte
	if err := f.db.Pool.QueryRow(f.ctx, "SELECT data FROM products WHERE tenant_id = $1 AND sku = $2", tenant, sku).Scan(&raw); err != nil {
		f.t.Fatalf("stored data of %s: %v", sku, err)
	}
	return canon(f.t, string(raw))
}

// skus lists the SKUs of a page in order.
func skus(ps []*catalog.Product) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.SKU
	}
	return out
}

// canon re-encodes a JSON document with sorted keys, so two encodings compare as strings.
func canon(t testing.TB, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// validation asserts err is a *errs.ValidationError (matching errs.ErrInvalid) and returns it.
func validation(t testing.TB, err error) *errs.ValidationError {
	t.Helper()
	var ve *errs.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T), want a *errs.ValidationError", err, err)
	}
	if !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("error %v does not match errs.ErrInvalid", err)
	}
	return ve
}

// coded asserts err is a *errs.CodedError of the kind and code.
func coded(t testing.TB, err error, kind error, code string) *errs.CodedError {
	t.Helper()
	var ce *errs.CodedError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *errs.CodedError %s", err, err, code)
	}
	if ce.Code != code || !errors.Is(err, kind) {
		t.Fatalf("error code %q kind %v (%v), want %q %v", ce.Code, ce.Kind, err, code, kind)
	}
	return ce
}
