package catalog_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// fakeEmbedder wraps the local provider: it records every Embed call's texts and can refuse
// texts, fail every call, or run a hook before answering.
type fakeEmbedder struct {
	inner  *ai.Local
	model  string                 // EmbeddingModel; the local provider's when ""
	refuse func(text string) bool // a call with such a text fails with ai.ErrInvalidRequest
	err    error                  // every call fails with it
	before func(texts []string)   // runs before the answer (outside the lock)
	delay  time.Duration          // each call takes this long
	mu     sync.Mutex
	calls  [][]string
}

func newFakeEmbedder(t testing.TB) *fakeEmbedder {
	t.Helper()
	l, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &fakeEmbedder{inner: l}
}

func (e *fakeEmbedder) EmbeddingModel() string {
	if e.model != "" {
		return e.model
	}
	return e.inner.EmbeddingModel()
}

func (e *fakeEmbedder) Dimensions() int { return e.inner.Dimensions() }

func (e *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.calls = append(e.calls, slices.Clone(texts))
	e.mu.Unlock()
	if e.before != nil {
		e.before(texts)
	}
	if e.delay > 0 {
		time.Sleep(e.delay)
	}
	if e.err != nil {
		return nil, e.err
	}
	if e.refuse != nil {
		for _, t := range texts {
			if e.refuse(t) {
				return nil, &ai.ProviderError{Provider: "fake", Op: "embed", Kind: ai.ErrInvalidRequest, StatusCode: 400, Message: "input refused"}
			}
		}
	}
	return e.inner.Embed(ctx, texts)
}

// take returns the calls recorded since the last take.
func (e *fakeEmbedder) take() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.calls
	e.calls = nil
	return out
}

// recordingScheduler records kicks.
type recordingScheduler struct {
	mu    sync.Mutex
	kicks []int64
	err   error
}

func (r *recordingScheduler) ScheduleEmbeddings(_ context.Context, tenantID int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kicks = append(r.kicks, tenantID)
	return r.err
}

func (r *recordingScheduler) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.kicks)
}

// queue is the tenant's embedding queue: product id -> seq.
func (f *fixture) queue(tenant int64) map[int64]int64 {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, "SELECT product_id, seq FROM product_embedding_queue WHERE tenant_id = $1", tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			f.t.Fatal(err)
		}
		out[id] = seq
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// queuedIDs are the sorted product ids of the tenant's queue.
func (f *fixture) queuedIDs(tenant int64) []int64 {
	f.t.Helper()
	return slices.Sorted(maps.Keys(f.queue(tenant)))
}

func (f *fixture) clearQueue(tenant int64) {
	f.t.Helper()
	f.exec("DELETE FROM product_embedding_queue WHERE tenant_id = $1", tenant)
}

func (f *fixture) drain(tenant int64, p catalog.Embedder, limit int) catalog.DrainResult {
	f.t.Helper()
	res, err := f.svc.DrainEmbeddings(f.ctx, tenant, p, limit)
	if err != nil {
		f.t.Fatalf("drain: %v", err)
	}
	return res
}

// storedEmbedding is a product's row of product_embeddings.
type storedEmbedding struct {
	model string
	dims  int
	hash  []byte
	vec   []float32
}

func (f *fixture) embedding(id int64) (storedEmbedding, bool) {
	f.t.Helper()
	var e storedEmbedding
	var raw []byte
	err := f.db.Pool.QueryRow(f.ctx, "SELECT model, dims, text_hash, vector FROM product_embeddings WHERE product_id = $1", id).
		Scan(&e.model, &e.dims, &e.hash, &raw)
	if err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return e, false
		}
		f.t.Fatal(err)
	}
	e.vec = catalog.DecodeVector(nil, raw)
	return e, true
}

func ids(ps ...*catalog.Product) []int64 {
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	slices.Sort(out)
	return out
}

func bulkIDs(sum *catalog.BulkSummary, status string) []int64 {
	var out []int64
	for _, r := range sum.Results {
		if r.Status == status {
			out = append(out, r.ID)
		}
	}
	slices.Sort(out)
	return out
}

