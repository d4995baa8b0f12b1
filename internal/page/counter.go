package page

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// viewCounter counts public reads (and reads by known AI crawlers) in memory; flush adds them to
// the database in one statement per table. Reads take the read lock and add to the current
// batch's atomic counters; a flush takes the write lock only to swap in a new batch, so every
// read counted before the swap is in the batch it writes and none after it: no count is lost or
// written twice, and no read waits for the database.
type viewCounter struct {
	mu       sync.RWMutex
	cur      *countBatch                // guarded by mu (read lock for adding to it)
	flushing atomic.Pointer[countBatch] // the batch being written, for pending counts
	crawlers int
	flushMu  sync.Mutex // one flush at a time
}

type countBatch struct {
	pages sync.Map // page id -> *pageTally
}

type pageTally struct {
	tenantID int64
	views    atomic.Int64
	crawls   []atomic.Int64 // per crawler (index in Crawlers)
	crawlAt  []atomic.Int64 // per crawler: the latest read, unix nanoseconds
}

func newViewCounter(crawlers int) *viewCounter {
	return &viewCounter{cur: &countBatch{}, crawlers: crawlers}
}

func (b *countBatch) tally(tenantID, pageID int64, crawlers int) *pageTally {
	if v, ok := b.pages.Load(pageID); ok {
		return v.(*pageTally)
	}
	t := &pageTally{tenantID: tenantID, crawls: make([]atomic.Int64, crawlers), crawlAt: make([]atomic.Int64, crawlers)}
	v, _ := b.pages.LoadOrStore(pageID, t)
	return v.(*pageTally)
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if cur >= v || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// add counts views reads of a page, crawler (an index in Crawlers, -1 for none) of them at at.
func (c *viewCounter) add(tenantID, pageID int64, views int64, crawler int, crawls int64, at int64) {
	c.mu.RLock()
	t := c.cur.tally(tenantID, pageID, c.crawlers)
	if views != 0 {
		t.views.Add(views)
	}
	if crawler >= 0 && crawler < c.crawlers && crawls != 0 {
		t.crawls[crawler].Add(crawls)
		storeMax(&t.crawlAt[crawler], at)
	}
	c.mu.RUnlock()
}

// record counts one read.
func (c *viewCounter) record(tenantID, pageID int64, crawler int, at time.Time) {
	c.add(tenantID, pageID, 1, crawler, 1, at.UnixNano())
}

// pending returns the reads of a page counted here and not yet written.
func (c *viewCounter) pending(pageID int64) int64 {
	var n int64
	c.mu.RLock()
	if v, ok := c.cur.pages.Load(pageID); ok {
		n += v.(*pageTally).views.Load()
	}
	c.mu.RUnlock()
	if b := c.flushing.Load(); b != nil {
		if v, ok := b.pages.Load(pageID); ok {
			n += v.(*pageTally).views.Load()
		}
	}
	return n
}

// pendingCrawls returns the crawler reads of a page counted here and not yet written, and the
// latest of them (zero time when none).
func (c *viewCounter) pendingCrawls(pageID int64, names []string) (map[string]int64, time.Time) {
	out := map[string]int64{}
	var latest int64
	collect := func(b *countBatch) {
		v, ok := b.pages.Load(pageID)
		if !ok {
			return
		}
		t := v.(*pageTally)
		for i := range t.crawls {
			if n := t.crawls[i].Load(); n > 0 && i < len(names) {
				out[names[i]] += n
				latest = max(latest, t.crawlAt[i].Load())
			}
		}
	}
	c.mu.RLock()
	collect(c.cur)
	c.mu.RUnlock()
	if b := c.flushing.Load(); b != nil {
		collect(b)
	}
	if latest == 0 {
		return out, time.Time{}
	}
	return out, time.Unix(0, latest).UTC()
}

// flushRows are a batch in the column arrays of the flush statements.
type flushRows struct {
	tenantIDs, pageIDs, views []int64
	crawlAt                   []*time.Time
	// crawls
	cTenantIDs, cPageIDs, cCounts []int64
	cCrawlers                     []string
	cAt                           []time.Time
}

func (b *countBatch) rows(names []string) *flushRows {
	type entry struct {
		pageID int64
		t      *pageTally
	}
	var entries []entry
	b.pages.Range(func(k, v any) bool {
		entries = append(entries, entry{k.(int64), v.(*pageTally)})
		return true
	})
	// Page id order: concurrent flushes of several replicas lock rows in the same order.
	sort.Slice(entries, func(i, j int) bool { return entries[i].pageID < entries[j].pageID })
	r := &flushRows{}
	for _, e := range entries {
		var latest int64
		for i := range e.t.crawls {
			n := e.t.crawls[i].Load()
			if n <= 0 || i >= len(names) {
				continue
			}
			at := e.t.crawlAt[i].Load()
			latest = max(latest, at)
			r.cTenantIDs = append(r.cTenantIDs, e.t.tenantID)
			r.cPageIDs = append(r.cPageIDs, e.pageID)
			r.cCrawlers = append(r.cCrawlers, names[i])
			r.cCounts = append(r.cCounts, n)
			r.cAt = append(r.cAt, time.Unix(0, at).UTC())
		}
		views := e.t.views.Load()
		if views == 0 && latest == 0 {
			continue
		}
		r.tenantIDs = append(r.tenantIDs, e.t.tenantID)
		r.pageIDs = append(r.pageIDs, e.pageID)
		r.views = append(r.views, views)
		if latest > 0 {
			at := time.Unix(0, latest).UTC()
			r.crawlAt = append(r.crawlAt, &at)
		} else {
			r.crawlAt = append(r.crawlAt, nil)
		}
	}
	return r
}

// putBack adds a batch that could not be written to the current one.
func (c *viewCounter) putBack(b *countBatch) {
	b.pages.Range(func(k, v any) bool {
		t := v.(*pageTally)
		if n := t.views.Load(); n != 0 {
			c.add(t.tenantID, k.(int64), n, -1, 0, 0)
		}
		for i := range t.crawls {
			if n := t.crawls[i].Load(); n != 0 {
				c.add(t.tenantID, k.(int64), 0, i, n, t.crawlAt[i].Load())
			}
		}
		return true
	})
}

// Flush writes the reads counted so far: view_count and last_ai_crawl_at of the pages in one
// UPDATE, the per-crawler counts in one upsert, in one transaction. Reads of pages deleted
// meanwhile are dropped. When the write fails the counts are kept for the next flush.
func (s *Service) Flush(ctx context.Context) error {
	c := s.counter
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	b := c.cur
	c.cur = &countBatch{}
	c.flushing.Store(b)
	c.mu.Unlock()
	defer c.flushing.Store(nil)

	r := b.rows(Crawlers)
	if len(r.pageIDs) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE generated_pages g
			SET view_count = g.view_count + u.views, last_ai_crawl_at = greatest(g.last_ai_crawl_at, u.crawl_at)
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::timestamptz[]) AS u(tenant_id, id, views, crawl_at)
			WHERE g.tenant_id = u.tenant_id AND g.id = u.id`, r.tenantIDs, r.pageIDs, r.views, r.crawlAt); err != nil {
			return fmt.Errorf("add page views: %w", err)
		}
		if len(r.cPageIDs) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO page_ai_crawls (tenant_id, page_id, crawler, count, last_at)
			SELECT u.tenant_id, u.page_id, u.crawler, u.n, u.at
			FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::timestamptz[]) AS u(tenant_id, page_id, crawler, n, at)
			JOIN generated_pages g ON g.tenant_id = u.tenant_id AND g.id = u.page_id
			ON CONFLICT (page_id, crawler) DO UPDATE
			SET count = page_ai_crawls.count + excluded.count, last_at = greatest(page_ai_crawls.last_at, excluded.last_at)`,
			r.cTenantIDs, r.cPageIDs, r.cCrawlers, r.cCounts, r.cAt); err != nil {
			return fmt.Errorf("add page crawls: %w", err)
		}
		return nil
	})
	if err != nil {
		c.putBack(b)
		return err
	}
	return nil
}

// Run writes counted views and crawls every FlushEvery until ctx ends, then once more on a fresh
// context bounded by FlushTimeout, so reads counted before shutdown are kept. Failed periodic
// flushes are logged and retried with the next (their counts are kept); Run returns the error of
// the final flush. The role runs it beside the HTTP API and stops it after the API stopped.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.FlushTimeout)
			defer cancel()
			if err := s.Flush(fctx); err != nil {
				return fmt.Errorf("final flush of page views: %w", err)
			}
			return nil
		case <-t.C:
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.FlushTimeout)
			err := s.Flush(fctx)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("flush page views (kept for the next flush)", "error", err)
			}
		}
	}
}
