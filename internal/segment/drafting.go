package segment

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/cohort-dev/cohort/internal/segment/draft"
)

// Hints is the tenant's vocabulary for drafting: event types by volume (from the ingestion
// rollups), payload keys of recent events of the top types, and profile trait keys.
func (s *Service) Hints(ctx context.Context, tenantID int64) (draft.Hints, error) {
	h := draft.Hints{Properties: map[string][]string{}}
	collect := func(sql string, args ...any) ([]string, error) {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("load drafting hints: %w", err)
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	var err error
	h.EventTypes, err = collect(`SELECT event_type FROM ingestion_hourly WHERE tenant_id = $1
		GROUP BY event_type ORDER BY sum(event_count) DESC, event_type LIMIT 30`, tenantID)
	if err != nil {
		return h, err
	}
	for i, et := range h.EventTypes {
		if i == 10 {
			break
		}
		keys, err := collect(`SELECT DISTINCT k FROM (SELECT payload FROM warehouse.events WHERE tenant_id = $1 AND event_type = $2
			ORDER BY occurred_at DESC LIMIT 200) e, jsonb_object_keys(e.payload) k ORDER BY k LIMIT 50`, tenantID, et)
		if err != nil {
			return h, err
		}
		h.Properties[et] = keys
	}
	h.Traits, err = collect(`SELECT DISTINCT k FROM (SELECT traits FROM profiles WHERE tenant_id = $1 LIMIT 500) p,
		jsonb_object_keys(p.traits) k ORDER BY k LIMIT 100`, tenantID)
	return h, err
}

// ValidateDefinition checks a definition for the segment (type, references, cycles) and returns
// its canonical JSON.
func (s *Service) ValidateDefinition(ctx context.Context, seg *Segment, raw json.RawMessage) (json.RawMessage, error) {
	return s.validateFor(ctx, s.db, seg, raw)
}

// SaveDraft stores a drafted definition as the next version and leaves the segment in status
// draft (not computed until someone asks).
func (s *Service) SaveDraft(ctx context.Context, tenantID, id int64, raw json.RawMessage) (*Segment, error) {
	var out *Segment
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		seg, err := get(ctx, tx, tenantID, id, true)
		if err != nil {
			return err
		}
		canonical, err := s.validateFor(ctx, tx, seg, raw)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		next := seg.Version + 1
		if err := tx.Create(&Version{TenantID: tenantID, SegmentID: id, Version: next, Definition: canonical, CreatedAt: now}).Error; err != nil {
			return fmt.Errorf("store version: %w", err)
		}
		if err := tx.Exec(`UPDATE segments SET definition = ?, version = ?, status = 'draft', updated_at = ? WHERE tenant_id = ? AND id = ?`,
			string(canonical), next, now, tenantID, id).Error; err != nil {
			return fmt.Errorf("save draft: %w", err)
		}
		out, err = get(ctx, tx, tenantID, id, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