func TestEmbeddingText(t *testing.T) {
	searchable := func(f catalog.Field) catalog.Field { f.Searchable = true; return f }
	withUnit := func(f catalog.Field, unit string) catalog.Field { f.Unit = unit; return f }
	labelled := func(f catalog.Field, label string) catalog.Field { f.Label = label; return f }
	data := map[string]any{
		"color": "Red", "brand": " Acme ", "tags": []any{"soft", " ", "summer"}, "description": "A linen shirt.\nBreathable.",
		"width": float64(42), "weight": int64(3), "vegan": true, "wool": false, "url": "https://x.example/p", "hidden": "gone field",
	}
	tests := []struct {
		name   string
		fields []catalog.Field
		data   map[string]any
		want   string
	}{
		{name: "searchable fields in schema order", data: data,
			fields: []catalog.Field{fld("color", "string"), searchable(fld("description", "text")), searchable(fld("brand", "string"))},
			want:   "Linen shirt\nA linen shirt.\nBreathable.\nAcme"},
		{name: "no searchable field: name, string, text and array fields", data: data,
			fields: []catalog.Field{fld("color", "string"), withUnit(fld("width", "number"), "cm"), fld("tags", "array"), fld("url", "url"), fld("description", "text")},
			want:   "Linen shirt\nRed\nsoft, summer\nA linen shirt.\nBreathable."},
		{name: "numbers with units, booleans as labels", data: data,
			fields: []catalog.Field{searchable(withUnit(fld("width", "number"), "cm")), searchable(fld("weight", "integer")),
				searchable(labelled(fld("vegan", "boolean"), "Vegan")), searchable(labelled(fld("wool", "boolean"), "Wool"))},
			want: "Linen shirt\n42 cm\n3\nVegan"},
		{name: "missing and removed fields add nothing", data: data,
			fields: []catalog.Field{searchable(fld("size", "string")), searchable(fld("color", "string"))},
			want:   "Linen shirt\nRed"},
		{name: "no fields", data: data, want: "Linen shirt"},
		{name: "int64 and float64 render alike", data: map[string]any{"n": int64(7)},
			fields: []catalog.Field{searchable(fld("n", "integer"))}, want: "Linen shirt\n7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := catalog.EmbeddingText(&catalog.Schema{Fields: tt.fields}, "Linen shirt", tt.data)
			if got != tt.want {
				t.Errorf("text %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("capped at a rune boundary", func(t *testing.T) {
		long := strings.Repeat("ü", catalog.MaxEmbeddingTextBytes) // 2 bytes each
		got := catalog.EmbeddingText(&catalog.Schema{Fields: []catalog.Field{searchable(fld("d", "text"))}}, "N", map[string]any{"d": long})
		if len(got) > catalog.MaxEmbeddingTextBytes || len(got) < catalog.MaxEmbeddingTextBytes-1 || !strings.HasPrefix(got, "N\nüü") {
			t.Fatalf("text of %d bytes (%q...)", len(got), got[:10])
		}
		if !strings.HasSuffix(got, "ü") {
			t.Errorf("text ends %q: cut inside a rune", got[len(got)-3:])
		}
	})
}

func TestEmbeddingQueueOnSave(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("queue")
	desc := fld("description", catalog.TypeText)
	desc.Searchable = true
	f.putSchema(tn, fld("color", catalog.TypeString), fld("price", catalog.TypePrice), desc)
	a := f.create(tn, "A", "Shirt", `{"color": "red", "price": 10, "description": "linen"}`)
	b := f.create(tn, "B", "Dress", `{"price": 20}`)

	t.Run("create queues the product", func(t *testing.T) {
		f := f.with(t)
		if got, want := f.queuedIDs(tn), ids(a, b); !slices.Equal(got, want) {
			t.Fatalf("queued %v, want %v", got, want)
		}
	})
	t.Run("a text change re-queues with a new seq", func(t *testing.T) {
		f := f.with(t)
		before := f.queue(tn)
		name := "Linen shirt"
		if _, err := f.svc.Update(f.ctx, tn, a.ID, catalog.ProductPatch{Name: &name}); err != nil {
			t.Fatal(err)
		}
		after := f.queue(tn)
		if after[a.ID] <= before[a.ID] || after[b.ID] != before[b.ID] {
			t.Fatalf("seqs %v -> %v: want a new seq for %d only", before, after, a.ID)
		}
		f.clearQueue(tn)
		if _, err := f.svc.Update(f.ctx, tn, a.ID, catalog.ProductPatch{Data: []byte(`{"description": "linen, washed"}`)}); err != nil {
			t.Fatal(err)
		}
		if got := f.queuedIDs(tn); !slices.Equal(got, []int64{a.ID}) {
			t.Fatalf("after a searchable field edit queued %v, want [%d]", got, a.ID)
		}
	})
	t.Run("edits outside the text and no-op updates queue nothing", func(t *testing.T) {
		f := f.with(t)
		f.clearQueue(tn)
		patches := []catalog.ProductPatch{
			{Data: []byte(`{"price": 12}`)},     // not embedded: description is the searchable field
			{Data: []byte(`{"color": "blue"}`)}, // a string, but the schema has a searchable field
			{Data: []byte(`{"price": 12}`)},     // no change at all
			{},
		}
		for _, p := range patches {
			if _, err := f.svc.Update(f.ctx, tn, a.ID, p); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.queuedIDs(tn); len(got) != 0 {
			t.Fatalf("queued %v, want nothing", got)
		}
	})
	t.Run("bulk queues created and text-changed products only", func(t *testing.T) {
		f := f.with(t)
		f.clearQueue(tn)
		sum := f.bulk(tn,
			`{"sku": "A", "name": "Linen shirt", "price": 99}`,                    // price only: updated, text kept
			`{"sku": "B", "name": "Summer dress"}`,                                // name: updated, text changed
			`{"sku": "C", "name": "Jacket", "description": "wool"}`,               // created
			`{"sku": "D", "name": "Coat"}`,                                        // created
			`{"sku": "E", "price": 5}`,                                            // failed: a new product needs a name
			`{"sku": "a", "name": "Linen shirt", "description": "linen, washed"}`, // repeats A's sku: failed
		)
		if sum.Created != 2 || sum.Updated != 2 || sum.Failed != 2 {
			t.Fatalf("summary %+v", sum)
		}
		want := append(bulkIDs(sum, catalog.BulkCreated), b.ID)
		slices.Sort(want)
		if got := f.queuedIDs(tn); !slices.Equal(got, want) {
			t.Fatalf("queued %v, want %v (created + B)", got, want)
		}
		f.clearQueue(tn)
		sum = f.bulk(tn, `{"sku": "A", "name": "Linen shirt"}`, `{"sku": "C", "name": "Jacket", "description": "wool"}`)
		if sum.Unchanged != 2 {
			t.Fatalf("summary %+v, want 2 unchanged", sum)
		}
		if got := f.queuedIDs(tn); len(got) != 0 {
			t.Fatalf("unchanged bulk items queued %v", got)
		}
	})
	t.Run("PutSchema re-queues everything when the embedded fields change", func(t *testing.T) {
		f := f.with(t)
		f.clearQueue(tn)
		all := f.count("SELECT count(*) FROM products WHERE tenant_id = $1", tn)
		// Not about the text: a facet, a required flag, the currency, a new non-searchable field.
		color := fld("color", catalog.TypeString)
		color.Facet = true
		if _, err := f.svc.PutSchema(f.ctx, tn, catalog.Schema{DefaultCurrency: "EUR",
			Fields: []catalog.Field{color, fld("price", catalog.TypePrice), desc, fld("stock", catalog.TypeInteger)}}); err != nil {
			t.Fatal(err)
		}
		if got := f.queuedIDs(tn); len(got) != 0 {
			t.Fatalf("a schema change outside the text queued %v", got)
		}
		brand := fld("brand", catalog.TypeString)
		brand.Searchable = true
		f.putSchema(tn, color, fld("price", catalog.TypePrice), desc, brand)
		if got := int64(len(f.queue(tn))); got != all {
			t.Fatalf("a new searchable field queued %d products, want all %d", got, all)
		}
		f.clearQueue(tn)
		desc2 := desc
		desc2.Label = "About"
		f.putSchema(tn, color, fld("price", catalog.TypePrice), desc2, brand)
		if got := int64(len(f.queue(tn))); got != all {
			t.Fatalf("a relabelled searchable field queued %d products, want all %d", got, all)
		}
	})
	t.Run("delete drops the queue row and the embedding", func(t *testing.T) {
		f := f.with(t)
		p := f.create(tn, "DEL", "Doomed", "")
		e := newFakeEmbedder(t)
		f.drain(tn, e, 0)
		if _, ok := f.embedding(p.ID); !ok {
			t.Fatal("no embedding after the drain")
		}
		name := "Doomed again"
		if _, err := f.svc.Update(f.ctx, tn, p.ID, catalog.ProductPatch{Name: &name}); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.queue(tn)[p.ID]; !ok {
			t.Fatal("not queued after a rename")
		}
		if err := f.svc.Delete(f.ctx, tn, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.queue(tn)[p.ID]; ok {
			t.Error("queue row left after delete")
		}
		if _, ok := f.embedding(p.ID); ok {
			t.Error("embedding left after delete")
		}
	})
}

func TestEmbeddingKicks(t *testing.T) {
	f := newFixture(t)
	tn, other := f.tenant("kicks"), f.tenant("kicks-other")
	sched := &recordingScheduler{}
	var reported []error
	f.svc = catalog.NewService(f.db.Pool, f.clock.Now,
		catalog.WithEmbeddingScheduler(sched, func(tenantID int64, err error) { reported = append(reported, err) }))

	p := f.create(tn, "A", "Shirt", "")
	if sched.count() != 1 {
		t.Fatalf("kicks after a create: %d, want 1", sched.count())
	}
	f.create(tn, "B", "Dress", "")
	f.bulk(tn, `{"sku": "C", "name": "Coat"}`)
	if sched.count() != 1 {
		t.Fatalf("kicks within the debounce: %d, want 1", sched.count())
	}
	f.create(other, "A", "Shirt", "")
	if sched.count() != 2 || sched.kicks[1] != other {
		t.Fatalf("kicks %v: want another tenant kicked at once", sched.kicks)
	}
	f.clock.Advance(catalog.EmbeddingKickDebounce)
	if _, err := f.svc.Update(f.ctx, tn, p.ID, catalog.ProductPatch{}); err != nil {
		t.Fatal(err)
	}
	f.bulk(tn, `{"sku": "C", "name": "Coat"}`) // unchanged
	if sched.count() != 2 {
		t.Fatalf("kicks after saves that queued nothing: %d, want 2", sched.count())
	}
	f.bulk(tn, `{"sku": "C", "name": "Long coat"}`)
	if sched.count() != 3 || sched.kicks[2] != tn {
		t.Fatalf("kicks %v: want the tenant kicked after the debounce", sched.kicks)
	}
	f.clock.Advance(catalog.EmbeddingKickDebounce)
	sched.err = errors.New("temporal is down")
	if _, err := f.svc.PutSchema(f.ctx, tn, catalog.Schema{Fields: []catalog.Field{fld("color", catalog.TypeString)}}); err != nil {
		t.Fatalf("a failed kick failed the save: %v", err)
	}
	if sched.count() != 4 || f.svc.EmbeddingKickFailures() != 1 || len(reported) != 1 {
		t.Fatalf("kicks %d, failures %d, reported %v: want the schema change kicked once and the failure counted",
			sched.count(), f.svc.EmbeddingKickFailures(), reported)
	}
	if got := len(f.queue(tn)); got != 3 {
		t.Fatalf("queue holds %d products after a failed kick, want 3", got)
	}
	// A service built with a nil scheduler saves and kicks nothing.
	f.svc = catalog.NewService(f.db.Pool, f.clock.Now, catalog.WithEmbeddingScheduler(nil, nil))
	f.clock.Advance(catalog.EmbeddingKickDebounce)
	f.create(tn, "D", "Hat", "")
	if sched.count() != 4 || len(f.queue(tn)) != 4 {
		t.Fatalf("kicks %d, queue %v: want no kick and the product queued", sched.count(), f.queue(tn))
	}
}

func TestDrainEmbeddings(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("drain")
	desc := fld("description", catalog.TypeText)
	desc.Searchable = true
	f.putSchema(tn, fld("color", catalog.TypeString), fld("price", catalog.TypePrice), desc)
	sum := f.bulk(tn,
		`{"sku": "S1", "name": "Linen shirt", "description": "Breathable linen", "price": 30}`,
		`{"sku": "S2", "name": "Wool jacket", "description": "Warm", "color": "navy"}`,
		`{"sku": "S3", "name": "Cotton dress"}`,
	)
	p4 := f.create(tn, "S4", "Silk scarf", `{"description": "Hand-rolled edges"}`)
	all := append(bulkIDs(sum, catalog.BulkCreated), p4.ID)
	e := newFakeEmbedder(t)
	sc, err := f.svc.Schema(f.ctx, tn)
	if err != nil {
		t.Fatal(err)
	}

	res := f.drain(tn, e, 0)
	if res != (catalog.DrainResult{Read: 4, Embedded: 4}) {
		t.Fatalf("first drain %+v", res)
	}
	calls := e.take()
	if len(calls) != 1 || len(calls[0]) != 4 {
		t.Fatalf("provider calls %v, want one with 4 texts", calls)
	}
	for _, id := range all {
		p, err := f.svc.Get(f.ctx, tn, id)
		if err != nil {
			t.Fatal(err)
		}
		text := catalog.EmbeddingText(sc, p.Name, p.Data)
		want, err := e.inner.Embed(f.ctx, []string{text})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := f.embedding(id)
		hash := sha256.Sum256([]byte(text))
		switch {
		case !ok:
			t.Fatalf("product %s has no embedding", p.SKU)
		case got.model != "local-ngram-v1" || got.dims != 384 || string(got.hash) != string(hash[:]):
			t.Errorf("product %s: model %q dims %d hash %x, want local-ngram-v1 384 %x", p.SKU, got.model, got.dims, got.hash, hash)
		case !slices.Equal(got.vec, want[0]):
			t.Errorf("product %s: stored vector differs from the provider's vector of %q", p.SKU, text)
		}
	}
	if p, err := f.svc.Get(f.ctx, tn, all[0]); err != nil || catalog.EmbeddingText(sc, p.Name, p.Data) != "Linen shirt\nBreathable linen" {
		if err != nil {
			t.Fatalf("get S1: %v", err)
		}
		t.Errorf("text of S1 = %q", catalog.EmbeddingText(sc, p.Name, p.Data))
	}
	if len(f.queue(tn)) != 0 {
		t.Fatalf("queue after the drain: %v", f.queue(tn))
	}

	t.Run("nothing queued: no provider call", func(t *testing.T) {
		f := f.with(t)
		f.bulk(tn, `{"sku": "S1", "price": 31}`, `{"sku": "S2", "color": "black"}`) // outside the text
		if res := f.drain(tn, e, 0); res != (catalog.DrainResult{}) {
			t.Fatalf("drain %+v, want nothing read", res)
		}
		if calls := e.take(); len(calls) != 0 {
			t.Fatalf("provider calls %v", calls)
		}
	})
	t.Run("re-queued with the same text: no provider call", func(t *testing.T) {
		f := f.with(t)
		brand := fld("brand", catalog.TypeString) // searchable, but no product has a brand
		brand.Searchable = true
		f.putSchema(tn, fld("color", catalog.TypeString), fld("price", catalog.TypePrice), desc, brand)
		if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 4, Unchanged: 4}) {
			t.Fatalf("drain %+v, want 4 unchanged", res)
		}
		if calls := e.take(); len(calls) != 0 {
			t.Fatalf("provider calls %v", calls)
		}
	})
	t.Run("a text change re-embeds", func(t *testing.T) {
		f := f.with(t)
		before, ok := f.embedding(all[1])
		if !ok {
			t.Fatal("S2 has no embedding before the change")
		}
		f.bulk(tn, `{"sku": "S2", "description": "Warm and soft"}`)
		if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 1, Embedded: 1}) {
			t.Fatalf("drain %+v", res)
		}
		calls := e.take()
		if len(calls) != 1 || !slices.Equal(calls[0], []string{"Wool jacket\nWarm and soft"}) {
			t.Fatalf("provider calls %q", calls)
		}
		after, ok := f.embedding(all[1])
		if !ok {
			t.Fatal("S2 has no embedding after the change")
		}
		if slices.Equal(before.vec, after.vec) || string(before.hash) == string(after.hash) {
			t.Error("the stored embedding did not change")
		}
	})
	t.Run("a model change re-embeds", func(t *testing.T) {
		f := f.with(t)
		v2 := newFakeEmbedder(t)
		v2.model = "local-ngram-v2"
		n, err := f.svc.QueueStaleEmbeddings(f.ctx, v2.EmbeddingModel(), v2.Dimensions())
		if err != nil || n != 4 {
			t.Fatalf("queue stale: %d, %v; want 4", n, err)
		}
		if n, err := f.svc.QueueStaleEmbeddings(f.ctx, v2.EmbeddingModel(), v2.Dimensions()); err != nil || n != 0 {
			t.Fatalf("queue stale again: %d, %v; want 0 (already queued)", n, err)
		}
		if res := f.drain(tn, v2, 0); res != (catalog.DrainResult{Read: 4, Embedded: 4}) {
			t.Fatalf("drain %+v", res)
		}
		if calls := v2.take(); len(calls) != 1 || len(calls[0]) != 4 {
			t.Fatalf("provider calls %v", calls)
		}
		for _, id := range all {
			if got, ok := f.embedding(id); !ok || got.model != "local-ngram-v2" {
				t.Errorf("product %d model %q (embedded: %v)", id, got.model, ok)
			}
		}
		// The old model again: a queued product whose embedding is of another model re-embeds.
		f.exec("INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at) VALUES ($1, $2, now())", all[0], tn)
		if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 1, Embedded: 1}) {
			t.Fatalf("drain with the first model %+v", res)
		}
		if got, ok := f.embedding(all[0]); !ok || got.model != "local-ngram-v1" {
			t.Errorf("model %q after the drain with local-ngram-v1 (embedded: %v)", got.model, ok)
		}
		e.take()
	})
	t.Run("status", func(t *testing.T) {
		f := f.with(t)
		st, err := f.svc.EmbeddingStatus(f.ctx, tn)
		if err != nil || st != (catalog.EmbeddingStatus{Embedded: 4}) {
			t.Fatalf("status %+v, %v", st, err)
		}
	})
}

