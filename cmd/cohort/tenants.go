package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/devstack"
	"github.com/cohort-dev/cohort/internal/keycheck"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/store"
)

// tenantCommands are the tenants commands and their usage lines, in the order cohort tenants
// --help lists them.
var tenantCommands = []struct{ name, usage string }{
	{"create", `  create --slug S [--name N]             create a tenant; prints its keys, a 24 h token and secrets as JSON
`},
	{"token", `  token --slug S                          mint a fresh Bearer token (24 h)
`},
	{"rotate-keys", `  rotate-keys --slug S [--grace 24h]      issue new sk_/pk_ keys; older keys stop working after the grace period;
                                          every token minted so far is revoked (as revoke-tokens)
`},
	{"revoke-tokens", `  revoke-tokens --slug S                  revoke every Bearer and session token minted so far; mint new ones
                                          with token (clients with a pk_ key open new sessions themselves)
`},
	{"revoke-key", `  revoke-key --slug S --key-id ID         revoke one key now (ID as listed by keys, e.g. sk_0123456789ab)
`},
	{"rotate-secrets", `  rotate-secrets --slug S [--webhook] [--identity]
                                          replace the webhook secret and/or identity secret (neither flag:
                                          both); prints the new ones; the old ones are refused at once
`},
	{"keys", `  keys --slug S                           list a tenant's keys (never their secrets)
`},
	{"set", `  set --slug S --require-signed-user-id=true|false
                                          require pk_ session handshakes to carry a signed user_id
  set --slug S --page-limit N             how many AI landing pages the tenant may hold (default 1000)
  set --slug S --allowed-origins https://a.example,https://b.example
                                          browser origins whose pages may read answers to pk_/session
                                          requests (CORS); --allowed-origins '' allows any origin (default)
  set --slug S --blocked-ai-crawlers GPTBot,CCBot
                                          AI crawlers the tenant's robots.txt (/p/S/robots.txt) disallows;
                                          '' allows every known crawler (default)
  set --slug S --ai-budget N|none         monthly model token budget (UTC calendar month); beyond it builds,
                                          generation, extraction and drafts answer 403 ai_budget_exceeded
`},
}

const tenantsUsageFooter = `
--tenant S is the same as --slug S. Revoked keys and tokens are refused by every server within 30 s.

Database and secret key resolve as for cohort dev: DATABASE_URL, else 127.0.0.1:5432, else the
private cluster under COHORT_DATA_DIR (without DATABASE_URL, the data dir's own database, made by
the first cohort dev there); COHORT_SECRET_KEY, else the dev key file there. A secret key other
than the one the database was set up with is refused: run from the directory that holds .cohort,
or set COHORT_DATA_DIR or COHORT_SECRET_KEY.
`

var tenantsUsage = func() string {
	var b strings.Builder
	b.WriteString("usage: cohort tenants <command> [flags]\n\n")
	for _, c := range tenantCommands {
		b.WriteString(c.usage)
	}
	return b.String() + tenantsUsageFooter
}()

// tenantCommandUsage is the usage of one tenants command.
func tenantCommandUsage(name string) (string, bool) {
	for _, c := range tenantCommands {
		if c.name == name {
			return "usage: cohort tenants " + name + " [flags]\n\n" + c.usage + tenantsUsageFooter, true
		}
	}
	return "", false
}

