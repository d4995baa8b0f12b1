package page

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Hosted pages: a published page rendered as a document (the HTML of internal/pagehost) is kept
// in the public cache beside the JSON read, so a hosted read costs what a JSON read costs, and is
// counted the same way. The tenant's published pages are listed for its sitemap and llms.txt,
// and its crawler setting says which AI crawlers its robots.txt keeps out.

// maxRenderKeys bounds the renderings kept per cached page (one per render key: in practice one
// per public base URL).
const maxRenderKeys = 4

// PublicDoc is a published page as a hosted rendering draws it: the page (its product_skus are
// the shown ones, ShownSKUs) and its products in that order.
type PublicDoc struct {
	TenantID   int64
	TenantSlug string
	Page       *Page
	Products   []PublicProduct
}

// Rendered is a rendering of a published page and its strong validator.
type Rendered struct {
	Body []byte
	ETag string
}

// Renderer renders a published page; it is called once per cached read of the page and key.
type Renderer func(ctx context.Context, d *PublicDoc) ([]byte, error)

// PublicRendered answers a read of a published page as render draws it: like PublicJSON it reads
// through the public cache, 404s an unknown, unpublished or another tenant's page, and counts
// the read (a view, and a crawl for a known AI crawler's User-Agent) unless ctx is
// WithoutCounting. The rendering is kept with the cached page under key (the renderer's and its
// settings' name), so it is rendered again only when the page changes or its entry expires. A
// rendering that fails counts nothing.
func (s *Service) PublicRendered(ctx context.Context, tenantSlug, pageSlug, userAgent, key string, render Renderer) (*Rendered, error) {
	e, err := s.publicLookup(ctx, tenantSlug, pageSlug)
	if err != nil {
		return nil, err
	}
	r, kept, err := e.render(ctx, key, render)
	if err != nil {
		return nil, err
	}
	if kept {
		s.cache.grow(e, int64(len(r.Body)))
	}
	s.countRead(ctx, e, userAgent)
	return r, nil
}

// render returns e's rendering under key, rendering it on the first read; kept says a new
// rendering was kept with the entry (its bytes now count in the cache).
func (e *publicEntry) render(ctx context.Context, key string, render Renderer) (r *Rendered, kept bool, err error) {
	e.renderMu.Lock()
	defer e.renderMu.Unlock()
	if r := e.rendered[key]; r != nil {
		return r, false, nil
	}
	body, err := render(ctx, e.doc)
	if err != nil {
		return nil, false, err
	}
	r = &Rendered{Body: body, ETag: StrongETag(body)}
	if e.rendered == nil {
		e.rendered = map[string]*Rendered{}
	}
	if len(e.rendered) < maxRenderKeys {
		e.rendered[key] = r
		kept = true
	}
	return r, kept, nil
}

// PublicCacheStats reports what the public page cache holds.
func (s *Service) PublicCacheStats() PublicCacheStats { return s.cache.stats() }

// PublicCacheTTL is how long a public read is kept in memory (negative: not kept); a CDN may
// keep a public answer as long.
func (s *Service) PublicCacheTTL() time.Duration { return s.opts.PublicCacheTTL }

// StrongETag is a strong entity tag of body: a hash of its bytes.
func StrongETag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

func weakETag(body []byte) string { return "W/" + StrongETag(body) }

// SitePage is a published page in a tenant's site listing.
type SitePage struct {
	Slug      string
	Title     string
	Summary   string // the intro copy's first line, at most maxSummary bytes
	UpdatedAt time.Time
}

// Site is a tenant's published pages (by slug) and what its robots.txt says.
type Site struct {
	TenantID        int64
	Slug            string
	Name            string
	BlockedCrawlers []string // AI crawlers (Crawlers' spelling) the tenant keeps out
	Pages           []SitePage
}

// maxSummary bounds a page's summary in a site listing.
const maxSummary = 300

