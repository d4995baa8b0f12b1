package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

// ErrGone is wrapped by Sync's error when the feed was deleted (before or during the sync).
var ErrGone = fmt.Errorf("feed deleted: %w", errs.ErrNotFound)

// SyncError is a sync that failed. Msg is what the feed's last_error shows: it names the feed's
// host as the tenant wrote it, never an address it resolved to. Permanent: retrying cannot help.
type SyncError struct {
	Msg       string
	Permanent bool
	err       error
}

func (e *SyncError) Error() string { return e.Msg }
func (e *SyncError) Unwrap() error { return e.err }

func permanent(err error, format string, args ...any) *SyncError {
	return &SyncError{Msg: fmt.Sprintf(format, args...), Permanent: true, err: err}
}

func transient(err error, format string, args ...any) *SyncError {
	return &SyncError{Msg: fmt.Sprintf(format, args...), err: err}
}

// Progress is reported after every chunk a sync commits.
type Progress struct {
	Items int // items read so far
}

// SyncResult is what a finished sync did.
type SyncResult struct {
	Counts
	FailedItems []FailedItem
}

// Sync fetches the feed's document and upserts its items: the feed is marked syncing, the
// document streamed and read in chunks of Options.ChunkItems items, each chunk upserted by SKU
// through the catalogue's bulk path while the next is read. It ends with the feed synced and its
// counts and failed items recorded. Errors: ErrGone when the feed was deleted; a *SyncError when
// the document cannot be fetched or read (a failed fetch touches no product; a document that
// turns out malformed midway keeps the items before the fault, and its counts are recorded); any
// other error is worth a retry, which starts the document again (items already stored count as
// unchanged).
func (s *Service) Sync(ctx context.Context, tenantID, id int64, progress func(Progress)) (*SyncResult, error) {
	f, err := s.markSyncing(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	sc, err := s.catalog.Schema(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	m, err := newMapper(f.FieldMap, sc)
	if err != nil {
		return nil, permanent(err, "%s", err.Error())
	}
	// Cancelling ctx (an early return) also aborts a read of the body the reader is blocked in.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, err := s.fetch(ctx, f)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	host := hostOf(f.URL)

	res := &SyncResult{FailedItems: []FailedItem{}}
	fail := func(it FailedItem) {
		res.Failed++
		if len(res.FailedItems) < MaxFailedItems {
			res.FailedItems = append(res.FailedItems, it)
		}
	}
	chunks := make(chan *chunk, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		readChunks(ctx, newItemReader(f.Format, body), m, s.opts.ChunkItems, chunks)
	}()
	defer func() { cancel(); <-readerDone }() // before the body closes

	for {
		var c *chunk
		select {
		case c = <-chunks:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		res.Total += c.items
		for _, it := range c.failed {
			fail(it)
		}
		if len(c.products) > 0 {
			sum, err := s.catalog.Bulk(ctx, tenantID, c.products)
			if err != nil {
				return nil, fmt.Errorf("upsert feed items: %w", err)
			}
			res.Created += sum.Created
			res.Updated += sum.Updated
			res.Unchanged += sum.Unchanged
			for i, r := range sum.Results {
				if r.Status == catalog.BulkFailed {
					fail(FailedItem{Position: c.pos[i], SKU: c.skus[i], Reason: r.Reason("the item at position", c.pos)})
				}
			}
		}
		sort.SliceStable(res.FailedItems, func(a, b int) bool { return res.FailedItems[a].Position < res.FailedItems[b].Position })
		if progress != nil {
			progress(Progress{Items: res.Total})
		}
		if c.err != nil {
			serr := readFailure(ctx, c.err, host, s.opts)
			var se *SyncError
			if errors.As(serr, &se) && se.Permanent && res.Total > 0 {
				// Items before the fault are stored: their counts are the feed's last sync.
				if err := s.record(ctx, tenantID, id, StatusError, &se.Msg, res, false); err != nil {
					return nil, err
				}
			}
			return nil, serr
		}
		if c.eof {
			break
		}
		if err := s.exists(ctx, tenantID, id); err != nil {
			return nil, err
		}
	}
	if err := s.record(ctx, tenantID, id, StatusSynced, nil, res, true); err != nil {
		return nil, err
	}
	return res, nil
}

// MarkFailed records a sync's failure on the feed (status error, last_error); a deleted feed is
// left alone.
func (s *Service) MarkFailed(ctx context.Context, tenantID, id int64, reason string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE product_feeds SET status = 'error', last_error = $3 WHERE tenant_id = $1 AND id = $2`,
		tenantID, id, shortenReason(reason)); err != nil {
		return fmt.Errorf("record failed sync of feed %d: %w", id, err)
	}
	return nil
}

func shortenReason(s string) string {
	if len(s) <= 2000 {
		return s
	}
	return shorten(s[:2000])
}

func (s *Service) markSyncing(ctx context.Context, tenantID, id int64) (*Feed, error) {
	f, err := scanFeed(s.pool.QueryRow(ctx, `UPDATE product_feeds SET status = 'syncing' WHERE tenant_id = $1 AND id = $2
		RETURNING `+feedColumns, tenantID, id))
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("feed %d: %w", id, ErrGone)
		}
		return nil, fmt.Errorf("mark feed %d syncing: %w", id, err)
	}
	return f, nil
}

func (s *Service) exists(ctx context.Context, tenantID, id int64) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM product_feeds WHERE tenant_id = $1 AND id = $2`, tenantID, id).Scan(&one)
	if err != nil {
		return fmt.Errorf("look up feed %d: %w", id, err)
	}
	if one == 0 {
		return fmt.Errorf("feed %d: %w", id, ErrGone)
	}
	return nil
}

// record stores a sync's outcome; finished sets last_synced_at and clears last_error.
func (s *Service) record(ctx context.Context, tenantID, id int64, status string, lastErr *string, res *SyncResult, finished bool) error {
	ls, err := json.Marshal(lastSync{Counts: res.Counts, FailedItems: res.FailedItems})
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE product_feeds SET status = $3, last_error = $4, last_sync = $5,
			last_synced_at = CASE WHEN $6 THEN $7::timestamptz ELSE last_synced_at END
		WHERE tenant_id = $1 AND id = $2`, tenantID, id, status, lastErr, ls, finished, s.now().UTC())
	if err != nil {
		return fmt.Errorf("record sync of feed %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("feed %d: %w", id, ErrGone)
	}
	return nil
}

// --- fetching ---

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the feed's host"
	}
	return u.Hostname()
}

// fetch requests the feed's document; its body is capped at Options.MaxBytes and the whole
// download at Options.Timeout by the client.
func (s *Service) fetch(ctx context.Context, f *Feed) (io.ReadCloser, error) {
	host := hostOf(f.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return nil, permanent(err, "the feed's URL cannot be requested")
	}
	if f.Format == FormatXML {
		req.Header.Set("Accept", "application/rss+xml, application/atom+xml, application/xml, text/xml;q=0.9, */*;q=0.1")
	} else {
		req.Header.Set("Accept", "application/json, */*;q=0.1")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fetchFailure(ctx, err, host, s.opts)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.Body, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout:
		_ = resp.Body.Close()
		return nil, transient(nil, "the feed's host %s answered HTTP %d", host, resp.StatusCode)
	default:
		_ = resp.Body.Close()
		return nil, permanent(nil, "the feed's host %s answered HTTP %d", host, resp.StatusCode)
	}
}

// fetchFailure words a failed request without the addresses the host resolved to.
func fetchFailure(ctx context.Context, err error, host string, o Options) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, safehttp.ErrBlockedRedirect):
		// The feed's own host was reached; the hop it redirected to is the refused one.
		return permanent(err, "the feed's URL redirects to a redirect target that is not allowed: it is a private or internal address")
	case errors.Is(err, safehttp.ErrBlockedAddress):
		return permanent(err, "the feed's host %s is not allowed: it is a private or internal address", host)
	case errors.Is(err, safehttp.ErrTooManyRedirects):
		return permanent(err, "the feed's URL redirects too many times")
	case errors.Is(err, safehttp.ErrBadURL):
		return permanent(err, "the feed's URL (or a redirect) is not an http or https URL")
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return transient(err, "the feed's host %s was not found", host)
	case errors.As(err, &netErr) && netErr.Timeout():
		return transient(err, "the feed's host %s did not answer within %s", host, o.Timeout)
	}
	return transient(err, "could not download the feed from %s", host)
}

// readFailure words an error of reading the document.
func readFailure(ctx context.Context, err error, host string, o Options) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var netErr net.Error
	switch {
	case errors.Is(err, ErrBadDocument):
		return permanent(err, "%s", err.Error())
	case errors.Is(err, safehttp.ErrResponseTooLarge):
		return permanent(err, "the feed is larger than %d bytes", o.MaxBytes)
	case errors.As(err, &netErr) && netErr.Timeout():
		return permanent(err, "the feed took longer than %s to download", o.Timeout)
	}
	if _, ok := err.(*SyncError); ok {
		return err
	}
	return transient(err, "the download of the feed from %s broke off", host)
}

// --- chunks ---

type chunk struct {
	products []map[string]any
	pos      []int    // each product's position in the document
	skus     []string // each product's SKU
	failed   []FailedItem
	items    int
	eof      bool
	err      error // reading stopped here (products before it are in the chunk)
}

// readChunks reads the document chunk after chunk until its end, an error or ctx ends.
func readChunks(ctx context.Context, rd itemReader, m *mapper, size int, out chan<- *chunk) {
	for {
		c := &chunk{}
		for len(c.products) < size {
			it, err := rd.Next()
			if err == io.EOF {
				c.eof = true
				break
			}
			if err != nil {
				c.err = err
				break
			}
			c.items++
			p, sku, reason := m.product(it)
			if reason != "" {
				c.failed = append(c.failed, FailedItem{Position: it.pos, SKU: sku, Reason: reason})
				continue
			}
			c.products = append(c.products, p)
			c.pos = append(c.pos, it.pos)
			c.skus = append(c.skus, sku)
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return
		}
		if c.eof || c.err != nil {
			return
		}
	}
}
