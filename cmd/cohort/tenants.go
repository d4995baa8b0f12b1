package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/devstack"
)

const tenantsUsage = `usage: cohort tenants <command> [flags]

  create --slug S [--name N]             create a tenant; prints its keys, a 24 h token and secrets as JSON
  token --slug S                          mint a fresh Bearer token (24 h)
  rotate-keys --slug S [--grace 24h]      issue new sk_/pk_ keys; older keys stop working after the grace period
  revoke-key --slug S --key-id ID         revoke one key now (ID as listed by keys, e.g. sk_0123456789ab)
  keys --slug S                           list a tenant's keys (never their secrets)
  set --slug S --require-signed-user-id=true|false
                                          require pk_ session handshakes to carry a signed user_id

Database and secret key resolve as for cohort dev: DATABASE_URL, else 127.0.0.1:5432, else the
private cluster under COHORT_DATA_DIR; COHORT_SECRET_KEY, else the dev key file there.
`

func runTenants(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		return fmt.Errorf("%w\n%s", errUsage, tenantsUsage)
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("tenants "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	slug := fs.String("slug", "", "tenant slug")
	name := fs.String("name", "", "tenant display name")
	grace := fs.Duration("grace", 24*time.Hour, "how long old keys keep working after rotation")
	keyID := fs.String("key-id", "", "key id to revoke")
	requireSig := fs.String("require-signed-user-id", "", "true or false")
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%w: %v\n%s", errUsage, err, tenantsUsage)
	}
	if *slug == "" {
		return fmt.Errorf("%w: --slug is required\n%s", errUsage, tenantsUsage)
	}
	switch sub {
	case "create", "token", "rotate-keys", "revoke-key", "keys", "set":
	default:
		return fmt.Errorf("%w: unknown tenants command %q\n%s", errUsage, sub, tenantsUsage)
	}

	pg, err := resolveEmbeddedDeps(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() { _ = pg.Close() }()
	c, err := openCore(ctx, cfg, logger, coreOptions{migrate: pg.Source != devstack.SourceEnv})
	if err != nil {
		return err
	}
	defer c.close()

	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	switch sub {
	case "create":
		created, err := c.tenants.Create(ctx, *slug, *name)
		if err != nil {
			return err
		}
		token, _, err := c.tenants.MintToken(created.Tenant, c.signer)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{
			"id": created.Tenant.ID, "slug": created.Tenant.Slug, "name": created.Tenant.Name,
			"secret_key": created.SecretKey, "public_key": created.PublicKey, "token": token,
			"webhook_secret": created.WebhookSecret, "identity_secret": created.IdentitySecret,
		})
	case "token":
		t, err := c.tenants.BySlug(ctx, *slug)
		if err != nil {
			return err
		}
		token, exp, err := c.tenants.MintToken(t, c.signer)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"id": t.ID, "slug": t.Slug, "token": token, "expires_at": exp.UTC()})
	case "rotate-keys":
		sk, pk, err := c.tenants.RotateKeys(ctx, *slug, *grace)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "secret_key": sk, "public_key": pk,
			"old_keys_expire_at": time.Now().Add(*grace).UTC()})
	case "revoke-key":
		if *keyID == "" {
			return fmt.Errorf("%w: --key-id is required", errUsage)
		}
		if err := c.tenants.RevokeKey(ctx, *slug, *keyID); err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "key_id": *keyID, "revoked": true})
	case "keys":
		keys, err := c.tenants.Keys(ctx, *slug)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "keys": keys})
	case "set":
		if *requireSig != "true" && *requireSig != "false" {
			return fmt.Errorf("%w: --require-signed-user-id=true|false is required", errUsage)
		}
		if err := c.tenants.SetRequireSignedUserID(ctx, *slug, *requireSig == "true"); err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "require_signed_user_id": *requireSig == "true"})
	}
	return errors.New("unreachable")
}

// resolveEmbeddedDeps fills DATABASE_URL and COHORT_SECRET_KEY the way cohort dev does, so the
// tenants commands reach the same database (even while cohort dev runs) and sign tokens it accepts.
func resolveEmbeddedDeps(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*devstack.Postgres, error) {
	pg, err := devstack.ResolvePostgres(ctx, devstack.PostgresOptions{
		DatabaseURL: cfg.DatabaseURL, DataDir: cfg.DataDir,
		Log: func(msg string, args ...any) { logger.Info(msg, args...) },
	})
	if err != nil {
		return nil, err
	}
	cfg.DatabaseURL = pg.DatabaseURL
	if len(cfg.SecretKey) == 0 {
		key, err := devstack.DevSecretKey(cfg.DataDir)
		if err != nil {
			_ = pg.Close()
			return nil, err
		}
		cfg.SecretKey = key
	}
	return pg, nil
}
