package page

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"
	"github.com/cohort-dev/cohort/internal/store"
)

const pageColumns = "id, query_id, slug, title, published, intro_copy, product_skus, blocks, status, last_error, pending_embeddings, generated_at, view_count, last_ai_crawl_at, version, created_at, updated_at"

func decodeBlocks(raw []byte) ([]block.Block, error) {
	out := []block.Block{}
	if len(raw) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode blocks: %w", err)
	}
	return out, nil
}

func encodeBlocks(b []block.Block) ([]byte, error) {
	if b == nil {
		b = []block.Block{}
	}
	return json.Marshal(b)
}

func scanPage(row pgx.Row) (*Page, error) {
	var p Page
	var blocks []byte
	if err := row.Scan(&p.ID, &p.Query, &p.Slug, &p.Title, &p.Published, &p.IntroCopy, &p.ProductSKUs, &blocks,
		&p.Status, &p.LastError, &p.PendingEmbeddings, &p.GeneratedAt, &p.ViewCount, &p.LastAICrawlAt, &p.Version, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return nil, err
	}
	if p.ProductSKUs == nil {
		p.ProductSKUs = []string{}
	}
	var err error
	if p.Blocks, err = decodeBlocks(blocks); err != nil {
		return nil, err
	}
	p.AICrawls = map[string]int64{}
	return &p, nil
}

func pageNotFound(id int64) error {
	return errs.Coded(errs.ErrNotFound, "not_found", "page %d not found", id)
}

func slugTaken(slug string) error {
	return errs.Coded(errs.ErrConflict, "slug_taken", "slug %q is taken by another of your pages", slug)
}

