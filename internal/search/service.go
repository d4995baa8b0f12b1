package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cohort-dev/cohort/internal/breaker"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
)

// Search limits and defaults (api/openapi.yaml, searchProducts).
const (
	DefaultLimit  = 20
	MaxLimit      = 100
	MaxQueryChars = 1000 // characters (runes) of q after trimming

	DefaultRateLimit       = 100
	MaxRateLimit           = 10_000
	DefaultRateWindow      = time.Minute
	DefaultEmbedTimeout    = 5 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second

	// RateBucket names the search endpoint's count in api_rate_limits.
	RateBucket = "ai_pages_query"
)

// CodeEmbeddingUnavailable is the error code of a search the embedding provider could not serve
// (down, timing out, refusing, or the circuit breaker open): 503.
const CodeEmbeddingUnavailable = "embedding_unavailable"

// Embedder is the part of the AI provider (ai.Provider) the search calls.
type Embedder interface {
	EmbeddingModel() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Config tunes the service; zero values take the defaults.
type Config struct {
	EmbedTimeout    time.Duration // one query embedding (default 5 s)
	BreakerFailures int           // consecutive provider failures that open the breaker (default 5)
	BreakerCooldown time.Duration // how long it stays open before one probe (default 30 s)
	// RateLimit: Query requests per tenant per RateWindow (default 100, at most MaxRateLimit:
	// the count keeps the time of each request in the window).
	RateLimit  int
	RateWindow time.Duration // default one minute
}

// Service is semantic product search.
type Service struct {
	pool     *pgxpool.Pool
	embedder Embedder
	index    Index
	now      func() time.Time
	log      *slog.Logger
	limiter  *RateLimiter
	breaker  *breaker.Breaker
	timeout  time.Duration
	members  memberCache
	counts   productCounts
}

// NewService builds the service. index is the vector index (Embedded in the API process);
// now is the clock of rate limits, the breaker's cool-down and latency_ms.
func NewService(pool *pgxpool.Pool, embedder Embedder, index Index, now func() time.Time, log *slog.Logger, cfg Config) *Service {
	if cfg.EmbedTimeout <= 0 {
		cfg.EmbedTimeout = DefaultEmbedTimeout
	}
	if cfg.BreakerFailures <= 0 {
		cfg.BreakerFailures = DefaultBreakerFailures
	}
	if cfg.BreakerCooldown <= 0 {
		cfg.BreakerCooldown = DefaultBreakerCooldown
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	cfg.RateLimit = min(cfg.RateLimit, MaxRateLimit)
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = DefaultRateWindow
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		pool: pool, embedder: embedder, index: index, now: now, log: log,
		limiter: &RateLimiter{pool: pool, now: now, bucket: RateBucket, limit: cfg.RateLimit, window: cfg.RateWindow},
		breaker: breaker.New(now, cfg.BreakerFailures, cfg.BreakerCooldown), timeout: cfg.EmbedTimeout,
	}
}

// In is one search.
type In struct {
	Query     string // the text to search for (trimmed; required, at most MaxQueryChars)
	Limit     int    // products to return: 1 to MaxLimit, 0 for DefaultLimit
	SegmentID *int64 // restrict to the members of this product segment of the tenant
}

// Result is GET /api/ai-pages/query's body.
type Result struct {
	Query    string    `json:"query"`
	Products []Product `json:"products"`
	// Filters maps each string and array field of the tenant's product schema to the values the
	// returned products have (most frequent first, then alphabetical); fields without a value
	// are left out.
	Filters  map[string][]string `json:"filters"`
	Metadata Metadata            `json:"metadata"`
}

// Product is one match, most similar first.
type Product struct {
	ID   int64           `json:"id"`
	SKU  string          `json:"sku"`
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	// RelevanceScore is the cosine similarity of the product's vector and the query's, -1 to 1.
	RelevanceScore float64 `json:"relevance_score"`
}

// Metadata describes the search.
type Metadata struct {
	MatchCount int   `json:"match_count"` // len(products)
	LatencyMS  int64 `json:"latency_ms"`  // time spent in the service
	// PendingEmbeddings counts the tenant's products that cannot be found yet: no vector of the
	// provider's current model, or queued for a new one.
	PendingEmbeddings int64 `json:"pending_embeddings"`
}

// Query is the HTTP endpoint's search: the tenant's request is counted against the rate limit
// first (an *errs.RateLimitedError beyond it), then searched; while the tenant's vectors load
// (longer than IndexConfig.LoadWait) it answers a 503 *errs.CodedError CodeIndexLoading with a
// RetryAfter, and the load goes on in the background.
func (s *Service) Query(ctx context.Context, tenantID int64, in In) (*Result, error) {
	if err := s.limiter.Take(ctx, tenantID); err != nil {
		return nil, err
	}
	// A tenant whose vectors are still loading answers 503 CodeIndexLoading at once rather than
	// hold the request for the load.
	return s.Search(failFast(ctx), tenantID, in)
}

// Search embeds the query with the provider's embedding model and returns the tenant's closest
// products by cosine similarity, without a rate limit (page generation calls it too). Errors:
// *errs.ValidationError for bad input (fields q, limit, segment_id); errs.ErrNotFound for a
// segment the tenant does not have; a *errs.CodedError of kind errs.ErrUnavailable and code
// CodeEmbeddingUnavailable when the provider fails, times out or its breaker is open, or code
// CodeIndexTooLarge when the tenant's vectors exceed the index's memory budget. It waits for a
// load of the tenant's vectors.
func (s *Service) Search(ctx context.Context, tenantID int64, in In) (*Result, error) {
	start := s.now()
	q, limit, err := validate(in)
	if err != nil {
		return nil, err
	}
	var allow func(int64) bool
	if in.SegmentID != nil {
		if allow, err = s.segmentFilter(ctx, tenantID, *in.SegmentID); err != nil {
			return nil, err
		}
	}
	vec, err := s.embed(ctx, q)
	if err != nil {
		return nil, err
	}
	if isZero(vec) {
		// The provider found nothing to embed (the local one: no word at all): a zero vector is
		// similar to nothing, so the search could only ever answer "no match".
		return nil, errs.Invalid("q", EmbedsToNothingMessage)
	}
	model := s.embedder.EmbeddingModel()
	matches, err := s.index.TopK(ctx, tenantID, model, vec, limit, allow)
	if err != nil {
		return nil, err
	}
	out := &Result{Query: q, Products: []Product{}, Filters: map[string][]string{}}
	if err := s.fill(ctx, tenantID, model, len(vec), matches, out); err != nil {
		return nil, err
	}
	out.Metadata.MatchCount = len(out.Products)
	out.Metadata.LatencyMS = max(0, s.now().Sub(start).Milliseconds())
	return out, nil
}

// Messages of a query the search cannot use: NoWordsMessage when its text has no word at all,
// EmbedsToNothingMessage when the embedding model found nothing in it (a zero vector).
const (
	NoWordsMessage         = "has no words the search can use (only punctuation, symbols or spaces): use words that describe the products"
	EmbedsToNothingMessage = "has no words the search can use (the embedding model finds nothing in it, so it would match no product): use words that describe the products"
)

// HasWords reports whether text has a word the search can embed: a letter or a digit. A text
// without one (punctuation, symbols) embeds to a zero vector, which matches nothing; callers that
// take a query's text ahead of a search refuse it with NoWordsMessage.
func HasWords(text string) bool {
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return true
		}
	}
	return false
}