func runTenants(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w\n%s", errUsage, tenantsUsage)
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("tenants "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	slug := fs.String("slug", "", "tenant slug")
	fs.StringVar(slug, "tenant", "", "tenant slug (same as --slug)")
	name := fs.String("name", "", "tenant display name")
	grace := fs.Duration("grace", 24*time.Hour, "how long old keys keep working after rotation")
	keyID := fs.String("key-id", "", "key id to revoke")
	requireSig := fs.String("require-signed-user-id", "", "true or false")
	pageLimit := fs.Int("page-limit", -1, "AI landing pages the tenant may hold")
	allowedOrigins := fs.String("allowed-origins", "", "comma-separated browser origins; empty: any")
	blockedCrawlers := fs.String("blocked-ai-crawlers", "", "comma-separated AI crawlers robots.txt disallows; empty: none")
	aiBudget := fs.String("ai-budget", "", "monthly model token budget, or none")
	rotateWebhook := fs.Bool("webhook", false, "rotate-secrets: replace the webhook secret")
	rotateIdentity := fs.Bool("identity", false, "rotate-secrets: replace the identity secret")
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%w: %v\n%s", errUsage, err, tenantsUsage)
	}
	if *slug == "" {
		return fmt.Errorf("%w: --slug is required\n%s", errUsage, tenantsUsage)
	}
	if _, ok := tenantCommandUsage(sub); !ok {
		return fmt.Errorf("%w: unknown tenants command %q\n%s", errUsage, sub, tenantsUsage)
	}

	c, closeCore, err := openCLICore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeCore()

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
			"old_keys_expire_at": time.Now().Add(*grace).UTC(), "tokens_revoked": true})
	case "revoke-tokens":
		gen, err := c.tenants.RevokeTokens(ctx, *slug)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "tokens_revoked": true, "token_generation": gen})
	case "revoke-key":
		if *keyID == "" {
			return fmt.Errorf("%w: --key-id is required", errUsage)
		}
		if err := c.tenants.RevokeKey(ctx, *slug, *keyID); err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "key_id": *keyID, "revoked": true})
	case "rotate-secrets":
		webhook, identity := *rotateWebhook, *rotateIdentity
		if !flagSet(fs, "webhook") && !flagSet(fs, "identity") {
			webhook, identity = true, true
		}
		if !webhook && !identity {
			return fmt.Errorf("%w: nothing to rotate: give --webhook, --identity or neither (both)", errUsage)
		}
		newWebhook, newIdentity, err := c.tenants.RotateSecrets(ctx, *slug, webhook, identity)
		if err != nil {
			return err
		}
		res := map[string]any{"slug": *slug}
		rotated := []string{}
		if webhook {
			res["webhook_secret"] = newWebhook
			rotated = append(rotated, "webhook_secret")
		}
		if identity {
			res["identity_secret"] = newIdentity
			rotated = append(rotated, "identity_secret")
		}
		res["rotated"] = rotated
		return out.Encode(res)
	case "keys":
		keys, err := c.tenants.Keys(ctx, *slug)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"slug": *slug, "keys": keys})
	case "set":
		setPageLimit := pageLimitSet(fs)
		setOrigins := flagSet(fs, "allowed-origins")
		setBudget := flagSet(fs, "ai-budget")
		setCrawlers := flagSet(fs, "blocked-ai-crawlers")
		if *requireSig == "" && !setPageLimit && !setOrigins && !setBudget && !setCrawlers {
			return fmt.Errorf("%w: --require-signed-user-id=true|false, --page-limit N, --allowed-origins O,..., --blocked-ai-crawlers C,... or --ai-budget N|none is required", errUsage)
		}
		var budget *int64
		if setBudget && *aiBudget != "none" {
			n, err := strconv.ParseInt(*aiBudget, 10, 64)
			if err != nil || n < 0 || n > aispend.MaxBudget {
				return fmt.Errorf("%w: --ai-budget must be a number of tokens from 0 to %d, or none", errUsage, aispend.MaxBudget)
			}
			budget = &n
		}
		if *requireSig != "" && *requireSig != "true" && *requireSig != "false" {
			return fmt.Errorf("%w: --require-signed-user-id must be true or false", errUsage)
		}
		if setPageLimit && (*pageLimit < 0 || *pageLimit > page.MaxPageLimit) {
			return fmt.Errorf("%w: --page-limit must be from 0 to %d", errUsage, page.MaxPageLimit)
		}
		res := map[string]any{"slug": *slug}
		if *requireSig != "" {
			if err := c.tenants.SetRequireSignedUserID(ctx, *slug, *requireSig == "true"); err != nil {
				return err
			}
			res["require_signed_user_id"] = *requireSig == "true"
		}
		if setPageLimit {
			if err := c.openPages(nil).SetPageLimit(ctx, *slug, *pageLimit); err != nil {
				return err
			}
			res["page_limit"] = *pageLimit
		}
		if setBudget {
			if err := c.spend.SetBudget(ctx, *slug, budget); err != nil {
				return err
			}
			res["ai_budget"] = budget
		}
		if setOrigins {
			var list []string
			for _, o := range strings.Split(*allowedOrigins, ",") {
				if o = strings.TrimSpace(o); o != "" {
					list = append(list, o)
				}
			}
			norm, err := c.tenants.SetAllowedOrigins(ctx, *slug, list)
			if err != nil {
				return err
			}
			res["allowed_origins"] = norm
		}
		if setCrawlers {
			var names []string
			for _, n := range strings.Split(*blockedCrawlers, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			blocked, err := c.openPages(nil).SetBlockedCrawlers(ctx, *slug, names)
			if err != nil {
				return err
			}
			res["blocked_ai_crawlers"] = blocked
		}
		return out.Encode(res)
	}
	return errors.New("unreachable")
}

