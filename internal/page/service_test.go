package page

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func validBlocks(skus ...string) []block.Block {
	items := make([]any, len(skus))
	for i, s := range skus {
		items[i] = s
	}
	return []block.Block{
		{Type: block.Hero, Props: map[string]any{"headline": "Linen dresses"}},
		{Type: block.ProductGrid, Props: map[string]any{"product_skus": items}},
	}
}

func wantCode(t *testing.T, err error, kind error, code string) {
	t.Helper()
	var ce *errs.CodedError
	if !errors.Is(err, kind) || !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("error %v, want %v with code %s", err, kind, code)
	}
}

func TestCreatePageAndGeneration(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "Linen summer dresses")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	if p.Slug != "linen-summer-dresses" || p.Title != "Linen summer dresses" || p.Published || p.Status != StatusGenerating || p.Version != 0 || len(p.Blocks) != 0 {
		t.Fatalf("page %+v", p)
	}
	if len(e.gen.pages) != 1 || e.gen.pages[0] != [2]int64{e.a, p.ID} {
		t.Fatalf("starts %v", e.gen.pages)
	}
	target, err := e.svc.GenerationTarget(e.ctx, e.a, p.ID)
	if err != nil || target.QueryText != q.Text || target.QueryID != q.ID || target.ProductSegmentID != nil {
		t.Fatalf("target %+v %v", target, err)
	}
	if _, err := e.svc.GenerationTarget(e.ctx, e.b, p.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("other tenant's target: %v", err)
	}

	// An invalid result is refused whole, with the path of the problem.
	bad := validBlocks("SKU-1")
	delete(bad[0].Props, "headline")
	err = e.svc.SaveGenerated(e.ctx, e.a, p.ID, GeneratedContent{IntroCopy: "x", Blocks: bad})
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || ve.Fields["blocks[0].props.headline"] == "" {
		t.Fatalf("invalid blocks: %v", err)
	}
	if got, _ := e.svc.GetPage(e.ctx, e.a, p.ID); got.Version != 0 || got.Status != StatusGenerating {
		t.Fatalf("after an invalid result: %+v", got)
	}

	if err := e.svc.SaveGenerated(e.ctx, e.a, p.ID, GeneratedContent{IntroCopy: "Light and airy.", ProductSKUs: []string{"SKU-1"}, Blocks: validBlocks("SKU-1")}); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.GetPage(e.ctx, e.a, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusReady || got.GeneratedAt == nil || got.Version != 1 || got.IntroCopy != "Light and airy." || len(got.Blocks) != 2 || got.Blocks[0].ID == "" {
		t.Fatalf("after generation: %+v", got)
	}
	if err := e.svc.SaveGenerated(e.ctx, e.b, p.ID, GeneratedContent{Blocks: validBlocks("X")}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("save into another tenant's page: %v", err)
	}

	if err := e.svc.MarkGenerationFailed(e.ctx, e.a, p.ID, "search is down"); err != nil {
		t.Fatal(err)
	}
	got, _ = e.svc.GetPage(e.ctx, e.a, p.ID)
	if got.Status != StatusError || got.LastError == nil || *got.LastError != "search is down" || got.Version != 1 {
		t.Fatalf("after a failure: %+v", got)
	}

	// ApplyBuild is optimistic.
	if _, err := e.svc.ApplyBuild(e.ctx, e.a, p.ID, 0, validBlocks("SKU-2"), nil, nil, "stale"); err == nil {
		t.Fatal("build on a stale version was applied")
	} else {
		wantCode(t, err, errs.ErrConflict, "version_conflict")
	}
	built, err := e.svc.ApplyBuild(e.ctx, e.a, p.ID, 1, validBlocks("SKU-2"), new("Built title"), nil, "make it about SKU-2")
	if err != nil {
		t.Fatal(err)
	}
	if built.Version != 2 || built.Title != "Built title" || built.IntroCopy != "Light and airy." {
		t.Fatalf("built %+v", built)
	}
	vs, err := e.svc.ListVersions(e.ctx, e.a, p.ID)
	if err != nil || len(vs) != 2 || vs[0].N != 2 || vs[0].Source != SourceBuild || vs[0].Message != "make it about SKU-2" || vs[1].Source != SourceGeneration || vs[0].BlockCount != 2 {
		t.Fatalf("versions %+v %v", vs, err)
	}
}

