// Package feed keeps a tenant's external product feeds (a URL serving Google Merchant Center XML,
// RSS 2.0 or Atom with Google's g: namespace, or a JSON document) and syncs them into the product
// catalogue: the document is streamed through the SSRF-safe client (size and time caps), every
// item is mapped through the feed's field_map, converted to the product schema's types and
// upserted by SKU through the catalogue's bulk path in chunks, so embeddings are queued as for any
// other save. Broken items are reported by position; the rest are imported.
//
// Feed statuses: idle (never synced) -> queued (a sync was requested) -> syncing -> synced, or
// error with last_error. A sync requested while one is queued or running joins it: the running
// sync runs once more after it ends, so two syncs of one feed never run at once.
package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/safehttp"
	"github.com/cohort-dev/cohort/internal/startjob"
	"github.com/cohort-dev/cohort/internal/store"
)

// Formats.
const (
	FormatJSON = "json"
	FormatXML  = "xml"
)

// Statuses.
const (
	StatusIdle    = "idle"
	StatusQueued  = "queued"
	StatusSyncing = "syncing"
	StatusSynced  = "synced"
	StatusError   = "error"
)

// Limits and defaults.
const (
	MaxNameLength     = 200
	MaxURLLength      = 2048
	MaxFieldMapKeys   = 200
	MaxSourceLength   = 200
	MaxFailedItems    = 100     // failed items a sync keeps (the count goes on)
	DefaultMaxBytes   = 1 << 30 // a feed document larger than this fails the sync
	DefaultTimeout    = 30 * time.Minute
	DefaultChunkItems = catalog.MaxBulk // items per bulk upsert
	MaxFeedsPerTenant = 100
)

