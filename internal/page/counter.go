package page

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// read counted before the swap is in the batch it writes and none after it, and no read waits
// for the database.
//
// A batch taken out is held, with the id it got then, until a flush knows it is written: a
// failed write is retried with the same batch and id at the next flush, and the id recorded in
// page_view_flushes in the transaction of the counts makes a retry of a batch whose commit
// happened (its acknowledgement was lost) add nothing. Memory holds at most two batches (the
// held one and the current), each one tally per page read.
type viewCounter struct {
	mu       sync.RWMutex
	cur      *countBatch                // guarded by mu (read lock for adding to it)
	held     atomic.Pointer[countBatch] // taken out and not known to be written; set under mu
	crawlers int
	flushMu  sync.Mutex // one flush at a time

	pages                           atomic.Int64 // pages with a tally in the current and held batch
	written, failed, replayed, done atomic.Int64 // flush outcomes (CounterStats)
}

type countBatch struct {
	id    string       // the flush id (a random UUID), set when the batch is taken out
	pages sync.Map     // page id -> *pageTally
	n     atomic.Int64 // pages in it, for CounterStats
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

func (c *viewCounter) tally(b *countBatch, tenantID, pageID int64) *pageTally {
	if v, ok := b.pages.Load(pageID); ok {
		return v.(*pageTally)
	}
	t := &pageTally{tenantID: tenantID, crawls: make([]atomic.Int64, c.crawlers), crawlAt: make([]atomic.Int64, c.crawlers)}
	v, loaded := b.pages.LoadOrStore(pageID, t)
	if !loaded {
		b.n.Add(1)
		c.pages.Add(1)
	}
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
	t := c.tally(c.cur, tenantID, pageID)
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
	defer c.mu.RUnlock()
	if v, ok := c.cur.pages.Load(pageID); ok {
		n += v.(*pageTally).views.Load()
	}
	if b := c.held.Load(); b != nil {
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
	if b := c.held.Load(); b != nil {
		collect(b)
	}
	c.mu.RUnlock()
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

// Flush ledger (page_view_flushes): ids are kept for flushLedgerKeep and swept at most every
// flushLedgerSweepEvery, flushLedgerSweepBatch rows per statement.
const (
	flushLedgerKeep       = 24 * time.Hour
	flushLedgerSweepEvery = 10 * time.Minute
	flushLedgerSweepBatch = 10000
)

// txBeginner begins the transaction of a flush: the service's pool (tests wrap it to lose a
// commit's acknowledgement).
type txBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// newFlushID returns a random (version 4) UUID.
func newFlushID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on a broken source)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Flush writes the reads counted so far: view_count and last_ai_crawl_at of the pages in one
// UPDATE, the per-crawler counts in one upsert, and the batch's id in page_view_flushes, in one
// transaction. Reads of pages deleted meanwhile are dropped. When the write fails (or its
// commit's acknowledgement is lost) the batch is kept and the next flush writes it again under
// the same id, which adds nothing when the first write did commit; the reads counted meanwhile
// are written by that flush too, as a batch of their own.
func (s *Service) Flush(ctx context.Context) error {
	c := s.counter
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	for {
		b := c.held.Load()
		retry := b != nil
		if !retry {
			c.mu.Lock()
			b = c.cur
			b.id = newFlushID()
			c.cur = &countBatch{}
			c.held.Store(b)
			c.mu.Unlock()
		}
		replayed, err := s.writeBatch(ctx, b)
		if err != nil {
			c.failed.Add(1)
			return err
		}
		switch {
		case replayed:
			c.replayed.Add(1)
		case b.n.Load() > 0:
			c.written.Add(1)
		}
		c.mu.Lock()
		c.held.Store(nil)
		c.pages.Add(-b.n.Load())
		c.mu.Unlock()
		if !retry {
			return nil
		}
		// The held batch is written now; write what was counted while it was held as well.
	}
}

// writeBatch adds a batch's counts unless its id is in the ledger already (replayed: a previous
// attempt committed them).
func (s *Service) writeBatch(ctx context.Context, b *countBatch) (replayed bool, err error) {
	r := b.rows(Crawlers)
	if len(r.pageIDs) == 0 {
		return false, nil
	}
	tx, err := s.flushDB.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin page view flush: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	tag, err := tx.Exec(ctx, `INSERT INTO page_view_flushes (flush_id, flushed_at) VALUES ($1::uuid, $2)
		ON CONFLICT (flush_id) DO NOTHING`, b.id, s.now().UTC())
	if err != nil {
		return false, fmt.Errorf("record page view flush: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return true, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE generated_pages g
		SET view_count = g.view_count + u.views, last_ai_crawl_at = greatest(g.last_ai_crawl_at, u.crawl_at)
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::timestamptz[]) AS u(tenant_id, id, views, crawl_at)
		WHERE g.tenant_id = u.tenant_id AND g.id = u.id`, r.tenantIDs, r.pageIDs, r.views, r.crawlAt); err != nil {
		return false, fmt.Errorf("add page views: %w", err)
	}
	if len(r.cPageIDs) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO page_ai_crawls (tenant_id, page_id, crawler, count, last_at)
			SELECT u.tenant_id, u.page_id, u.crawler, u.n, u.at
			FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::timestamptz[]) AS u(tenant_id, page_id, crawler, n, at)
			JOIN generated_pages g ON g.tenant_id = u.tenant_id AND g.id = u.page_id
			ON CONFLICT (page_id, crawler) DO UPDATE
			SET count = page_ai_crawls.count + excluded.count, last_at = greatest(page_ai_crawls.last_at, excluded.last_at)`,
			r.cTenantIDs, r.cPageIDs, r.cCrawlers, r.cCounts, r.cAt); err != nil {
			return false, fmt.Errorf("add page crawls: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit page view flush: %w", err)
	}
	return false, nil
}

// SweepFlushLedger deletes the ids of flushes older than a day from page_view_flushes (no
// batch is held that long: one is retried every flush interval) and returns how many.
func (s *Service) SweepFlushLedger(ctx context.Context) (int64, error) {
	cutoff := s.now().Add(-flushLedgerKeep).UTC()
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM page_view_flushes WHERE flush_id IN (
			SELECT flush_id FROM page_view_flushes WHERE flushed_at < $1 LIMIT $2)`, cutoff, flushLedgerSweepBatch)
		if err != nil {
			return total, fmt.Errorf("sweep page view flushes: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < flushLedgerSweepBatch {
			return total, nil
		}
	}
}

// CounterStats are the view counter's figures (metrics: PageCounterCollector).
type CounterStats struct {
	// PendingPages are the pages with reads counted and not known to be written (the current
	// batch's and the held one's; a page in both counts twice); PendingViews their reads.
	PendingPages, PendingViews int64
	// Flushes by outcome: written, failed (the batch is held and retried), replayed (a retried
	// batch found already written: its acknowledgement had been lost).
	Written, Failed, Replayed int64
}

// CounterStats returns the view counter's figures.
func (s *Service) CounterStats() CounterStats {
	c := s.counter
	st := CounterStats{Written: c.written.Load(), Failed: c.failed.Load(), Replayed: c.replayed.Load()}
	sum := func(b *countBatch) {
		b.pages.Range(func(_, v any) bool {
			st.PendingViews += v.(*pageTally).views.Load()
			return true
		})
	}
	c.mu.RLock()
	st.PendingPages = c.pages.Load()
	sum(c.cur)
	if b := c.held.Load(); b != nil {
		sum(b)
	}
	c.mu.RUnlock()
	return st
}

// finalFlush is Run's last flush: retried (a held batch is retried under its id, so a retry
// never counts twice) until it succeeds or FlushTimeout has passed.
func (s *Service) finalFlush(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.FlushTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		err := s.Flush(fctx)
		if err == nil {
			return nil
		}
		s.log.Warn("final flush of page views failed, retrying", "error", err)
		select {
		case <-fctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Run writes counted views and crawls every FlushEvery until ctx ends, then flushes once more
// (retried until FlushTimeout has passed), so reads counted before shutdown are kept. Failed
// periodic flushes are logged and retried with the next (their batch is kept); Run returns the
// error of the final flush. Every flushLedgerSweepEvery it deletes day-old flush ids. The role
// runs it beside the HTTP API and stops it after the API stopped.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.FlushEvery)
	defer t.Stop()
	var swept time.Time
	for {
		select {
		case <-ctx.Done():
			if err := s.finalFlush(ctx); err != nil {
				return fmt.Errorf("final flush of page views: %w", err)
			}
			return nil
		case <-t.C:
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.FlushTimeout)
			err := s.Flush(fctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("flush page views (kept for the next flush)", "error", err)
			}
			if now := s.now(); err == nil && now.Sub(swept) >= flushLedgerSweepEvery {
				swept = now
				if _, err := s.SweepFlushLedger(fctx); err != nil {
					s.log.Warn("sweep page view flush ids", "error", err)
				}
			}
			cancel()
		}
	}
}
