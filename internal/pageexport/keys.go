package pageexport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/auth"
)

// Keys is the KeySource of the exports: each tenant gets one public (pk_) key of its own for the
// tracking snippets of its exports, minted on its first export like any other pk_ key (only its
// hash in api_keys, so it authenticates the same way) and kept in page_export_keys, because a
// snippet needs the plain key and a tenant's other keys are stored only as hashes. A pk_ key is
// public by design: it only opens a browser session. When the key is revoked or expires (a key
// rotation), the next export mints a new one; exports built before keep the old key.
type Keys struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewKeys builds the key source.
func NewKeys(pool *pgxpool.Pool, now func() time.Time) *Keys {
	if now == nil {
		now = time.Now
	}
	return &Keys{pool: pool, now: now}
}

var _ KeySource = (*Keys)(nil)

// PublicKey returns the tenant's export key, minting one when it has none that still works.
func (k *Keys) PublicKey(ctx context.Context, tenantID int64) (string, error) {
	now := k.now().UTC()
	var plain string
	err := k.pool.QueryRow(ctx, `SELECT e.public_key FROM page_export_keys e
		JOIN api_keys a ON a.tenant_id = e.tenant_id AND a.key_id = e.key_id
		WHERE e.tenant_id = $1 AND a.revoked_at IS NULL AND (a.expires_at IS NULL OR a.expires_at > $2)`, tenantID, now).Scan(&plain)
	if err == nil {
		return plain, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("load export key: %w", err)
	}
	nk, err := auth.GenerateKey(auth.KeyPublic)
	if err != nil {
		return "", err
	}
	err = pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (tenant_id, kind, key_id, key_hash, created_at) VALUES ($1, 'public', $2, $3, $4)`,
			tenantID, nk.KeyID, nk.Hash, now); err != nil {
			return fmt.Errorf("insert export key: %w", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO page_export_keys (tenant_id, key_id, public_key, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant_id) DO UPDATE SET key_id = EXCLUDED.key_id, public_key = EXCLUDED.public_key, created_at = EXCLUDED.created_at`,
			tenantID, nk.KeyID, nk.Plain, now)
		if err != nil {
			return fmt.Errorf("store export key: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return nk.Plain, nil
}
