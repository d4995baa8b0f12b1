// Package pagetemplate holds the page templates of every tenant: a named, tagged list of blocks
// (validated by the block registry, internal/block) that a generated page can be created from
// (internal/page copies a template's blocks when a page is created with template_id).
package pagetemplate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/block"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
)

// Limits of a template.
const (
	MaxNameLength        = 200  // characters of a name
	MaxDescriptionLength = 2000 // characters of a description
	MaxTags              = 20   // tags per template
	MaxTagLength         = 50   // characters of a tag
	MaxTemplates         = 1000 // templates per tenant
	MaxListed            = 1000 // templates a list returns
)

// Template is a page template as the API shows it.
type Template struct {
	ID          int64         `json:"id"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Blocks      []block.Block `json:"blocks"`
	Tags        []string      `json:"tags"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

// Input is the body of POST /api/ai-pages/templates/ and of PATCH .../templates/{id}/ (where
// every field is optional and only those present change). Blocks stay raw so the block registry's
// strict parser reports their errors by path.
type Input struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Blocks      json.RawMessage `json:"blocks"`
	Tags        *[]string       `json:"tags"`
}

// Service stores templates in Postgres (table page_templates).
type Service struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewService builds the service; now is the clock (time.Now when nil).
func NewService(pool *pgxpool.Pool, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, now: now}
}

func notFound(id int64) error {
	return errs.Coded(errs.ErrNotFound, "not_found", "template %d not found", id)
}

// checkText validates one line or paragraph of text.
func checkText(f errs.Fields, field, s string, maxLen int, multiline bool) {
	switch {
	case !utf8.ValidString(s):
		f.Add(field, "must be valid UTF-8 text")
	case utf8.RuneCountInString(s) > maxLen:
		f.Add(field, "must be at most %d characters", maxLen)
	case strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r'))
	}):
		f.Add(field, "must not contain control characters")
	}
}

