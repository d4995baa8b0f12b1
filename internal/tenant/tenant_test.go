package tenant_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/tenant"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// t0 is second-aligned so it survives Postgres' microsecond timestamps unchanged.
var t0 = time.Date(2025, 6, 1, 9, 30, 0, 0, time.UTC)

var (
	masterSecret = []byte("tenant-test-master-secret-0123456789")
	signerKey    = bytes.Repeat([]byte("s"), 32)
	skRE         = regexp.MustCompile(`^sk_[0-9a-f]{12}_[0-9a-f]{48}$`)
	pkRE         = regexp.MustCompile(`^pk_[0-9a-f]{12}_[0-9a-f]{48}$`)
	secretRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

type env struct {
	db  *store.DB
	svc *tenant.Service
	clk *testenv.Clock
	box *secretbox.Box
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.OpenDB(t)
	key := secretbox.DeriveKey(masterSecret, "cohort/secretbox")
	box, err := secretbox.New(map[string][]byte{secretbox.KeyID(key): key}, secretbox.KeyID(key))
	if err != nil {
		t.Fatal(err)
	}
	clk := testenv.NewClock(t0)
	return &env{db: db, svc: tenant.NewService(db.Gorm, box, clk.Now), clk: clk, box: box}
}

func (e *env) create(t *testing.T, slug string) tenant.Created {
	t.Helper()
	c, err := e.svc.Create(context.Background(), slug, "")
	if err != nil {
		t.Fatalf("Create(%q): %v", slug, err)
	}
	return c
}

// authenticator wires the service into a real auth.Authenticator (the service is its key store,
// tenant resolver and identity store).
func (e *env) authenticator(t *testing.T) (*auth.Authenticator, *auth.Signer) {
	t.Helper()
	signer, err := auth.NewSigner(signerKey, e.clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return auth.NewAuthenticator(auth.Deps{
		Keys: e.svc, Tenants: e.svc, Identity: e.svc, Signer: signer, Now: e.clk.Now, CacheTTL: time.Nanosecond,
	}), signer
}

func keyID(t *testing.T, plain string) string {
	t.Helper()
	_, id, ok := auth.ParseKey(plain)
	if !ok {
		t.Fatalf("%q is not a well-formed key", plain)
	}
	return id
}

func TestCreate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		slug     string
		tname    string
		wantSlug string
		wantName string
	}{
		{name: "slug and name", slug: "acme", tname: "Acme Inc.", wantSlug: "acme", wantName: "Acme Inc."},
		{name: "name defaults to the slug", slug: "beta", tname: "", wantSlug: "beta", wantName: "beta"},
		{name: "blank name defaults to the slug", slug: "gamma", tname: "   ", wantSlug: "gamma", wantName: "gamma"},
		{name: "slug and name are trimmed", slug: "  delta  ", tname: "  Delta  ", wantSlug: "delta", wantName: "Delta"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := e.svc.Create(ctx, tt.slug, tt.tname)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if c.Tenant.ID <= 0 || c.Tenant.Slug != tt.wantSlug || c.Tenant.Name != tt.wantName {
				t.Fatalf("tenant = %+v, want slug %q name %q", c.Tenant, tt.wantSlug, tt.wantName)
			}
			if !skRE.MatchString(c.SecretKey) || !pkRE.MatchString(c.PublicKey) {
				t.Fatalf("keys = %q, %q; want sk_/pk_ shapes", c.SecretKey, c.PublicKey)
			}
			if !secretRE.MatchString(c.WebhookSecret) || !secretRE.MatchString(c.IdentitySecret) || c.WebhookSecret == c.IdentitySecret {
				t.Fatalf("secrets = %q, %q; want two different 32-byte hex secrets", c.WebhookSecret, c.IdentitySecret)
			}
			for _, k := range []struct {
				plain string
				kind  auth.KeyKind
			}{{c.SecretKey, auth.KeySecret}, {c.PublicKey, auth.KeyPublic}} {
				rec, err := e.svc.LookupKey(ctx, keyID(t, k.plain))
				if err != nil {
					t.Fatalf("LookupKey(%s): %v", keyID(t, k.plain), err)
				}
				if rec.KeyID != keyID(t, k.plain) || rec.Kind != k.kind || rec.TenantID != c.Tenant.ID || rec.TenantSlug != tt.wantSlug {
					t.Fatalf("record = %+v, want kind %s tenant %d/%s", rec, k.kind, c.Tenant.ID, tt.wantSlug)
				}
				if !bytes.Equal(rec.Hash, auth.HashKey(k.plain)) {
					t.Fatalf("stored hash does not match HashKey of the returned key")
				}
				if rec.ExpiresAt != nil || rec.RevokedAt != nil || !rec.Usable(e.clk.Now()) {
					t.Fatalf("new key is not plainly usable: %+v", rec)
				}
			}
			got, err := e.svc.BySlug(ctx, tt.wantSlug)
			if err != nil || got.ID != c.Tenant.ID || got.Name != tt.wantName || got.RequireSignedUserID {
				t.Fatalf("BySlug = %+v, %v", got, err)
			}
			byID, err := e.svc.ByID(ctx, c.Tenant.ID)
			if err != nil || byID.Slug != tt.wantSlug {
				t.Fatalf("ByID = %+v, %v", byID, err)
			}
		})
	}
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name      string
		slug      string
		tname     string
		wantField string // "" means valid
	}{
		{name: "two characters", slug: "ab"},
		{name: "letters digits and hyphens", slug: "acme-2-shop"},
		{name: "starts with a digit", slug: "9lives"},
		{name: "63 characters", slug: "a" + strings.Repeat("b", 62)},
		{name: "name of 200 characters", slug: "long-name", tname: strings.Repeat("n", 200)},

		{name: "empty", slug: "", wantField: "slug"},
		{name: "blank", slug: "   ", wantField: "slug"},
		{name: "one character", slug: "a", wantField: "slug"},
		{name: "64 characters", slug: "a" + strings.Repeat("b", 63), wantField: "slug"},
		{name: "starts with a hyphen", slug: "-acme", wantField: "slug"},
		{name: "only digits", slug: "2024", wantField: "slug"},
		{name: "uppercase", slug: "Acme", wantField: "slug"},
		{name: "underscore", slug: "acme_co", wantField: "slug"},
		{name: "dot", slug: "acme.co", wantField: "slug"},
		{name: "space inside", slug: "ac me", wantField: "slug"},
		{name: "newline inside", slug: "ac\nme", wantField: "slug"},
		{name: "slash", slug: "acme/../x", wantField: "slug"},
		{name: "non-ASCII", slug: "zürich", wantField: "slug"},
		{name: "sql quote", slug: "acme'--", wantField: "slug"},
		{name: "name of 201 characters", slug: "longer-name", tname: strings.Repeat("n", 201), wantField: "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := e.svc.Create(ctx, tt.slug, tt.tname)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Create(%q) = %v, want success", tt.slug, err)
				}
				if c.Tenant.Slug != strings.TrimSpace(tt.slug) {
					t.Fatalf("slug = %q", c.Tenant.Slug)
				}
				return
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("Create(%q) = %+v, %v; want errs.ErrInvalid", tt.slug, c, err)
			}
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tt.wantField] == "" {
				t.Fatalf("err = %v, want a validation error on %q", err, tt.wantField)
			}
		})
	}
	// Nothing was written for the invalid rows.
	var n int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM tenants`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("tenants = %d, want 5 (only the valid rows)", n)
	}
}

func TestCreateDuplicateSlug(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := e.create(t, "acme")
	tests := []struct {
		name string
		slug string
	}{
		{name: "same slug", slug: "acme"},
		{name: "same slug with spaces", slug: " acme "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Create(ctx, tt.slug, "Another")
			if !errors.Is(err, errs.ErrConflict) {
				t.Fatalf("Create duplicate = %v, want errs.ErrConflict", err)
			}
		})
	}
	var tenants, keys int
	if err := e.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM api_keys)`).Scan(&tenants, &keys); err != nil {
		t.Fatal(err)
	}
	if tenants != 1 || keys != 2 {
		t.Fatalf("after duplicates: %d tenants, %d keys; want 1 and 2 (no partial rows)", tenants, keys)
	}
	got, err := e.svc.BySlug(ctx, "acme")
	if err != nil || got.Name != first.Tenant.Name {
		t.Fatalf("original tenant changed: %+v, %v", got, err)
	}
}

