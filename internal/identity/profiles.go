package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Profile is a user's canonical profile with the ids linked to it.
type Profile struct {
	UserID      string          `json:"user_id"`
	Traits      json.RawMessage `json:"traits"`
	FirstSeenAt *time.Time      `json:"first_seen_at"`
	LastSeenAt  *time.Time      `json:"last_seen_at"`
	LinkedIDs   []Link          `json:"linked_ids"`
}

// Profiles reads canonical profiles.
type Profiles struct {
	pool *pgxpool.Pool
}

// NewProfiles reads through pool.
func NewProfiles(pool *pgxpool.Pool) *Profiles { return &Profiles{pool: pool} }

// Get returns the canonical profile of id (a user id, or an id linked to one) in the tenant:
// errs.ErrNotFound when the tenant knows neither a profile nor a link for it.
func (p *Profiles) Get(ctx context.Context, tenantID int64, id string) (Profile, error) {
	user, err := Resolve(ctx, p.pool, tenantID, id)
	if err != nil {
		return Profile{}, errors.Join(errs.ErrUnavailable, err)
	}
	out := Profile{UserID: user, Traits: json.RawMessage(`{}`)}
	var traits []byte
	var first, last time.Time
	err = p.pool.QueryRow(ctx, `SELECT traits, first_seen_at, last_seen_at FROM profiles WHERE tenant_id = $1 AND user_id = $2`,
		tenantID, user).Scan(&traits, &first, &last)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return Profile{}, errors.Join(errs.ErrUnavailable, fmt.Errorf("read profile: %w", err))
	default:
		first, last = first.UTC(), last.UTC()
		out.Traits, out.FirstSeenAt, out.LastSeenAt = traits, &first, &last
	}
	if out.LinkedIDs, err = Linked(ctx, p.pool, tenantID, user); err != nil {
		return Profile{}, errors.Join(errs.ErrUnavailable, err)
	}
	if out.FirstSeenAt == nil && len(out.LinkedIDs) == 0 {
		return Profile{}, errs.Coded(errs.ErrNotFound, "not_found", "no profile for this id")
	}
	return out, nil
}