// normTags trims, lower-cases and de-duplicates tags (keeping the first occurrence's order).
func normTags(f errs.Fields, tags []string) []string {
	if len(tags) > MaxTags {
		f.Add("tags", "must have at most %d tags", MaxTags)
		return nil
	}
	out := make([]string, 0, len(tags))
	seen := map[string]bool{}
	for i, t := range tags {
		t, msg := normalizeTag(t)
		if msg != "" {
			f.Add(fmt.Sprintf("tags[%d]", i), "%s", msg)
			continue
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// normalizeTag is a tag as it is stored and compared (trimmed, inner spaces collapsed, lower
// case), or why it cannot be one.
func normalizeTag(t string) (string, string) {
	valid := utf8.ValidString(t) // before ToLower, which turns invalid bytes into U+FFFD
	t = strings.ToLower(strings.Join(strings.Fields(t), " "))
	switch {
	case t == "":
		return "", "must not be empty"
	case !valid || strings.ContainsFunc(t, unicode.IsControl):
		return "", "must be text without control characters"
	case utf8.RuneCountInString(t) > MaxTagLength:
		return "", fmt.Sprintf("must be at most %d characters", MaxTagLength)
	}
	return t, ""
}

// parsed is a validated Input.
type parsed struct {
	name, description *string
	blocks            []block.Block // nil: not sent
	tags              []string      // nil: not sent
}

func (in Input) parse(create bool) (parsed, error) {
	f := errs.Fields{}
	var p parsed
	if in.Name != nil {
		n := strings.TrimSpace(*in.Name)
		if n == "" {
			f.Add("name", "must not be blank")
		} else {
			checkText(f, "name", n, MaxNameLength, false)
		}
		p.name = &n
	} else if create {
		f.Add("name", "is required")
	}
	if in.Description != nil {
		checkText(f, "description", *in.Description, MaxDescriptionLength, true)
		p.description = in.Description
	}
	if in.Tags != nil {
		p.tags = normTags(f, *in.Tags)
	}
	raw := bytes.TrimSpace(in.Blocks)
	blocksSent := len(raw) > 0
	if !blocksSent && create {
		f.Add("blocks", "is required: an array of {type, props} (GET /api/ai-pages/blocks/ lists the types)")
	}
	if err := f.Err(); err != nil {
		return parsed{}, err
	}
	if blocksSent {
		bs, err := block.ParseBlocks(raw)
		if err != nil {
			return parsed{}, err
		}
		if bs, err = block.Validate("blocks", bs); err != nil {
			return parsed{}, err
		}
		p.blocks = bs
	}
	return p, nil
}

const columns = `id, name, description, blocks, tags, created_at, updated_at`

func scan(row pgx.Row) (*Template, error) {
	var t Template
	var raw []byte
	if err := row.Scan(&t.ID, &t.Name, &t.Description, &raw, &t.Tags, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &t.Blocks); err != nil {
		return nil, fmt.Errorf("decode template %d blocks: %w", t.ID, err)
	}
	if t.Blocks == nil {
		t.Blocks = []block.Block{}
	}
	if t.Tags == nil {
		t.Tags = []string{}
	}
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return &t, nil
}

// List returns the tenant's templates, newest first; tag (when not empty) keeps those carrying
// it (compared trimmed and case-insensitively).
func (s *Service) List(ctx context.Context, tenantID int64, tag string) ([]*Template, error) {
	if strings.TrimSpace(tag) == "" {
		tag = ""
	} else {
		var msg string
		if tag, msg = normalizeTag(tag); msg != "" {
			return nil, errs.Invalid("tag", msg)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM page_templates
		WHERE tenant_id = $1 AND ($2 = '' OR tags @> ARRAY[$2]::text[])
		ORDER BY id DESC LIMIT $3`, tenantID, tag, MaxListed)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	out := []*Template{}
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return out, nil
}

// Get returns one template; another tenant's is errs.ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id int64) (*Template, error) {
	t, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM page_templates WHERE tenant_id = $1 AND id = $2`, tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load template %d: %w", id, err)
	}
	return t, nil
}

// Create validates and stores a template: name and blocks are required, blocks are checked
// against the block registry (blocks without an id get one). Beyond MaxTemplates per tenant it is
// 409 template_limit_reached.
func (s *Service) Create(ctx context.Context, tenantID int64, in Input) (*Template, error) {
	p, err := in.parse(true)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(p.blocks)
	if err != nil {
		return nil, fmt.Errorf("encode blocks: %w", err)
	}
	desc := ""
	if p.description != nil {
		desc = *p.description
	}
	tags := p.tags
	if tags == nil {
		tags = []string{}
	}
	var t *Template
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Serialise a tenant's creates so the count check holds (as page creates do).
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, tenantID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock tenant %d templates: %w", tenantID, err)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM page_templates WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
			return fmt.Errorf("count templates: %w", err)
		}
		if n >= MaxTemplates {
			return errs.Coded(errs.ErrConflict, "template_limit_reached", "a tenant may hold at most %d templates", MaxTemplates)
		}
		now := s.now().UTC()
		t, err = scan(tx.QueryRow(ctx, `INSERT INTO page_templates (tenant_id, name, description, blocks, tags, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING `+columns, tenantID, *p.name, desc, string(raw), tags, now))
		if err != nil {
			return fmt.Errorf("create template: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Update applies the fields of in that are present (name, description, blocks, tags), validated
// as on create.
func (s *Service) Update(ctx context.Context, tenantID, id int64, in Input) (*Template, error) {
	p, err := in.parse(false)
	if err != nil {
		return nil, err
	}
	var raw *string
	if p.blocks != nil {
		b, err := json.Marshal(p.blocks)
		if err != nil {
			return nil, fmt.Errorf("encode blocks: %w", err)
		}
		s := string(b)
		raw = &s
	}
	t, err := scan(s.pool.QueryRow(ctx, `UPDATE page_templates SET
			name = coalesce($3, name),
			description = coalesce($4, description),
			blocks = coalesce($5::jsonb, blocks),
			tags = coalesce($6, tags),
			updated_at = $7
		WHERE tenant_id = $1 AND id = $2 RETURNING `+columns,
		tenantID, id, p.name, p.description, raw, p.tags, s.now().UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("update template %d: %w", id, err)
	}
	return t, nil
}

// Delete removes a template; pages created from it keep their blocks.
func (s *Service) Delete(ctx context.Context, tenantID, id int64) error {
	return store.DeleteOwned(ctx, s.pool, "page_templates", tenantID, id, notFound(id))
}