func isSlugConflict(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "generated_pages_slug_key"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

func generationUnavailable(err error) error {
	return errors.Join(errs.Coded(errs.ErrUnavailable, "generation_unavailable",
		"page generation could not be started: the workflow service is unavailable; try again shortly"), err)
}

// startGeneration starts the page's generation; a failure is generationUnavailable.
func (s *Service) startGeneration(ctx context.Context, tenantID, pageID int64) error {
	if err := s.gen.StartGeneration(ctx, tenantID, pageID); err != nil {
		return generationUnavailable(err)
	}
	return nil
}

// startFailedMessage is the last_error of a page whose generation could not be started.
const startFailedMessage = "generation could not be started: the workflow service was unavailable"

// ListPages returns the tenant's pages, newest first, without intro_copy, product_skus and blocks.
func (s *Service) ListPages(ctx context.Context, tenantID int64) ([]*PageSummary, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, query_id, slug, title, published, status, last_error, generated_at,
			view_count, last_ai_crawl_at, version, created_at, updated_at
		FROM generated_pages WHERE tenant_id = $1 ORDER BY id DESC`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list pages: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*PageSummary, error) {
		var p PageSummary
		err := r.Scan(&p.ID, &p.Query, &p.Slug, &p.Title, &p.Published, &p.Status, &p.LastError, &p.GeneratedAt,
			&p.ViewCount, &p.LastAICrawlAt, &p.Version, &p.CreatedAt, &p.UpdatedAt)
		p.ViewCount += s.counter.pending(p.ID)
		return &p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list pages: %w", err)
	}
	if out == nil {
		out = []*PageSummary{}
	}
	return out, nil
}

// GetPage returns one of the tenant's pages with its blocks and ai_crawls; view_count and
// ai_crawls include the reads this replica counted and has not written yet.
func (s *Service) GetPage(ctx context.Context, tenantID, id int64) (*Page, error) {
	p, err := scanPage(s.pool.QueryRow(ctx, "SELECT "+pageColumns+" FROM generated_pages WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, pageNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load page %d: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, "SELECT crawler, count FROM page_ai_crawls WHERE tenant_id = $1 AND page_id = $2", tenantID, id)
	if err != nil {
		return nil, fmt.Errorf("load page %d crawls: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("load page %d crawls: %w", id, err)
		}
		p.AICrawls[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load page %d crawls: %w", id, err)
	}
	s.addPending(p)
	return p, nil
}

// addPending adds the reads counted here and not yet written to a page read from the database.
func (s *Service) addPending(p *Page) {
	p.ViewCount += s.counter.pending(p.ID)
	crawls, at := s.counter.pendingCrawls(p.ID, Crawlers)
	for name, n := range crawls {
		p.AICrawls[name] += n
	}
	if !at.IsZero() && (p.LastAICrawlAt == nil || at.After(*p.LastAICrawlAt)) {
		p.LastAICrawlAt = &at
	}
}

// lockTenantPages takes the tenant's page lock for the transaction (its tenants row, FOR NO KEY
// UPDATE: other tenant-owned inserts, which take KEY SHARE, go on) and returns its page limit and
// how many pages it has. Creates of one tenant's pages are serialised by it, so the limit holds
// and derived slugs do not race.
func lockTenantPages(ctx context.Context, tx pgx.Tx, tenantID int64) (limit, count int, err error) {
	err = tx.QueryRow(ctx, `SELECT page_limit FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, tenantID).Scan(&limit)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("lock tenant %d pages: %w", tenantID, err)
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM generated_pages WHERE tenant_id = $1`, tenantID).Scan(&count); err != nil {
		return 0, 0, fmt.Errorf("count tenant %d pages: %w", tenantID, err)
	}
	return limit, count, nil
}

func pageLimitReached(limit int) error {
	return errs.Coded(errs.ErrForbidden, "page_limit_reached", "your page limit of %d pages is reached; delete pages or ask for a higher limit", limit)
}

// takenSlugs loads the tenant's slugs that start with the stem of base.
func takenSlugs(ctx context.Context, tx pgx.Tx, tenantID int64, base string, into map[string]bool) error {
	rows, err := tx.Query(ctx, `SELECT slug FROM generated_pages WHERE tenant_id = $1 AND slug LIKE $2`, tenantID, slugStem(base)+"%")
	if err != nil {
		return fmt.Errorf("load slugs: %w", err)
	}
	slugs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("load slugs: %w", err)
	}
	for _, sl := range slugs {
		into[sl] = true
	}
	return nil
}

// CreatePage records a page for one of the tenant's AIQueries (status generating) and starts its
// generation. A page made from a template (template_id) starts ready with the template's blocks
// and starts no generation; it needs no AIQuery, and without one the template's name stands in
// for the query text below. The slug is derived from the query text when not sent (made unique with -2, -3
// ...); a slug sent must be free (409 slug_taken). The title defaults to the query text;
// published to false. Beyond the tenant's page limit it is 403 page_limit_reached. When the
// generation cannot be started the page is removed again and the error is 503
// generation_unavailable.
func (s *Service) CreatePage(ctx context.Context, tenantID int64, in CreateInput) (*Page, error) {
	f := errs.Fields{}
	if in.Query == nil && in.TemplateID == nil {
		f.Add("query", "is required (unless template_id is sent): the id of one of your AIQueries")
	} else if in.Query != nil && *in.Query <= 0 {
		f.Add("query", "must be the id of one of your AIQueries")
	}
	if in.Slug != nil {
		if msg := checkSlug(*in.Slug); msg != "" {
			f.Add("slug", "%s", msg)
		}
	}
	if in.Title != nil {
		checkLine(f, "title", in.Title, MaxTitleLength)
	}
	if in.TemplateID != nil && *in.TemplateID <= 0 {
		f.Add("template_id", "must be the id of one of your page templates")
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	fromTemplate := in.TemplateID != nil
	if s.gen == nil && !fromTemplate {
		return nil, generationUnavailable(errors.New("no generator in this process"))
	}
	// queryText names the page (its title and slug when not sent): the AIQuery's text, or for a
	// page made from a template without a query, the template's name.
	var queryText string
	if in.Query != nil {
		err := s.pool.QueryRow(ctx, `SELECT text FROM ai_queries WHERE tenant_id = $1 AND id = $2`, tenantID, *in.Query).Scan(&queryText)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, errs.Invalid("query", "is not one of your AIQueries")
		}
		if err != nil {
			return nil, fmt.Errorf("load AIQuery %d: %w", *in.Query, err)
		}
		if err := checkSearchable(*in.Query, queryText); err != nil {
			return nil, err
		}
	} else {
		err := s.pool.QueryRow(ctx, `SELECT name FROM page_templates WHERE tenant_id = $1 AND id = $2`, tenantID, *in.TemplateID).Scan(&queryText)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, errs.Invalid("template_id", "is not one of your page templates")
		}
		if err != nil {
			return nil, fmt.Errorf("load template %d: %w", *in.TemplateID, err)
		}
	}
	title := queryText
	if in.Title != nil {
		title = *in.Title
	}
	published := in.Published != nil && *in.Published
	var p *Page
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		limit, count, err := lockTenantPages(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		if count >= limit {
			return pageLimitReached(limit)
		}
		slug := ""
		if in.Slug != nil {
			slug = *in.Slug
		} else {
			base := deriveSlug(queryText)
			taken := map[string]bool{}
			if err := takenSlugs(ctx, tx, tenantID, base, taken); err != nil {
				return err
			}
			slug = uniqueSlug(base, taken)
		}
		now := s.now().UTC()
		p, err = scanPage(tx.QueryRow(ctx, `INSERT INTO generated_pages (tenant_id, query_id, slug, title, published, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, 'generating', $6, $6) RETURNING `+pageColumns,
			tenantID, in.Query, slug, title, published, now))
		switch {
		case isSlugConflict(err):
			return slugTaken(slug)
		case isForeignKeyViolation(err):
			return errs.Invalid("query", "is not one of your AIQueries")
		case err != nil:
			return fmt.Errorf("create page: %w", err)
		}
		if fromTemplate {
			p, err = s.copyTemplate(ctx, tx, tenantID, p.ID, *in.TemplateID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s.cache.invalidate()
	if fromTemplate {
		return p, nil
	}
	// A client that goes away must not leave a page generating with nothing started (Detached).
	err = startjob.RecordStartUndo(ctx, startjob.Detached, nil,
		func(ctx context.Context) error { return s.startGeneration(ctx, tenantID, p.ID) },
		func(ctx context.Context) error {
			if _, err := s.pool.Exec(ctx, `DELETE FROM generated_pages WHERE tenant_id = $1 AND id = $2`, tenantID, p.ID); err != nil {
				return fmt.Errorf("remove page %d after the failed start: %w", p.ID, err)
			}
			s.cache.invalidate()
			return nil
		})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// copyTemplate writes the blocks of the tenant's template templateID to the new page pageID (new
// block ids, validated again by the block registry) as its first version (source patch), and
// marks the page ready. A template that is not the tenant's is a 400 on template_id.
func (s *Service) copyTemplate(ctx context.Context, tx pgx.Tx, tenantID, pageID, templateID int64) (*Page, error) {
	var raw []byte
	err := tx.QueryRow(ctx, `SELECT blocks FROM page_templates WHERE tenant_id = $1 AND id = $2`, tenantID, templateID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Invalid("template_id", "is not one of your page templates")
	}
	if err != nil {
		return nil, fmt.Errorf("load template %d: %w", templateID, err)
	}
	blocks, err := block.ParseBlocksAt("template.blocks", raw)
	if err != nil {
		return nil, fmt.Errorf("read template %d blocks: %w", templateID, err)
	}
	for i := range blocks {
		blocks[i].ID = ""
	}
	if blocks, err = block.Validate("template.blocks", blocks); err != nil {
		return nil, fmt.Errorf("template %d blocks no longer match the block registry: %w", templateID, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE generated_pages SET status = 'ready' WHERE tenant_id = $1 AND id = $2`, tenantID, pageID); err != nil {
		return nil, fmt.Errorf("mark page %d ready: %w", pageID, err)
	}
	return s.writeContent(ctx, tx, tenantID, pageID, content{blocks: blocks}, SourcePatch, fmt.Sprintf("created from template %d", templateID))
}

func isForeignKeyViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23503"
}

// parseBlocks decodes and validates a blocks value of a request against the registry, its errors
// keyed "blocks[2].props.headline".
func parseBlocks(raw json.RawMessage) ([]block.Block, error) {
	bl, err := block.ParseBlocks(raw)
	if err != nil {
		return nil, err
	}
	return block.Validate("blocks", bl)
}

// PatchPage applies a PATCH of slug, title, published and/or blocks. Blocks are validated against
// the block registry (400 with the path of each error, for example blocks[2].props.headline;
// blocks without an id get one); blocks that differ from the page's store a version (source
// patch). A slug taken by another page is 409 slug_taken.
func (s *Service) PatchPage(ctx context.Context, tenantID, id int64, in PatchInput) (*Page, error) {
	f := errs.Fields{}
	if in.Slug != nil {
		if msg := checkSlug(*in.Slug); msg != "" {
			f.Add("slug", "%s", msg)
		}
	}
	if in.Title != nil {
		checkLine(f, "title", in.Title, MaxTitleLength)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	var blocks []block.Block
	if len(bytes.TrimSpace(in.Blocks)) > 0 {
		var err error
		if blocks, err = parseBlocks(in.Blocks); err != nil {
			return nil, err
		}
	}
	var out *Page
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := scanPage(tx.QueryRow(ctx, "SELECT "+pageColumns+" FROM generated_pages WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenantID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return pageNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("load page %d: %w", id, err)
		}
		slug, title, published := cur.Slug, cur.Title, cur.Published
		if in.Slug != nil {
			slug = *in.Slug
		}
		if in.Title != nil {
			title = *in.Title
		}
		if in.Published != nil {
			published = *in.Published
		}
		blocksChanged := false
		if blocks != nil {
			a, _ := encodeBlocks(blocks)
			b, _ := encodeBlocks(cur.Blocks)
			blocksChanged = !bytes.Equal(a, b)
		}
		if slug == cur.Slug && title == cur.Title && published == cur.Published && !blocksChanged {
			out = cur
			return nil
		}
		now := s.now().UTC()
		out, err = scanPage(tx.QueryRow(ctx, `UPDATE generated_pages SET slug = $3, title = $4, published = $5, updated_at = $6
			WHERE tenant_id = $1 AND id = $2 RETURNING `+pageColumns, tenantID, id, slug, title, published, now))
		if isSlugConflict(err) {
			return slugTaken(slug)
		}
		if err != nil {
			return fmt.Errorf("update page %d: %w", id, err)
		}
		if blocksChanged {
			out, err = s.writeContent(ctx, tx, tenantID, id, content{blocks: blocks}, SourcePatch, "")
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.cache.invalidate()
	return s.withCrawls(ctx, tenantID, out)
}

// withCrawls completes a page read in a write with its ai_crawls and pending counts.
func (s *Service) withCrawls(ctx context.Context, tenantID int64, p *Page) (*Page, error) {
	full, err := s.GetPage(ctx, tenantID, p.ID)
	if err != nil {
		return nil, err
	}
	return full, nil
}

// DeletePage removes a page with its versions and crawl counts.
func (s *Service) DeletePage(ctx context.Context, tenantID, id int64) error {
	if err := store.DeleteOwned(ctx, s.pool, "generated_pages", tenantID, id, pageNotFound(id)); err != nil {
		return err
	}
	s.cache.invalidate()
	return nil
}

// content is a change of a page's content; nil fields keep the page's.
type content struct {
	blocks      []block.Block // validated; required
	title       *string
	introCopy   *string
	productSKUs []string
	generated   bool // a generation's result: status ready, generated_at, last_error cleared
}

// writeContent writes validated content to a page and stores it as the page's next version, in
// tx; the caller holds or takes the page's row lock with the UPDATE. Versions beyond
// KeptVersions are pruned.
func (s *Service) writeContent(ctx context.Context, tx pgx.Tx, tenantID, id int64, c content, source, message string) (*Page, error) {
	raw, err := encodeBlocks(c.blocks)
	if err != nil {
		return nil, fmt.Errorf("encode blocks: %w", err)
	}
	now := s.now().UTC()
	p, err := scanPage(tx.QueryRow(ctx, `UPDATE generated_pages SET
			blocks = $3,
			title = coalesce($4, title),
			intro_copy = coalesce($5, intro_copy),
			product_skus = coalesce($6, product_skus),
			status = CASE WHEN $7 THEN 'ready' ELSE status END,
			last_error = CASE WHEN $7 THEN NULL ELSE last_error END,
			generated_at = CASE WHEN $7 THEN $8 ELSE generated_at END,
			version = version + 1,
			updated_at = $8
		WHERE tenant_id = $1 AND id = $2 RETURNING `+pageColumns,
		tenantID, id, string(raw), c.title, c.introCopy, c.productSKUs, c.generated, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, pageNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("update page %d content: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO page_versions (tenant_id, page_id, n, source, message, title, intro_copy, product_skus, blocks, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		tenantID, id, p.Version, source, truncate(message, MaxMessageLength), p.Title, p.IntroCopy, p.ProductSKUs, string(raw), now); err != nil {
		return nil, fmt.Errorf("store page %d version %d: %w", id, p.Version, err)
	}
	if p.Version > KeptVersions {
		if _, err := tx.Exec(ctx, `DELETE FROM page_versions WHERE tenant_id = $1 AND page_id = $2 AND n <= $3`,
			tenantID, id, p.Version-KeptVersions); err != nil {
			return nil, fmt.Errorf("prune page %d versions: %w", id, err)
		}
	}
	return p, nil
}

// checkSKUs checks the SKUs of generated content.
func checkSKUs(f errs.Fields, skus []string) {
	if len(skus) > MaxProductSKUs {
		f.Add("product_skus", "must have at most %d SKUs", MaxProductSKUs)
		return
	}
	for i, sku := range skus {
		if sku == "" || len(sku) > MaxSKULength || !utf8.ValidString(sku) || strings.ContainsFunc(sku, unicode.IsControl) {
			f.Add(fmt.Sprintf("product_skus[%d]", i), "must be a SKU of 1 to %d bytes", MaxSKULength)
		}
	}
}

func checkIntro(f errs.Fields, s string) {
	switch {
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		f.Add("intro_copy", "must be valid UTF-8 text")
	case utf8.RuneCountInString(s) > MaxIntroCopyLength:
		f.Add("intro_copy", "must be at most %d characters", MaxIntroCopyLength)
	}
}

// SaveGenerated writes a generation's result to a page: intro copy, SKUs and blocks (validated
// against the block registry: an invalid result is a *errs.ValidationError and nothing is
// written), the title when given; status ready, generated_at now, last_error cleared; and stores
// a version (source generation). A page deleted meanwhile is errs.ErrNotFound.
func (s *Service) SaveGenerated(ctx context.Context, tenantID, pageID int64, g GeneratedContent) error {
	f := errs.Fields{}
	checkIntro(f, g.IntroCopy)
	checkSKUs(f, g.ProductSKUs)
	if g.Title != nil {
		checkLine(f, "title", g.Title, MaxTitleLength)
	}
	if err := f.Err(); err != nil {
		return err
	}
	blocks, err := block.Validate("blocks", g.Blocks)
	if err != nil {
		return err
	}
	skus := g.ProductSKUs
	if skus == nil {
		skus = []string{}
	}
	intro := g.IntroCopy
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := s.writeContent(ctx, tx, tenantID, pageID, content{blocks: blocks, title: g.Title, introCopy: &intro, productSKUs: skus, generated: true}, SourceGeneration, "generated")
		return err
	})
	if err != nil {
		return err
	}
	s.cache.invalidate()
	return nil
}

// MarkGenerating records that a generation of the page was requested or runs (status generating,
// last_error cleared).
func (s *Service) MarkGenerating(ctx context.Context, tenantID, pageID int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE generated_pages SET status = 'generating', last_error = NULL, updated_at = $3
		WHERE tenant_id = $1 AND id = $2`, tenantID, pageID, s.now().UTC())
	if err != nil {
		return fmt.Errorf("mark page %d generating: %w", pageID, err)
	}
	if tag.RowsAffected() == 0 {
		return pageNotFound(pageID)
	}
	s.cache.invalidate()
	return nil
}

// MarkGenerationFailed records a failed generation: status error and msg in last_error; the
// page keeps its content. A page deleted meanwhile is errs.ErrNotFound.
func (s *Service) MarkGenerationFailed(ctx context.Context, tenantID, pageID int64, msg string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE generated_pages SET status = 'error', last_error = $3, updated_at = $4
		WHERE tenant_id = $1 AND id = $2`, tenantID, pageID, truncate(msg, MaxErrorLength), s.now().UTC())
	if err != nil {
		return fmt.Errorf("record page %d failure: %w", pageID, err)
	}
	if tag.RowsAffected() == 0 {
		return pageNotFound(pageID)
	}
	s.cache.invalidate()
	return nil
}

// GenerationTarget returns what a generation of the page works from: its AIQuery's text and
// product segment. A page whose query was deleted is a conflict (code query_deleted).
func (s *Service) GenerationTarget(ctx context.Context, tenantID, pageID int64) (*GenerationTarget, error) {
	t := GenerationTarget{TenantID: tenantID, PageID: pageID}
	var queryID *int64
	var text *string
	err := s.pool.QueryRow(ctx, `SELECT g.slug, g.title, g.query_id, q.text, q.product_segment_id
		FROM generated_pages g LEFT JOIN ai_queries q ON q.tenant_id = g.tenant_id AND q.id = g.query_id
		WHERE g.tenant_id = $1 AND g.id = $2`, tenantID, pageID).Scan(&t.Slug, &t.Title, &queryID, &text, &t.ProductSegmentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, pageNotFound(pageID)
	}
	if err != nil {
		return nil, fmt.Errorf("load page %d: %w", pageID, err)
	}
	if queryID == nil || text == nil {
		return nil, queryDeleted(pageID)
	}
	t.QueryID, t.QueryText = *queryID, *text
	return &t, nil
}

func queryDeleted(pageID int64) error {
	return errs.Coded(errs.ErrConflict, "query_deleted", "page %d has no AIQuery any more (it was deleted), so it cannot be generated again", pageID)
}

// Regenerate marks the page generating and starts (or joins) its generation. A page whose
// AIQuery was deleted is 409 query_deleted. When the generation cannot be started the page goes
// to status error with the reason in last_error, and the error is 503 generation_unavailable.
func (s *Service) Regenerate(ctx context.Context, tenantID, pageID int64) error {
	var queryID *int64
	err := s.pool.QueryRow(ctx, `SELECT query_id FROM generated_pages WHERE tenant_id = $1 AND id = $2`, tenantID, pageID).Scan(&queryID)
	if errors.Is(err, pgx.ErrNoRows) {
		return pageNotFound(pageID)
	}
	if err != nil {
		return fmt.Errorf("load page %d: %w", pageID, err)
	}
	if queryID == nil {
		return queryDeleted(pageID)
	}
	if s.gen == nil {
		return generationUnavailable(errors.New("no generator in this process"))
	}
	return startjob.RecordStartUndo(ctx, startjob.Detached,
		func(ctx context.Context) error { return s.MarkGenerating(ctx, tenantID, pageID) },
		func(ctx context.Context) error { return s.startGeneration(ctx, tenantID, pageID) },
		func(ctx context.Context) error {
			if err := s.MarkGenerationFailed(ctx, tenantID, pageID, startFailedMessage); err != nil && !errors.Is(err, errs.ErrNotFound) {
				return err
			}
			return nil
		})
}

// ListVersions returns the page's stored versions, newest first.
func (s *Service) ListVersions(ctx context.Context, tenantID, pageID int64) ([]*Version, error) {
	if err := s.pageExists(ctx, tenantID, pageID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT n, source, message, jsonb_array_length(blocks), created_at
		FROM page_versions WHERE tenant_id = $1 AND page_id = $2 ORDER BY n DESC`, tenantID, pageID)
	if err != nil {
		return nil, fmt.Errorf("list page %d versions: %w", pageID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Version, error) {
		var v Version
		return &v, r.Scan(&v.N, &v.Source, &v.Message, &v.BlockCount, &v.CreatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("list page %d versions: %w", pageID, err)
	}
	if out == nil {
		out = []*Version{}
	}
	return out, nil
}

func (s *Service) pageExists(ctx context.Context, tenantID, pageID int64) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM generated_pages WHERE tenant_id = $1 AND id = $2`, tenantID, pageID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return pageNotFound(pageID)
	}
	if err != nil {
		return fmt.Errorf("load page %d: %w", pageID, err)
	}
	return nil
}

func versionNotFound(pageID int64, n int) error {
	return errs.Coded(errs.ErrNotFound, "not_found", "page %d has no version %d", pageID, n)
}

func scanVersionDetail(row pgx.Row) (*VersionDetail, error) {
	var v VersionDetail
	var blocks []byte
	if err := row.Scan(&v.N, &v.Source, &v.Message, &v.CreatedAt, &v.Title, &v.IntroCopy, &v.ProductSKUs, &blocks); err != nil {
		return nil, err
	}
	var err error
	if v.Blocks, err = decodeBlocks(blocks); err != nil {
		return nil, err
	}
	if v.ProductSKUs == nil {
		v.ProductSKUs = []string{}
	}
	v.BlockCount = len(v.Blocks)
	return &v, nil
}

const versionColumns = "n, source, message, created_at, title, intro_copy, product_skus, blocks"

// GetVersion returns one stored version of the page with its content.
func (s *Service) GetVersion(ctx context.Context, tenantID, pageID int64, n int) (*VersionDetail, error) {
	if err := s.pageExists(ctx, tenantID, pageID); err != nil {
		return nil, err
	}
	v, err := scanVersionDetail(s.pool.QueryRow(ctx, "SELECT "+versionColumns+" FROM page_versions WHERE tenant_id = $1 AND page_id = $2 AND n = $3",
		tenantID, pageID, n))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, versionNotFound(pageID, n)
	}
	if err != nil {
		return nil, fmt.Errorf("load page %d version %d: %w", pageID, n, err)
	}
	return v, nil
}

// RestoreVersion puts a stored version's blocks, title, intro copy and SKUs back on the page and
// stores that as a new version (source restore): an undo that can itself be undone. A version
// whose blocks the registry no longer accepts is 400 version_incompatible.
func (s *Service) RestoreVersion(ctx context.Context, tenantID, pageID int64, n int) (*Page, error) {
	var out *Page
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM generated_pages WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, tenantID, pageID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return pageNotFound(pageID)
		}
		if err != nil {
			return fmt.Errorf("load page %d: %w", pageID, err)
		}
		v, err := scanVersionDetail(tx.QueryRow(ctx, "SELECT "+versionColumns+" FROM page_versions WHERE tenant_id = $1 AND page_id = $2 AND n = $3",
			tenantID, pageID, n))
		if errors.Is(err, pgx.ErrNoRows) {
			return versionNotFound(pageID, n)
		}
		if err != nil {
			return fmt.Errorf("load page %d version %d: %w", pageID, n, err)
		}
		blocks, err := block.Validate("blocks", v.Blocks)
		if err != nil {
			var ve *errs.ValidationError
			if errors.As(err, &ve) {
				return &errs.ValidationError{Code: "version_incompatible", Msg: fmt.Sprintf("version %d no longer matches the block registry", n), Fields: ve.Fields}
			}
			return err
		}
		out, err = s.writeContent(ctx, tx, tenantID, pageID, content{blocks: blocks, title: &v.Title, introCopy: &v.IntroCopy, productSKUs: v.ProductSKUs},
			SourceRestore, fmt.Sprintf("restored version %d", n))
		return err
	})
	if err != nil {
		return nil, err
	}
	s.cache.invalidate()
	return s.withCrawls(ctx, tenantID, out)
}

