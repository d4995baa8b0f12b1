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

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
)

const queryColumns = "id, text, active, product_segment_id, created_at, updated_at"

func scanQuery(row pgx.Row) (*AIQuery, error) {
	var q AIQuery
	if err := row.Scan(&q.ID, &q.Text, &q.Active, &q.ProductSegmentID, &q.CreatedAt, &q.UpdatedAt); err != nil {
		return nil, err
	}
	return &q, nil
}

func queryNotFound(id int64) error {
	return errs.Coded(errs.ErrNotFound, "not_found", "AIQuery %d not found", id)
}

// checkLine trims v and adds a field error unless it is 1 to max characters of valid UTF-8 text
// without control characters (no line breaks either).
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

// checkSegment adds a field error unless id is a product segment of the tenant.
func (s *Service) checkSegment(ctx context.Context, f errs.Fields, tenantID int64, id *int64) error {
	if id == nil {
		return nil
	}
	if *id <= 0 {
		f.Add("product_segment_id", "must be the id of one of your product segments")
		return nil
	}
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM product_segments WHERE tenant_id = $1 AND id = $2`, tenantID, *id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		f.Add("product_segment_id", "is not one of your product segments")
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up product segment %d: %w", *id, err)
	}
	return nil
}

// ListQueries returns the tenant's AIQueries, newest first.
func (s *Service) ListQueries(ctx context.Context, tenantID int64) ([]*AIQuery, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+queryColumns+" FROM ai_queries WHERE tenant_id = $1 ORDER BY id DESC", tenantID)
	if err != nil {
		return nil, fmt.Errorf("list AIQueries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*AIQuery, error) { return scanQuery(r) })
	if err != nil {
		return nil, fmt.Errorf("list AIQueries: %w", err)
	}
	if out == nil {
		out = []*AIQuery{}
	}
	return out, nil
}

// CreateQuery stores an AIQuery: text trimmed, 1 to MaxQueryTextLength characters on one line;
// active unless sent false; product_segment_id, when sent, one of the tenant's product segments.
func (s *Service) CreateQuery(ctx context.Context, tenantID int64, in QueryInput) (*AIQuery, error) {
	f := errs.Fields{}
	checkLine(f, "text", &in.Text, MaxQueryTextLength)
	if err := s.checkSegment(ctx, f, tenantID, in.ProductSegmentID); err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	active := in.Active == nil || *in.Active
	now := s.now().UTC()
	q, err := scanQuery(s.pool.QueryRow(ctx, `INSERT INTO ai_queries (tenant_id, text, active, product_segment_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5) RETURNING `+queryColumns, tenantID, in.Text, active, in.ProductSegmentID, now))
	if err != nil {
		return nil, fmt.Errorf("create AIQuery: %w", err)
	}
	return q, nil
}

// GetQuery returns one of the tenant's AIQueries; another tenant's is not found.
func (s *Service) GetQuery(ctx context.Context, tenantID, id int64) (*AIQuery, error) {
	q, err := scanQuery(s.pool.QueryRow(ctx, "SELECT "+queryColumns+" FROM ai_queries WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queryNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load AIQuery %d: %w", id, err)
	}
	return q, nil
}

// UpdateQuery applies a PATCH: text, active, product_segment_id (null removes the restriction).
// Pages already generated keep their content until they are regenerated.
func (s *Service) UpdateQuery(ctx context.Context, tenantID, id int64, in QueryPatch) (*AIQuery, error) {
	f := errs.Fields{}
	if in.Text != nil {
		checkLine(f, "text", in.Text, MaxQueryTextLength)
	}
	var segment *int64
	clearSegment := false
	if raw := bytes.TrimSpace(in.ProductSegmentID); len(raw) > 0 {
		if string(raw) == "null" {
			clearSegment = true
		} else {
			var id int64
			if err := json.Unmarshal(raw, &id); err != nil {
				f.Add("product_segment_id", "must be the integer id of one of your product segments, or null")
			} else {
				segment = &id
			}
		}
	}
	if err := s.checkSegment(ctx, f, tenantID, segment); err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	q, err := scanQuery(s.pool.QueryRow(ctx, `UPDATE ai_queries SET
			text = coalesce($3, text),
			active = coalesce($4, active),
			product_segment_id = CASE WHEN $5 THEN NULL ELSE coalesce($6, product_segment_id) END,
			updated_at = $7
		WHERE tenant_id = $1 AND id = $2 RETURNING `+queryColumns,
		tenantID, id, in.Text, in.Active, clearSegment, segment, s.now().UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queryNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("update AIQuery %d: %w", id, err)
	}
	return q, nil
}

// DeleteQuery removes an AIQuery. Its pages stay (published ones stay online) with query null;
// they can no longer be regenerated, and bulk generation no longer includes them.
func (s *Service) DeleteQuery(ctx context.Context, tenantID, id int64) error {
	return store.DeleteOwned(ctx, s.pool, "ai_queries", tenantID, id, queryNotFound(id))
}