func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

func validate(in In) (string, int, error) {
	f := errs.Fields{}
	q := strings.TrimSpace(in.Query)
	switch {
	case !utf8.ValidString(q):
		f.Add("q", "must be UTF-8 text")
	case q == "":
		f.Add("q", "is required: the text to search for")
	case utf8.RuneCountInString(q) > MaxQueryChars:
		f.Add("q", "must be at most %d characters", MaxQueryChars)
	case !HasWords(q):
		f.Add("q", "%s", NoWordsMessage)
	}
	limit := in.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		f.Add("limit", "must be an integer from 1 to %d", MaxLimit)
	}
	if in.SegmentID != nil && *in.SegmentID < 1 {
		f.Add("segment_id", "must be a positive integer (a product segment id)")
	}
	return q, limit, f.Err()
}

// embed calls the provider through the breaker.
func (s *Service) embed(ctx context.Context, q string) ([]float32, error) {
	if !s.breaker.Allow() {
		return nil, errs.Coded(errs.ErrUnavailable, CodeEmbeddingUnavailable,
			"the embedding service is failing; searches resume when it answers again")
	}
	ectx, cancel := context.WithTimeout(ctx, s.timeout)
	vecs, err := s.embedder.Embed(ectx, []string{q})
	cancel()
	if err == nil && (len(vecs) != 1 || len(vecs[0]) == 0) {
		err = fmt.Errorf("the provider returned %d vectors for one text", len(vecs))
	}
	if err != nil {
		if ctx.Err() != nil { // the caller gave up: nothing learnt about the provider
			s.breaker.Abandon()
			return nil, ctx.Err()
		}
		wasOpen := s.breaker.IsOpen()
		s.breaker.Failure()
		if !wasOpen && s.breaker.IsOpen() {
			// The failures themselves reach the log with each search's error.
			s.log.Warn("embedding provider failing: searches answer 503 without calling it for the cool-down",
				"consecutive_failures", s.breaker.Threshold(), "cool_down", s.breaker.Cooldown())
		}
		// The cause is in the text for the log, not in the chain: its kind is the provider's
		// business, the caller's is unavailable.
		return nil, fmt.Errorf("%w (%v)", errs.Coded(errs.ErrUnavailable, CodeEmbeddingUnavailable,
			"the embedding service is unavailable; try again shortly"), err)
	}
	s.breaker.Success()
	return vecs[0], nil
}