// PublishedSite lists the published pages of the tenant with that slug, by slug, and its crawler
// setting; with summaries each page's Summary is set. An unknown tenant is a not-found error.
func (s *Service) PublishedSite(ctx context.Context, tenantSlug string, summaries bool) (*Site, error) {
	if !tenantSlugRE.MatchString(tenantSlug) {
		return nil, errs.Coded(errs.ErrNotFound, "not_found", "site not found")
	}
	site := Site{Slug: tenantSlug, Pages: []SitePage{}}
	err := s.pool.QueryRow(ctx, `SELECT id, name, blocked_ai_crawlers FROM tenants WHERE slug = $1`, tenantSlug).
		Scan(&site.TenantID, &site.Name, &site.BlockedCrawlers)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Coded(errs.ErrNotFound, "not_found", "site not found")
	}
	if err != nil {
		return nil, fmt.Errorf("load site %s: %w", tenantSlug, err)
	}
	summaryLen := 0
	if summaries {
		summaryLen = maxSummary * 2
	}
	rows, err := s.pool.Query(ctx, `SELECT slug, title, left(intro_copy, $2), updated_at FROM generated_pages
		WHERE tenant_id = $1 AND published ORDER BY slug`, site.TenantID, summaryLen)
	if err != nil {
		return nil, fmt.Errorf("list published pages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p SitePage
		if err := rows.Scan(&p.Slug, &p.Title, &p.Summary, &p.UpdatedAt); err != nil {
			return nil, fmt.Errorf("list published pages: %w", err)
		}
		if summaries {
			p.Summary = summaryLine(p.Summary)
		}
		site.Pages = append(site.Pages, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list published pages: %w", err)
	}
	return &site, nil
}

// summaryLine is text's first line, whitespace collapsed, cut to maxSummary bytes on a word.
func summaryLine(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if len(line) <= maxSummary {
		return line
	}
	cut := line[:maxSummary]
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return strings.ToValidUTF8(cut, "") + "…"
}

// CrawlerSettings is GET/PUT /api/ai-pages/settings/: the AI crawlers the tenant's robots.txt
// disallows (the others are allowed), and every crawler Cohort knows.
type CrawlerSettings struct {
	BlockedAICrawlers []string `json:"blocked_ai_crawlers"`
	KnownAICrawlers   []string `json:"known_ai_crawlers"`
}

// CrawlerSettingsInput is the body of PUT /api/ai-pages/settings/.
type CrawlerSettingsInput struct {
	BlockedAICrawlers *[]string `json:"blocked_ai_crawlers"`
}

// CanonicalCrawlers checks names against Crawlers (ignoring case) and returns them in Crawlers'
// spelling and order, each once; an unknown name is a validation error of field.
func CanonicalCrawlers(field string, names []string) ([]string, error) {
	blocked := map[string]bool{}
	for _, n := range names {
		i := slices.IndexFunc(Crawlers, func(c string) bool { return strings.EqualFold(c, strings.TrimSpace(n)) })
		if i < 0 {
			return nil, errs.Invalid(field, fmt.Sprintf("unknown AI crawler %q; known: %s", n, strings.Join(Crawlers, ", ")))
		}
		blocked[Crawlers[i]] = true
	}
	out := []string{}
	for _, c := range Crawlers {
		if blocked[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// CrawlerSettings reads the tenant's AI crawler setting.
func (s *Service) CrawlerSettings(ctx context.Context, tenantID int64) (*CrawlerSettings, error) {
	var blocked []string
	err := s.pool.QueryRow(ctx, `SELECT blocked_ai_crawlers FROM tenants WHERE id = $1`, tenantID).Scan(&blocked)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Coded(errs.ErrNotFound, "not_found", "tenant not found")
	}
	if err != nil {
		return nil, fmt.Errorf("load crawler settings: %w", err)
	}
	if blocked == nil {
		blocked = []string{}
	}
	return &CrawlerSettings{BlockedAICrawlers: blocked, KnownAICrawlers: slices.Clone(Crawlers)}, nil
}

// SetCrawlerSettings replaces the tenant's AI crawler setting; an unknown crawler is a 400.
func (s *Service) SetCrawlerSettings(ctx context.Context, tenantID int64, in CrawlerSettingsInput) (*CrawlerSettings, error) {
	if in.BlockedAICrawlers == nil {
		return nil, errs.Invalid("blocked_ai_crawlers", "is required (an empty list allows every AI crawler)")
	}
	blocked, err := CanonicalCrawlers("blocked_ai_crawlers", *in.BlockedAICrawlers)
	if err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET blocked_ai_crawlers = $2, updated_at = $3 WHERE id = $1`, tenantID, blocked, s.now().UTC())
	if err != nil {
		return nil, fmt.Errorf("store crawler settings: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, errs.Coded(errs.ErrNotFound, "not_found", "tenant not found")
	}
	return &CrawlerSettings{BlockedAICrawlers: blocked, KnownAICrawlers: slices.Clone(Crawlers)}, nil
}

// SetBlockedCrawlers replaces the AI crawler setting of the tenant with that slug (cohort tenants
// set --blocked-ai-crawlers) and returns it as stored; an unknown crawler is a validation error.
func (s *Service) SetBlockedCrawlers(ctx context.Context, tenantSlug string, names []string) ([]string, error) {
	blocked, err := CanonicalCrawlers("blocked_ai_crawlers", names)
	if err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET blocked_ai_crawlers = $2, updated_at = $3 WHERE slug = $1`, tenantSlug, blocked, s.now().UTC())
	if err != nil {
		return nil, fmt.Errorf("set tenant %s blocked crawlers: %w", tenantSlug, err)
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("tenant %q: %w", tenantSlug, errs.ErrNotFound)
	}
	return blocked, nil
}
