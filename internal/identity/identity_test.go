package identity_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// newTenant creates a tenant row, requiring signed user ids or not.
func newTenant(t *testing.T, pool *pgxpool.Pool, slug string, signed bool) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO tenants (slug, name, webhook_secret_sealed, identity_secret_sealed, require_signed_user_id)
		VALUES ($1, $1, 'x', 'x', $2) RETURNING id`, slug, signed).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func apply(t *testing.T, pool *pgxpool.Pool, g *identity.Graph, claims ...identity.Claim) ([]identity.Link, []identity.Refusal, []identity.Link) {
	t.Helper()
	var made, merged []identity.Link
	var refused []identity.Refusal
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		made, refused, err = g.Apply(context.Background(), tx, claims, func(l identity.Link) error {
			merged = append(merged, l)
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return made, refused, merged
}

func claim(tenant int64, id, user string) identity.Claim {
	return identity.Claim{TenantID: tenant, ID: id, UserID: user, Source: identity.SourceIdentify, At: t0}
}

func refusalTypes(rs []identity.Refusal) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Type)
	}
	return out
}

func TestApplyRules(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	ctx := context.Background()
	g := identity.New(identity.Config{MaxLinkedIDs: 2})
	tenant := newTenant(t, pool, "acme", false)
	other := newTenant(t, pool, "other", false)
	signed := newTenant(t, pool, "signed", true)

	cases := []struct {
		name        string
		claims      []identity.Claim
		wantMade    int
		wantRefused []string
	}{
		{name: "self link is a no-op", claims: []identity.Claim{claim(tenant, "u1", "u1")}, wantRefused: []string{}},
		{name: "first link made", claims: []identity.Claim{claim(tenant, "a1", "u1")}, wantMade: 1, wantRefused: []string{}},
		{name: "same link again is a no-op", claims: []identity.Claim{claim(tenant, "a1", "u1")}, wantRefused: []string{}},
		{name: "second claim for another user refused", claims: []identity.Claim{claim(tenant, "a1", "u2")}, wantRefused: []string{identity.RefusedConflict}},
		{name: "another tenant's same id links on its own", claims: []identity.Claim{claim(other, "a1", "u2")}, wantMade: 1, wantRefused: []string{}},
		{name: "link to a linked id refused (no chains)", claims: []identity.Claim{claim(tenant, "a9", "a1")}, wantRefused: []string{identity.RefusedChain}},
		{name: "a user with links cannot be linked (no chains)", claims: []identity.Claim{claim(tenant, "u1", "u3")}, wantRefused: []string{identity.RefusedChain}},
		{name: "second id up to the limit", claims: []identity.Claim{claim(tenant, "a2", "u1")}, wantMade: 1, wantRefused: []string{}},
		{name: "one more than the limit refused, never merged", claims: []identity.Claim{claim(tenant, "a3", "u1")}, wantRefused: []string{identity.RefusedLimit}},
		{name: "unsigned browser claim refused where signing is required",
			claims: []identity.Claim{{TenantID: signed, ID: "a1", UserID: "u1", Source: identity.SourceIdentify, Auth: identity.AuthSession, At: t0}}, wantRefused: []string{identity.RefusedUnsigned}},
		{name: "verified browser claim made where signing is required",
			claims: []identity.Claim{{TenantID: signed, ID: "a2", UserID: "u1", Source: identity.SourceIdentify, Auth: identity.AuthVerified, At: t0}}, wantMade: 1, wantRefused: []string{}},
		{name: "server key claim made where signing is required",
			claims: []identity.Claim{{TenantID: signed, ID: "a3", UserID: "u1", Source: identity.SourceAlias, Auth: identity.AuthServer, At: t0}}, wantMade: 1, wantRefused: []string{}},
		{name: "unsigned browser claim made where signing is not required",
			claims: []identity.Claim{{TenantID: other, ID: "a5", UserID: "u5", Source: identity.SourceIdentify, Auth: identity.AuthSession, At: t0}}, wantMade: 1, wantRefused: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			made, refused, merged := apply(t, pool, g, tc.claims...)
			if len(made) != tc.wantMade || len(merged) != tc.wantMade {
				t.Errorf("made %d links (merged %d), want %d", len(made), len(merged), tc.wantMade)
			}
			if got := refusalTypes(refused); len(got) != len(tc.wantRefused) || (len(got) > 0 && got[0] != tc.wantRefused[0]) {
				t.Errorf("refused %v, want %v", got, tc.wantRefused)
			}
			for _, r := range refused {
				if r.Message == "" {
					t.Errorf("refusal %s without a message", r.Type)
				}
			}
		})
	}

	// What the rows say afterwards.
	for _, tc := range []struct {
		name   string
		tenant int64
		id     string
		want   string
	}{
		{"linked id resolves to its user", tenant, "a1", "u1"},
		{"user resolves to itself", tenant, "u1", "u1"},
		{"refused id stays its own", tenant, "a3", "a3"},
		{"other tenant's link is its own", other, "a1", "u2"},
		{"unknown id resolves to itself", tenant, "nobody", "nobody"},
	} {
		t.Run("resolve "+tc.name, func(t *testing.T) {
			got, err := identity.Resolve(ctx, pool, tc.tenant, tc.id)
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%s) = %q, %v; want %q", tc.id, got, err, tc.want)
			}
		})
	}
	links, err := identity.Linked(ctx, pool, tenant, "u1")
	if err != nil || len(links) != 2 || links[0].ID != "a1" || links[1].ID != "a2" || links[0].Source != identity.SourceIdentify || !links[0].LinkedAt.Equal(t0) {
		t.Errorf("Linked(u1) = %+v, %v; want a1 and a2", links, err)
	}
	all, err := identity.ResolveAll(ctx, pool, []identity.Subject{{TenantID: tenant, ID: "a1"}, {TenantID: tenant, ID: "u1"}, {TenantID: other, ID: "a1"}})
	if err != nil || len(all) != 2 || all[identity.Subject{TenantID: tenant, ID: "a1"}] != "u1" || all[identity.Subject{TenantID: other, ID: "a1"}] != "u2" {
		t.Errorf("ResolveAll = %v, %v", all, err)
	}
}

// The limit holds when many claims on one user race from concurrent transactions.
func TestApplyLimitUnderConcurrency(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	g := identity.New(identity.Config{MaxLinkedIDs: 3})
	tenant := newTenant(t, pool, "acme", false)
	done := make(chan int, 8)
	for i := range 8 {
		go func() {
			var made []identity.Link
			_ = pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				var err error
				made, _, err = g.Apply(context.Background(), tx, []identity.Claim{claim(tenant, "anon-"+string(rune('a'+i)), "u1")}, nil)
				return err
			})
			done <- len(made)
		}()
	}
	for range 8 {
		<-done
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM identity_links WHERE tenant_id = $1 AND user_id = 'u1'`, tenant).Scan(&n); err != nil || n != 3 {
		t.Errorf("links of u1 = %d, %v; want 3", n, err)
	}
}
