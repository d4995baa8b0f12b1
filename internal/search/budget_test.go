package search

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
)

// seedVectors stores n products of the tenant with random unit vectors of dims under model,
// straight into the tables (the embedding trigger logs them as the catalogue's writes do).
func (f *fixture) seedVectors(tenant int64, n, dims int, seed uint64) {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key)
		SELECT $1, 's' || g, 'Product ' || g, 's' || g, 'product ' || g FROM generate_series(1, $2) g RETURNING id`, tenant, n)
	if err != nil {
		f.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		f.t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	hash := sha256.Sum256([]byte("x"))
	now := time.Now()
	_, err = f.db.Pool.CopyFrom(f.ctx, pgx.Identifier{"product_embeddings"},
		[]string{"product_id", "tenant_id", "model", "dims", "text_hash", "vector", "updated_at"},
		pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
			return []any{ids[i], tenant, model, dims, hash[:], catalog.EncodeVector(randomUnit(rng, dims)), now}, nil
		}))
	if err != nil {
		f.t.Fatal(err)
	}
}

// memStatus reads the process's resident memory from /proc/self/status (kB): VmRSS and its anonymous
// (heap, stacks) and file-backed parts.
func memStatus(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !slices.Contains([]string{"VmRSS", "RssAnon", "RssFile"}, k) {
			continue
		}
		var n int64
		for _, r := range strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")) {
			n = n*10 + int64(r-'0')
		}
		out[k] = n
	}
	return out
}

// TestIndexBudgetHoldsAcrossTenants loads three tenants of 3,000 vectors of 1,536 dimensions
// (18 MB of float32 each) into an index whose budget holds two: the least recently searched goes
// each time, the heap the index holds never exceeds the budget, and a tenant larger than another
// index's whole budget is refused with a 503 naming it. The process's resident memory is printed
// (-v) before and after.
func TestIndexBudgetHoldsAcrossTenants(t *testing.T) {
	const n, dims = 3000, 1536
	f := newFixture(t)
	tenants := []int64{f.tenant("a"), f.tenant("b"), f.tenant("c")}
	for i, tn := range tenants {
		f.seedVectors(tn, n, dims, uint64(i))
	}
	perTenant := int64(n)*residentPerVector(dims) + dims*4
	budget := 2*perTenant + perTenant/2
	runtime.GC()
	before := memStatus(t)
	ix := NewEmbedded(f.db.Pool, nil, f.clock.Now, IndexConfig{MaxBytes: budget})
	rng := rand.New(rand.NewPCG(9, 9))
	for round, tn := range append(tenants, tenants[0]) {
		f.clock.Advance(time.Second)
		ms, err := ix.TopK(f.ctx, tn, model, randomUnit(rng, dims), 20, nil)
		if err != nil || len(ms) != 20 {
			t.Fatalf("round %d: %d matches, %v", round, len(ms), err)
		}
		st := ix.Stats()
		if st.Bytes > budget || st.Sets > 2 {
			t.Fatalf("round %d: stats %+v over the budget %d", round, st, budget)
		}
		t.Logf("round %d: %d sets, %d vectors, heap %s of %s, files %s", round, st.Sets, st.Vectors,
			FormatBytes(st.Bytes), FormatBytes(budget), FormatBytes(st.FileBytes))
	}
	if st := ix.Stats(); st.Loads != 4 {
		t.Fatalf("stats %+v: a was dropped for c and loaded again", st)
	}
	runtime.GC()
	after := memStatus(t)
	t.Logf("RSS before %d kB (anon %d, file %d), after %d kB (anon %d, file %d); float32 of the 4 loads: %d kB, budget %d kB",
		before["VmRSS"], before["RssAnon"], before["RssFile"], after["VmRSS"], after["RssAnon"], after["RssFile"],
		4*n*dims*4/1024, budget/1024)

	small := NewEmbedded(f.db.Pool, nil, f.clock.Now, IndexConfig{MaxBytes: perTenant / 2})
	_, err := small.TopK(f.ctx, tenants[0], model, randomUnit(rng, dims), 20, nil)
	var coded *errs.CodedError
	if !errors.As(err, &coded) || coded.Code != CodeIndexTooLarge || !strings.Contains(coded.Msg, "budget of "+FormatBytes(perTenant/2)) {
		t.Fatalf("over the budget: %v", err)
	}
	t.Logf("503 %s: %s", coded.Code, coded.Msg)
}

// TestIndexDropsWhileSearching: two tenants whose vectors do not fit the budget together,
// searched from several goroutines at once: each load drops the other tenant's set (its mapped
// file released) while searches may be reading it; every search still returns its own tenant's
// full answer (a dropped set is looked up again) and nothing reads a released mapping.
func TestIndexDropsWhileSearching(t *testing.T) {
	const n, dims = 500, 384
	f := newFixture(t)
	tenants := []int64{f.tenant("a"), f.tenant("b")}
	for i, tn := range tenants {
		f.seedVectors(tn, n, dims, uint64(10+i))
	}
	perTenant := int64(n)*residentPerVector(dims) + dims*4
	ix := NewEmbedded(f.db.Pool, nil, time.Now, IndexConfig{MaxBytes: perTenant + perTenant/2})
	q := randomUnit(rand.New(rand.NewPCG(5, 5)), dims)
	want := map[int64][]Match{}
	for _, tn := range tenants {
		ms, err := NewEmbedded(f.db.Pool, nil, time.Now, IndexConfig{}).TopK(f.ctx, tn, model, q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[tn] = ms
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 15 {
				tn := tenants[(g+i)%2]
				ms, err := ix.TopK(f.ctx, tn, model, q, 10, nil)
				if err != nil || !slices.Equal(ms, want[tn]) {
					t.Errorf("goroutine %d search %d of tenant %d: %v %v", g, i, tn, ms, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := ix.Stats(); st.Sets > 1 || st.Bytes > perTenant+perTenant/2 {
		t.Fatalf("stats %+v over the budget", st)
	}
	t.Logf("%d loads for 60 searches alternating between two tenants", ix.Stats().Loads)
}