func TestDrainBatches(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("batches")
	var products []string
	for i := range 700 {
		products = append(products, fmt.Sprintf(`{"sku": "P%d", "name": "Product number %d"}`, i, i))
	}
	in := make([]string, 0, 700)
	in = append(in, products...)
	f.bulk(tn, in...)
	e := newFakeEmbedder(t)
	var got []catalog.DrainResult
	for {
		res := f.drain(tn, e, 300)
		got = append(got, res)
		if !res.More {
			break
		}
	}
	want := []catalog.DrainResult{{Read: 300, Embedded: 300, More: true}, {Read: 300, Embedded: 300, More: true}, {Read: 100, Embedded: 100}}
	if !slices.Equal(got, want) {
		t.Fatalf("drains %+v, want %+v", got, want)
	}
	calls := e.take()
	if len(calls) != 3 || len(calls[0]) != 300 || len(calls[1]) != 300 || len(calls[2]) != 100 {
		t.Fatalf("provider calls of %v texts, want one call per drain: 300, 300, 100", lens(calls))
	}
	// Oldest request first: the first drain took the first 300 products saved.
	if calls[0][0] != "Product number 0" || calls[2][99] != "Product number 699" {
		t.Errorf("order: first %q, last %q", calls[0][0], calls[2][99])
	}

	f.clearQueue(tn)
	f.exec("DELETE FROM product_embeddings")
	f.exec("INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at) SELECT id, tenant_id, now() FROM products WHERE tenant_id = $1", tn)
	if res := f.drain(tn, e, 1000); res != (catalog.DrainResult{Read: 700, Embedded: 700}) {
		t.Fatalf("drain of 700 with limit 1000: %+v", res)
	}
	if calls := e.take(); len(calls) != 1 || len(calls[0]) != 700 {
		t.Fatalf("provider calls of %v texts, want one of 700", lens(calls))
	}
}

