package segment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/segment/export"
)

// Export limits.
const (
	ExportTTL       = 24 * time.Hour // a ready file (and its links) is kept this long
	MaxExportTraits = 50
	exportBatch     = 10_000
)

// Export mirrors segment_exports; its JSON is the API's export record.
type Export struct {
	ID          int64      `gorm:"primaryKey" json:"export_id"`
	TenantID    int64      `json:"-"`
	SegmentID   int64      `json:"segment_id"`
	Format      string     `json:"format"`
	Traits      []string   `gorm:"type:jsonb;serializer:json" json:"traits"`
	Status      string     `json:"status"`
	RowCount    *int64     `json:"row_count"`
	BlobKey     *string    `json:"-"`
	Error       *string    `json:"error"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	DownloadURL *string    `gorm:"-" json:"download_url"`
}

func (Export) TableName() string { return "segment_exports" }

// ExportInput is the body of POST /api/segments/<id>/export/.
type ExportInput struct {
	Format string   `json:"format"`
	Traits []string `json:"traits"`
}

// CreateExport records a queued export of the segment's current members.
func (s *Service) CreateExport(ctx context.Context, tenantID, segmentID int64, in ExportInput) (*Export, error) {
	if _, _, err := s.head(ctx, tenantID, segmentID); err != nil {
		return nil, err
	}
	f := errs.Fields{}
	format, err := export.ParseFormat(in.Format)
	if in.Format == "" {
		format, err = export.Parquet, nil
	}
	if err != nil {
		f.Add("format", "%s", err.Error())
	}
	if len(in.Traits) > MaxExportTraits {
		f.Add("traits", "at most %d traits", MaxExportTraits)
	}
	seen := map[string]bool{}
	for i, t := range in.Traits {
		switch {
		case strings.TrimSpace(t) == "" || len(t) > ident.MaxNameLen:
			// Blank keys would pass here and fail the export's writer later.
			f.Add(fmt.Sprintf("traits[%d]", i), "must be 1 to %d bytes, not only spaces", ident.MaxNameLen)
		case !utf8.ValidString(t):
			f.Add(fmt.Sprintf("traits[%d]", i), "must be valid UTF-8")
		case t == "user_id" || t == "computed_at" || t == "score":
			f.Add(fmt.Sprintf("traits[%d]", i), "collides with a fixed column")
		case seen[t]:
			f.Add(fmt.Sprintf("traits[%d]", i), "is listed twice")
		case strings.ContainsFunc(t, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			f.Add(fmt.Sprintf("traits[%d]", i), "must not contain control characters")
		}
		seen[t] = true
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	if in.Traits == nil {
		in.Traits = []string{}
	}
	e := &Export{TenantID: tenantID, SegmentID: segmentID, Format: string(format), Traits: in.Traits, Status: "queued", CreatedAt: s.now().UTC()}
	if err := s.db.WithContext(ctx).Omit("RowCount", "BlobKey", "Error", "FinishedAt", "ExpiresAt").Create(e).Error; err != nil {
		return nil, fmt.Errorf("create export: %w", err)
	}
	return e, nil
}

// GetExport returns one of the tenant's exports; with segmentID > 0 it must belong to it.
func (s *Service) GetExport(ctx context.Context, tenantID, segmentID, exportID int64) (*Export, error) {
	var e Export
	q := s.db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenantID, exportID)
	if segmentID > 0 {
		q = q.Where("segment_id = ?", segmentID)
	}
	err := q.Take(&e).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("export %d: %w", exportID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load export %d: %w", exportID, err)
	}
	if e.Traits == nil {
		e.Traits = []string{}
	}
	return &e, nil
}

// Expired reports whether a ready export's file is past its lifetime.
func (e *Export) Expired(now time.Time) bool {
	return e.ExpiresAt != nil && !now.Before(*e.ExpiresAt)
}

// ExportKey is where an export's file lives in the blob store.
func ExportKey(e *Export) string {
	return fmt.Sprintf("exports/t%d/segment-%d-export-%d%s", e.TenantID, e.SegmentID, e.ID, export.Format(e.Format).Ext())
}

// WriteExport streams the segment's members into the export's file in the blob store and marks
// it ready. progress is called every batch (the activity heartbeats there).
func (s *Service) WriteExport(ctx context.Context, tenantID, exportID int64, store blob.Store, progress func(rows int64)) (*Export, error) {
	e, err := s.GetExport(ctx, tenantID, 0, exportID)
	if err != nil {
		return nil, err
	}
	if e.Status == "ready" {
		return e, nil
	}
	segmentType, _, err := s.head(ctx, tenantID, e.SegmentID)
	if err != nil {
		return nil, err
	}
	if err := s.db.WithContext(ctx).Exec(`UPDATE segment_exports SET status = 'running' WHERE tenant_id = ? AND id = ?`, tenantID, e.ID).Error; err != nil {
		return nil, fmt.Errorf("start export: %w", err)
	}
	format := export.Format(e.Format)
	key := ExportKey(e)
	pr, pw := io.Pipe()
	var rowsWritten int64
	go func() {
		err := s.streamMembers(ctx, e, segmentType == KindLookalike, pw, progress, &rowsWritten)
		_ = pw.CloseWithError(err)
	}()
	if _, err := store.Put(ctx, key, pr, format.ContentType()); err != nil {
		_ = pr.CloseWithError(err)
		return nil, fmt.Errorf("write export file: %w", err)
	}
	now := s.now().UTC()
	exp := now.Add(ExportTTL)
	if err := s.db.WithContext(ctx).Exec(`UPDATE segment_exports SET status = 'ready', row_count = ?, blob_key = ?, finished_at = ?, expires_at = ?, error = NULL
		WHERE tenant_id = ? AND id = ?`, rowsWritten, key, now, exp, tenantID, e.ID).Error; err != nil {
		return nil, fmt.Errorf("finish export: %w", err)
	}
	return s.GetExport(ctx, tenantID, 0, exportID)
}

// streamMembers writes every member (in user id order, read in keyset batches from one
// repeatable-read snapshot, so a concurrent recompute never tears the file) to w.
func (s *Service) streamMembers(ctx context.Context, e *Export, withScore bool, w io.Writer, progress func(int64), n *int64) error {
	ew, err := export.NewWriter(w, export.Format(e.Format), export.Options{TraitKeys: e.Traits, WithScore: withScore})
	if err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin export read: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Profiles are joined only when traits are exported. A user without a profile of their own
	// (a load racing the link's merge) has the latest of their linked ids', as segments see it.
	traits, join := "NULL::jsonb", ""
	if len(e.Traits) > 0 {
		traits = `COALESCE(p.traits, (SELECT lp.traits FROM identity_links l
			JOIN profiles lp ON lp.tenant_id = l.tenant_id AND lp.user_id = l.anonymous_id
			WHERE l.tenant_id = m.tenant_id AND l.user_id = m.user_id ORDER BY lp.last_seen_at DESC LIMIT 1))`
		join = "LEFT JOIN profiles p ON p.tenant_id = m.tenant_id AND p.user_id = m.user_id"
	}
	query := `SELECT m.user_id, m.computed_at, m.score, ` + traits + ` FROM segment_members m ` + join + `
		WHERE m.tenant_id = $1 AND m.segment_id = $2 AND m.user_id > $3 ORDER BY m.user_id LIMIT $4`
	after := ""
	for {
		rows, err := tx.Query(ctx, query, e.TenantID, e.SegmentID, after, exportBatch)
		if err != nil {
			return fmt.Errorf("read members: %w", err)
		}
		got := 0
		for rows.Next() {
			var r export.Row
			var traits []byte
			if err := rows.Scan(&r.UserID, &r.ComputedAt, &r.Score, &traits); err != nil {
				rows.Close()
				return fmt.Errorf("read members: %w", err)
			}
			if len(traits) > 0 {
				_ = json.Unmarshal(traits, &r.Traits)
			}
			if err := ew.Write(r); err != nil {
				rows.Close()
				return err
			}
			after = r.UserID
			got++
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read members: %w", err)
		}
		*n += int64(got)
		if progress != nil {
			progress(*n)
		}
		if got < exportBatch {
			break
		}
	}
	return ew.Close()
}

// FailExport records a failed export.
func (s *Service) FailExport(ctx context.Context, tenantID, exportID int64, msg string) error {
	return s.db.WithContext(ctx).Exec(`UPDATE segment_exports SET status = 'error', error = ?, finished_at = ? WHERE tenant_id = ? AND id = ?`,
		truncate(msg, 2000), s.now().UTC(), tenantID, exportID).Error
}