// ApplyBuild writes the build agent's result: blocks (validated against the registry), and the
// title and intro copy when not nil, as a new version (source build) carrying message. It is
// optimistic: when the page's version is no longer baseVersion (someone changed it since the
// agent read it) nothing is written and the error is a conflict (code version_conflict).
func (s *Service) ApplyBuild(ctx context.Context, tenantID, pageID int64, baseVersion int, blocks []block.Block, title, introCopy *string, message string) (*Page, error) {
	f := errs.Fields{}
	if title != nil {
		checkLine(f, "title", title, MaxTitleLength)
	}
	if introCopy != nil {
		checkIntro(f, *introCopy)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	valid, err := block.Validate("blocks", blocks)
	if err != nil {
		return nil, err
	}
	var out *Page
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM generated_pages WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, tenantID, pageID).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			return pageNotFound(pageID)
		}
		if err != nil {
			return fmt.Errorf("load page %d: %w", pageID, err)
		}
		if version != baseVersion {
			return errs.Coded(errs.ErrConflict, "version_conflict", "page %d changed since version %d (it is at version %d); read it again", pageID, baseVersion, version)
		}
		out, err = s.writeContent(ctx, tx, tenantID, pageID, content{blocks: valid, title: title, introCopy: introCopy}, SourceBuild, message)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.cache.invalidate()
	return s.withCrawls(ctx, tenantID, out)
}

// PageLimit returns the tenant's page limit.
func (s *Service) PageLimit(ctx context.Context, tenantID int64) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT page_limit FROM tenants WHERE id = $1`, tenantID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("load tenant %d page limit: %w", tenantID, err)
	}
	return n, nil
}

// SetPageLimit sets how many pages a tenant (by slug) may hold; pages beyond a lowered limit
// stay, but no page is created until the tenant is below it again.
func (s *Service) SetPageLimit(ctx context.Context, tenantSlug string, limit int) error {
	if limit < 0 || limit > MaxPageLimit {
		return errs.Invalid("page_limit", fmt.Sprintf("must be from 0 to %d", MaxPageLimit))
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET page_limit = $2, updated_at = $3 WHERE slug = $1`, tenantSlug, limit, s.now().UTC())
	if err != nil {
		return fmt.Errorf("set tenant %s page limit: %w", tenantSlug, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenant %q: %w", tenantSlug, errs.ErrNotFound)
	}
	return nil
}