func lens(calls [][]string) []int {
	out := make([]int, len(calls))
	for i, c := range calls {
		out[i] = len(c)
	}
	return out
}

func TestDrainRefusedTextParks(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("refused")
	good1 := f.create(tn, "G1", "Good one", "")
	bad := f.create(tn, "B1", "BAD text", "")
	good2 := f.create(tn, "G2", "Good two", "")
	good3 := f.create(tn, "G3", "Good three", "")
	e := newFakeEmbedder(t)
	e.refuse = func(text string) bool { return strings.Contains(text, "BAD") }

	res := f.drain(tn, e, 0)
	if res != (catalog.DrainResult{Read: 4, Embedded: 3, Failed: 1, NextReadyIn: 30 * time.Second}) {
		t.Fatalf("drain %+v", res)
	}
	// The batch, the probe, the first half (G1, BAD: refused), its halves, the second half.
	if got := lens(e.take()); !slices.Equal(got, []int{4, 1, 2, 1, 1, 2}) {
		t.Errorf("provider calls of %v texts", got)
	}
	for _, p := range []*catalog.Product{good1, good2, good3} {
		if _, ok := f.embedding(p.ID); !ok {
			t.Errorf("%s not embedded", p.SKU)
		}
	}
	var attempts int
	var lastError string
	if err := f.db.Pool.QueryRow(f.ctx, "SELECT attempts, last_error FROM product_embedding_queue WHERE product_id = $1", bad.ID).
		Scan(&attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || !strings.Contains(lastError, "input refused") {
		t.Fatalf("attempts %d, last_error %q", attempts, lastError)
	}
	// The refused row waits: the queue has nothing ready, the sweep does not kick the tenant; the
	// drain says when the row is ready (its first backoff is within a lease).
	if res := f.drain(tn, e, 0); res != (catalog.DrainResult{NextReadyIn: 30 * time.Second}) {
		t.Fatalf("drain during the backoff %+v", res)
	}
	if tenants, err := f.svc.QueuedTenants(f.ctx); err != nil || slices.Contains(tenants, tn) {
		t.Fatalf("queued tenants %v (%v) include the tenant during the backoff", tenants, err)
	}
	for i := 2; i <= catalog.MaxEmbedAttempts; i++ {
		f.clock.Advance(time.Hour)
		res := f.drain(tn, e, 0)
		want := catalog.DrainResult{Read: 1, Failed: 1}
		if i == catalog.MaxEmbedAttempts {
			want.Parked = 1
		}
		if res != want {
			t.Fatalf("attempt %d: drain %+v, want %+v", i, res, want)
		}
	}
	f.clock.Advance(24 * time.Hour)
	if res := f.drain(tn, e, 0); res != (catalog.DrainResult{}) {
		t.Fatalf("drain after parking %+v, want nothing", res)
	}
	if st, err := f.svc.EmbeddingStatus(f.ctx, tn); err != nil || st != (catalog.EmbeddingStatus{Embedded: 3, Parked: 1}) {
		t.Fatalf("status %+v, %v", st, err)
	}
	// The queue moves on.
	next := f.create(tn, "G4", "Good four", "")
	e.take()
	if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 1, Embedded: 1}) {
		t.Fatalf("drain after a new product %+v", res)
	}
	if _, ok := f.embedding(next.ID); !ok {
		t.Fatal("the new product was not embedded")
	}
	// A new save of the parked product gives it a clean slate.
	name := "Fixed text"
	if _, err := f.svc.Update(f.ctx, tn, bad.ID, catalog.ProductPatch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 1, Embedded: 1}) {
		t.Fatalf("drain after fixing the parked product %+v", res)
	}
}

