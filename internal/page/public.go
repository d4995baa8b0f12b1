package page

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
)

// maxCachedPublicPages bounds the public page cache (found and not found reads alike).
const maxCachedPublicPages = 10000

// maxPublicCacheBytes bounds the bytes the public cache holds: the pages' JSON and their hosted
// renderings. Past it (or past maxCachedPublicPages) an insertion first drops the expired entries,
// then, if that is not enough, every entry.
const maxPublicCacheBytes = 64 << 20

// publicLoadTimeout bounds loading one public page from the database.
const publicLoadTimeout = 5 * time.Second

// errPublicNotFound is the one answer for an unknown tenant, an unknown page, an unpublished page
// and another tenant's page.
func errPublicNotFound() error {
	return errs.Coded(errs.ErrNotFound, "not_found", "page not found")
}

// publicEntry is one public read as loaded: the response body after its view_count member, and
// what counting needs.
type publicEntry struct {
	found    bool
	tenantID int64
	pageID   int64
	// base is view_count as loaded plus the reads counted here and not yet written then; local
	// counts the reads served from this entry since.
	base    int64
	local   atomic.Int64
	rest    []byte // `,"id":...}`: the page's JSON without view_count and its opening brace
	etag    string // the JSON's validator: weak, from rest (view_count changes with every read)
	doc     *PublicDoc
	gen     uint64
	expires time.Time

	renderMu sync.Mutex
	rendered map[string]*Rendered // PublicRendered's answers by render key

	// Guarded by the cache's mu: whether the entry is in the cache's map, and the bytes it
	// counts there.
	cached bool
	size   int64
}

// baseSize is what an entry holds before any rendering: its JSON and its page's text.
func (e *publicEntry) baseSize() int64 { return int64(len(e.rest))*2 + 256 }

type loadCall struct {
	gen  uint64
	done chan struct{}
	e    *publicEntry
	err  error
}

// publicCache keeps public reads for a few seconds. Writes through this service bump gen, which
// retires every entry at once; other replicas' writes show once an entry expires. Concurrent
// misses of one key share one load.
type publicCache struct {
	ttl     time.Duration
	gen     atomic.Uint64
	mu      sync.RWMutex
	entries map[string]*publicEntry
	loading map[string]*loadCall
	bytes   int64 // guarded by mu: the sizes of the entries in entries
	max     int64 // bound of bytes
}

func newPublicCache(ttl time.Duration) *publicCache {
	return &publicCache{ttl: ttl, entries: map[string]*publicEntry{}, loading: map[string]*loadCall{}, max: maxPublicCacheBytes}
}

// PublicCacheStats is what the public page cache holds.
type PublicCacheStats struct {
	Entries int
	Bytes   int64
}

func (c *publicCache) stats() PublicCacheStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return PublicCacheStats{Entries: len(c.entries), Bytes: c.bytes}
}

// remove takes key's entry out of the map; mu held.
func (c *publicCache) remove(key string) {
	if e := c.entries[key]; e != nil {
		e.cached = false
		c.bytes -= e.size
		delete(c.entries, key)
	}
}

// grow counts n more bytes for e (a rendering kept with it), if it is still in the cache.
func (c *publicCache) grow(e *publicEntry, n int64) {
	c.mu.Lock()
	if e.cached {
		e.size += n
		c.bytes += n
	}
	c.mu.Unlock()
}

// invalidate retires every cached read.
func (c *publicCache) invalidate() { c.gen.Add(1) }