// openCLICore opens the core for a one-off command (tenants, secret-key) on the database and
// secret key cohort dev would use; closeCore closes both.
func openCLICore(ctx context.Context, cfg *config.Config, logger *slog.Logger) (c *core, closeCore func(), err error) {
	pg, err := resolveEmbeddedDeps(ctx, cfg, logger, false)
	if err != nil {
		return nil, nil, err
	}
	c, err = openCore(ctx, cfg, logger, coreOptions{migrate: pg.Source != devstack.SourceEnv})
	if err != nil {
		_ = pg.Close()
		return nil, nil, err
	}
	return c, func() { c.close(); _ = pg.Close() }, nil
}

// resolveEmbeddedDeps fills DATABASE_URL and COHORT_SECRET_KEY the way cohort dev does, so the
// tenants commands reach the same database (even while cohort dev runs) and sign tokens it accepts.
// Without DATABASE_URL the database is the data dir's own; newDataDir (cohort dev) may make one
// for a data dir that has none yet, the one-off commands may not.
func resolveEmbeddedDeps(ctx context.Context, cfg *config.Config, logger *slog.Logger, newDataDir bool) (*devstack.Postgres, error) {
	pg, err := devstack.ResolvePostgres(ctx, devstack.PostgresOptions{
		DatabaseURL: cfg.DatabaseURL, DataDir: cfg.DataDir, NewDataDir: newDataDir,
		Log: func(msg string, args ...any) { logger.Info(msg, args...) },
	})
	if err != nil {
		return nil, err
	}
	cfg.DatabaseURL = pg.DatabaseURL
	if len(cfg.SecretKey) == 0 {
		key, err := devSecretKey(ctx, cfg.DataDir, cfg.DatabaseURL)
		if err != nil {
			_ = pg.Close()
			return nil, err
		}
		cfg.SecretKey = key
	}
	return pg, nil
}

// devSecretKey reads the dev key file under dataDir. Without one it makes a new key, but only for a
// database that was not set up with a key yet: a run from a directory without the data dir would
// otherwise mint tokens the server refuses and seal secrets with a key nobody else has.
func devSecretKey(ctx context.Context, dataDir, databaseURL string) ([]byte, error) {
	key, err := devstack.ReadDevSecretKey(dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	db, err := store.Open(ctx, databaseURL, store.Options{MaxConns: 1})
	if err != nil {
		return nil, err
	}
	inUse, err := keycheck.InUse(ctx, db.Gorm)
	db.Close()
	if err != nil {
		return nil, err
	}
	if inUse {
		return nil, &keycheck.NoKeyError{Path: absPath(devstack.DevSecretKeyPath(dataDir))}
	}
	return devstack.DevSecretKey(dataDir)
}

// secretKeySource names where cfg.SecretKey came from, for keycheck's messages: the dev key file
// under the data dir when it holds that key, else COHORT_SECRET_KEY.
func secretKeySource(cfg *config.Config) string {
	if key, err := devstack.ReadDevSecretKey(cfg.DataDir); err == nil && bytes.Equal(key, cfg.SecretKey) {
		return "the dev key file " + absPath(devstack.DevSecretKeyPath(cfg.DataDir))
	}
	return "COHORT_SECRET_KEY"
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// pageLimitSet reports whether --page-limit was given.
func pageLimitSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "page-limit" })
	return set
}