func TestDrainProviderErrors(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("provider-errors")
	f.bulk(tn, `{"sku": "A", "name": "Shirt"}`, `{"sku": "B", "name": "Dress"}`)
	ready := func() int64 {
		return f.count(`SELECT count(*) FROM product_embedding_queue WHERE tenant_id = $1 AND attempts = 0
			AND available_at IS NULL AND last_error IS NULL`, tn)
	}
	tests := []struct {
		name    string
		setup   func(e *fakeEmbedder)
		want    error
		wantMsg string
	}{
		{name: "unavailable", setup: func(e *fakeEmbedder) {
			e.err = &ai.ProviderError{Provider: "fake", Op: "embed", Kind: ai.ErrUnavailable, StatusCode: 503}
		}, want: ai.ErrUnavailable},
		{name: "rate limited", setup: func(e *fakeEmbedder) {
			e.err = &ai.ProviderError{Provider: "fake", Op: "embed", Kind: ai.ErrRateLimited, StatusCode: 429}
		}, want: ai.ErrRateLimited},
		{name: "unauthorized: configuration, not the texts", setup: func(e *fakeEmbedder) {
			e.err = &ai.ProviderError{Provider: "fake", Op: "embed", Kind: ai.ErrUnauthorized, StatusCode: 401}
		}, want: ai.ErrUnauthorized},
		{name: "every text refused: configuration, not the texts", setup: func(e *fakeEmbedder) {
			e.refuse = func(string) bool { return true }
		}, want: ai.ErrInvalidRequest, wantMsg: "model or settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.with(t)
			e := newFakeEmbedder(t)
			tt.setup(e)
			_, err := f.svc.DrainEmbeddings(f.ctx, tn, e, 0)
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.wantMsg) {
				t.Fatalf("error %v, want %v containing %q", err, tt.want, tt.wantMsg)
			}
			if got := ready(); got != 2 {
				t.Fatalf("%d rows ready and untouched after the failed drain, want 2", got)
			}
		})
	}
	e := newFakeEmbedder(t)
	if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 2, Embedded: 2}) {
		t.Fatalf("drain once the provider is back %+v", res)
	}
}