// fill loads the matched products (in one round trip with the schema and the pending counts),
// in match order, and the filters.
func (s *Service) fill(ctx context.Context, tenantID int64, model string, dims int, matches []Match, out *Result) error {
	ids := make([]int64, len(matches))
	for i, m := range matches {
		ids[i] = m.ProductID
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT id, sku, name, data FROM products WHERE tenant_id = $1 AND id = ANY($2)`, tenantID, ids)
	b.Queue(`SELECT COALESCE((SELECT fields FROM product_schemas WHERE tenant_id = $1), '[]'::jsonb)`, tenantID)
	b.Queue(`SELECT COALESCE((SELECT version FROM catalog_versions WHERE tenant_id = $1), 0),
		(SELECT count(*) FROM product_embedding_queue q
			JOIN product_embeddings e ON e.product_id = q.product_id AND e.model = $2 AND e.dims = $3
			WHERE q.tenant_id = $1)`, tenantID, model, dims)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	type row struct {
		sku, name string
		data      []byte
	}
	found := make(map[int64]row, len(ids))
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("load matched products: %w", err)
	}
	for rows.Next() {
		var id int64
		var r row
		if err := rows.Scan(&id, &r.sku, &r.name, &r.data); err != nil {
			rows.Close()
			return fmt.Errorf("load matched products: %w", err)
		}
		found[id] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load matched products: %w", err)
	}
	var rawFields []byte
	if err := br.QueryRow().Scan(&rawFields); err != nil {
		return fmt.Errorf("load product schema: %w", err)
	}
	var version, queuedEmbedded int64
	if err := br.QueryRow().Scan(&version, &queuedEmbedded); err != nil {
		return fmt.Errorf("count pending embeddings: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("load matched products: %w", err)
	}
	var fields []catalog.Field
	if err := json.Unmarshal(rawFields, &fields); err != nil {
		return fmt.Errorf("read product schema: %w", err)
	}
	var facets []catalog.Field
	for _, f := range fields {
		if f.Type == catalog.TypeString || f.Type == catalog.TypeArray {
			facets = append(facets, f)
		}
	}
	counts := make([]map[string]int, len(facets))
	for _, m := range matches {
		r, ok := found[m.ProductID]
		if !ok {
			continue // deleted since the index saw it
		}
		out.Products = append(out.Products, Product{ID: m.ProductID, SKU: r.sku, Name: r.name, Data: r.data, RelevanceScore: score(m.Score)})
		if len(facets) == 0 {
			continue
		}
		var data map[string]any
		if json.Unmarshal(r.data, &data) != nil {
			continue
		}
		for i, f := range facets {
			countValues(&counts[i], data[f.Name])
		}
	}
	for i, f := range facets {
		if len(counts[i]) > 0 {
			out.Filters[f.Name] = byFrequency(counts[i])
		}
	}
	pending, err := s.pending(ctx, tenantID, model, dims, version, queuedEmbedded)
	if err != nil {
		return err
	}
	out.Metadata.PendingEmbeddings = pending
	return nil
}

// score is the float32 similarity as a float64 that prints as the float32 does (0.8 rather
// than 0.800000011920929).
func score(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil || math.IsNaN(v) {
		return 0
	}
	return v
}

func countValues(c *map[string]int, v any) {
	add := func(s string) {
		if s = strings.TrimSpace(s); s == "" {
			return
		}
		if *c == nil {
			*c = map[string]int{}
		}
		(*c)[s]++
	}
	switch x := v.(type) {
	case string:
		add(x)
	case []any:
		seen := map[string]bool{}
		for _, e := range x {
			if s, ok := e.(string); ok && !seen[s] {
				seen[s] = true
				add(s)
			}
		}
	}
}

func byFrequency(c map[string]int) []string {
	out := make([]string, 0, len(c))
	for v := range c {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if c[out[i]] != c[out[j]] {
			return c[out[i]] > c[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// sizer is implemented by indexes that know how many vectors a tenant has (Embedded does).
type sizer interface {
	Len(ctx context.Context, tenantID int64, model string, dims int) (int, error)
}

// pending is |products| - |products with a current vector| + |queued products with one|: the
// products without a vector of the model and size plus those queued for a new one. The product
// count is cached per catalogue version (every product write moves it); the vector count comes
// from the index when it keeps one.
func (s *Service) pending(ctx context.Context, tenantID int64, model string, dims int, version, queuedEmbedded int64) (int64, error) {
	products, ok := s.counts.get(tenantID, version)
	if !ok {
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM products WHERE tenant_id = $1`, tenantID).Scan(&products)
		if err != nil {
			return 0, fmt.Errorf("count products: %w", err)
		}
		s.counts.put(tenantID, version, products)
	}
	var embedded int64
	if sz, ok := s.index.(sizer); ok {
		n, err := sz.Len(ctx, tenantID, model, dims)
		if err != nil {
			return 0, err
		}
		embedded = int64(n)
	} else {
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM product_embeddings WHERE tenant_id = $1 AND model = $2 AND dims = $3`,
			tenantID, model, dims).Scan(&embedded)
		if err != nil {
			return 0, fmt.Errorf("count product embeddings: %w", err)
		}
	}
	return max(0, products-embedded+queuedEmbedded), nil
}

// segmentFilter returns the membership test of the tenant's product segment (its last computed
// members). Member lists are cached per segment row version: a compute rewrites the row in the
// transaction that changes the members.
func (s *Service) segmentFilter(ctx context.Context, tenantID, segmentID int64) (func(int64) bool, error) {
	var version string
	err := s.pool.QueryRow(ctx, `SELECT xmin::text FROM product_segments WHERE tenant_id = $1 AND id = $2`, tenantID, segmentID).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("product segment %d: %w", segmentID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load product segment %d: %w", segmentID, err)
	}
	ids, ok := s.members.get(tenantID, segmentID, version)
	if !ok {
		rows, err := s.pool.Query(ctx, `SELECT product_id FROM product_segment_members WHERE tenant_id = $1 AND segment_id = $2 ORDER BY product_id`,
			tenantID, segmentID)
		if err != nil {
			return nil, fmt.Errorf("read product segment %d members: %w", segmentID, err)
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return nil, fmt.Errorf("read product segment %d members: %w", segmentID, err)
		}
		s.members.put(tenantID, segmentID, version, ids)
	}
	return func(id int64) bool {
		_, ok := slices.BinarySearch(ids, id)
		return ok
	}, nil
}

// memberCache keeps recent segments' member lists (sorted product ids), bounded in ids.
type memberCache struct {
	mu      sync.Mutex
	entries map[[2]int64]memberEntry
	ids     int
}

type memberEntry struct {
	version string
	ids     []int64
}

// maxCachedMembers bounds the member ids the cache holds (8 bytes each).
const maxCachedMembers = 4 << 20

func (c *memberCache) get(tenantID, segmentID int64, version string) ([]int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[[2]int64{tenantID, segmentID}]
	if !ok || e.version != version {
		return nil, false
	}
	return e.ids, true
}

func (c *memberCache) put(tenantID, segmentID int64, version string, ids []int64) {
	if len(ids) > maxCachedMembers {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[[2]int64]memberEntry{}
	}
	key := [2]int64{tenantID, segmentID}
	if old, ok := c.entries[key]; ok {
		c.ids -= len(old.ids)
		delete(c.entries, key)
	}
	for k, e := range c.entries { // map order is random: an arbitrary victim each time
		if c.ids+len(ids) <= maxCachedMembers {
			break
		}
		c.ids -= len(e.ids)
		delete(c.entries, k)
	}
	c.entries[key] = memberEntry{version, ids}
	c.ids += len(ids)
}

// productCounts caches each tenant's product count at a catalogue version.
type productCounts struct {
	mu      sync.Mutex
	entries map[int64][2]int64 // tenant -> version, count
}

// maxCachedTenantCounts bounds the tenants whose count is kept.
const maxCachedTenantCounts = 4096

func (c *productCounts) get(tenantID, version int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[tenantID]
	return e[1], ok && e[0] == version
}

func (c *productCounts) put(tenantID, version, count int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[int64][2]int64{}
	}
	if _, ok := c.entries[tenantID]; !ok && len(c.entries) >= maxCachedTenantCounts {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[tenantID] = [2]int64{version, count}
}

// Backlog is the state of the embeddings of the products a search could match (the tenant's
// catalogue, or a product segment's members).
type Backlog struct {
	Products int64 // products it could match
	Embedded int64 // of those, with a vector of the provider's current model
	// Queued are queued for an embedding and not refused by the provider: a drain embeds them
	// (its workflow retries a provider that is down). A generation waits for these.
	Queued int64
	// Refused are queued but refused by the provider at least once (or parked after
	// catalog.MaxEmbedAttempts refusals): they may never be embedded, so nothing waits for them.
	Refused int64
}

// Backlog counts the embeddings of the tenant's products, or of the members of its product
// segment segmentID when set (errs.ErrNotFound when the tenant has no such segment).
func (s *Service) Backlog(ctx context.Context, tenantID int64, segmentID *int64) (Backlog, error) {
	var out Backlog
	var exists bool
	err := s.pool.QueryRow(ctx, `WITH scope AS (
			SELECT p.id FROM products p WHERE p.tenant_id = $1 AND ($2::bigint IS NULL OR EXISTS (
				SELECT 1 FROM product_segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $2 AND m.product_id = p.id)))
		SELECT $2::bigint IS NULL OR EXISTS (SELECT 1 FROM product_segments WHERE tenant_id = $1 AND id = $2),
			(SELECT count(*) FROM scope),
			(SELECT count(*) FROM scope JOIN product_embeddings e ON e.product_id = scope.id AND e.model = $3),
			(SELECT count(*) FROM scope JOIN product_embedding_queue q ON q.product_id = scope.id AND q.last_error IS NULL AND q.attempts = 0),
			(SELECT count(*) FROM scope JOIN product_embedding_queue q ON q.product_id = scope.id AND (q.last_error IS NOT NULL OR q.attempts > 0))`,
		tenantID, segmentID, s.embedder.EmbeddingModel()).Scan(&exists, &out.Products, &out.Embedded, &out.Queued, &out.Refused)
	if err != nil {
		return out, fmt.Errorf("count pending embeddings: %w", err)
	}
	if !exists {
		return Backlog{}, fmt.Errorf("product segment %d: %w", *segmentID, errs.ErrNotFound)
	}
	return out, nil
}