func TestCreateConcurrentSameSlug(t *testing.T) {
	e := newEnv(t)
	const n = 6
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, results[i] = e.svc.Create(context.Background(), "race", "")
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, errs.ErrConflict):
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent creates of one slug succeeded, want exactly 1", ok)
	}
}

func TestSecretsRoundTripAndAreSealed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.create(t, "acme")
	b := e.create(t, "beta")

	for _, c := range []tenant.Created{a, b} {
		t.Run(c.Tenant.Slug, func(t *testing.T) {
			tn, secret, err := e.svc.WebhookSecret(ctx, c.Tenant.Slug)
			if err != nil {
				t.Fatalf("WebhookSecret: %v", err)
			}
			if tn.ID != c.Tenant.ID || string(secret) != c.WebhookSecret {
				t.Fatalf("WebhookSecret = tenant %d %q, want %d %q", tn.ID, secret, c.Tenant.ID, c.WebhookSecret)
			}
			id, required, err := e.svc.IdentitySettings(ctx, c.Tenant.ID)
			if err != nil {
				t.Fatalf("IdentitySettings: %v", err)
			}
			if string(id) != c.IdentitySecret || required {
				t.Fatalf("IdentitySettings = %q, %v; want %q, false", id, required, c.IdentitySecret)
			}

			var webhookSealed, identitySealed, row string
			if err := e.db.Pool.QueryRow(ctx,
				`SELECT webhook_secret_sealed, identity_secret_sealed, t::text FROM tenants t WHERE id = $1`, c.Tenant.ID,
			).Scan(&webhookSealed, &identitySealed, &row); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{webhookSealed, identitySealed} {
				if !strings.HasPrefix(s, "v1:"+e.box.ActiveID()+":") {
					t.Errorf("stored secret %q is not a secretbox value", s)
				}
			}
			for _, plain := range []string{c.WebhookSecret, c.IdentitySecret} {
				if strings.Contains(row, plain) {
					t.Errorf("tenants row contains a plaintext secret")
				}
			}
		})
	}

	if a.WebhookSecret == b.WebhookSecret || a.IdentitySecret == b.IdentitySecret {
		t.Fatal("two tenants got the same secret")
	}

	// Sealed values are bound to their row and field: copying one elsewhere does not open.
	tests := []struct {
		name string
		sql  string
		read func() error
	}{
		{
			name: "acme's webhook secret copied to beta",
			sql:  `UPDATE tenants SET webhook_secret_sealed = (SELECT webhook_secret_sealed FROM tenants WHERE slug = 'acme') WHERE slug = 'beta'`,
			read: func() error { _, _, err := e.svc.WebhookSecret(ctx, "beta"); return err },
		},
		{
			name: "acme's webhook secret copied into its identity secret",
			sql:  `UPDATE tenants SET identity_secret_sealed = webhook_secret_sealed WHERE slug = 'acme'`,
			read: func() error { _, _, err := e.svc.IdentitySettings(ctx, a.Tenant.ID); return err },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e.db.Pool.Exec(ctx, tt.sql); err != nil {
				t.Fatal(err)
			}
			if err := tt.read(); !errors.Is(err, secretbox.ErrDecrypt) {
				t.Fatalf("reading a moved sealed value = %v, want secretbox.ErrDecrypt", err)
			}
		})
	}
}

