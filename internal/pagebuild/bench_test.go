package pagebuild

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/page"
)

// pageWithIDs is basePage with block ids prefixed, so every page's ids are its own.
func (e *env) pageWithIDs(b testing.TB, tenantID int64, slug, prefix string) *page.Page {
	b.Helper()
	p := e.page(b, tenantID, slug)
	blocks := basePage().Blocks
	for i := range blocks {
		blocks[i].ID = prefix + blocks[i].ID
	}
	if err := e.pages.SaveGenerated(e.ctx, tenantID, p.ID, page.GeneratedContent{Blocks: blocks}); err != nil {
		b.Fatal(err)
	}
	p, err := e.pages.GetPage(e.ctx, tenantID, p.ID)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func p95(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)*95+99)/100-1].Microseconds()) / 1000
}

// BenchmarkBuild measures builds with the local provider over real Postgres: each iteration runs
// 100 five-operation builds on one page (ms to the first event and to done, p95), then 50
// concurrent builds on 50 pages, checking that every stream carries only its own page's blocks.
//
//	go test -run '^$' -bench BenchmarkBuild -benchtime 1x ./internal/pagebuild
func BenchmarkBuild(b *testing.B) {
	e := newEnv(b)
	s := e.service(mustLocal(b), Options{})
	p := e.page(b, e.a, "bench")
	const builds, concurrent = 100, 50
	pages := make([]*page.Page, concurrent)
	for i := range pages {
		pages[i] = e.pageWithIDs(b, e.b, fmt.Sprintf("c%d", i), fmt.Sprintf("p%d-", i))
	}
	var first, total []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := 0; i < builds; i++ {
			msg := fmt.Sprintf("add a testimonial from Jane about fast shipping; make the grid four columns; move the product grid above the text; change the headline to Sale %d-%d; remove the last testimonial", n, i)
			start := time.Now()
			r, err := s.Begin(e.ctx, e.a, p.ID, msg)
			if err != nil {
				b.Fatal(err)
			}
			var firstAt time.Time
			ops := 0
			r.Execute(e.ctx, func(ev Event) error {
				if firstAt.IsZero() {
					firstAt = time.Now()
				}
				if ev.Type == EventError {
					b.Errorf("build %d: %s", i, ev.Content)
				}
				return nil
			})
			total = append(total, time.Since(start))
			first = append(first, firstAt.Sub(start))
			bs, err := s.List(e.ctx, e.a, p.ID)
			if err != nil {
				b.Fatal(err)
			}
			if ops = len(bs[0].Operations); ops != 5 || bs[0].Outcome != OutcomeApplied {
				b.Fatalf("build %d: %d operations, outcome %s", i, ops, bs[0].Outcome)
			}
		}

		// 50 concurrent builds on different pages.
		var wg sync.WaitGroup
		streams := make([][]Event, concurrent)
		start := time.Now()
		for i := range pages {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.Begin(e.ctx, e.b, pages[i].ID, fmt.Sprintf("add a testimonial from Jane about fast shipping; make the grid %d columns; remove the last testimonial", n%5+2))
				if err != nil {
					b.Error(err)
					return
				}
				r.Execute(e.ctx, func(ev Event) error { streams[i] = append(streams[i], ev); return nil })
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "concurrent50_ms")
		for i, evs := range streams {
			if len(evs) == 0 || evs[len(evs)-1].Type != EventDone {
				b.Fatalf("stream %d did not end with done: %+v", i, evs)
			}
			after, err := e.pages.GetPage(e.ctx, e.b, pages[i].ID)
			if err != nil {
				b.Fatal(err)
			}
			own := map[string]bool{}
			for _, bl := range after.Blocks {
				own[bl.ID] = true
			}
			prefix := fmt.Sprintf("p%d-", i)
			blocks := 0
			for _, ev := range evs {
				if ev.Type != EventBlock {
					continue
				}
				blocks++
				id := ev.Block.ID
				if !own[id] && !isNewID(id) {
					b.Fatalf("stream %d carried block %s of another page", i, id)
				}
				if !isNewID(id) && id[:len(prefix)] != prefix {
					b.Fatalf("stream %d carried block %s of another page", i, id)
				}
			}
			if blocks != 2 {
				b.Fatalf("stream %d: %d block events, want 2", i, blocks)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(p95(first), "first_event_p95_ms")
	b.ReportMetric(p95(total), "build5_p95_ms")
}

func isNewID(id string) bool { return len(id) > 4 && id[:4] == "blk_" && block.CheckID(id) == "" }
