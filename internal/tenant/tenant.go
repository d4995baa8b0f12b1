// Package tenant manages tenants and their credentials: creation, key rotation and revocation,
// and the lookups the authenticator and the webhook verifier need.
package tenant

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
)

// Tenant mirrors the tenants table.
type Tenant struct {
	ID                   int64     `gorm:"primaryKey" json:"id"`
	Slug                 string    `json:"slug"`
	Name                 string    `json:"name"`
	WebhookSecretSealed  string    `json:"-"`
	IdentitySecretSealed string    `json:"-"`
	RequireSignedUserID  bool      `json:"require_signed_user_id"`
	TokenGeneration      int64     `json:"-"` // bumped to revoke every token minted before
	CreatedAt            time.Time `json:"created_at"`
	UpdatedAt            time.Time `json:"updated_at"`
}

// APIKey mirrors the api_keys table.
type APIKey struct {
	ID        int64      `gorm:"primaryKey" json:"-"`
	TenantID  int64      `json:"-"`
	Kind      string     `json:"kind"`
	KeyID     string     `json:"key_id"`
	KeyHash   []byte     `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// Service owns tenants. It implements auth.KeyStore, auth.TenantResolver and auth.IdentityStore.
type Service struct {
	db  *gorm.DB
	box *secretbox.Box
	now func() time.Time
}

func NewService(db *gorm.DB, box *secretbox.Box, now func() time.Time) *Service {
	return &Service{db: db, box: box, now: now}
}

var (
	slugRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)
	digitsRE = regexp.MustCompile(`^[0-9]+$`)
)

// Created is what creation and rotation hand back once: the plain keys and secrets.
type Created struct {
	Tenant         Tenant
	SecretKey      string
	PublicKey      string
	WebhookSecret  string
	IdentitySecret string
}

// Create makes a tenant with one secret key, one public key, a webhook secret and an identity
// secret (for signed user ids).
func (s *Service) Create(ctx context.Context, slug, name string) (Created, error) {
	slug = strings.TrimSpace(slug)
	if !slugRE.MatchString(slug) || digitsRE.MatchString(slug) {
		// All-digit slugs are refused so a slug can never be mistaken for a tenant id.
		return Created{}, errs.Invalid("slug", "2-63 characters of a-z, 0-9 and -, starting with a letter or digit, not only digits")
	}
	if name = strings.TrimSpace(name); name == "" {
		name = slug
	}
	if len(name) > 200 {
		return Created{}, errs.Invalid("name", "at most 200 characters")
	}
	webhook, err := auth.RandomSecret(32)
	if err != nil {
		return Created{}, err
	}
	identity, err := auth.RandomSecret(32)
	if err != nil {
		return Created{}, err
	}
	now := s.now().UTC()
	t := Tenant{Slug: slug, Name: name, CreatedAt: now, UpdatedAt: now}
	var out Created
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Seal after the id is known so each ciphertext is bound to its row; insert placeholders first.
		t.WebhookSecretSealed, t.IdentitySecretSealed = "-", "-"
		if err := tx.Create(&t).Error; err != nil {
			if isUniqueViolation(err) {
				return errs.Coded(errs.ErrConflict, "conflict", "tenant slug %q is taken", slug)
			}
			return fmt.Errorf("insert tenant: %w", err)
		}
		var err error
		if t.WebhookSecretSealed, err = s.box.SealString(webhook, aad(t.ID, "webhook_secret")); err != nil {
			return err
		}
		if t.IdentitySecretSealed, err = s.box.SealString(identity, aad(t.ID, "identity_secret")); err != nil {
			return err
		}
		if err := tx.Model(&t).Updates(map[string]any{
			"webhook_secret_sealed": t.WebhookSecretSealed, "identity_secret_sealed": t.IdentitySecretSealed,
		}).Error; err != nil {
			return fmt.Errorf("store tenant secrets: %w", err)
		}
		sk, pk, err := s.insertKeys(tx, t.ID)
		if err != nil {
			return err
		}
		out = Created{Tenant: t, SecretKey: sk, PublicKey: pk, WebhookSecret: webhook, IdentitySecret: identity}
		return nil
	})
	if err != nil {
		return Created{}, err
	}
	return out, nil
}

func aad(tenantID int64, field string) string {
	return "tenant:" + strconv.FormatInt(tenantID, 10) + "/" + field
}

func (s *Service) insertKeys(tx *gorm.DB, tenantID int64) (secret, public string, err error) {
	for _, kind := range []auth.KeyKind{auth.KeySecret, auth.KeyPublic} {
		k, err := auth.GenerateKey(kind)
		if err != nil {
			return "", "", err
		}
		row := APIKey{TenantID: tenantID, Kind: string(kind), KeyID: k.KeyID, KeyHash: k.Hash}
		if err := tx.Create(&row).Error; err != nil {
			return "", "", fmt.Errorf("insert api key: %w", err)
		}
		if kind == auth.KeySecret {
			secret = k.Plain
		} else {
			public = k.Plain
		}
	}
	return secret, public, nil
}

// BySlug finds a tenant.
func (s *Service) BySlug(ctx context.Context, slug string) (Tenant, error) {
	// Every stored slug matches slugRE (the column's CHECK), so anything else names no tenant.
	// Slugs come from URL paths and token claims: invalid UTF-8 or a NUL would otherwise reach
	// Postgres, whose refusal is an error (a 500, or a 503 from the authenticator), not a 404.
	if !slugRE.MatchString(slug) {
		return Tenant{}, fmt.Errorf("tenant %q: %w", slug, errs.ErrNotFound)
	}
	var t Tenant
	err := s.db.WithContext(ctx).Where("slug = ?", slug).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Tenant{}, fmt.Errorf("tenant %q: %w", slug, errs.ErrNotFound)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("load tenant %q: %w", slug, err)
	}
	return t, nil
}

// ByID finds a tenant.
func (s *Service) ByID(ctx context.Context, id int64) (Tenant, error) {
	var t Tenant
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Tenant{}, fmt.Errorf("tenant %d: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("load tenant %d: %w", id, err)
	}
	return t, nil
}

// MintToken issues a Bearer access token for the tenant, valid 24 h, of the tenant's token
// generation as loaded in t: load t just before (BySlug), or a revocation in between is missed and
// the token is refused.
func (s *Service) MintToken(t Tenant, signer *auth.Signer) (string, time.Time, error) {
	return signer.Mint(auth.Claims{TenantID: t.ID, TenantSlug: t.Slug, Type: auth.TokenAccess, Generation: t.TokenGeneration}, auth.AccessTokenTTL)
}

// TokenGeneration implements auth.TenantResolver: the tenant's current token generation.
func (s *Service) TokenGeneration(ctx context.Context, tenantID int64) (int64, error) {
	var gen []int64
	if err := s.db.WithContext(ctx).Model(&Tenant{}).Where("id = ?", tenantID).Limit(1).Pluck("token_generation", &gen).Error; err != nil {
		return 0, fmt.Errorf("load token generation of tenant %d: %w", tenantID, err)
	}
	if len(gen) == 0 {
		return 0, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	return gen[0], nil
}

// RevokeTokens revokes every token minted for the tenant so far (Bearer access tokens and session
// tokens) by bumping its token generation; servers refuse them once their cache of the generation
// expires (auth.Deps.CacheTTL, 30 s). It returns the new generation.
func (s *Service) RevokeTokens(ctx context.Context, slug string) (int64, error) {
	t, err := s.BySlug(ctx, slug)
	if err != nil {
		return 0, err
	}
	return s.bumpTokenGeneration(s.db.WithContext(ctx), t.ID)
}

func (s *Service) bumpTokenGeneration(tx *gorm.DB, tenantID int64) (int64, error) {
	var gen []int64
	err := tx.Raw(`UPDATE tenants SET token_generation = token_generation + 1, updated_at = ? WHERE id = ? RETURNING token_generation`,
		s.now(), tenantID).Scan(&gen).Error
	if err != nil {
		return 0, fmt.Errorf("revoke tokens: %w", err)
	}
	if len(gen) == 0 {
		return 0, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	return gen[0], nil
}

// RotateKeys issues a new secret and public key and revokes every token minted so far (as
// RevokeTokens). The tenant's older active keys stop working after grace (0 revokes them now), so
// deployments can roll over without downtime; tokens are re-minted (tenants token) or, for
// sessions, obtained again by the client library with a key.
func (s *Service) RotateKeys(ctx context.Context, slug string, grace time.Duration) (secret, public string, err error) {
	if grace < 0 {
		return "", "", errs.Invalid("grace", "must not be negative")
	}
	t, err := s.BySlug(ctx, slug)
	if err != nil {
		return "", "", err
	}
	now := s.now()
	cutoff := now.Add(grace)
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Model(&APIKey{}).
			Where("tenant_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)", t.ID, cutoff).
			Update("expires_at", cutoff).Error; err != nil {
			return fmt.Errorf("expire old keys: %w", err)
		}
		if _, err := s.bumpTokenGeneration(tx, t.ID); err != nil {
			return err
		}
		var err error
		secret, public, err = s.insertKeys(tx, t.ID)
		return err
	})
	return secret, public, err
}

// RevokeKey revokes one key of the tenant now.
func (s *Service) RevokeKey(ctx context.Context, slug, keyID string) error {
	t, err := s.BySlug(ctx, slug)
	if err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Model(&APIKey{}).
		Where("tenant_id = ? AND key_id = ? AND revoked_at IS NULL", t.ID, keyID).
		Update("revoked_at", s.now())
	if res.Error != nil {
		return fmt.Errorf("revoke key: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("key %q of tenant %q: %w", keyID, slug, errs.ErrNotFound)
	}
	return nil
}

// RotateSecrets replaces the tenant's storefront webhook secret (webhook), its identity secret for
// signed user ids (identity), or both, with new random ones made as Create makes them, and returns
// the new plain values (empty for a secret not rotated): they are shown this once, only their
// sealed form is stored. At least one of webhook and identity must be true.
//
// The old secret stops working at once, with no grace period, in this process and in every other:
// neither secret is cached anywhere (WebhookSecret and IdentitySettings read the tenants row on
// every webhook delivery and every pk_ handshake; the 30 s auth.Deps.CacheTTL covers only keys and
// token generations). The storefront and the tenant's backend must switch to the new value; until
// they do, webhooks are refused (401 bad_signature) and signed handshakes fail. Sessions opened
// before, including any with a user id signed with a leaked identity secret, stay valid until they
// expire: revoke them with RevokeTokens.
func (s *Service) RotateSecrets(ctx context.Context, slug string, webhook, identity bool) (newWebhook, newIdentity string, err error) {
	if !webhook && !identity {
		return "", "", errs.Invalid("secrets", "choose the webhook secret, the identity secret or both")
	}
	t, err := s.BySlug(ctx, slug)
	if err != nil {
		return "", "", err
	}
	cols := map[string]any{"updated_at": s.now()}
	for _, sec := range []struct {
		rotate bool
		field  string
		plain  *string
	}{{webhook, "webhook_secret", &newWebhook}, {identity, "identity_secret", &newIdentity}} {
		if !sec.rotate {
			continue
		}
		if *sec.plain, err = auth.RandomSecret(32); err != nil {
			return "", "", err
		}
		sealed, err := s.box.SealString(*sec.plain, aad(t.ID, sec.field))
		if err != nil {
			return "", "", err
		}
		cols[sec.field+"_sealed"] = sealed
	}
	// One UPDATE of the chosen columns; a tenant deleted since BySlug is not found.
	res := s.db.WithContext(ctx).Model(&Tenant{}).Where("id = ?", t.ID).Updates(cols)
	if res.Error != nil {
		return "", "", fmt.Errorf("store tenant secrets: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return "", "", fmt.Errorf("tenant %q: %w", slug, errs.ErrNotFound)
	}
	return newWebhook, newIdentity, nil
}

// Keys lists a tenant's keys (never their secrets).
func (s *Service) Keys(ctx context.Context, slug string) ([]APIKey, error) {
	t, err := s.BySlug(ctx, slug)
	if err != nil {
		return nil, err
	}
	var keys []APIKey
	if err := s.db.WithContext(ctx).Where("tenant_id = ?", t.ID).Order("id").Find(&keys).Error; err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return keys, nil
}

// SetRequireSignedUserID turns the signed user id requirement of the pk_ handshake on or off.
func (s *Service) SetRequireSignedUserID(ctx context.Context, slug string, on bool) error {
	res := s.db.WithContext(ctx).Model(&Tenant{}).Where("slug = ?", slug).
		Updates(map[string]any{"require_signed_user_id": on, "updated_at": s.now()})
	if res.Error != nil {
		return fmt.Errorf("update tenant: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("tenant %q: %w", slug, errs.ErrNotFound)
	}
	return nil
}

// MaxAllowedOrigins is how many origins a tenant may list.
const MaxAllowedOrigins = 50

// NormalizeOrigin checks a browser origin as a tenant lists it, scheme://host[:port] with http or
// https and nothing after, and returns it as browsers send it in the Origin header (lowercase, no
// default port, no trailing slash).
func NormalizeOrigin(raw string) (string, error) {
	o := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(raw), "/"))
	scheme, hostport, ok := strings.Cut(o, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return "", fmt.Errorf("origin %q: want http://host or https://host", raw)
	}
	if hostport == "" || strings.ContainsAny(hostport, "/?#@ \t*,") {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] with nothing after", raw)
	}
	host, port, hasPort := strings.Cut(hostport, ":")
	if strings.HasPrefix(hostport, "[") { // IPv6 literal
		end := strings.Index(hostport, "]")
		if end < 0 {
			return "", fmt.Errorf("origin %q: unterminated IPv6 address", raw)
		}
		host, port = hostport[:end+1], strings.TrimPrefix(hostport[end+1:], ":")
		hasPort = len(hostport) > end+1
		if hasPort && hostport[end+1] != ':' {
			return "", fmt.Errorf("origin %q: want scheme://host[:port]", raw)
		}
	}
	if host == "" {
		return "", fmt.Errorf("origin %q: no host", raw)
	}
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("origin %q: bad port", raw)
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			return scheme + "://" + host, nil
		}
		return scheme + "://" + host + ":" + strconv.Itoa(n), nil
	}
	return scheme + "://" + host, nil
}

// SetAllowedOrigins sets the browser origins whose pages may read the answers to requests made with
// the tenant's public key or session tokens; none means any origin. Each is checked and normalized
// (NormalizeOrigin); duplicates are dropped.
func (s *Service) SetAllowedOrigins(ctx context.Context, slug string, origins []string) ([]string, error) {
	norm := make([]string, 0, len(origins))
	seen := map[string]bool{}
	for _, o := range origins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, errs.Invalid("allowed_origins", err.Error())
		}
		if !seen[n] {
			seen[n] = true
			norm = append(norm, n)
		}
	}
	if len(norm) > MaxAllowedOrigins {
		return nil, errs.Invalid("allowed_origins", fmt.Sprintf("at most %d origins", MaxAllowedOrigins))
	}
	// Normalized origins hold no spaces: the list travels as one space-separated string.
	res := s.db.WithContext(ctx).Exec(`UPDATE tenants SET allowed_origins = string_to_array(?, ' '), updated_at = ? WHERE slug = ?`,
		strings.Join(norm, " "), s.now(), slug)
	if res.Error != nil {
		return nil, fmt.Errorf("update tenant: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, fmt.Errorf("tenant %q: %w", slug, errs.ErrNotFound)
	}
	return norm, nil
}

// AllowedOrigins gives the tenant's allowed browser origins (SetAllowedOrigins); empty means any.
func (s *Service) AllowedOrigins(ctx context.Context, tenantID int64) ([]string, error) {
	var joined *string
	err := s.db.WithContext(ctx).Raw(`SELECT array_to_string(allowed_origins, ' ') FROM tenants WHERE id = ?`, tenantID).Row().Scan(&joined)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read allowed origins: %w", err)
	}
	if joined == nil || *joined == "" {
		return nil, nil
	}
	return strings.Fields(*joined), nil
}

// LookupKey implements auth.KeyStore.
func (s *Service) LookupKey(ctx context.Context, keyID string) (auth.KeyRecord, error) {
	var row struct {
		APIKey
		Slug string
	}
	err := s.db.WithContext(ctx).Table("api_keys").
		Select("api_keys.*, tenants.slug").
		Joins("JOIN tenants ON tenants.id = api_keys.tenant_id").
		Where("api_keys.key_id = ?", keyID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return auth.KeyRecord{}, errs.ErrNotFound
	}
	if err != nil {
		return auth.KeyRecord{}, fmt.Errorf("look up key: %w", err)
	}
	return auth.KeyRecord{
		KeyID: row.KeyID, Kind: auth.KeyKind(row.Kind), TenantID: row.TenantID, TenantSlug: row.Slug,
		Hash: row.KeyHash, ExpiresAt: row.ExpiresAt, RevokedAt: row.RevokedAt,
	}, nil
}

// ResolveTenant implements auth.TenantResolver: ref is a slug or a numeric id. A slug is tried
// first, so a tenant whose (older) slug is all digits is never confused with another's id.
func (s *Service) ResolveTenant(ctx context.Context, ref string) (int64, string, error) {
	t, err := s.BySlug(ctx, ref)
	if errors.Is(err, errs.ErrNotFound) {
		if id, perr := strconv.ParseInt(ref, 10, 64); perr == nil {
			t, err = s.ByID(ctx, id)
		}
	}
	if err != nil {
		return 0, "", err
	}
	return t.ID, t.Slug, nil
}

// IdentitySettings implements auth.IdentityStore.
func (s *Service) IdentitySettings(ctx context.Context, tenantID int64) ([]byte, bool, error) {
	t, err := s.ByID(ctx, tenantID)
	if err != nil {
		return nil, false, err
	}
	secret, err := s.box.OpenString(t.IdentitySecretSealed, aad(t.ID, "identity_secret"))
	if err != nil {
		return nil, false, fmt.Errorf("open identity secret: %w", err)
	}
	return []byte(secret), t.RequireSignedUserID, nil
}

// WebhookSecret returns the tenant's storefront webhook secret, for HMAC verification.
func (s *Service) WebhookSecret(ctx context.Context, slug string) (Tenant, []byte, error) {
	t, err := s.BySlug(ctx, slug)
	if err != nil {
		return Tenant{}, nil, err
	}
	secret, err := s.box.OpenString(t.WebhookSecretSealed, aad(t.ID, "webhook_secret"))
	if err != nil {
		return Tenant{}, nil, fmt.Errorf("open webhook secret: %w", err)
	}
	return t, []byte(secret), nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// CheckSealedKey implements keycheck.SealedData: it opens the oldest tenant's identity secret with
// the key in use (nil when there is no tenant with a sealed secret).
func (s *Service) CheckSealedKey(ctx context.Context) error {
	var t Tenant
	err := s.db.WithContext(ctx).Where("identity_secret_sealed LIKE ?", "v1:%").Order("id").Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load a sealed tenant secret: %w", err)
	}
	if _, err := s.box.OpenString(t.IdentitySecretSealed, aad(t.ID, "identity_secret")); err != nil {
		return fmt.Errorf("open identity secret of tenant %d: %w", t.ID, err)
	}
	return nil
}
