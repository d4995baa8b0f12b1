package prodseg_test

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
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var clockStart = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// fixture is a fresh migrated database with the catalogue and product segment services over it.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	db    *store.DB
	cat   *catalog.Service
	svc   *prodseg.Service
	clock *testenv.Clock
}

var (
	slugRE    = regexp.MustCompile(`[^a-z0-9]+`)
	tenantSeq atomic.Int64
)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := testenv.OpenDB(t)
	clock := testenv.NewClock(clockStart)
	cat := catalog.NewService(db.Pool, clock.Now)
	return &fixture{t: t, ctx: context.Background(), db: db, cat: cat, svc: prodseg.NewService(db.Pool, cat, nil, clock.Now), clock: clock}
}

// with is the fixture reporting to t (a subtest).
func (f *fixture) with(t testing.TB) *fixture {
	g := *f
	g.t = t
	return &g
}

func (f *fixture) tenant(slug string) int64 {
	f.t.Helper()
	slug = strings.Trim(slugRE.ReplaceAllString(strings.ToLower(slug), "-"), "-")
	if len(slug) > 40 {
		slug = slug[:40]
	}
	return testenv.Tenant(f.t, f.db, fmt.Sprintf("t%d-%s", tenantSeq.Add(1), slug))
}

func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	return testenv.Count(f.t, f.db, sql, args...)
}

func (f *fixture) putSchema(tenant int64, fields ...catalog.Field) {
	f.t.Helper()
	if _, err := f.cat.PutSchema(f.ctx, tenant, catalog.Schema{Fields: fields}); err != nil {
		f.t.Fatalf("put schema: %v", err)
	}
}

// bulk upserts products given as JSON objects and fails the test unless every one is stored.
func (f *fixture) bulk(tenant int64, products ...string) {
	f.t.Helper()
	in := make([]map[string]any, len(products))
	for i, p := range products {
		if err := json.Unmarshal([]byte(p), &in[i]); err != nil {
			f.t.Fatalf("product %d %s: %v", i, p, err)
		}
	}
	sum, err := f.cat.Bulk(f.ctx, tenant, in)
	if err != nil {
		f.t.Fatalf("bulk: %v", err)
	}
	if sum.Failed > 0 {
		for _, r := range sum.Results {
			if r.Status == catalog.BulkFailed {
				f.t.Fatalf("bulk product %d (%s) failed: %s", r.Index, r.SKU, r.Error)
			}
		}
	}
}

// create stores a segment and fails the test on an error.
func (f *fixture) create(tenant int64, name, definition string) *prodseg.Segment {
	f.t.Helper()
	seg, err := f.svc.Create(f.ctx, tenant, prodseg.CreateInput{Name: name, Definition: json.RawMessage(definition)})
	if err != nil {
		f.t.Fatalf("create %s: %v", name, err)
	}
	return seg
}

// preview runs a preview and fails the test on an error.
func (f *fixture) preview(tenant int64, definition string) *prodseg.Preview {
	f.t.Helper()
	out, err := f.svc.Preview(f.ctx, tenant, []byte(definition))
	if err != nil {
		f.t.Fatalf("preview %s: %v", definition, err)
	}
	return out
}

// memberSKUs reads every member page of limit products and returns the SKUs in order and the
// cursors that were returned.
func (f *fixture) memberSKUs(tenant, id int64, limit int) ([]string, []int64) {
	f.t.Helper()
	var skus []string
	var cursors []int64
	cursor := int64(0)
	for range 1000 {
		page, err := f.svc.Members(f.ctx, tenant, id, cursor, limit)
		if err != nil {
			f.t.Fatalf("members of %d at %d: %v", id, cursor, err)
		}
		if len(page.Results) > limit {
			f.t.Fatalf("page of %d results, limit %d", len(page.Results), limit)
		}
		for _, p := range page.Results {
			skus = append(skus, p.SKU)
		}
		if page.NextCursor == nil {
			return skus, cursors
		}
		cursors = append(cursors, *page.NextCursor)
		cursor = *page.NextCursor
	}
	f.t.Fatal("members never reached the last page")
	return nil, nil
}

// validation asserts err is a *errs.ValidationError matching errs.ErrInvalid.
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
func coded(t testing.TB, err error, kind error, code string) {
	t.Helper()
	var ce *errs.CodedError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *errs.CodedError %s", err, err, code)
	}
	if ce.Code != code || !errors.Is(err, kind) {
		t.Fatalf("error code %q kind %v (%v), want %q %v", ce.Code, ce.Kind, err, code, kind)
	}
}

func notFound(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("error %v, want not found", err)
	}
}

// canon re-encodes a JSON document with sorted keys.
func canon(t testing.TB, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