func (c *publicCache) get(key string, now time.Time, load func() (*publicEntry, error)) (*publicEntry, error) {
	gen := c.gen.Load()
	if c.ttl > 0 {
		c.mu.RLock()
		e := c.entries[key]
		c.mu.RUnlock()
		if e != nil && e.gen == gen && now.Before(e.expires) {
			return e, nil
		}
	}
	c.mu.Lock()
	if call, ok := c.loading[key]; ok && call.gen == gen {
		c.mu.Unlock()
		<-call.done
		return call.e, call.err
	}
	call := &loadCall{gen: gen, done: make(chan struct{})}
	c.loading[key] = call
	c.mu.Unlock()

	call.e, call.err = load()

	c.mu.Lock()
	if c.loading[key] == call {
		delete(c.loading, key)
	}
	if call.err == nil && c.ttl > 0 {
		call.e.gen = gen
		call.e.expires = now.Add(c.ttl)
		c.remove(key)
		need := call.e.baseSize()
		if len(c.entries) >= maxCachedPublicPages || c.bytes+need > c.max {
			for k, e := range c.entries {
				if e.gen != c.gen.Load() || !now.Before(e.expires) {
					c.remove(k)
				}
			}
			if len(c.entries) >= maxCachedPublicPages || c.bytes+need > c.max {
				for k := range c.entries {
					c.remove(k)
				}
			}
		}
		call.e.cached, call.e.size = true, need
		c.bytes += need
		c.entries[key] = call.e
	}
	c.mu.Unlock()
	close(call.done)
	return call.e, call.err
}