func TestCreatePageStartFailureRemovesIt(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "coats")
	e.gen.setErr(errDown)
	_, err := e.svc.CreatePage(e.ctx, e.a, CreateInput{Query: &q.ID})
	wantCode(t, err, errs.ErrUnavailable, "generation_unavailable")
	if n := testenv.Count(t, e.db, `SELECT count(*) FROM generated_pages`); n != 0 {
		t.Fatalf("%d pages left after the failed start", n)
	}
	e.gen.setErr(nil)
	p := e.page(e.a, CreateInput{Query: &q.ID})
	if p.Slug != "coats" {
		t.Fatalf("slug %q after the undone create", p.Slug)
	}
	e.gen.setErr(errDown)
	err = e.svc.Regenerate(e.ctx, e.a, p.ID)
	wantCode(t, err, errs.ErrUnavailable, "generation_unavailable")
	got, _ := e.svc.GetPage(e.ctx, e.a, p.ID)
	if got.Status != StatusError || got.LastError == nil || *got.LastError != startFailedMessage {
		t.Fatalf("after a failed regenerate start: %+v", got)
	}

	// Without a generator nothing is recorded.
	svc := NewService(e.db.Pool, nil, time.Now, nil, Options{})
	_, err = svc.CreatePage(e.ctx, e.a, CreateInput{Query: &q.ID})
	wantCode(t, err, errs.ErrUnavailable, "generation_unavailable")
}

func TestPageLimitIsRaceFree(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.svc.SetPageLimit(e.ctx, "tenant-a", 5); err != nil {
		t.Fatal(err)
	}
	q := e.query(e.a, "dresses")
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.svc.CreatePage(e.ctx, e.a, CreateInput{Query: &q.ID})
			mu.Lock()
			defer mu.Unlock()
			var ce *errs.CodedError
			switch {
			case err == nil:
				created++
			case errors.As(err, &ce) && ce.Code == "page_limit_reached":
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	if created != 5 || refused != 15 {
		t.Fatalf("created %d, refused %d", created, refused)
	}
	slugs := map[string]bool{}
	pages, _ := e.svc.ListPages(e.ctx, e.a)
	for _, p := range pages {
		slugs[p.Slug] = true
	}
	for _, s := range []string{"dresses", "dresses-2", "dresses-3", "dresses-4", "dresses-5"} {
		if !slugs[s] {
			t.Errorf("slug %s missing from %v", s, slugs)
		}
	}
	if err := e.svc.SetPageLimit(e.ctx, "nobody", 5); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}
	if err := e.svc.SetPageLimit(e.ctx, "tenant-a", -1); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("negative limit: %v", err)
	}
}

func TestVersionsPruned(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "pruned")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	for i := range KeptVersions + 5 {
		if err := e.svc.SaveGenerated(e.ctx, e.a, p.ID, GeneratedContent{IntroCopy: fmt.Sprint(i), Blocks: validBlocks("S")}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := e.svc.ListVersions(e.ctx, e.a, p.ID)
	if err != nil || len(vs) != KeptVersions || vs[0].N != KeptVersions+5 || vs[len(vs)-1].N != 6 {
		t.Fatalf("%d versions, newest %d, oldest %d: %v", len(vs), vs[0].N, vs[len(vs)-1].N, err)
	}
	if _, err := e.svc.GetVersion(e.ctx, e.a, p.ID, 5); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("pruned version: %v", err)
	}
}