// Feed is an external product feed as the API shows it.
type Feed struct {
	ID           int64             `json:"id"`
	Name         string            `json:"name"`
	URL          string            `json:"url"`
	Format       string            `json:"format"`
	FieldMap     map[string]string `json:"field_map"`
	Status       string            `json:"status"`
	LastError    *string           `json:"last_error"`
	LastSyncedAt *time.Time        `json:"last_synced_at"`
	Counts       Counts            `json:"counts"`
	FailedItems  []FailedItem      `json:"failed_items"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
}

// Counts are the outcome of a feed's last sync.
type Counts struct {
	Total     int `json:"total"` // items read from the document
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
	Failed    int `json:"failed"`
}

// FailedItem is one item a sync could not import.
type FailedItem struct {
	Position int    `json:"position"` // 1 for the document's first item
	SKU      string `json:"sku,omitempty"`
	Reason   string `json:"reason"`
}

// lastSync is the stored outcome of the last sync (column last_sync).
type lastSync struct {
	Counts
	FailedItems []FailedItem `json:"failed_items"`
}

// Input is the body of POST /api/ai-pages/feeds/. A field_map left out maps the format's usual
// identifier and title (DefaultFieldMap).
type Input struct {
	Name     string            `json:"name"`
	URL      string            `json:"url"`
	Format   string            `json:"format"`
	FieldMap map[string]string `json:"field_map"`
}

// Patch is the body of PATCH /api/ai-pages/feeds/{id}/: only the fields present change.
type Patch struct {
	Name     *string            `json:"name"`
	URL      *string            `json:"url"`
	Format   *string            `json:"format"`
	FieldMap *map[string]string `json:"field_map"`
}

// DefaultFieldMap is the field_map of a feed created without one.
func DefaultFieldMap(format string) map[string]string {
	if format == FormatXML {
		return map[string]string{"g:id": "sku", "g:title": "name"}
	}
	return map[string]string{"sku": "sku", "name": "name"}
}

// Catalog is what a feed needs of the product catalogue.
type Catalog interface {
	Schema(ctx context.Context, tenantID int64) (*catalog.Schema, error)
	Bulk(ctx context.Context, tenantID int64, products []map[string]any) (*catalog.BulkSummary, error)
}

// SyncStarter starts a feed's sync workflow, or makes the one running run once more.
type SyncStarter interface {
	StartFeedSync(ctx context.Context, tenantID, feedID int64) error
}

// Options are the sync's limits and its outbound client.
type Options struct {
	// AllowPrivate lets feeds be fetched from loopback and private addresses (config
	// COHORT_ALLOW_PRIVATE_NETWORKS); link-local addresses stay refused.
	AllowPrivate bool
	// MaxBytes caps a feed document (DefaultMaxBytes when 0).
	MaxBytes int64
	// Timeout caps one fetch including reading the whole document (DefaultTimeout when 0).
	Timeout time.Duration
	// ChunkItems is how many items one bulk upsert takes (DefaultChunkItems when 0).
	ChunkItems int
	// HTTP fetches feeds; safehttp.NewClient from the fields above when nil. It must be an
	// SSRF-safe client.
	HTTP *http.Client
}

// Service owns every tenant's feeds.
type Service struct {
	pool    *pgxpool.Pool
	catalog Catalog
	starter SyncStarter
	now     func() time.Time
	opts    Options
	http    *http.Client
}

// NewService builds the service. starter may be nil where no sync is requested (the worker).
func NewService(pool *pgxpool.Pool, cat Catalog, starter SyncStarter, now func() time.Time, opts Options) *Service {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ChunkItems <= 0 || opts.ChunkItems > catalog.MaxBulk {
		opts.ChunkItems = DefaultChunkItems
	}
	client := opts.HTTP
	if client == nil {
		client = safehttp.NewClient(safehttp.Options{AllowPrivate: opts.AllowPrivate, Timeout: opts.Timeout, MaxResponseBytes: opts.MaxBytes})
	}
	return &Service{pool: pool, catalog: cat, starter: starter, now: now, opts: opts, http: client}
}

const feedColumns = "id, name, url, format, field_map, status, last_error, last_synced_at, last_sync, created_at, updated_at"

func scanFeed(row pgx.Row) (*Feed, error) {
	var f Feed
	var fm, ls []byte
	if err := row.Scan(&f.ID, &f.Name, &f.URL, &f.Format, &fm, &f.Status, &f.LastError, &f.LastSyncedAt, &ls, &f.CreatedAt, &f.UpdatedAt); err != nil {
		return nil, err
	}
	f.FieldMap = map[string]string{}
	if err := json.Unmarshal(fm, &f.FieldMap); err != nil {
		return nil, fmt.Errorf("read field_map of feed %d: %w", f.ID, err)
	}
	f.FailedItems = []FailedItem{}
	if len(ls) > 0 {
		var last lastSync
		if err := json.Unmarshal(ls, &last); err != nil {
			return nil, fmt.Errorf("read last sync of feed %d: %w", f.ID, err)
		}
		f.Counts = last.Counts
		if last.FailedItems != nil {
			f.FailedItems = last.FailedItems
		}
	}
	return &f, nil
}

func notFound(id int64) error {
	return errs.Coded(errs.ErrNotFound, "not_found", "feed %d not found", id)
}

// List returns the tenant's feeds in creation order.
func (s *Service) List(ctx context.Context, tenantID int64) ([]*Feed, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+feedColumns+" FROM product_feeds WHERE tenant_id = $1 ORDER BY id", tenantID)
	if err != nil {
		return nil, fmt.Errorf("list feeds: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Feed, error) { return scanFeed(r) })
	if err != nil {
		return nil, fmt.Errorf("list feeds: %w", err)
	}
	if out == nil {
		out = []*Feed{}
	}
	return out, nil
}

// Get returns one of the tenant's feeds; another tenant's is not found.
func (s *Service) Get(ctx context.Context, tenantID, id int64) (*Feed, error) {
	f, err := scanFeed(s.pool.QueryRow(ctx, "SELECT "+feedColumns+" FROM product_feeds WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load feed %d: %w", id, err)
	}
	return f, nil
}

// Create validates and stores a feed.
func (s *Service) Create(ctx context.Context, tenantID int64, in Input) (*Feed, error) {
	f := errs.Fields{}
	checkName(f, &in.Name)
	checkURL(f, &in.URL)
	checkFormat(f, &in.Format)
	if in.FieldMap == nil && f["format"] == "" {
		in.FieldMap = DefaultFieldMap(in.Format)
	}
	if err := s.checkFieldMap(ctx, f, tenantID, in.FieldMap); err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM product_feeds WHERE tenant_id = $1", tenantID).Scan(&n); err != nil {
		return nil, fmt.Errorf("count feeds: %w", err)
	}
	if n >= MaxFeedsPerTenant {
		return nil, errs.Coded(errs.ErrConflict, "feed_limit", "a tenant may hold at most %d feeds; delete one first", MaxFeedsPerTenant)
	}
	fm, _ := json.Marshal(in.FieldMap)
	now := s.now().UTC()
	out, err := scanFeed(s.pool.QueryRow(ctx, `INSERT INTO product_feeds (tenant_id, name, url, format, field_map, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING `+feedColumns, tenantID, in.Name, in.URL, in.Format, fm, now))
	if err != nil {
		return nil, fmt.Errorf("create feed: %w", err)
	}
	return out, nil
}

// Update applies a PATCH: only the fields sent change, each validated as on create (a field_map
// sent is checked against the schema of now). The next sync uses the new settings.
func (s *Service) Update(ctx context.Context, tenantID, id int64, in Patch) (*Feed, error) {
	cur, err := s.Get(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	f := errs.Fields{}
	if in.Name != nil {
		cur.Name = *in.Name
		checkName(f, &cur.Name)
	}
	if in.URL != nil {
		cur.URL = *in.URL
		checkURL(f, &cur.URL)
	}
	if in.Format != nil {
		cur.Format = *in.Format
		checkFormat(f, &cur.Format)
	}
	if in.FieldMap != nil {
		cur.FieldMap = *in.FieldMap
		if cur.FieldMap == nil {
			f.Add("field_map", "must be an object")
		}
	}
	if in.FieldMap != nil && cur.FieldMap != nil {
		if err := s.checkFieldMap(ctx, f, tenantID, cur.FieldMap); err != nil {
			return nil, err
		}
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	fm, _ := json.Marshal(cur.FieldMap)
	out, err := scanFeed(s.pool.QueryRow(ctx, `UPDATE product_feeds SET name = $3, url = $4, format = $5, field_map = $6, updated_at = $7
		WHERE tenant_id = $1 AND id = $2 RETURNING `+feedColumns, tenantID, id, cur.Name, cur.URL, cur.Format, fm, s.now().UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("update feed %d: %w", id, err)
	}
	return out, nil
}

// Delete removes a feed. Its products stay in the catalogue; a running sync stops at its next
// chunk.
func (s *Service) Delete(ctx context.Context, tenantID, id int64) error {
	return store.DeleteOwned(ctx, s.pool, "product_feeds", tenantID, id, notFound(id))
}

// RequestSync queues a sync of the feed: it is marked queued (unless a sync is running, which then
// runs once more) and its workflow is started. When the start fails the feed's status is put back
// and the error (unavailable) returned.
func (s *Service) RequestSync(ctx context.Context, tenantID, id int64) (*Feed, error) {
	if s.starter == nil {
		return nil, fmt.Errorf("feed syncs: %w: no workflow starter", errs.ErrUnavailable)
	}
	var prev string
	err := startjob.RecordStartUndo(ctx, startjob.Caller,
		func(ctx context.Context) error {
			err := s.pool.QueryRow(ctx, `UPDATE product_feeds f SET status = CASE WHEN f.status = 'syncing' THEN f.status ELSE 'queued' END
		FROM (SELECT status FROM product_feeds WHERE tenant_id = $1 AND id = $2 FOR UPDATE) old
		WHERE f.tenant_id = $1 AND f.id = $2 RETURNING old.status`, tenantID, id).Scan(&prev)
			if errors.Is(err, pgx.ErrNoRows) {
				return notFound(id)
			}
			if err != nil {
				return fmt.Errorf("queue sync of feed %d: %w", id, err)
			}
			return nil
		},
		func(ctx context.Context) error { return s.starter.StartFeedSync(ctx, tenantID, id) },
		func(ctx context.Context) error {
			// Put the status back, unless the sync got going meanwhile.
			if _, err := s.pool.Exec(ctx, `UPDATE product_feeds SET status = $3
			WHERE tenant_id = $1 AND id = $2 AND status = 'queued'`, tenantID, id, prev); err != nil {
				return fmt.Errorf("put back the status of feed %d: %w", id, err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, tenantID, id)
}

// --- validation ---

func checkLine(f errs.Fields, field string, v *string, max int) {
	*v = strings.TrimSpace(*v)
	switch {
	case !utf8.ValidString(*v):
		f.Add(field, "must be valid UTF-8 text")
	case *v == "":
		f.Add(field, "is required and must not be blank")
	case utf8.RuneCountInString(*v) > max:
		f.Add(field, "must be at most %d characters", max)
	case strings.ContainsFunc(*v, unicode.IsControl):
		f.Add(field, "must not contain control characters or line breaks")
	}
}

func checkName(f errs.Fields, name *string) { checkLine(f, "name", name, MaxNameLength) }

// checkURL accepts an absolute http(s) URL without userinfo. Where it points is checked when the
// feed is fetched (the SSRF-safe client refuses internal addresses then).
func checkURL(f errs.Fields, u *string) {
	checkLine(f, "url", u, MaxURLLength)
	if f["url"] != "" {
		return
	}
	if _, err := safehttp.CheckURL(*u); err != nil {
		f.Add("url", "must be an absolute http or https URL with a host and no user name or password")
	}
}

func checkFormat(f errs.Fields, format *string) {
	*format = strings.ToLower(strings.TrimSpace(*format))
	if *format != FormatJSON && *format != FormatXML {
		f.Add("format", "is required and must be json or xml")
	}
}

// checkFieldMap checks a field_map against the tenant's schema: 1 to MaxFieldMapKeys sources,
// each mapped to sku, name or a field of the schema, one of them to sku, no target twice.
func (s *Service) checkFieldMap(ctx context.Context, f errs.Fields, tenantID int64, fm map[string]string) error {
	if fm == nil {
		f.Add("field_map", "is required: an object mapping source fields to sku, name or product schema fields")
		return nil
	}
	sc, err := s.catalog.Schema(ctx, tenantID)
	if err != nil {
		return err
	}
	for k, v := range validateFieldMap(fm, sc) {
		f.Add(k, "%s", v)
	}
	return nil
}

// validateFieldMap returns the problems of fm against sc, keyed field_map or field_map.<source>.
func validateFieldMap(fm map[string]string, sc *catalog.Schema) errs.Fields {
	f := errs.Fields{}
	if len(fm) == 0 {
		f.Add("field_map", "must map a source field to sku")
		return f
	}
	if len(fm) > MaxFieldMapKeys {
		f.Add("field_map", "must have at most %d entries", MaxFieldMapKeys)
		return f
	}
	fields := make(map[string]bool, len(sc.Fields))
	for _, fd := range sc.Fields {
		fields[fd.Name] = true
	}
	targets := map[string]string{}
	for src, target := range fm {
		key := "field_map." + src
		switch {
		case strings.TrimSpace(src) == "" || !utf8.ValidString(src) || len(src) > MaxSourceLength ||
			strings.ContainsFunc(src, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) ||
			strings.HasPrefix(src, ".") || strings.HasSuffix(src, ".") || strings.Contains(src, ".."):
			key = "field_map"
			f.Add(key, "source fields must be 1 to %d characters without spaces, control characters or empty path segments", MaxSourceLength)
			continue
		case target != "sku" && target != "name" && !fields[target]:
			f.Add(key, "must be sku, name or a field of your product schema (%q is none of them)", shorten(target))
			continue
		}
		if other, dup := targets[target]; dup {
			a, b := min(other, src), max(other, src)
			f.Add("field_map."+b, "maps to %s, which %q already does", target, a)
			continue
		}
		targets[target] = src
	}
	if _, ok := targets["sku"]; !ok && len(f) == 0 {
		f.Add("field_map", "must map a source field to sku")
	}
	return f
}

func shorten(s string) string {
	if len(s) <= 64 {
		return s
	}
	i := 64
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