func TestKeysStoredOnlyAsHashes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.create(t, "acme")
	newSK, newPK, err := e.svc.RotateKeys(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	plains := []string{c.SecretKey, c.PublicKey, newSK, newPK}
	for _, plain := range plains {
		t.Run(keyID(t, plain), func(t *testing.T) {
			var kind string
			var hash []byte
			if err := e.db.Pool.QueryRow(ctx, `SELECT kind, key_hash FROM api_keys WHERE key_id = $1`, keyID(t, plain)).Scan(&kind, &hash); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(plain))
			if !bytes.Equal(hash, sum[:]) {
				t.Fatalf("key_hash = %x, want SHA-256 of the key %x", hash, sum)
			}
			wantKind := "secret"
			if strings.HasPrefix(plain, "pk_") {
				wantKind = "public"
			}
			if kind != wantKind {
				t.Fatalf("kind = %q, want %q", kind, wantKind)
			}
		})
	}
	// The secret part of a key appears in no column of any row, in either table.
	rows, err := e.db.Pool.Query(ctx, `SELECT a::text FROM api_keys a UNION ALL SELECT t::text FROM tenants t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		n++
		for _, plain := range plains {
			secretPart := plain[len(keyID(t, plain))+1:]
			if strings.Contains(row, plain) || strings.Contains(row, secretPart) {
				t.Fatalf("a stored row contains the plaintext of %s: %s", keyID(t, plain), row)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("scanned %d rows, want 5 (4 keys + 1 tenant)", n)
	}
	// Listing keys never exposes hashes.
	keys, err := e.svc.Keys(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hash") || len(keys) != 4 {
		t.Fatalf("Keys JSON = %s; want 4 keys without hashes", b)
	}
}

func TestLookupKeyNotFound(t *testing.T) {
	e := newEnv(t)
	e.create(t, "acme")
	for _, id := range []string{"sk_000000000000", "pk_ffffffffffff", "", "nonsense"} {
		t.Run(id, func(t *testing.T) {
			if _, err := e.svc.LookupKey(context.Background(), id); !errors.Is(err, errs.ErrNotFound) {
				t.Fatalf("LookupKey(%q) = %v, want errs.ErrNotFound", id, err)
			}
		})
	}
}

func TestRotateKeys(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
	}{
		{name: "grace 0 revokes now", grace: 0},
		{name: "grace 1h", grace: time.Hour},
		{name: "grace 24h", grace: 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a, _ := e.authenticator(t)
			old := e.create(t, "acme")
			newSK, newPK, err := e.svc.RotateKeys(ctx, "acme", tt.grace)
			if err != nil {
				t.Fatalf("RotateKeys: %v", err)
			}
			if !skRE.MatchString(newSK) || !pkRE.MatchString(newPK) || newSK == old.SecretKey || newPK == old.PublicKey {
				t.Fatalf("new keys %q %q", newSK, newPK)
			}
			cutoff := t0.Add(tt.grace)
			for _, plain := range []string{old.SecretKey, old.PublicKey} {
				rec, err := e.svc.LookupKey(ctx, keyID(t, plain))
				if err != nil {
					t.Fatal(err)
				}
				if rec.ExpiresAt == nil || !rec.ExpiresAt.Equal(cutoff) {
					t.Fatalf("old key %s expires_at = %v, want %v", rec.KeyID, rec.ExpiresAt, cutoff)
				}
				if rec.RevokedAt != nil {
					t.Fatalf("rotation revoked the old key instead of expiring it")
				}
			}
			for _, plain := range []string{newSK, newPK} {
				rec, err := e.svc.LookupKey(ctx, keyID(t, plain))
				if err != nil {
					t.Fatal(err)
				}
				if rec.ExpiresAt != nil || rec.RevokedAt != nil || rec.TenantID != old.Tenant.ID {
					t.Fatalf("new key record = %+v", rec)
				}
			}

			// Old keys: usable until the cutoff, not at it. New keys: usable throughout.
			check := func(when string, plain string, want bool) {
				t.Helper()
				c, err := a.Authenticate(ctx, "ApiKey "+plain, "", false)
				if want && (err != nil || c.TenantID != old.Tenant.ID) {
					t.Fatalf("%s: %s = %+v, %v; want usable", when, keyID(t, plain), c, err)
				}
				if !want && !errors.Is(err, errs.ErrUnauthenticated) {
					t.Fatalf("%s: %s = %+v, %v; want unauthenticated", when, keyID(t, plain), c, err)
				}
			}
			if tt.grace > 0 {
				e.clk.Advance(tt.grace - time.Second)
				for _, p := range []string{old.SecretKey, old.PublicKey, newSK, newPK} {
					check("just before the cutoff", p, true)
				}
				e.clk.Advance(time.Second)
			}
			for _, p := range []string{old.SecretKey, old.PublicKey} {
				check("at the cutoff", p, false)
			}
			for _, p := range []string{newSK, newPK} {
				check("at the cutoff", p, true)
			}
		})
	}
}

func TestRotateKeysNeverExtendsEarlierExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gen1 := e.create(t, "acme")
	sk2, _, err := e.svc.RotateKeys(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	revokedLater := sk2
	e.clk.Advance(time.Minute)
	if err := e.svc.RevokeKey(ctx, "acme", keyID(t, revokedLater)); err != nil {
		t.Fatal(err)
	}
	sk3, pk3, err := e.svc.RotateKeys(ctx, "acme", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		plain       string
		wantExpires *time.Time
		wantRevoked bool
	}{
		{name: "first generation keeps its 1h cutoff", plain: gen1.SecretKey, wantExpires: new(t0.Add(time.Hour))},
		{name: "first generation pk keeps its 1h cutoff", plain: gen1.PublicKey, wantExpires: new(t0.Add(time.Hour))},
		{name: "revoked key is left alone", plain: revokedLater, wantRevoked: true},
		{name: "third generation has no expiry", plain: sk3},
		{name: "third generation pk has no expiry", plain: pk3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := e.svc.LookupKey(ctx, keyID(t, tt.plain))
			if err != nil {
				t.Fatal(err)
			}
			if (rec.RevokedAt != nil) != tt.wantRevoked {
				t.Fatalf("revoked_at = %v, want revoked %v", rec.RevokedAt, tt.wantRevoked)
			}
			if tt.wantRevoked {
				if rec.ExpiresAt != nil {
					t.Fatalf("revoked key got expires_at %v", rec.ExpiresAt)
				}
				return
			}
			switch {
			case tt.wantExpires == nil && rec.ExpiresAt != nil:
				t.Fatalf("expires_at = %v, want none", rec.ExpiresAt)
			case tt.wantExpires != nil && (rec.ExpiresAt == nil || !rec.ExpiresAt.Equal(*tt.wantExpires)):
				t.Fatalf("expires_at = %v, want %v", rec.ExpiresAt, *tt.wantExpires)
			}
		})
	}
	// The second generation pk_ (not revoked) now expires with the 24h grace from the third rotation.
	keys, err := e.svc.Keys(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 6 {
		t.Fatalf("keys = %d, want 6", len(keys))
	}
	if k := keys[3]; k.Kind != "public" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(t0.Add(time.Minute+24*time.Hour)) {
		t.Fatalf("second generation pk = %+v, want expiry at %v", k, t0.Add(time.Minute+24*time.Hour))
	}
}

func TestRotateKeysErrors(t *testing.T) {
	e := newEnv(t)
	e.create(t, "acme")
	tests := []struct {
		name  string
		slug  string
		grace time.Duration
		want  error
	}{
		{name: "negative grace", slug: "acme", grace: -time.Second, want: errs.ErrInvalid},
		{name: "unknown tenant", slug: "nobody", grace: 0, want: errs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sk, pk, err := e.svc.RotateKeys(context.Background(), tt.slug, tt.grace)
			if !errors.Is(err, tt.want) || sk != "" || pk != "" {
				t.Fatalf("RotateKeys = %q, %q, %v; want %v", sk, pk, err, tt.want)
			}
		})
	}
	keys, _ := e.svc.Keys(context.Background(), "acme")
	if len(keys) != 2 {
		t.Fatalf("failed rotations created keys: %d", len(keys))
	}
}

func TestRevokeKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	beta := e.create(t, "beta")
	a, _ := e.authenticator(t)
	e.clk.Advance(time.Minute)

	tests := []struct {
		name  string
		slug  string
		keyID string
		want  error
	}{
		{name: "another tenant's key", slug: "acme", keyID: keyID(t, beta.SecretKey), want: errs.ErrNotFound},
		{name: "unknown key", slug: "acme", keyID: "sk_000000000000", want: errs.ErrNotFound},
		{name: "unknown tenant", slug: "nobody", keyID: keyID(t, acme.SecretKey), want: errs.ErrNotFound},
		{name: "own secret key", slug: "acme", keyID: keyID(t, acme.SecretKey)},
		{name: "already revoked", slug: "acme", keyID: keyID(t, acme.SecretKey), want: errs.ErrNotFound},
		{name: "own public key", slug: "acme", keyID: keyID(t, acme.PublicKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.svc.RevokeKey(ctx, tt.slug, tt.keyID)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("RevokeKey = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("RevokeKey = %v", err)
			}
			rec, err := e.svc.LookupKey(ctx, tt.keyID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.RevokedAt == nil || !rec.RevokedAt.Equal(t0.Add(time.Minute)) {
				t.Fatalf("revoked_at = %v, want %v", rec.RevokedAt, t0.Add(time.Minute))
			}
		})
	}
	// beta's keys were not touched by acme's attempt.
	for _, plain := range []string{beta.SecretKey, beta.PublicKey} {
		c, err := a.Authenticate(ctx, "ApiKey "+plain, "", false)
		if err != nil || c.TenantID != beta.Tenant.ID {
			t.Fatalf("beta key %s after acme's revoke attempt = %+v, %v", keyID(t, plain), c, err)
		}
	}
	for _, plain := range []string{acme.SecretKey, acme.PublicKey} {
		if _, err := a.Authenticate(ctx, "ApiKey "+plain, "", false); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Fatalf("revoked acme key %s = %v, want unauthenticated", keyID(t, plain), err)
		}
	}
}

func TestResolveTenant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	beta := e.create(t, "beta")
	tests := []struct {
		name     string
		ref      string
		wantID   int64
		wantSlug string
		wantErr  error
	}{
		{name: "by slug", ref: "acme", wantID: acme.Tenant.ID, wantSlug: "acme"},
		{name: "other tenant by slug", ref: "beta", wantID: beta.Tenant.ID, wantSlug: "beta"},
		{name: "by id", ref: strconv.FormatInt(acme.Tenant.ID, 10), wantID: acme.Tenant.ID, wantSlug: "acme"},
		{name: "other tenant by id", ref: strconv.FormatInt(beta.Tenant.ID, 10), wantID: beta.Tenant.ID, wantSlug: "beta"},
		{name: "unknown slug", ref: "nobody", wantErr: errs.ErrNotFound},
		{name: "unknown id", ref: "999999", wantErr: errs.ErrNotFound},
		{name: "empty", ref: "", wantErr: errs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, slug, err := e.svc.ResolveTenant(ctx, tt.ref)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ResolveTenant(%q) = %d, %q, %v; want %v", tt.ref, id, slug, err, tt.wantErr)
				}
				return
			}
			if err != nil || id != tt.wantID || slug != tt.wantSlug {
				t.Fatalf("ResolveTenant(%q) = %d, %q, %v; want %d, %q", tt.ref, id, slug, err, tt.wantID, tt.wantSlug)
			}
		})
	}
}

// Create refuses all-digit slugs (TestCreateValidation), but the column allows them and tenants
// created before that rule may have one; an external token's tenant claim may carry it. Such a
// slug must resolve to its own tenant — never to the tenant whose numeric id reads the same.
func TestResolveTenantNumericSlug(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	tests := []struct {
		name string
		slug string
	}{
		{name: "digits that are no tenant's id", slug: "2024"},
		{name: "zero-padded id of another tenant", slug: fmt.Sprintf("0%d", acme.Tenant.ID)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Create refuses the slug, so give an ordinary tenant the older, all-digit one.
			c := e.create(t, fmt.Sprintf("legacy-%d", i))
			if _, err := e.db.Pool.Exec(ctx, `UPDATE tenants SET slug = $1 WHERE id = $2`, tt.slug, c.Tenant.ID); err != nil {
				t.Fatal(err)
			}
			id, slug, err := e.svc.ResolveTenant(ctx, tt.slug)
			if err != nil || id != c.Tenant.ID || slug != tt.slug {
				t.Fatalf("ResolveTenant(%q) = %d, %q, %v; want tenant %d (%q) — the slug resolved as an id",
					tt.slug, id, slug, err, c.Tenant.ID, tt.slug)
			}
		})
	}
}

func TestSetRequireSignedUserID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	beta := e.create(t, "beta")
	a, _ := e.authenticator(t)
	pk, err := a.Authenticate(ctx, "ApiKey "+acme.PublicKey, "", false)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Unix()
	tests := []struct {
		name         string
		slug         string
		on           bool
		wantErr      error
		wantRequired bool
	}{
		{name: "turn on", slug: "acme", on: true, wantRequired: true},
		{name: "turn on again", slug: "acme", on: true, wantRequired: true},
		{name: "turn off", slug: "acme", on: false},
		{name: "unknown tenant", slug: "nobody", on: true, wantErr: errs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.svc.SetRequireSignedUserID(ctx, tt.slug, tt.on)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("SetRequireSignedUserID = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, required, err := e.svc.IdentitySettings(ctx, acme.Tenant.ID)
			if err != nil || required != tt.wantRequired {
				t.Fatalf("IdentitySettings required = %v, %v; want %v", required, err, tt.wantRequired)
			}
			tn, err := e.svc.BySlug(ctx, "acme")
			if err != nil || tn.RequireSignedUserID != tt.wantRequired {
				t.Fatalf("BySlug = %+v, %v", tn, err)
			}
			// The handshake follows the setting.
			_, err = a.StartSession(ctx, pk, auth.SessionRequest{UserID: "u1"})
			if tt.wantRequired && !errors.Is(err, errs.ErrUnauthenticated) {
				t.Fatalf("unsigned handshake with the requirement on = %v, want unauthenticated", err)
			}
			if !tt.wantRequired && err != nil {
				t.Fatalf("unsigned handshake with the requirement off = %v", err)
			}
			s, err := a.StartSession(ctx, pk, auth.SessionRequest{UserID: "u1", UserIDTs: now, UserIDSig: auth.SignUserID([]byte(acme.IdentitySecret), "u1", now)})
			if err != nil || !s.Verified {
				t.Fatalf("signed handshake = %+v, %v; want verified", s, err)
			}
		})
	}
	// beta was never touched. (Unknown tenants: TestLookupsNotFound.)
	if _, required, err := e.svc.IdentitySettings(ctx, beta.Tenant.ID); err != nil || required {
		t.Fatalf("beta required = %v, %v; want false", required, err)
	}
}

func TestMintToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	a, signer := e.authenticator(t)
	tok, exp, err := e.svc.MintToken(acme.Tenant, signer)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(t0.Add(auth.AccessTokenTTL)) {
		t.Fatalf("exp = %v, want %v", exp, t0.Add(auth.AccessTokenTTL))
	}
	claims, err := signer.Verify(tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if claims.TenantID != acme.Tenant.ID || claims.TenantSlug != "acme" || claims.Type != auth.TokenAccess {
		t.Fatalf("claims = %+v", claims)
	}
	c, err := a.Authenticate(ctx, "Bearer "+tok, "", false)
	if err != nil || c.Kind != auth.KindBearer || c.TenantID != acme.Tenant.ID {
		t.Fatalf("Authenticate = %+v, %v", c, err)
	}
	e.clk.Advance(auth.AccessTokenTTL + time.Minute)
	if _, err := signer.Verify(tok); !errors.Is(err, auth.ErrTokenExpired) {
		t.Fatalf("after 24h: %v, want ErrTokenExpired", err)
	}
}

func TestTenantsNeverCross(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	beta := e.create(t, "beta")
	a, _ := e.authenticator(t)

	// Frankenstein keys: one tenant's key id with the other's secret part.
	splice := func(idFrom, secretFrom string) string {
		return keyID(t, idFrom) + secretFrom[len(keyID(t, secretFrom)):]
	}
	tests := []struct {
		name       string
		header     string
		wantTenant int64 // 0: must be refused
		wantKind   auth.Kind
	}{
		{name: "acme sk_", header: "ApiKey " + acme.SecretKey, wantTenant: acme.Tenant.ID, wantKind: auth.KindSecretKey},
		{name: "acme pk_", header: "ApiKey " + acme.PublicKey, wantTenant: acme.Tenant.ID, wantKind: auth.KindPublicKey},
		{name: "beta sk_", header: "ApiKey " + beta.SecretKey, wantTenant: beta.Tenant.ID, wantKind: auth.KindSecretKey},
		{name: "beta pk_", header: "ApiKey " + beta.PublicKey, wantTenant: beta.Tenant.ID, wantKind: auth.KindPublicKey},
		{name: "acme key id with beta's secret", header: "ApiKey " + splice(acme.SecretKey, beta.SecretKey)},
		{name: "beta key id with acme's secret", header: "ApiKey " + splice(beta.SecretKey, acme.SecretKey)},
		{name: "acme pk_ id with acme's sk_ secret", header: "ApiKey " + splice(acme.PublicKey, acme.SecretKey)},
		{name: "acme sk_ secret presented as pk_", header: "ApiKey pk_" + acme.SecretKey[3:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := a.Authenticate(ctx, tt.header, "", false)
			if tt.wantTenant == 0 {
				if !errors.Is(err, errs.ErrUnauthenticated) {
					t.Fatalf("Authenticate = %+v, %v; want unauthenticated", c, err)
				}
				return
			}
			if err != nil || c.TenantID != tt.wantTenant || c.Kind != tt.wantKind {
				t.Fatalf("Authenticate = %+v, %v; want tenant %d kind %v", c, err, tt.wantTenant, tt.wantKind)
			}
		})
	}
	for _, c := range []tenant.Created{acme, beta} {
		keys, err := e.svc.Keys(ctx, c.Tenant.Slug)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 {
			t.Fatalf("%s has %d keys, want 2", c.Tenant.Slug, len(keys))
		}
		for _, k := range keys {
			if k.TenantID != c.Tenant.ID || (k.KeyID != keyID(t, c.SecretKey) && k.KeyID != keyID(t, c.PublicKey)) {
				t.Fatalf("%s lists a key that is not its own: %+v", c.Tenant.Slug, k)
			}
		}
	}
	// A session from acme's pk_ is acme's.
	pk, err := a.Authenticate(ctx, "ApiKey "+acme.PublicKey, "", false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.StartSession(ctx, pk, auth.SessionRequest{UserID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Authenticate(ctx, "Bearer "+s.Token, "", false)
	if err != nil || c.Kind != auth.KindSession || c.TenantID != acme.Tenant.ID || c.TenantSlug != "acme" {
		t.Fatalf("session = %+v, %v", c, err)
	}
	// Rotating beta's keys does not touch acme's.
	if _, _, err := e.svc.RotateKeys(ctx, "beta", 0); err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{acme.SecretKey, acme.PublicKey} {
		rec, err := e.svc.LookupKey(ctx, keyID(t, plain))
		if err != nil || rec.ExpiresAt != nil || rec.RevokedAt != nil {
			t.Fatalf("acme key after beta's rotation = %+v, %v", rec, err)
		}
	}
	if c, err := a.Authenticate(ctx, "Bearer "+s.Token, "", false); err != nil || c.TenantID != acme.Tenant.ID {
		t.Fatalf("acme session after beta's rotation = %+v, %v", c, err)
	}
}

func TestLookupsNotFound(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
	}{
		{name: "BySlug", call: func() error { _, err := e.svc.BySlug(ctx, "nobody"); return err }},
		{name: "ByID", call: func() error { _, err := e.svc.ByID(ctx, 424242); return err }},
		{name: "Keys", call: func() error { _, err := e.svc.Keys(ctx, "nobody"); return err }},
		{name: "WebhookSecret", call: func() error { _, _, err := e.svc.WebhookSecret(ctx, "nobody"); return err }},
		{name: "IdentitySettings", call: func() error { _, _, err := e.svc.IdentitySettings(ctx, 424242); return err }},
		{name: "SetRequireSignedUserID", call: func() error { return e.svc.SetRequireSignedUserID(ctx, "nobody", true) }},
		{name: "RevokeKey", call: func() error { return e.svc.RevokeKey(ctx, "nobody", "sk_000000000000") }},
		// Slugs arrive in URL paths and token claims: bytes Postgres refuses must still be a 404.
		{name: "WebhookSecret of a slug with invalid UTF-8", call: func() error { _, _, err := e.svc.WebhookSecret(ctx, "ac\xffme"); return err }},
		{name: "ResolveTenant of a ref with NUL", call: func() error { _, _, err := e.svc.ResolveTenant(ctx, "ac\x00me"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, errs.ErrNotFound) {
				t.Fatalf("err = %v, want errs.ErrNotFound", err)
			}
		})
	}
}

// TestRevokeTokens: rotate-keys and revoke-tokens bump the tenant's token generation; a real
// authenticator with the 30 s cache refuses every token minted before (access and session) once
// its cache expires, accepts tokens minted after, and leaves other tenants alone.
func TestRevokeTokens(t *testing.T) {
	// revoke revokes acme's tokens and returns the public key that opens acme's sessions after it.
	tests := []struct {
		name   string
		revoke func(e *env, acme tenant.Created) (string, error)
	}{
		{name: "revoke-tokens", revoke: func(e *env, acme tenant.Created) (string, error) {
			gen, err := e.svc.RevokeTokens(context.Background(), "acme")
			if err == nil && gen != 1 {
				return "", fmt.Errorf("RevokeTokens = generation %d, want 1", gen)
			}
			return acme.PublicKey, err
		}},
		{name: "rotate-keys with a grace period", revoke: func(e *env, acme tenant.Created) (string, error) {
			_, _, err := e.svc.RotateKeys(context.Background(), "acme", 24*time.Hour)
			return acme.PublicKey, err
		}},
		{name: "rotate-keys without grace", revoke: func(e *env, _ tenant.Created) (string, error) {
			_, pk, err := e.svc.RotateKeys(context.Background(), "acme", 0)
			return pk, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			acme := e.create(t, "acme")
			beta := e.create(t, "beta")
			signer, err := auth.NewSigner(signerKey, e.clk.Now)
			if err != nil {
				t.Fatal(err)
			}
			a := auth.NewAuthenticator(auth.Deps{Keys: e.svc, Tenants: e.svc, Identity: e.svc, Signer: signer, Now: e.clk.Now, CacheTTL: 30 * time.Second})
			mint := func(slug string) string {
				t.Helper()
				tn, err := e.svc.BySlug(ctx, slug)
				if err != nil {
					t.Fatal(err)
				}
				tok, _, err := e.svc.MintToken(tn, signer)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			session := func(pkPlain string) string {
				t.Helper()
				pk, err := a.Authenticate(ctx, "ApiKey "+pkPlain, "", false)
				if err != nil {
					t.Fatal(err)
				}
				s, err := a.StartSession(ctx, pk, auth.SessionRequest{UserID: "u1"})
				if err != nil {
					t.Fatal(err)
				}
				return s.Token
			}
			bearer := func(tok string) error {
				_, err := a.Authenticate(ctx, "Bearer "+tok, "", false)
				return err
			}
			oldAccess, oldSession, betaAccess := mint("acme"), session(acme.PublicKey), mint("beta")
			for _, tok := range []string{oldAccess, oldSession, betaAccess} {
				if err := bearer(tok); err != nil {
					t.Fatalf("before revocation: %v", err)
				}
			}
			pk, err := tt.revoke(e, acme)
			if err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(29 * time.Second)
			if err := bearer(oldAccess); err != nil {
				t.Fatalf("within the cache TTL the cached generation is used: %v", err)
			}
			e.clk.Advance(time.Second)
			for name, tok := range map[string]string{"access token": oldAccess, "session token": oldSession} {
				err := bearer(tok)
				if !errors.Is(err, errs.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
					t.Fatalf("old %s after the cache TTL: err = %v, want unauthenticated: revoked", name, err)
				}
			}
			// New tokens work: minted from the tenant as loaded now, and sessions from a key.
			newAccess := mint("acme")
			claims, err := signer.Verify(newAccess)
			if err != nil || claims.Generation != 1 {
				t.Fatalf("new token claims = %+v, %v; want generation 1", claims, err)
			}
			if err := bearer(newAccess); err != nil {
				t.Fatalf("new access token: %v", err)
			}
			if err := bearer(session(pk)); err != nil {
				t.Fatalf("new session: %v", err)
			}
			// The other tenant is untouched.
			if err := bearer(betaAccess); err != nil {
				t.Fatalf("beta's token: %v", err)
			}
			if gen, err := e.svc.TokenGeneration(ctx, beta.Tenant.ID); err != nil || gen != 0 {
				t.Fatalf("beta's generation = %d, %v; want 0", gen, err)
			}
		})
	}
}

// TestTokensOfUnknownTenants: a validly signed token naming a tenant that does not exist (never
// did, or was deleted) is refused.
func TestTokensOfUnknownTenants(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.create(t, "acme")
	a, signer := e.authenticator(t)
	ghost, _, err := signer.Mint(auth.Claims{TenantID: 424242, TenantSlug: "ghost", Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := a.Authenticate(ctx, "Bearer "+ghost, "", false); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("token of a tenant that never existed = %+v, %v; want unauthenticated", c, err)
	}
	tok, _, err := e.svc.MintToken(acme.Tenant, signer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, "Bearer "+tok, "", false); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.db, `DELETE FROM tenants WHERE id = $1`, acme.Tenant.ID)
	e.clk.Advance(time.Second) // past the test authenticator's cache TTL
	if c, err := a.Authenticate(ctx, "Bearer "+tok, "", false); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("token of a deleted tenant = %+v, %v; want unauthenticated", c, err)
	}
	if _, err := e.svc.TokenGeneration(ctx, acme.Tenant.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("TokenGeneration of a deleted tenant: %v, want not found", err)
	}
	if _, err := e.svc.RevokeTokens(ctx, "nobody"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("RevokeTokens of an unknown tenant: %v, want not found", err)
	}
}

// TestCheckSealedKey: the tenant service opens a tenant's sealed secret with its key, and names a
// wrong key with secretbox's error.
func TestCheckSealedKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.svc.CheckSealedKey(ctx); err != nil {
		t.Fatalf("no tenants: %v", err)
	}
	e.create(t, "acme")
	if err := e.svc.CheckSealedKey(ctx); err != nil {
		t.Fatalf("the key the tenant was sealed with: %v", err)
	}
	other := secretbox.DeriveKey([]byte("another-master-secret-0123456789abcdef"), "cohort/secretbox")
	box, err := secretbox.New(map[string][]byte{secretbox.KeyID(other): other}, secretbox.KeyID(other))
	if err != nil {
		t.Fatal(err)
	}
	err = tenant.NewService(e.db.Gorm, box, e.clk.Now).CheckSealedKey(ctx)
	if !errors.Is(err, secretbox.ErrUnknownKey) && !errors.Is(err, secretbox.ErrDecrypt) {
		t.Fatalf("another key: err = %v, want secretbox.ErrUnknownKey or ErrDecrypt", err)
	}
}
