package tenant

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/cohort-dev/cohort/internal/secretbox"
)

// Reseal re-encrypts every tenant's webhook and identity secrets under box's active key (after
// the secret key was rotated; box also holds the previous keys). db is normally the transaction
// that reseals everything and then records the new key's fingerprint. Values already under the
// active key are left alone; it returns how many values it re-encrypted.
func Reseal(ctx context.Context, db *gorm.DB, box *secretbox.Box) (int, error) {
	var rows []Tenant
	if err := db.WithContext(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).
		Select("id", "webhook_secret_sealed", "identity_secret_sealed").Order("id").Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("load tenants: %w", err)
	}
	n := 0
	for _, t := range rows {
		set := map[string]any{}
		for col, sealed := range map[string]string{"webhook_secret": t.WebhookSecretSealed, "identity_secret": t.IdentitySecretSealed} {
			if sealed == "" {
				continue
			}
			out, changed, err := box.ResealString(sealed, aad(t.ID, col))
			if err != nil {
				return n, fmt.Errorf("reseal %s of tenant %d: %w", col, t.ID, err)
			}
			if changed {
				set[col+"_sealed"] = out
			}
		}
		if len(set) == 0 {
			continue
		}
		if err := db.WithContext(ctx).Model(&Tenant{}).Where("id = ?", t.ID).UpdateColumns(set).Error; err != nil {
			return n, fmt.Errorf("store resealed secrets of tenant %d: %w", t.ID, err)
		}
		n += len(set)
	}
	return n, nil
}