func TestDrainSupersededBySave(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("superseded")
	a := f.create(tn, "A", "Old name", "")
	b := f.create(tn, "B", "Other", "")
	e := newFakeEmbedder(t)
	once := sync.Once{}
	e.before = func([]string) {
		once.Do(func() {
			name := "New name"
			if _, err := f.svc.Update(f.ctx, tn, a.ID, catalog.ProductPatch{Name: &name}); err != nil {
				t.Error(err)
			}
		})
	}
	res := f.drain(tn, e, 0)
	if res != (catalog.DrainResult{Read: 2, Embedded: 1, Superseded: 1, More: true}) {
		t.Fatalf("drain %+v", res)
	}
	if _, ok := f.embedding(a.ID); ok {
		t.Fatal("the vector of the old name was stored although the product changed meanwhile")
	}
	if _, ok := f.embedding(b.ID); !ok {
		t.Fatal("B not embedded")
	}
	if got := f.queuedIDs(tn); !slices.Equal(got, []int64{a.ID}) {
		t.Fatalf("queue %v, want the renamed product", got)
	}
	e.take()
	if res := f.drain(tn, e, 0); res != (catalog.DrainResult{Read: 1, Embedded: 1}) {
		t.Fatalf("second drain %+v", res)
	}
	if calls := e.take(); len(calls) != 1 || !slices.Equal(calls[0], []string{"New name"}) {
		t.Fatalf("calls %q", calls)
	}
}

