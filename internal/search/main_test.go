package search

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is a fresh migrated database with the real catalogue (products are queued for
// embedding on save and embedded by DrainEmbeddings with the local provider) and product
// segments.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	db    *store.DB
	cat   *catalog.Service
	segs  *prodseg.Service
	local *ai.Local
	clock *testenv.Clock
}

var tenantSeq atomic.Int64

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := testenv.OpenDB(t)
	clock := testenv.NewClock(time.Date(2026, 3, 2, 12, 0, 30, 0, time.UTC))
	cat := catalog.NewService(db.Pool, time.Now)
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: context.Background(), db: db, cat: cat, segs: prodseg.NewService(db.Pool, cat, nil, time.Now), local: local, clock: clock}
}

func (f *fixture) tenant(name string) int64 {
	f.t.Helper()
	return testenv.Tenant(f.t, f.db, fmt.Sprintf("t%d-%s", tenantSeq.Add(1), name))
}

// apparelSchema is the schema of the test catalogues.
func (f *fixture) apparelSchema(tenant int64) {
	f.t.Helper()
	_, err := f.cat.PutSchema(f.ctx, tenant, catalog.Schema{Fields: []catalog.Field{
		{Name: "category", Type: catalog.TypeString, Facet: true},
		{Name: "material", Type: catalog.TypeString, Facet: true},
		{Name: "color", Type: catalog.TypeString, Facet: true},
		{Name: "season", Type: catalog.TypeString},
		{Name: "tags", Type: catalog.TypeArray},
		{Name: "description", Type: catalog.TypeText},
		{Name: "price", Type: catalog.TypePrice},
	}, DefaultCurrency: "EUR"})
	if err != nil {
		f.t.Fatalf("put schema: %v", err)
	}
}

// bulk stores products (JSON objects with sku, name and fields) and returns their ids by SKU.
func (f *fixture) bulk(tenant int64, products ...map[string]any) map[string]int64 {
	f.t.Helper()
	sum, err := f.cat.Bulk(f.ctx, tenant, products)
	if err != nil {
		f.t.Fatalf("bulk: %v", err)
	}
	if sum.Failed > 0 {
		f.t.Fatalf("bulk: %d failed: %s", sum.Failed, testenv.AsJSON(f.t, sum.Results))
	}
	rows, err := f.db.Pool.Query(f.ctx, `SELECT sku, id FROM products WHERE tenant_id = $1`, tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var sku string
		var id int64
		if err := rows.Scan(&sku, &id); err != nil {
			f.t.Fatal(err)
		}
		out[sku] = id
	}
	return out
}

func product(sku, name string, fields ...any) map[string]any {
	p := map[string]any{"sku": sku, "name": name}
	for i := 0; i+1 < len(fields); i += 2 {
		v := fields[i+1]
		if n, ok := v.(int); ok { // as JSON decodes numbers
			v = float64(n)
		}
		p[fields[i].(string)] = v
	}
	return p
}

// embed drains the tenant's embedding queue with the local provider.
func (f *fixture) embed(tenant int64) {
	f.t.Helper()
	for range 1000 {
		res, err := f.cat.DrainEmbeddings(f.ctx, tenant, f.local, catalog.MaxEmbedBatch)
		if err != nil {
			f.t.Fatalf("drain embeddings: %v", err)
		}
		if !res.More {
			return
		}
	}
	f.t.Fatal("embedding queue does not drain")
}

// vector is the local provider's embedding of text.
func (f *fixture) vector(text string) []float32 {
	f.t.Helper()
	v, err := f.local.Embed(f.ctx, []string{text})
	if err != nil {
		f.t.Fatal(err)
	}
	return v[0]
}

// index starts an Embedded index whose listener runs until the test ends, and waits until it
// serves from notifications.
func (f *fixture) index(cfg IndexConfig) *Embedded {
	f.t.Helper()
	ix := NewEmbedded(f.db.Pool, nil, f.clock.Now, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ix.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("index Run: %v", err)
		}
	})
	eventually(f.t, "index listener live", ix.live.Load)
	return ix
}

// eventually polls cond for up to 10 seconds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
