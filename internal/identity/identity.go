// Package identity is a tenant's identity graph: it links an id (an anonymous id, or for an alias
// the previous id) to the user it became, and resolves any id to its canonical user. Links are
// made by the event loader in the transaction that stores the event that claims them (an identify
// carrying both ids, or an alias), so a redelivered message links once and links follow the bus's
// order. The table is identity_links (schema/postgres/0022_identity.sql).
//
// Rules:
//   - an id linking to itself is a no-op;
//   - an id links to one user only: a second claim for another user is refused (RefusedConflict);
//     the same claim again is a no-op;
//   - a user holds at most Config.MaxLinkedIDs linked ids: one more is refused (RefusedLimit) and
//     never merged, so one "super-node" cannot swallow a tenant;
//   - links do not chain: a link whose user is itself a linked id, or whose id already holds
//     linked ids of its own, is refused (RefusedChain), so every link's user is canonical and
//     resolving is one look-up;
//   - when the tenant requires signed user ids (tenants.require_signed_user_id), a claim from a
//     browser session is made only when the session's signature proved its user id; otherwise it
//     is refused (RefusedUnsigned). Server keys (sk_) are trusted.
//
// A refused claim never stops its event from being stored: the caller logs the refusal.
package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sources of a link.
const (
	SourceIdentify = "identify"
	SourceAlias    = "alias"
)

// Refusal types, as written to the ingestion error log (error_type).
const (
	RefusedConflict = "identity_conflict"
	RefusedLimit    = "identity_limit"
	RefusedUnsigned = "identity_unsigned"
	RefusedChain    = "identity_chain"
)

// DefaultMaxLinkedIDs is the default of Config.MaxLinkedIDs.
const DefaultMaxLinkedIDs = 100

// Auth is how far the sender of a claim vouched for its user id.
type Auth int

const (
	AuthServer   Auth = iota // a server key (sk_): trusted
	AuthSession              // a browser session whose signature did not prove the user id
	AuthVerified             // a browser session whose signature proved the user id
)

// Claim asks for id to be linked to user.
type Claim struct {
	TenantID int64
	ID       string // the anonymous (or previous) id
	UserID   string
	Source   string
	Auth     Auth
	At       time.Time // when the claiming event occurred: the link's linked_at
}

// Link is a stored link.
type Link struct {
	TenantID int64     `json:"-"`
	ID       string    `json:"id"`
	UserID   string    `json:"-"`
	Source   string    `json:"source"`
	LinkedAt time.Time `json:"linked_at"`
}

// Refusal is a claim that was not made, and why.
type Refusal struct {
	Claim
	Type    string // RefusedConflict, RefusedLimit, RefusedUnsigned or RefusedChain
	Message string
}

// Config holds the graph's rules.
type Config struct {
	MaxLinkedIDs int // links a user may hold; DefaultMaxLinkedIDs when <= 0
}

// Graph applies claims and resolves ids.
type Graph struct {
	max int
}

// New returns a graph with cfg's rules.
func New(cfg Config) *Graph {
	if cfg.MaxLinkedIDs <= 0 {
		cfg.MaxLinkedIDs = DefaultMaxLinkedIDs
	}
	return &Graph{max: cfg.MaxLinkedIDs}
}

// MaxLinkedIDs is how many ids a user may hold.
func (g *Graph) MaxLinkedIDs() int { return g.max }

