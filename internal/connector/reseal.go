package connector

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/cohort-dev/cohort/internal/secretbox"
)

// Reseal re-encrypts every connector's secrets (of every tenant) under box's active key after the
// secret key was rotated, in db (normally the transaction that reseals everything). Values already
// under the active key are left alone; it returns how many values it re-encrypted.
func Reseal(ctx context.Context, db *gorm.DB, box *secretbox.Box) (int, error) {
	var rows []row
	if err := db.WithContext(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).
		Select("id", "tenant_id", "secrets").Order("id").Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("load connectors: %w", err)
	}
	n := 0
	for _, r := range rows {
		var sealed map[string]string
		if len(r.Secrets) == 0 {
			continue
		}
		if err := json.Unmarshal(r.Secrets, &sealed); err != nil {
			return n, fmt.Errorf("secrets of connector %d: %w", r.ID, err)
		}
		changed := 0
		for k, v := range sealed {
			out, ch, err := box.ResealString(v, aad(r.TenantID, r.ID, k))
			if err != nil {
				return n, fmt.Errorf("reseal %s of connector %d: %w", k, r.ID, err)
			}
			if ch {
				sealed[k] = out
				changed++
			}
		}
		if changed == 0 {
			continue
		}
		b, err := json.Marshal(sealed)
		if err != nil {
			return n, err
		}
		if err := db.WithContext(ctx).Model(&row{}).Where("id = ?", r.ID).UpdateColumn("secrets", json.RawMessage(b)).Error; err != nil {
			return n, fmt.Errorf("store resealed secrets of connector %d: %w", r.ID, err)
		}
		n += changed
	}
	return n, nil
}