func TestBulkJobRecords(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.svc.SetPageLimit(e.ctx, "tenant-a", 3); err != nil {
		t.Fatal(err)
	}
	q1 := e.query(e.a, "linen dresses")
	existing := e.page(e.a, CreateInput{Query: &q1.ID, Slug: new("my-linen")})
	q2 := e.query(e.a, "wool coats")
	inactive, err := e.svc.CreateQuery(e.ctx, e.a, QueryInput{Text: "inactive", Active: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	q3 := e.query(e.a, "silk scarves")
	q4 := e.query(e.a, "rain boots") // beyond the limit of 3
	e.query(e.b, "other tenant")

	started, err := e.svc.BulkGenerate(e.ctx, e.a)
	if err != nil {
		t.Fatal(err)
	}
	if started.Status != "queued" || len(e.gen.bulks) != 1 || e.gen.bulks[0] != [2]int64{e.a, started.JobID} {
		t.Fatalf("started %+v, bulks %v", started, e.gen.bulks)
	}
	job, err := e.svc.BulkJob(e.ctx, e.a, started.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != JobPending || job.Total != 4 || job.Completed != 0 || job.Failed != 1 || len(job.Pages) != 4 {
		t.Fatalf("job %+v", job)
	}
	want := []struct {
		query  int64
		slug   string
		status string
	}{{q1.ID, "my-linen", JobPagePending}, {q2.ID, "wool-coats", JobPagePending}, {q3.ID, "silk-scarves", JobPagePending}, {q4.ID, "", JobPageError}}
	for i, w := range want {
		p := job.Pages[i]
		if *p.QueryID != w.query || p.Slug != w.slug || p.Status != w.status {
			t.Errorf("page %d: %+v, want %+v", i, p, w)
		}
	}
	if *job.Pages[0].PageID != existing.ID || job.Pages[3].PageID != nil || job.Pages[3].Error == nil || !strings.Contains(*job.Pages[3].Error, "page limit of 3") {
		t.Errorf("pages %+v", job.Pages)
	}
	_ = inactive
	if _, err := e.svc.BulkJob(e.ctx, e.b, started.JobID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("other tenant's job: %v", err)
	}

	if err := e.svc.MarkBulkRunning(e.ctx, e.a, started.JobID); err != nil {
		t.Fatal(err)
	}
	p1, p2 := *job.Pages[0].PageID, *job.Pages[1].PageID
	for range 2 { // a retried report counts once
		if err := e.svc.FinishBulkPage(e.ctx, e.a, started.JobID, p1, nil); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.FinishBulkPage(e.ctx, e.a, started.JobID, p2, errors.New("no products found")); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.FinishBulkPage(e.ctx, e.b, started.JobID, p1, nil); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("other tenant's job page: %v", err)
	}
	mid, _ := e.svc.BulkJob(e.ctx, e.a, started.JobID)
	if mid.Status != JobRunning || mid.Completed != 1 || mid.Failed != 2 {
		t.Fatalf("mid job %+v", mid.BulkJob)
	}
	done, err := e.svc.FinishBulk(e.ctx, e.a, started.JobID) // the third page never reported
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != JobPartialFailure || done.FinishedAt == nil || done.Completed != 1 || done.Failed != 3 {
		t.Fatalf("finished %+v", done)
	}
	final, _ := e.svc.BulkJob(e.ctx, e.a, started.JobID)
	if final.Pages[1].Error == nil || *final.Pages[1].Error != "no products found" || final.Pages[2].Status != JobPageError {
		t.Fatalf("final pages %+v", final.Pages)
	}

	// A second bulk reuses the pages; the limit is still reached for the fourth query.
	again, err := e.svc.BulkGenerate(e.ctx, e.a)
	if err != nil {
		t.Fatal(err)
	}
	job2, _ := e.svc.BulkJob(e.ctx, e.a, again.JobID)
	if *job2.Pages[0].PageID != p1 || *job2.Pages[1].PageID != p2 || job2.Failed != 1 {
		t.Fatalf("second job %+v", job2)
	}
	if n := testenv.Count(t, e.db, `SELECT count(*) FROM generated_pages WHERE tenant_id = $1`, e.a); n != 3 {
		t.Fatalf("%d pages", n)
	}
	jobs, _ := e.svc.ListBulkJobs(e.ctx, e.a)
	if len(jobs) != 2 || jobs[0].ID != again.JobID {
		t.Fatalf("jobs %+v", jobs)
	}

	// A failed start ends the job at once.
	e.gen.setErr(errDown)
	_, err = e.svc.BulkGenerate(e.ctx, e.a)
	wantCode(t, err, errs.ErrUnavailable, "generation_unavailable")
	jobs, _ = e.svc.ListBulkJobs(e.ctx, e.a)
	if j := jobs[0]; j.Status != JobPartialFailure || j.Failed != 4 || j.FinishedAt == nil {
		t.Fatalf("failed start job %+v", j)
	}
	pg, _ := e.svc.GetPage(e.ctx, e.a, p1)
	if pg.Status != StatusError || *pg.LastError != bulkStartFailedMessage {
		t.Fatalf("page after the failed bulk start %+v", pg)
	}

	// No active queries: complete at once, nothing started.
	e.gen.setErr(nil)
	empty, err := e.svc.BulkGenerate(e.ctx, e.b+1000)
	if err == nil {
		t.Fatalf("bulk of an unknown tenant: %+v", empty)
	}
	for _, q := range []int64{q1.ID, q2.ID, q3.ID, q4.ID} {
		if _, err := e.svc.UpdateQuery(e.ctx, e.a, q, QueryPatch{Active: new(false)}); err != nil {
			t.Fatal(err)
		}
	}
	bulks := len(e.gen.bulks)
	none, err := e.svc.BulkGenerate(e.ctx, e.a)
	if err != nil {
		t.Fatal(err)
	}
	nj, _ := e.svc.BulkJob(e.ctx, e.a, none.JobID)
	if nj.Status != JobComplete || nj.Total != 0 || nj.FinishedAt == nil || len(e.gen.bulks) != bulks {
		t.Fatalf("empty job %+v", nj)
	}
}

func TestQueryValidation(t *testing.T) {
	e := newEnv(t, Options{})
	var segA, segB int64
	for _, s := range []struct {
		tenant int64
		id     *int64
	}{{e.a, &segA}, {e.b, &segB}} {
		if err := e.db.Pool.QueryRow(e.ctx, `INSERT INTO product_segments (tenant_id, name, name_key, definition) VALUES ($1, 'reds', 'reds', '{}') RETURNING id`, s.tenant).Scan(s.id); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		in    QueryInput
		field string
	}{
		{"blank", QueryInput{Text: "   "}, "text"},
		{"too long", QueryInput{Text: strings.Repeat("é", MaxQueryTextLength+1)}, "text"},
		{"newline", QueryInput{Text: "a\nb"}, "text"},
		{"invalid utf8", QueryInput{Text: "a\xffb"}, "text"},
		{"other tenant's segment", QueryInput{Text: "x", ProductSegmentID: &segB}, "product_segment_id"},
		{"negative segment", QueryInput{Text: "x", ProductSegmentID: new(int64(-1))}, "product_segment_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.CreateQuery(e.ctx, e.a, tc.in)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tc.field] == "" {
				t.Fatalf("err %v, want a field error on %s", err, tc.field)
			}
		})
	}
	q, err := e.svc.CreateQuery(e.ctx, e.a, QueryInput{Text: "  " + strings.Repeat("é", MaxQueryTextLength) + " ", ProductSegmentID: &segA})
	if err != nil || !q.Active || *q.ProductSegmentID != segA || len([]rune(q.Text)) != MaxQueryTextLength {
		t.Fatalf("%+v %v", q, err)
	}
	q, err = e.svc.UpdateQuery(e.ctx, e.a, q.ID, QueryPatch{ProductSegmentID: json.RawMessage("null")})
	if err != nil || q.ProductSegmentID != nil {
		t.Fatalf("clear segment: %+v %v", q, err)
	}
	if _, err := e.svc.UpdateQuery(e.ctx, e.a, q.ID, QueryPatch{ProductSegmentID: json.RawMessage(`"5"`)}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("string segment: %v", err)
	}
	if _, err := e.svc.UpdateQuery(e.ctx, e.b, q.ID, QueryPatch{Text: new("x")}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("other tenant's query: %v", err)
	}
	// Deleting a query keeps its pages.
	p := e.page(e.a, CreateInput{Query: &q.ID})
	if err := e.svc.DeleteQuery(e.ctx, e.a, q.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.GetPage(e.ctx, e.a, p.ID)
	if err != nil || got.Query != nil {
		t.Fatalf("page after its query was deleted: %+v %v", got, err)
	}
	wantCode(t, e.svc.Regenerate(e.ctx, e.a, p.ID), errs.ErrConflict, "query_deleted")
}

// TestCountingIsExact: reads counted concurrently with flushes are each written exactly once.
func TestCountingIsExact(t *testing.T) {
	e := newEnv(t, Options{FlushEvery: 5 * time.Millisecond})
	q := e.query(e.a, "counted")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	var wg sync.WaitGroup
	const readers, each = 8, 500
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				crawler := -1
				if i%10 == 0 {
					crawler = r % len(Crawlers)
				}
				e.svc.counter.record(e.a, p.ID, crawler, time.Now())
			}
		}()
	}
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, e.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != readers*each {
		t.Fatalf("view_count %d, want %d", n, readers*each)
	}
	if n := testenv.Count(t, e.db, `SELECT sum(count) FROM page_ai_crawls WHERE page_id = $1`, p.ID); n != readers*each/10 {
		t.Fatalf("crawls %d, want %d", n, readers*each/10)
	}
	got, _ := e.svc.GetPage(e.ctx, e.a, p.ID)
	if got.ViewCount != readers*each || got.LastAICrawlAt == nil || got.AICrawls[Crawlers[0]] != each/10 {
		t.Fatalf("page %+v", got)
	}
}