// publicPageJSON is the public representation of a page, but view_count, which each response
// puts in front of it.
type publicPageJSON struct {
	ID            int64           `json:"id"`
	Slug          string          `json:"slug"`
	Title         string          `json:"title"`
	Published     bool            `json:"published"`
	IntroCopy     string          `json:"intro_copy"`
	ProductSKUs   []string        `json:"product_skus"`
	Blocks        []block.Block   `json:"blocks"`
	Products      []PublicProduct `json:"products"`
	Status        string          `json:"status"`
	GeneratedAt   *time.Time      `json:"generated_at"`
	LastAICrawlAt *time.Time      `json:"last_ai_crawl_at"`
	Version       int             `json:"version"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

// PublicPage answers GET /api/ai-pages/public/pages/{tenant_slug}/{page_slug}/ with the JSON body:
// a published page with its intro copy, SKUs (ShownSKUs: the page's and its product grids'),
// blocks and products (name, price, image and data, in the order of product_skus; SKUs no
// longer in the catalogue are left out), and view_count.
// An unknown tenant, an unknown or unpublished page and another tenant's page are the same
// not-found error. Each read counts one view (in memory, written by Run), and a User-Agent that
// names a known AI crawler (Crawlers) records a crawl; view_count includes the reads not yet
// written, this one among them. A read through a WithoutCounting context counts nothing; one
// through a WithVisitorUserAgent context of the page's tenant is counted with that User-Agent.
func (s *Service) PublicPage(ctx context.Context, tenantSlug, pageSlug, userAgent string) ([]byte, error) {
	body, _, err := s.PublicJSON(ctx, tenantSlug, pageSlug, userAgent)
	return body, err
}

// PublicJSON is PublicPage with the body's validator: a weak ETag of the page as published,
// which view_count (different in every answer) does not change.
func (s *Service) PublicJSON(ctx context.Context, tenantSlug, pageSlug, userAgent string) ([]byte, string, error) {
	e, views, err := s.publicRead(ctx, tenantSlug, pageSlug, userAgent)
	if err != nil {
		return nil, "", err
	}
	buf := make([]byte, 0, len(e.rest)+32)
	buf = append(buf, `{"view_count":`...)
	buf = strconv.AppendInt(buf, views, 10)
	return append(buf, e.rest...), e.etag, nil
}

// publicRead finds a published page in the public cache (loading it on a miss) and counts the
// read unless ctx is WithoutCounting; views is view_count including this read.
func (s *Service) publicRead(ctx context.Context, tenantSlug, pageSlug, userAgent string) (*publicEntry, int64, error) {
	e, err := s.publicLookup(ctx, tenantSlug, pageSlug)
	if err != nil {
		return nil, 0, err
	}
	return e, s.countRead(ctx, e, userAgent), nil
}

// publicLookup finds a published page in the public cache, loading it on a miss.
func (s *Service) publicLookup(ctx context.Context, tenantSlug, pageSlug string) (*publicEntry, error) {
	if !tenantSlugRE.MatchString(tenantSlug) || checkSlug(pageSlug) != "" {
		return nil, errPublicNotFound()
	}
	now := s.now()
	e, err := s.cache.get(tenantSlug+"/"+pageSlug, now, func() (*publicEntry, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publicLoadTimeout)
		defer cancel()
		return s.loadPublic(lctx, tenantSlug, pageSlug)
	})
	if err != nil {
		return nil, err
	}
	if !e.found {
		return nil, errPublicNotFound()
	}
	return e, nil
}

// countRead counts one read of e (a view, and a crawl when userAgent names a known AI crawler)
// unless counting is off or ctx is WithoutCounting, and returns view_count with it.
func (s *Service) countRead(ctx context.Context, e *publicEntry, userAgent string) int64 {
	views := e.base
	if v, ok := ctx.Value(visitorKey{}).(visitor); ok && v.tenantID == e.tenantID {
		userAgent = v.userAgent
	}
	if !s.opts.DisableViewCounting && !uncounted(ctx) {
		s.counter.record(e.tenantID, e.pageID, s.crawlers.match(userAgent), s.now())
		views += e.local.Add(1)
	}
	return views
}

// uncountedKey marks a context whose public reads count no view (a HEAD request: nobody saw it).
type uncountedKey struct{}

// WithoutCounting returns ctx marked so that PublicPage reads through it count no view and no
// crawl (a HEAD request, which checks a page without anybody reading it).
func WithoutCounting(ctx context.Context) context.Context {
	return context.WithValue(ctx, uncountedKey{}, true)
}

func uncounted(ctx context.Context) bool { return ctx.Value(uncountedKey{}) != nil }

// visitorKey marks a context whose public read is counted as a storefront visitor's.
type visitorKey struct{}

type visitor struct {
	tenantID  int64
	userAgent string
}

// WithVisitorUserAgent returns ctx marked so that a PublicPage read through it of a page of
// tenantID is counted with userAgent (the storefront's visitor's, VisitorUserAgentHeader) in
// place of the request's own; a read of another tenant's page ignores it. The caller marks a
// context only for a request that proved to be tenantID's (its key).
func WithVisitorUserAgent(ctx context.Context, tenantID int64, userAgent string) context.Context {
	return context.WithValue(ctx, visitorKey{}, visitor{tenantID: tenantID, userAgent: userAgent})
}

// VisitorUserAgentHeader is the header in which a storefront that renders pages server-side
// passes its visitor's User-Agent on a public read made with its key (api/openapi.yaml).
const VisitorUserAgentHeader = "X-Cohort-Visitor-User-Agent"

func (s *Service) loadPublic(ctx context.Context, tenantSlug, pageSlug string) (*publicEntry, error) {
	var (
		p        publicPageJSON
		tenantID int64
		views    int64
		blocks   []byte
		fields   []byte
		currency *string
	)
	err := s.pool.QueryRow(ctx, `SELECT g.tenant_id, g.id, g.slug, g.title, g.published, g.intro_copy, g.product_skus, g.blocks,
			g.status, g.generated_at, g.view_count, g.last_ai_crawl_at, g.version, g.created_at, g.updated_at,
			ps.fields, ps.default_currency
		FROM tenants t
		JOIN generated_pages g ON g.tenant_id = t.id
		LEFT JOIN product_schemas ps ON ps.tenant_id = t.id
		WHERE t.slug = $1 AND g.slug = $2 AND g.published`, tenantSlug, pageSlug).
		Scan(&tenantID, &p.ID, &p.Slug, &p.Title, &p.Published, &p.IntroCopy, &p.ProductSKUs, &blocks,
			&p.Status, &p.GeneratedAt, &views, &p.LastAICrawlAt, &p.Version, &p.CreatedAt, &p.UpdatedAt, &fields, &currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return &publicEntry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load public page: %w", err)
	}
	if p.Blocks, err = decodeBlocks(blocks); err != nil {
		return nil, fmt.Errorf("load public page %d: %w", p.ID, err)
	}
	p.ProductSKUs = ShownSKUs(p.ProductSKUs, p.Blocks)
	if p.Products, err = s.publicProducts(ctx, tenantID, p.ProductSKUs, fields, currency); err != nil {
		return nil, fmt.Errorf("load public page %d products: %w", p.ID, err)
	}
	if _, at := s.counter.pendingCrawls(p.ID, Crawlers); !at.IsZero() && (p.LastAICrawlAt == nil || at.After(*p.LastAICrawlAt)) {
		p.LastAICrawlAt = &at
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode public page %d: %w", p.ID, err)
	}
	rest := append([]byte{','}, body[1:]...)
	doc := &PublicDoc{TenantID: tenantID, TenantSlug: tenantSlug, Page: &Page{ID: p.ID, Slug: p.Slug, Title: p.Title,
		Published: p.Published, IntroCopy: p.IntroCopy, ProductSKUs: p.ProductSKUs, Blocks: p.Blocks, Status: p.Status,
		GeneratedAt: p.GeneratedAt, Version: p.Version, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}, Products: p.Products}
	return &publicEntry{found: true, tenantID: tenantID, pageID: p.ID, base: views + s.counter.pending(p.ID), rest: rest,
		etag: weakETag(rest), doc: doc}, nil
}

// productFields names the product schema's first price field and first image field.
func productFields(raw []byte) (price, image string) {
	var fields []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &fields)
	for _, f := range fields {
		switch {
		case f.Type == "price" && price == "":
			price = f.Name
		case f.Type == "image" && image == "":
			image = f.Name
		}
	}
	return price, image
}

// publicProducts reads the products of skus, in that order, with their price (the schema's price
// field, else "price") and image (the schema's image field, else "image_url" or "image").
func (s *Service) publicProducts(ctx context.Context, tenantID int64, skus []string, schemaFields []byte, currency *string) ([]PublicProduct, error) {
	out := []PublicProduct{}
	if len(skus) == 0 {
		return out, nil
	}
	keys := make([]string, len(skus))
	for i, sku := range skus {
		keys[i] = strings.ToLower(sku)
	}
	rows, err := s.pool.Query(ctx, `SELECT sku_key, sku, name, data FROM products WHERE tenant_id = $1 AND sku_key = ANY($2::text[])`, tenantID, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	priceField, imageField := productFields(schemaFields)
	byKey := map[string]PublicProduct{}
	for rows.Next() {
		var key string
		var p PublicProduct
		var data []byte
		if err := rows.Scan(&key, &p.SKU, &p.Name, &data); err != nil {
			return nil, err
		}
		p.Data = map[string]any{}
		_ = json.Unmarshal(data, &p.Data)
		p.Price = priceOf(p.Data, priceField, "price")
		p.ImageURL = imageOf(p.Data, imageField, "image_url", "image")
		if p.Price != nil && currency != nil {
			p.Currency = *currency
		}
		byKey[key] = p
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if p, ok := byKey[k]; ok && !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func priceOf(data map[string]any, fields ...string) *float64 {
	for _, f := range fields {
		switch v := data[f].(type) {
		case float64:
			return &v
		case string:
			if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return &n
			}
		}
	}
	return nil
}

func imageOf(data map[string]any, fields ...string) *string {
	for _, f := range fields {
		switch v := data[f].(type) {
		case string:
			if v != "" {
				return &v
			}
		case []any:
			if len(v) > 0 {
				if s, ok := v[0].(string); ok && s != "" {
					return &s
				}
			}
		}
	}
	return nil
}