func TestConcurrentDrains(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("concurrent")
	const n = 300
	var in []string
	for i := range n {
		in = append(in, fmt.Sprintf(`{"sku": "P%d", "name": "Item %d"}`, i, i))
	}
	f.bulk(tn, in...)
	e := newFakeEmbedder(t)
	e.delay = 20 * time.Millisecond
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 6 {
		wg.Go(func() {
			for {
				res, err := f.svc.DrainEmbeddings(f.ctx, tn, e, 25)
				if err != nil {
					errs <- err
					return
				}
				if res.Read == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, call := range e.take() {
		for _, text := range call {
			seen[text]++
		}
	}
	for text, c := range seen {
		if c != 1 {
			t.Errorf("%q embedded %d times", text, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d texts embedded, want %d", len(seen), n)
	}
	if got := f.count("SELECT count(*) FROM product_embeddings WHERE tenant_id = $1", tn); got != n {
		t.Errorf("%d embeddings stored, want %d", got, n)
	}
	if q := f.queue(tn); len(q) != 0 {
		t.Errorf("queue left: %v", q)
	}
}

func TestDrainTenantIsolation(t *testing.T) {
	f := newFixture(t)
	ta, tb := f.tenant("iso-a"), f.tenant("iso-b")
	f.bulk(ta, `{"sku": "X", "name": "Alpha shirt"}`, `{"sku": "Y", "name": "Alpha dress"}`)
	f.bulk(tb, `{"sku": "X", "name": "Beta shirt"}`, `{"sku": "Y", "name": "Beta dress"}`)
	tenants, err := f.svc.QueuedTenants(f.ctx)
	if err != nil || !slices.Contains(tenants, ta) || !slices.Contains(tenants, tb) {
		t.Fatalf("queued tenants %v, %v: want both", tenants, err)
	}
	queueB := f.queue(tb)
	e := newFakeEmbedder(t)
	if res := f.drain(ta, e, 0); res != (catalog.DrainResult{Read: 2, Embedded: 2}) {
		t.Fatalf("drain of A %+v", res)
	}
	for _, call := range e.take() {
		for _, text := range call {
			if !strings.HasPrefix(text, "Alpha") {
				t.Errorf("draining A embedded %q", text)
			}
		}
	}
	if got := f.queue(tb); !maps.Equal(got, queueB) {
		t.Errorf("B's queue changed: %v -> %v", queueB, got)
	}
	if n := f.count("SELECT count(*) FROM product_embeddings WHERE tenant_id = $1", tb); n != 0 {
		t.Errorf("B has %d embeddings", n)
	}
	tenants, err = f.svc.QueuedTenants(f.ctx)
	if err != nil || slices.Contains(tenants, ta) || !slices.Contains(tenants, tb) {
		t.Fatalf("queued tenants %v (%v) after draining A: want B only", tenants, err)
	}
}

func TestVectorEncoding(t *testing.T) {
	v := []float32{0, 1, -1, 0.5, 3.4028235e38, -1.1754944e-38}
	b := catalog.EncodeVector(v)
	if len(b) != 4*len(v) || b[4] != 0 || b[7] != 0x3f { // 1.0 = 0x3f800000, little-endian
		t.Fatalf("encoding %x", b)
	}
	if got := catalog.DecodeVector(nil, b); !slices.Equal(got, v) {
		t.Fatalf("round trip %v", got)
	}
}

// BenchmarkDrainEmbeddings measures the drain with the local provider: 10,000 products (name
// and a searchable description) drained in batches of 512, the workflow's, as embeddings/s.
func BenchmarkDrainEmbeddings(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	db := testenv.OpenDB(b)
	tn := testenv.Tenant(b, db, "bench-drain")
	svc := catalog.NewService(db.Pool, time.Now)
	if _, err := svc.PutSchema(ctx, tn, catalog.Schema{Fields: []catalog.Field{
		{Name: "description", Type: catalog.TypeText, Searchable: true}, {Name: "price", Type: catalog.TypePrice},
	}}); err != nil {
		b.Fatal(err)
	}
	words := []string{"linen", "cotton", "wool", "shirt", "dress", "jacket", "summer", "classic", "slim", "relaxed"}
	for lo := 0; lo < n; lo += catalog.MaxBulk {
		batch := make([]map[string]any, 0, catalog.MaxBulk)
		for i := lo; i < lo+catalog.MaxBulk; i++ {
			batch = append(batch, map[string]any{"sku": fmt.Sprintf("SKU-%d", i),
				"name":        fmt.Sprintf("%s %s %s %d", words[i%10], words[(i/10)%10], words[(i/100)%10], i),
				"description": "A " + words[(i/7)%10] + " piece for every day, cut " + words[(i/3)%10] + ".", "price": 10.0})
		}
		sum, err := svc.Bulk(ctx, tn, batch)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Created != len(batch) {
			b.Fatalf("bulk: %+v", sum.Results[0])
		}
	}
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		// Every run embeds every product again: no embeddings, everything queued.
		testenv.Exec(b, db, "DELETE FROM product_embeddings WHERE tenant_id = $1", tn)
		testenv.Exec(b, db, `INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at)
			SELECT id, tenant_id, now() FROM products WHERE tenant_id = $1 ON CONFLICT DO NOTHING`, tn)
		start := time.Now()
		embedded := 0
		for {
			res, err := svc.DrainEmbeddings(ctx, tn, local, 512)
			if err != nil {
				b.Fatal(err)
			}
			embedded += res.Embedded
			if !res.More {
				break
			}
		}
		if embedded != n {
			b.Fatalf("embedded %d, want %d", embedded, n)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "embeddings/s")
	}
}

// TestDrainAfterADeadDrain: the rows of a drain that died (claimed, neither settled nor released)
// are skipped while its lease lasts, the drains meanwhile say when they are ready, and the first
// drain after the lease takes them.
func TestDrainAfterADeadDrain(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("dead-drain")
	f.bulk(tn, `{"sku": "A", "name": "Shirt"}`, `{"sku": "B", "name": "Dress"}`, `{"sku": "C", "name": "Coat"}`)
	if n, err := f.svc.ClaimEmbeddingsAndDie(f.ctx, tn, 2); err != nil || n != 2 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	e := newFakeEmbedder(t)
	steps := []struct {
		name    string
		advance time.Duration
		want    catalog.DrainResult
	}{
		{name: "the ready row is drained; the dead drain's rows are leased", want: catalog.DrainResult{Read: 1, Embedded: 1, NextReadyIn: catalog.EmbeddingLease}},
		{name: "nothing ready while the lease lasts", advance: catalog.EmbeddingLease - time.Second, want: catalog.DrainResult{NextReadyIn: time.Second}},
		{name: "the lease ended: the rows are drained", advance: time.Second, want: catalog.DrainResult{Read: 2, Embedded: 2}},
		{name: "nothing left", want: catalog.DrainResult{}},
	}
	for _, s := range steps {
		f.clock.Advance(s.advance)
		if got := f.drain(tn, e, 0); got != s.want {
			t.Fatalf("%s: drain %+v, want %+v", s.name, got, s.want)
		}
	}
	if got := f.count("SELECT count(*) FROM product_embeddings WHERE tenant_id = $1", tn); got != 3 {
		t.Fatalf("%d embeddings stored, want 3", got)
	}
	if lease := catalog.EmbeddingLease; lease > time.Minute || catalog.EmbeddingLeaseRenewEvery*3 > lease {
		t.Errorf("lease %v renewed every %v: a dead drain's rows must be ready within a minute, and a live drain renew several times a lease",
			lease, catalog.EmbeddingLeaseRenewEvery)
	}
}

// TestDrainRenewsItsLease: a live drain renews the lease of its rows while the provider works, so
// a drain past the first lease's end still skips them, and it reports each renewal as alive.
func TestDrainRenewsItsLease(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("renew")
	f.bulk(tn, `{"sku": "A", "name": "Shirt"}`, `{"sku": "B", "name": "Dress"}`)
	svc := catalog.NewService(f.db.Pool, f.clock.Now, catalog.WithEmbeddingLeaseRenewal(5*time.Millisecond))
	var alive atomic.Int64
	leaseEnds := func() []time.Time {
		rows, err := f.db.Pool.Query(f.ctx, "SELECT available_at FROM product_embedding_queue WHERE tenant_id = $1", tn)
		if err != nil {
			t.Error(err)
			return nil
		}
		ends, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			t.Error(err)
		}
		return ends
	}
	// renewedTo waits until every row's lease ends at end (the drain renewed it since the clock moved).
	renewedTo := func(end time.Time) bool {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			ends := leaseEnds()
			if len(ends) == 2 && ends[0].Equal(end) && ends[1].Equal(end) {
				return true
			}
		}
		t.Errorf("leases end %v, want %v", leaseEnds(), end)
		return false
	}
	e := newFakeEmbedder(t)
	var during catalog.DrainResult
	e.before = func([]string) {
		beats := alive.Load()
		for range 2 {
			f.clock.Advance(catalog.EmbeddingLease * 2 / 3)
			if !renewedTo(f.clock.Now().Add(catalog.EmbeddingLease)) {
				return
			}
		}
		// Past the end of the first lease (and of the second): another drain still skips the rows.
		res, err := f.svc.DrainEmbeddings(f.ctx, tn, e, 0)
		if err != nil {
			t.Error(err)
		}
		during = res
		if got := alive.Load(); got < beats+2 {
			t.Errorf("%d alive reports while renewing twice (from %d)", got, beats)
		}
	}
	res, err := svc.DrainEmbeddingsAlive(f.ctx, tn, e, 0, func() { alive.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if want := (catalog.DrainResult{NextReadyIn: catalog.EmbeddingLease}); during != want {
		t.Errorf("a drain during the renewed lease %+v, want %+v", during, want)
	}
	if want := (catalog.DrainResult{Read: 2, Embedded: 2}); res != want {
		t.Errorf("drain %+v, want %+v", res, want)
	}
	if q := f.queue(tn); len(q) != 0 {
		t.Errorf("queue left: %v", q)
	}
}

// TestDrainEndedReleases: a drain that ends without settling its rows (its ctx cancelled, as when
// its worker stops and hands the activity back) releases them: the next drain takes them at once.
func TestDrainEndedReleases(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant("released")
	f.bulk(tn, `{"sku": "A", "name": "Shirt"}`, `{"sku": "B", "name": "Dress"}`)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	e := newFakeEmbedder(t)
	e.before = func([]string) { cancel() }
	if _, err := f.svc.DrainEmbeddings(ctx, tn, e, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled drain: %v, want context.Canceled", err)
	}
	e.before = nil
	if got := f.drain(tn, e, 0); got != (catalog.DrainResult{Read: 2, Embedded: 2}) {
		t.Fatalf("drain after the cancelled one %+v", got)
	}
}