// TestFailedFlushKeepsCounts: a flush that cannot write keeps its counts for the next one.
func TestFailedFlushKeepsCounts(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.query(e.a, "kept")
	p := e.page(e.a, CreateInput{Query: &q.ID})
	for range 7 {
		e.svc.counter.record(e.a, p.ID, 0, time.Now())
	}
	cctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := e.svc.Flush(cctx); err == nil {
		t.Fatal("flush on a cancelled context succeeded")
	}
	if n := e.svc.counter.pending(p.ID); n != 7 {
		t.Fatalf("pending %d after the failed flush", n)
	}
	if err := e.svc.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := testenv.Count(t, e.db, `SELECT view_count FROM generated_pages WHERE id = $1`, p.ID); n != 7 {
		t.Fatalf("view_count %d", n)
	}
	if n := testenv.Count(t, e.db, `SELECT count FROM page_ai_crawls WHERE page_id = $1`, p.ID); n != 7 {
		t.Fatalf("crawls %d", n)
	}
	// Counts of a page deleted before the flush are dropped without failing it.
	e.svc.counter.record(e.a, p.ID, 0, time.Now())
	if err := e.svc.DeletePage(e.ctx, e.a, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Flush(e.ctx); err != nil {
		t.Fatalf("flush with a deleted page: %v", err)
	}
}

func TestPublicProducts(t *testing.T) {
	e := newEnv(t, Options{})
	testenv.Exec(t, e.db, `INSERT INTO product_schemas (tenant_id, fields, default_currency) VALUES ($1, '[{"name":"cost","type":"price"},{"name":"photo","type":"image"}]', 'EUR')`, e.a)
	testenv.Exec(t, e.db, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES
		($1, 'A-1', 'Dress', 'a-1', 'dress', '{"cost": 79.5, "photo": "https://img.example/a.jpg"}'),
		($1, 'B-2', 'Coat', 'b-2', 'coat', '{"price": "120", "image_url": "/b.jpg"}'),
		($2, 'C-3', 'Other', 'c-3', 'other', '{}')`, e.a, e.b)
	q := e.query(e.a, "shop")
	p := e.page(e.a, CreateInput{Query: &q.ID, Published: new(true)})
	if err := e.svc.SaveGenerated(e.ctx, e.a, p.ID, GeneratedContent{IntroCopy: "Hi", ProductSKUs: []string{"b-2", "A-1", "C-3", "gone"}, Blocks: validBlocks("A-1")}); err != nil {
		t.Fatal(err)
	}
	body, err := e.svc.PublicPage(e.ctx, "tenant-a", p.Slug, "GPTBot/1.0")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ViewCount int64           `json:"view_count"`
		Products  []PublicProduct `json:"products"`
		Blocks    []block.Block   `json:"blocks"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if got.ViewCount != 1 || len(got.Products) != 2 || len(got.Blocks) != 2 {
		t.Fatalf("%s", body)
	}
	b, a := got.Products[0], got.Products[1]
	if b.SKU != "B-2" || *b.Price != 120 || *b.ImageURL != "/b.jpg" || b.Currency != "EUR" {
		t.Errorf("B-2: %+v", b)
	}
	if a.SKU != "A-1" || *a.Price != 79.5 || *a.ImageURL != "https://img.example/a.jpg" || a.Data["cost"] != 79.5 {
		t.Errorf("A-1: %+v", a)
	}
	if _, err := e.svc.PublicPage(e.ctx, "tenant-b", p.Slug, ""); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("through another tenant: %v", err)
	}
}

// TestPublicPageGridSKUs: the public read's product_skus and products include the SKUs of the
// page's product grids as a PATCH (or a build, or a template) put them there, not only the ones a
// generation recorded: the page's first, then its grids' in block order, each once.
func TestPublicPageGridSKUs(t *testing.T) {
	e := newEnv(t, Options{})
	testenv.Exec(t, e.db, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data) VALUES
		($1, 'NEW-1', 'New', 'new-1', 'new', '{"price": 10}'),
		($1, 'X-3', 'Ex', 'x-3', 'ex', '{}'),
		($1, 'A-1', 'Dress', 'a-1', 'dress', '{}')`, e.a)
	q := e.query(e.a, "shop")
	p := e.page(e.a, CreateInput{Query: &q.ID, Published: new(true)})
	if err := e.svc.SaveGenerated(e.ctx, e.a, p.ID, GeneratedContent{IntroCopy: "Hi", ProductSKUs: []string{"A-1"}, Blocks: validBlocks("A-1")}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(append(validBlocks("A-1"), validBlocks("NEW-1", "x-3", "a-1")[1]))
	if _, err := e.svc.PatchPage(e.ctx, e.a, p.ID, PatchInput{Blocks: raw}); err != nil {
		t.Fatal(err)
	}
	body, err := e.svc.PublicPage(e.ctx, "tenant-a", p.Slug, "")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ProductSKUs []string        `json:"product_skus"`
		Products    []PublicProduct `json:"products"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if strings.Join(got.ProductSKUs, ",") != "A-1,NEW-1,x-3" {
		t.Errorf("product_skus %q, want A-1, NEW-1, x-3", got.ProductSKUs)
	}
	var skus []string
	for _, pr := range got.Products {
		skus = append(skus, pr.SKU)
	}
	if strings.Join(skus, ",") != "A-1,NEW-1,X-3" {
		t.Errorf("products %q, want A-1, NEW-1, X-3", skus)
	}

	// A page whose only SKUs are its grid's (as one made from a template): none recorded.
	p2 := e.page(e.a, CreateInput{Query: &q.ID, Slug: new("from-grid"), Published: new(true)})
	raw, _ = json.Marshal(validBlocks("NEW-1", "X-3"))
	if _, err := e.svc.PatchPage(e.ctx, e.a, p2.ID, PatchInput{Blocks: raw}); err != nil {
		t.Fatal(err)
	}
	if body, err = e.svc.PublicPage(e.ctx, "tenant-a", "from-grid", ""); err != nil {
		t.Fatal(err)
	}
	got.ProductSKUs, got.Products = nil, nil
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.ProductSKUs, ",") != "NEW-1,X-3" || len(got.Products) != 2 {
		t.Errorf("grid-only page: product_skus %q, %d products", got.ProductSKUs, len(got.Products))
	}
}
