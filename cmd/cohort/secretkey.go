package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"gorm.io/gorm"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/keycheck"
	"github.com/cohort-dev/cohort/internal/tenant"
)

const secretKeyUsage = `usage: cohort secret-key reseal

  reseal   re-encrypt every stored secret (tenants' webhook and identity secrets, connectors'
           platform keys) with COHORT_SECRET_KEY and record it as the key the database is set up
           with, in one transaction. Run it once every process runs with the new key in
           COHORT_SECRET_KEY and the old one in COHORT_SECRET_KEY_PREVIOUS; keep
           COHORT_SECRET_KEY_PREVIOUS 24 h longer (tokens and download links signed with the old
           key verify until they expire), then remove it. A second run re-encrypts nothing.

Database and secret keys resolve as for cohort tenants. deploy/runbooks/rotate-keys.md has the
whole rotation.
`

func runSecretKey(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "reseal" {
		return fmt.Errorf("%w: want `cohort secret-key reseal`\n%s", errUsage, secretKeyUsage)
	}
	if err := cfg.Validate(config.RoleTenants); err != nil {
		return err
	}
	c, closeCore, err := openCLICore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeCore()
	var tenantSecrets, connectorSecrets int
	err = c.db.Gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if tenantSecrets, err = tenant.Reseal(ctx, tx, c.box); err != nil {
			return err
		}
		if connectorSecrets, err = connector.Reseal(ctx, tx, c.box); err != nil {
			return err
		}
		return keycheck.Record(ctx, tx, cfg.SecretKey)
	})
	if err != nil {
		return fmt.Errorf("reseal (nothing was changed): %w", err)
	}
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	return out.Encode(map[string]any{
		"resealed":             map[string]int{"tenant_secrets": tenantSecrets, "connector_secrets": connectorSecrets},
		"fingerprint_recorded": true,
		"previous_keys":        len(cfg.PreviousSecretKeys),
	})
}