// Apply makes the claims within tx, in their order, and returns the links it made and the claims
// it refused. Each new link is followed by merge(link) in the same transaction, so the linked
// id's rollups and profile move to its user with it.
func (g *Graph) Apply(ctx context.Context, tx pgx.Tx, claims []Claim, merge func(Link) error) ([]Link, []Refusal, error) {
	var made []Link
	var refused []Refusal
	required := map[int64]bool{}
	for _, c := range claims {
		if c.ID == c.UserID || c.ID == "" || c.UserID == "" {
			continue
		}
		if c.Auth == AuthSession {
			req, seen := required[c.TenantID]
			if !seen {
				var err error
				if req, err = requiresSigned(ctx, tx, c.TenantID); err != nil {
					return nil, nil, err
				}
				required[c.TenantID] = req
			}
			if req {
				refused = append(refused, Refusal{Claim: c, Type: RefusedUnsigned,
					Message: fmt.Sprintf("link of %q to user %q refused: this tenant requires signed user ids and the session's signature did not prove this user id", c.ID, c.UserID)})
				continue
			}
		}
		// Lock the user's links (and so serialise claims on one user across loaders) before
		// counting them: the limit then holds under concurrent claims.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(c.TenantID), c.UserID); err != nil {
			return nil, nil, fmt.Errorf("lock user links: %w", err)
		}
		var current, userOf string
		var held, own int
		err := tx.QueryRow(ctx, `SELECT
				COALESCE((SELECT user_id FROM identity_links WHERE tenant_id = $1 AND anonymous_id = $2), ''),
				COALESCE((SELECT user_id FROM identity_links WHERE tenant_id = $1 AND anonymous_id = $3), ''),
				(SELECT count(*) FROM identity_links WHERE tenant_id = $1 AND user_id = $3),
				(SELECT count(*) FROM identity_links WHERE tenant_id = $1 AND user_id = $2)`,
			c.TenantID, c.ID, c.UserID).Scan(&current, &userOf, &held, &own)
		if err != nil {
			return nil, nil, fmt.Errorf("read links: %w", err)
		}
		switch {
		case current == c.UserID:
			continue // linked already
		case current != "":
			refused = append(refused, Refusal{Claim: c, Type: RefusedConflict,
				Message: fmt.Sprintf("link of %q to user %q refused: it is linked to another user already", c.ID, c.UserID)})
			continue
		case userOf != "":
			refused = append(refused, Refusal{Claim: c, Type: RefusedChain,
				Message: fmt.Sprintf("link of %q to user %q refused: %q is itself a linked id (links do not chain)", c.ID, c.UserID, c.UserID)})
			continue
		}
		if own > 0 {
			refused = append(refused, Refusal{Claim: c, Type: RefusedChain,
				Message: fmt.Sprintf("link of %q to user %q refused: %q holds linked ids of its own (links do not chain)", c.ID, c.UserID, c.ID)})
			continue
		}
		if held >= g.max {
			refused = append(refused, Refusal{Claim: c, Type: RefusedLimit,
				Message: fmt.Sprintf("link of %q to user %q refused: the user holds %d linked ids, the most allowed", c.ID, c.UserID, g.max)})
			continue
		}
		l := Link{TenantID: c.TenantID, ID: c.ID, UserID: c.UserID, Source: c.Source, LinkedAt: c.At.UTC()}
		if _, err := tx.Exec(ctx, `INSERT INTO identity_links (tenant_id, anonymous_id, user_id, source, linked_at)
			VALUES ($1, $2, $3, $4, $5)`, l.TenantID, l.ID, l.UserID, l.Source, l.LinkedAt); err != nil {
			return nil, nil, fmt.Errorf("insert link: %w", err)
		}
		if merge != nil {
			if err := merge(l); err != nil {
				return nil, nil, err
			}
		}
		made = append(made, l)
	}
	return made, refused, nil
}

func requiresSigned(ctx context.Context, tx pgx.Tx, tenantID int64) (bool, error) {
	var req bool
	err := tx.QueryRow(ctx, `SELECT require_signed_user_id FROM tenants WHERE id = $1`, tenantID).Scan(&req)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read tenant identity settings: %w", err)
	}
	return req, nil
}

// Reader is what resolving reads through: a pool or a transaction.
type Reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Subject is an id of a tenant.
type Subject struct {
	TenantID int64
	ID       string
}

// ResolveAll returns the canonical user of each subject that is a linked id (subjects that are
// not linked are left out: they are their own canonical user), in one query.
func ResolveAll(ctx context.Context, r Reader, subjects []Subject) (map[Subject]string, error) {
	if len(subjects) == 0 {
		return nil, nil
	}
	tenants := make([]int64, len(subjects))
	ids := make([]string, len(subjects))
	for i, s := range subjects {
		tenants[i], ids[i] = s.TenantID, s.ID
	}
	rows, err := r.Query(ctx, `SELECT l.tenant_id, l.anonymous_id, l.user_id
		FROM unnest($1::bigint[], $2::text[]) AS x(t, id)
		JOIN identity_links l ON l.tenant_id = x.t AND l.anonymous_id = x.id COLLATE "C"`, tenants, ids)
	if err != nil {
		return nil, fmt.Errorf("resolve ids: %w", err)
	}
	defer rows.Close()
	var out map[Subject]string
	for rows.Next() {
		var s Subject
		var user string
		if err := rows.Scan(&s.TenantID, &s.ID, &user); err != nil {
			return nil, fmt.Errorf("resolve ids: %w", err)
		}
		if out == nil {
			out = map[Subject]string{}
		}
		out[s] = user
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resolve ids: %w", err)
	}
	return out, nil
}

// Resolve returns the canonical user of id: its linked user, or id itself.
func Resolve(ctx context.Context, r Reader, tenantID int64, id string) (string, error) {
	var user string
	err := r.QueryRow(ctx, `SELECT user_id FROM identity_links WHERE tenant_id = $1 AND anonymous_id = $2`, tenantID, id).Scan(&user)
	if errors.Is(err, pgx.ErrNoRows) {
		return id, nil
	}
	if err != nil {
		return "", fmt.Errorf("resolve id: %w", err)
	}
	return user, nil
}

// Linked lists the ids linked to user, oldest link first.
func Linked(ctx context.Context, r Reader, tenantID int64, user string) ([]Link, error) {
	rows, err := r.Query(ctx, `SELECT anonymous_id, source, linked_at FROM identity_links
		WHERE tenant_id = $1 AND user_id = $2 ORDER BY linked_at, anonymous_id`, tenantID, user)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	defer rows.Close()
	out := []Link{}
	for rows.Next() {
		l := Link{TenantID: tenantID, UserID: user}
		if err := rows.Scan(&l.ID, &l.Source, &l.LinkedAt); err != nil {
			return nil, fmt.Errorf("list links: %w", err)
		}
		l.LinkedAt = l.LinkedAt.UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	return out, nil
}
