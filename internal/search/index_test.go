package search

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
)

const model = "local-ngram-v1"

// topAll is every match of the tenant for the query text, best first.
func topAll(t testing.TB, ix Index, f *fixture, tenant int64, text string) []Match {
	t.Helper()
	ms, err := ix.TopK(f.ctx, tenant, model, f.vector(text), 1000, nil)
	if err != nil {
		t.Fatalf("TopK: %v", err)
	}
	return ms
}

func ids(ms []Match) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ProductID
	}
	return out
}

// TestIndexFollowsEmbeddingWrites: two running indexes (two API replicas) and one without a
// listener load a tenant, then see inserts, updates and deletes of its embeddings made through
// the catalogue, by notification (the poll is an hour away and nothing is loaded again), and
// after their listener's connection is killed; after every step they equal a fresh load.
func TestIndexFollowsEmbeddingWrites(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	idsBySKU := f.bulk(a,
		product("d1", "Linen summer dress", "material", "linen", "category", "dress"),
		product("c1", "Wool winter coat", "material", "wool", "category", "coat"),
		product("b1", "Leather boots", "material", "leather", "category", "boots"),
	)
	f.embed(a)
	cfg := IndexConfig{PollEvery: time.Hour}
	one, two := f.index(cfg), f.index(cfg)
	bare := NewEmbedded(f.db.Pool, nil, f.clock.Now, cfg) // no Run: syncs on every search
	const q = "linen dress"
	all := []*Embedded{one, two, bare}
	for _, ix := range all {
		if got := topAll(t, ix, f, a, q); len(got) != 3 || got[0].ProductID != idsBySKU["d1"] {
			t.Fatalf("first load: %v", got)
		}
	}
	// converged waits until every index answers as a fresh load does.
	converged := func(step string, check func(ms []Match) bool) {
		t.Helper()
		for i, ix := range all {
			eventually(t, step, func() bool {
				fresh := topAll(t, NewEmbedded(f.db.Pool, nil, f.clock.Now, cfg), f, a, q)
				got := topAll(t, ix, f, a, q)
				return slices.Equal(got, fresh) && check(got)
			})
			if i < 2 {
				if n := ix.Stats().Loads; n != 1 {
					t.Fatalf("%s: index %d loaded %d times, want 1 (changes applied as deltas)", step, i, n)
				}
			}
		}
	}

	// Insert: a closer match.
	idsBySKU = f.bulk(a, product("d2", "Linen dress", "material", "linen", "category", "dress"))
	f.embed(a)
	converged("insert", func(ms []Match) bool { return len(ms) == 4 && ms[0].ProductID == idsBySKU["d2"] })

	// Update: the boots become a linen dress (a new embedding text).
	name := "Linen dress, long"
	if _, err := f.cat.Update(f.ctx, a, idsBySKU["b1"], catalog.ProductPatch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	f.embed(a)
	converged("update", func(ms []Match) bool { return len(ms) == 4 && slices.Index(ids(ms), idsBySKU["b1"]) < 3 })

	// Delete.
	if err := f.cat.Delete(f.ctx, a, idsBySKU["d2"]); err != nil {
		t.Fatal(err)
	}
	converged("delete", func(ms []Match) bool { return len(ms) == 3 && !slices.Contains(ids(ms), idsBySKU["d2"]) })

	// The listeners' connections die; a change lands while they reconnect.
	n := testCount(t, f, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'LISTEN%'`)
	if n != 2 {
		t.Fatalf("terminated %d listeners, want 2", n)
	}
	idsBySKU = f.bulk(a, product("d3", "Linen summer dress in white", "material", "linen", "category", "dress"))
	f.embed(a)
	converged("reconnect", func(ms []Match) bool { return len(ms) == 4 && slices.Contains(ids(ms), idsBySKU["d3"]) })
	eventually(t, "listeners live again", func() bool { return one.live.Load() && two.live.Load() })
}

func testCount(t testing.TB, f *fixture, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := f.db.Pool.QueryRow(f.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestIndexTenantsAndModels: a tenant's search never sees another tenant's vectors, nor vectors
// of another model or size; a zero query or k 0 matches nothing.
func TestIndexTenantsAndModels(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	for _, tn := range []int64{a, b} {
		f.apparelSchema(tn)
		f.bulk(tn, product("d1", "Linen summer dress"), product("c1", "Wool winter coat"))
		f.embed(tn)
	}
	ix := f.index(IndexConfig{})
	aIDs := f.bulk(a)
	bIDs := f.bulk(b)
	got := topAll(t, ix, f, a, "linen summer dress")
	if len(got) != 2 || got[0].ProductID != aIDs["d1"] || got[1].ProductID != aIDs["c1"] {
		t.Fatalf("tenant a: %v, want a's two products (%v)", got, aIDs)
	}
	for _, m := range got {
		if m.ProductID == bIDs["d1"] || m.ProductID == bIDs["c1"] {
			t.Fatalf("tenant a sees b's product %d", m.ProductID)
		}
	}
	if got[0].Score < 0.99 {
		t.Errorf("the identical text scores %v, want about 1", got[0].Score)
	}
	// Another model, another size, nothing to compare.
	if ms, err := ix.TopK(f.ctx, a, "other-model", f.vector("linen"), 10, nil); err != nil || len(ms) != 0 {
		t.Errorf("other model: %v %v", ms, err)
	}
	if ms, err := ix.TopK(f.ctx, a, model, make([]float32, 12), 10, nil); err != nil || len(ms) != 0 {
		t.Errorf("other size: %v %v", ms, err)
	}
	if ms, err := ix.TopK(f.ctx, a, model, make([]float32, 384), 10, nil); err != nil || len(ms) != 0 {
		t.Errorf("zero query: %v %v", ms, err)
	}
	if ms, err := ix.TopK(f.ctx, a, model, f.vector("linen"), 0, nil); err != nil || len(ms) != 0 {
		t.Errorf("k 0: %v %v", ms, err)
	}
	// The filter admits products; k bounds.
	onlyCoat := func(id int64) bool { return id == aIDs["c1"] }
	if ms, err := ix.TopK(f.ctx, a, model, f.vector("linen summer dress"), 10, onlyCoat); err != nil || len(ms) != 1 || ms[0].ProductID != aIDs["c1"] {
		t.Errorf("filtered: %v %v", ms, err)
	}
	if ms, err := ix.TopK(f.ctx, a, model, f.vector("linen summer dress"), 1, nil); err != nil || len(ms) != 1 || ms[0].ProductID != aIDs["d1"] {
		t.Errorf("k 1: %v %v", ms, err)
	}
}

// TestIndexLoadsOnce: concurrent first searches of a tenant share one load.
func TestIndexLoadsOnce(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	var ps []map[string]any
	for i := range 300 {
		ps = append(ps, product("p"+string(rune('a'+i%26))+string(rune('a'+i/26)), "Product "+string(rune('a'+i%26))))
	}
	f.bulk(a, ps...)
	f.embed(a)
	ix := f.index(IndexConfig{})
	var wg sync.WaitGroup
	q := f.vector("product")
	for range 16 {
		wg.Go(func() {
			if ms, err := ix.TopK(f.ctx, a, model, q, 5, nil); err != nil || len(ms) != 5 {
				t.Errorf("TopK: %v %v", ms, err)
			}
		})
	}
	wg.Wait()
	// The heap holds the int8 codes (about a quarter of the float32 values), the float32 values
	// are in the file.
	if st := ix.Stats(); st.Loads != 1 || st.Sets != 1 || st.Vectors != 300 || st.FileBytes != 300*384*4 ||
		st.Bytes <= 300*384 || st.Bytes >= 300*384*2 {
		t.Fatalf("stats %+v, want one load of 300 vectors", st)
	}
	// A search that gives up while the load runs does not fail the others.
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, err := NewEmbedded(f.db.Pool, nil, f.clock.Now, IndexConfig{}).TopK(ctx, a, model, q, 5, nil); err == nil {
		t.Error("a cancelled first search succeeded")
	}
}

// TestIndexPruneFloor: change records of deleted embeddings are pruned after PruneAfter; an
// index that had not seen a pruned removal loads the tenant again instead of keeping the vector.
func TestIndexPruneFloor(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	idsBySKU := f.bulk(a, product("d1", "Linen summer dress"), product("c1", "Wool winter coat"))
	f.embed(a)
	ix := NewEmbedded(f.db.Pool, nil, f.clock.Now, IndexConfig{PruneAfter: time.Hour}) // syncs per search
	if got := topAll(t, ix, f, a, "coat"); len(got) != 2 {
		t.Fatalf("load: %v", got)
	}
	if err := f.cat.Delete(f.ctx, a, idsBySKU["c1"]); err != nil {
		t.Fatal(err)
	}
	if err := ix.Prune(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := testCount(t, f, `SELECT count(*) FROM product_embedding_changes WHERE tenant_id = $1`, a); n != 2 {
		t.Fatalf("%d change records, want 2 (one per product: the recent removal is kept)", n)
	}
	if _, err := f.db.Pool.Exec(f.ctx, `UPDATE product_embedding_changes SET changed_at = changed_at - interval '2 hours' WHERE product_id = $1`, idsBySKU["c1"]); err != nil {
		t.Fatal(err)
	}
	if err := ix.Prune(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := testCount(t, f, `SELECT count(*) FROM product_embedding_changes WHERE tenant_id = $1`, a); n != 1 {
		t.Fatalf("%d change records after the prune, want 1", n)
	}
	if n := testCount(t, f, `SELECT count(*) FROM product_embedding_change_floors WHERE tenant_id = $1 AND pruned_seq > 0`, a); n != 1 {
		t.Fatal("no floor recorded")
	}
	got := topAll(t, ix, f, a, "coat")
	if len(got) != 1 || got[0].ProductID != idsBySKU["d1"] {
		t.Fatalf("after the prune: %v, want only the dress", got)
	}
	if n := ix.Stats().Loads; n != 2 {
		t.Fatalf("%d loads, want 2 (below the floor: loaded again)", n)
	}
}

// TestIndexEviction: idle tenants are dropped; MaxBytes drops the least recently searched; a
// tenant larger than the whole budget is refused with a 503 that names the budget.
func TestIndexEviction(t *testing.T) {
	f := newFixture(t)
	a, b := f.tenant("a"), f.tenant("b")
	for _, tn := range []int64{a, b} {
		f.apparelSchema(tn)
		f.bulk(tn, product("d1", "Linen summer dress"), product("c1", "Wool winter coat"), product("b1", "Boots"))
		f.embed(tn)
	}
	// One tenant's 3 vectors of 384 need 3*residentPerVector(384) plus one padded vector of
	// scratch (2,808 bytes): the budget holds one tenant, not two.
	ix := NewEmbedded(f.db.Pool, nil, f.clock.Now, IndexConfig{MaxBytes: 4000, IdleAfter: time.Minute})
	topAll(t, ix, f, a, "dress")
	f.clock.Advance(time.Second)
	topAll(t, ix, f, b, "dress")
	if st := ix.Stats(); st.Sets != 1 || st.Vectors != 3 || st.Bytes > 4000 {
		t.Fatalf("stats %+v: loading b beyond MaxBytes keeps b only", st)
	}
	topAll(t, ix, f, a, "dress") // a again: b goes
	if st := ix.Stats(); st.Sets != 1 || st.Loads != 3 {
		t.Fatalf("stats %+v: a loaded again, b dropped", st)
	}
	f.clock.Advance(2 * time.Minute)
	ix.evictIdle()
	if st := ix.Stats(); st.Sets != 0 || st.FileBytes != 0 {
		t.Fatalf("stats %+v after the idle time", st)
	}
	if got := topAll(t, ix, f, a, "dress"); len(got) != 3 {
		t.Fatalf("reload: %v", got)
	}

	small := NewEmbedded(f.db.Pool, nil, f.clock.Now, IndexConfig{MaxBytes: 2000})
	_, err := small.TopK(f.ctx, a, model, f.vector("dress"), 3, nil)
	var coded *errs.CodedError
	if !errors.As(err, &coded) || coded.Code != CodeIndexTooLarge || !errors.Is(err, errs.ErrUnavailable) ||
		!strings.Contains(coded.Msg, "budget of 2.0 KiB (COHORT_SEARCH_MEMORY)") {
		t.Fatalf("a tenant over the budget: %v, want 503 %s naming the budget", err, CodeIndexTooLarge)
	}
	if st := small.Stats(); st.Sets != 0 || st.Refused != 1 || st.LoadsInProgress != 0 {
		t.Fatalf("stats %+v after the refusal", st)
	}
}

// TestIndexLoadingAnswers503: while a tenant's vectors load, a search that must not wait (the
// HTTP endpoint's) answers 503 search_index_loading with a Retry-After at once, and the load goes
// on in the background; a search that waits (page generation's) gets the matches once it ends.
func TestIndexLoadingAnswers503(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	f.bulk(a, product("d1", "Linen summer dress"), product("c1", "Wool winter coat"), product("b1", "Boots"))
	f.embed(a)
	ix := f.index(IndexConfig{})
	// The load blocks on the lock until the test releases it.
	lock, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background()) //nolint:errcheck // released below
	if _, err := lock.Exec(f.ctx, `LOCK TABLE product_embeddings IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	q := f.vector("dress")
	start := time.Now()
	_, err = ix.TopK(failFast(f.ctx), a, model, q, 3, nil)
	took := time.Since(start)
	var coded *errs.CodedError
	if !errors.As(err, &coded) || coded.Code != CodeIndexLoading || coded.RetryAfter <= 0 || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("search while loading: %v, want 503 %s with a Retry-After", err, CodeIndexLoading)
	}
	t.Logf("503 %s after %v", CodeIndexLoading, took)
	if took > time.Second { // LoadWait is 50 ms; a second leaves room for a loaded machine
		t.Errorf("the 503 took %v", took)
	}
	waited := make(chan []Match, 1)
	go func() {
		ms, err := ix.TopK(f.ctx, a, model, q, 3, nil)
		if err != nil {
			t.Errorf("waiting search: %v", err)
		}
		waited <- ms
	}()
	if st := ix.Stats(); st.LoadsInProgress != 1 || st.Sets != 0 {
		t.Fatalf("stats %+v while loading", st)
	}
	if err := lock.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if ms := <-waited; len(ms) != 3 {
		t.Fatalf("the waiting search got %v", ms)
	}
	if ms, err := ix.TopK(failFast(f.ctx), a, model, q, 3, nil); err != nil || len(ms) != 3 {
		t.Fatalf("after the load: %v %v", ms, err)
	}
	if st := ix.Stats(); st.Loads != 1 || st.LoadsDone != 1 || st.LoadsInProgress != 0 || st.LoadSeconds <= 0 {
		t.Fatalf("stats %+v after the load", st)
	}
}

// TestIndexLoadFailureIsUnavailable: a load that cannot write the vectors' file (here: its
// directory does not exist) fails the search as a dependency failure (the API's 503), never as
// an unclassified error (a 500).
func TestIndexLoadFailureIsUnavailable(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("a")
	f.apparelSchema(a)
	f.bulk(a, product("p1", "Linen dress"), product("p2", "Wool coat"))
	f.embed(a)
	ix := f.index(IndexConfig{Dir: filepath.Join(t.TempDir(), "missing")})
	_, err := ix.TopK(f.ctx, a, model, f.vector("dress"), 1, nil)
	if err == nil || !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("TopK with an unwritable vectors dir: %v, want errs.ErrUnavailable", err)
	}
}
