package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
)

// matrixCred is one way of presenting (or not presenting) a credential.
type matrixCred struct {
	name   string
	header http.Header
	// kind is the credential kind when the credential is valid: sk, pk, session, bearer or
	// xapi_sk (a secret key in X-API-Key). Empty when it must be rejected with 401 everywhere.
	kind string
	// code is the error code of the 401 when kind is empty.
	code string
}

// groupCase is one endpoint group of the contract's authentication (api/openapi.yaml: info and each
// operation's security) and the credential kinds it
// accepts, written out independently of the policy's own kinds list.
type groupCase struct {
	name    string
	p       policy
	accepts []string
}

var matrixGroups = []groupCase{
	{name: "handshake", p: policyHandshake, accepts: []string{"pk"}},
	{name: "any_caller", p: policyAnyCaller, accepts: []string{"sk", "session", "bearer"}},
	{name: "ingest", p: policyIngest, accepts: []string{"sk", "session"}},
	{name: "bearer", p: policyBearer, accepts: []string{"bearer"}},
	{name: "secret_key", p: policySecretKey, accepts: []string{"sk"}},
	{name: "pages", p: policyPages, accepts: []string{"bearer", "sk"}},
	{name: "catalog", p: policyCatalog, accepts: []string{"bearer", "sk", "xapi_sk"}},
}

// revokedCreds rotates in a second key pair for tenant A, opens a session with the new public
// key through the real handshake, and then revokes both new keys. A's original keys stay valid
// (a year's grace); the rotation revokes A's tokens, so A's Bearer and session tokens are minted
// again, and the ones from before the rotation are returned as revoked.
func (f *fixture) revokedCreds(t *testing.T) (revokedSK, revokedPKSession, preRotationBearer, preRotationSession string) {
	t.Helper()
	ctx := context.Background()
	preRotationBearer, preRotationSession = f.A.Bearer, f.A.Session
	sk, pk, err := f.tenants.RotateKeys(ctx, f.A.T.Slug, 365*24*time.Hour)
	if err != nil {
		t.Fatalf("rotate keys: %v", err)
	}
	if f.A.T, err = f.tenants.BySlug(ctx, f.A.T.Slug); err != nil {
		t.Fatal(err)
	}
	if f.A.Bearer, _, err = f.tenants.MintToken(f.A.T, f.signer); err != nil {
		t.Fatal(err)
	}
	setup := serve(t, f.newServer(t))
	f.A.Session = f.handshake(t, setup, f.A.PK, `{"user_id":"user-a"}`)
	sess := f.handshake(t, setup, pk, "")
	for _, k := range []string{sk, pk} {
		if err := f.tenants.RevokeKey(ctx, f.A.T.Slug, keyID(t, k)); err != nil {
			t.Fatalf("revoke %s: %v", keyID(t, k), err)
		}
	}
	return sk, sess, preRotationBearer, preRotationSession
}

func (f *fixture) matrixCreds(t *testing.T) []matrixCred {
	t.Helper()
	expiredSigner, err := auth.NewSigner(f.tokenKey, func() time.Time { return time.Now().Add(-48 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	expiredBearer, _, err := f.tenants.MintToken(f.A.T, expiredSigner)
	if err != nil {
		t.Fatal(err)
	}
	expiredSession, _, err := expiredSigner.Mint(auth.Claims{TenantID: f.A.T.ID, TenantSlug: f.A.T.Slug, Type: auth.TokenSession, KeyID: f.A.PKID}, auth.SessionTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := auth.NewSigner([]byte(strings.Repeat("k", 32)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	foreignBearer, _, err := f.tenants.MintToken(f.A.T, otherSigner)
	if err != nil {
		t.Fatal(err)
	}
	revokedSK, revokedSession, preRotationBearer, preRotationSession := f.revokedCreds(t)
	revokedTokens := f.createTenant(t, "tenant-revoked-tokens")
	revokedTokens.Session = f.handshake(t, serve(t, f.newServer(t)), revokedTokens.PK, "")
	if _, err := f.tenants.RevokeTokens(context.Background(), revokedTokens.T.Slug); err != nil {
		t.Fatal(err)
	}
	ghostBearer, _, err := f.signer.Mint(auth.Claims{TenantID: 1 << 40, TenantSlug: "ghost", Type: auth.TokenAccess}, auth.AccessTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	ghostSession, _, err := f.signer.Mint(auth.Claims{TenantID: 1 << 40, TenantSlug: "ghost", Type: auth.TokenSession, KeyID: f.A.PKID}, auth.SessionTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	// A key rotated out with no grace period is expired at once.
	rotated := f.createTenant(t, "tenant-rotated")
	if _, _, err := f.tenants.RotateKeys(context.Background(), rotated.T.Slug, 0); err != nil {
		t.Fatal(err)
	}
	unknownSK := "sk_" + strings.Repeat("0", 12) + "_" + strings.Repeat("a", 48)
	// A's key id with B's secret part: the stored hash must not match.
	spliced := f.A.SKID + f.B.SK[len(f.B.SKID):]
	// A public key relabelled as a secret key: a different key id, unknown.
	relabelled := "sk_" + strings.TrimPrefix(f.A.PK, "pk_")

	authz := func(v string) http.Header { return hdr("Authorization", v) }
	return []matrixCred{
		{name: "none", header: http.Header{}, code: "unauthenticated"},
		{name: "blank Authorization", header: authz("   "), code: "unauthenticated"},
		{name: "malformed Bearer without token", header: authz("Bearer"), code: "unauthenticated"},
		{name: "malformed Basic scheme", header: authz("Basic abc"), code: "unauthenticated"},
		{name: "malformed ApiKey not a key", header: authz("ApiKey notakey"), code: "unauthenticated"},
		{name: "malformed Bearer not a JWT", header: authz("Bearer abc.def.ghi"), code: "unauthenticated"},
		{name: "unknown sk", header: authz("ApiKey " + unknownSK), code: "unauthenticated"},
		{name: "sk with another key's secret", header: authz("ApiKey " + spliced), code: "unauthenticated"},
		{name: "pk relabelled as sk", header: authz("ApiKey " + relabelled), code: "unauthenticated"},
		{name: "sk of A", header: authz("ApiKey " + f.A.SK), kind: "sk"},
		{name: "sk of A lowercase scheme", header: authz("apikey " + f.A.SK), kind: "sk"},
		{name: "pk of A", header: authz("ApiKey " + f.A.PK), kind: "pk"},
		{name: "session of A", header: authz("Bearer " + f.A.Session), kind: "session"},
		{name: "Bearer of A", header: authz("Bearer " + f.A.Bearer), kind: "bearer"},
		{name: "Bearer of A expired", header: authz("Bearer " + expiredBearer), code: "token_expired"},
		{name: "session of A expired", header: authz("Bearer " + expiredSession), code: "token_expired"},
		{name: "Bearer signed with another key", header: authz("Bearer " + foreignBearer), code: "unauthenticated"},
		{name: "revoked sk", header: authz("ApiKey " + revokedSK), code: "unauthenticated"},
		{name: "sk rotated out without grace", header: authz("ApiKey " + rotated.SK), code: "unauthenticated"},
		{name: "revoked sk in X-API-Key", header: hdr("X-API-Key", revokedSK), code: "unauthenticated"},
		{name: "X-API-Key sk of A", header: hdr("X-API-Key", f.A.SK), kind: "xapi_sk"},
		{name: "session whose pk was revoked", header: authz("Bearer " + revokedSession), code: "unauthenticated"},
		{name: "Bearer of A minted before rotate-keys", header: authz("Bearer " + preRotationBearer), code: "unauthenticated"},
		{name: "session of A opened before rotate-keys", header: authz("Bearer " + preRotationSession), code: "unauthenticated"},
		{name: "Bearer minted before revoke-tokens", header: authz("Bearer " + revokedTokens.Bearer), code: "unauthenticated"},
		{name: "session opened before revoke-tokens", header: authz("Bearer " + revokedTokens.Session), code: "unauthenticated"},
		{name: "Bearer of a tenant that does not exist", header: authz("Bearer " + ghostBearer), code: "unauthenticated"},
		{name: "session of a tenant that does not exist", header: authz("Bearer " + ghostSession), code: "unauthenticated"},
	}
}

// echoKind is the credential kind the probe reports for an accepted credential.
var echoKind = map[string]string{"sk": "secret_key", "xapi_sk": "secret_key", "pk": "public_key", "session": "session", "bearer": "bearer"}

// TestAuthMatrix runs every endpoint group against every credential on probe routes mounted on the
// real server: 401 (with WWW-Authenticate) for missing or bad credentials, 403 for a valid
// credential of a kind the group does not accept, 200 when accepted; never a 500.
func TestAuthMatrix(t *testing.T) {
	f := newFixture(t)
	creds := f.matrixCreds(t)
	s := f.newServer(t)
	paths := map[string]string{}
	for _, g := range matrixGroups {
		paths[g.name] = mountProbe(s, g.name, g.p)
	}
	ts := serve(t, s)

	for _, g := range matrixGroups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range creds {
				t.Run(c.name, func(t *testing.T) {
					r := send(t, ts, http.MethodGet, paths[g.name], c.header, nil)
					if r.Status >= 500 {
						t.Fatalf("status %d (never a 5xx for a credential): %s", r.Status, r.Body)
					}
					wantStatus, wantCode := http.StatusOK, ""
					switch {
					case c.kind == "":
						wantStatus, wantCode = http.StatusUnauthorized, c.code
					case c.kind == "xapi_sk" && !slices.Contains(g.accepts, "xapi_sk"):
						// X-API-Key is only read by the catalogue: elsewhere there is no credential.
						wantStatus, wantCode = http.StatusUnauthorized, "unauthenticated"
					case !slices.Contains(g.accepts, c.kind):
						wantStatus, wantCode = http.StatusForbidden, "forbidden"
					}
					if r.Status != wantStatus {
						t.Fatalf("status %d, want %d; body %s", r.Status, wantStatus, r.Body)
					}
					switch wantStatus {
					case http.StatusOK:
						var echo probeEcho
						if err := json.Unmarshal(r.Body, &echo); err != nil {
							t.Fatalf("probe body %s: %v", r.Body, err)
						}
						if echo.TenantID != f.A.T.ID || echo.TenantSlug != f.A.T.Slug {
							t.Errorf("tenant %d/%q, want A %d/%q", echo.TenantID, echo.TenantSlug, f.A.T.ID, f.A.T.Slug)
						}
						if echo.Kind != echoKind[c.kind] {
							t.Errorf("credential kind %q, want %q", echo.Kind, echoKind[c.kind])
						}
					case http.StatusUnauthorized:
						e := errorBody(t, r)
						if e.Code != wantCode {
							t.Errorf("code %q, want %q (message %q)", e.Code, wantCode, e.Message)
						}
						if r.Header.Get("WWW-Authenticate") == "" {
							t.Error("401 without a WWW-Authenticate header")
						}
					case http.StatusForbidden:
						e := errorBody(t, r)
						if e.Code != wantCode {
							t.Errorf("code %q, want %q (message %q)", e.Code, wantCode, e.Message)
						}
						if c.kind == "pk" && !strings.Contains(e.Message, "/api/auth/session/") {
							t.Errorf("403 for a pk_ key should point at the session handshake; message %q", e.Message)
						}
					}
				})
			}
		})
	}
}

// TestAuthTenantFromCredentialOnly: tenant B's credentials act as tenant B even when the request
// names tenant A in headers or the query; naming a tenant without a credential is a 401.
func TestAuthTenantFromCredentialOnly(t *testing.T) {
	f := newFixture(t)
	s := f.newServer(t)
	paths := map[string]string{}
	for _, g := range matrixGroups {
		paths[g.name] = mountProbe(s, g.name, g.p)
	}
	ts := serve(t, s)

	spoof := func(h http.Header) http.Header {
		h = h.Clone()
		h.Set("X-Tenant-ID", strconv.FormatInt(f.A.T.ID, 10))
		h.Set("X-Tenant", f.A.T.Slug)
		h.Set("X-Tenant-Slug", f.A.T.Slug)
		return h
	}
	query := "?tenant_id=" + strconv.FormatInt(f.A.T.ID, 10) + "&tenant=" + f.A.T.Slug
	bCreds := []struct {
		kind   string
		header http.Header
	}{
		{"sk", hdr("Authorization", "ApiKey "+f.B.SK)},
		{"pk", hdr("Authorization", "ApiKey "+f.B.PK)},
		{"session", hdr("Authorization", "Bearer "+f.B.Session)},
		{"bearer", hdr("Authorization", "Bearer "+f.B.Bearer)},
		{"xapi_sk", hdr("X-API-Key", f.B.SK)},
	}
	for _, g := range matrixGroups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range bCreds {
				if !slices.Contains(g.accepts, c.kind) {
					continue
				}
				t.Run(c.kind+" of B naming A", func(t *testing.T) {
					r := send(t, ts, http.MethodGet, paths[g.name]+query, spoof(c.header), nil)
					if r.Status != http.StatusOK {
						t.Fatalf("status %d, body %s", r.Status, r.Body)
					}
					var echo probeEcho
					if err := json.Unmarshal(r.Body, &echo); err != nil {
						t.Fatal(err)
					}
					if echo.TenantID != f.B.T.ID || echo.TenantSlug != f.B.T.Slug {
						t.Fatalf("tenant %d/%q, want B %d/%q (A is %d)", echo.TenantID, echo.TenantSlug, f.B.T.ID, f.B.T.Slug, f.A.T.ID)
					}
				})
			}
			t.Run("only naming A", func(t *testing.T) {
				r := send(t, ts, http.MethodGet, paths[g.name]+query, spoof(http.Header{}), nil)
				if r.Status != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401; body %s", r.Status, r.Body)
				}
				errorBody(t, r)
			})
		})
	}
}

// TestAuthRevocationWithinCacheTTL: a revoked key keeps working at most CacheTTL in a process
// that had cached it (the documented 30 s), then answers 401.
func TestAuthRevocationWithinCacheTTL(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sk, pk, err := f.tenants.RotateKeys(ctx, f.A.T.Slug, 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clk := &testClock{}
	s := New(Deps{Auth: f.authenticator(clk.Now, 30*time.Second)})
	ts := serve(t, s)
	sess := f.handshake(t, ts, pk, "")
	whoami := func(authz string) result {
		return send(t, ts, http.MethodGet, "/api/auth/whoami/", hdr("Authorization", authz), nil)
	}
	for _, a := range []string{"ApiKey " + sk, "Bearer " + sess} {
		if r := whoami(a); r.Status != http.StatusOK {
			t.Fatalf("before revocation: %d %s", r.Status, r.Body)
		}
	}
	for _, k := range []string{sk, pk} {
		if err := f.tenants.RevokeKey(ctx, f.A.T.Slug, keyID(t, k)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		offset time.Duration
		want   int
	}{
		{name: "cached within ttl", offset: 10 * time.Second, want: http.StatusOK},
		{name: "after ttl", offset: 31 * time.Second, want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.offset)
			for _, a := range []string{"ApiKey " + sk, "Bearer " + sess} {
				r := whoami(a)
				if r.Status != tt.want {
					t.Fatalf("%s: status %d, want %d; body %s", strings.Fields(a)[0], r.Status, tt.want, r.Body)
				}
				if r.Status != http.StatusOK {
					errorBody(t, r)
				}
			}
		})
	}
}

// TestAuthTokenRevocation: rotate-keys and revoke-tokens revoke tenant A's Bearer and session
// tokens; a server that had cached A's token generation keeps accepting them at most the cache
// TTL (30 s), then answers 401 in the error shape. Tokens minted after work; B is untouched.
func TestAuthTokenRevocation(t *testing.T) {
	tests := []struct {
		name   string
		revoke func(f *fixture) error
	}{
		{name: "revoke-tokens", revoke: func(f *fixture) error {
			_, err := f.tenants.RevokeTokens(context.Background(), f.A.T.Slug)
			return err
		}},
		{name: "rotate-keys", revoke: func(f *fixture) error {
			_, _, err := f.tenants.RotateKeys(context.Background(), f.A.T.Slug, 24*time.Hour)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			clk := &testClock{}
			ts := serve(t, New(Deps{Auth: f.authenticator(clk.Now, 30*time.Second)}))
			whoami := func(token string) result {
				return send(t, ts, http.MethodGet, "/api/auth/whoami/", hdr("Authorization", "Bearer "+token), nil)
			}
			for _, tok := range []string{f.A.Bearer, f.A.Session, f.B.Bearer} {
				if r := whoami(tok); r.Status != http.StatusOK {
					t.Fatalf("before revocation: %d %s", r.Status, r.Body)
				}
			}
			if err := tt.revoke(f); err != nil {
				t.Fatal(err)
			}
			clk.Set(10 * time.Second)
			if r := whoami(f.A.Bearer); r.Status != http.StatusOK {
				t.Fatalf("within the cache TTL: %d %s", r.Status, r.Body)
			}
			clk.Set(31 * time.Second)
			for name, tok := range map[string]string{"Bearer": f.A.Bearer, "session": f.A.Session} {
				r := whoami(tok)
				if r.Status != http.StatusUnauthorized {
					t.Fatalf("%s token after revocation and the cache TTL: %d %s", name, r.Status, r.Body)
				}
				if e := errorBody(t, r); e.Code != "unauthenticated" || !strings.Contains(e.Message, "revoked") {
					t.Errorf("%s token: code %q message %q, want unauthenticated: revoked", name, e.Code, e.Message)
				}
			}
			a, err := f.tenants.BySlug(ctx, f.A.T.Slug)
			if err != nil {
				t.Fatal(err)
			}
			fresh, _, err := f.tenants.MintToken(a, f.signer)
			if err != nil {
				t.Fatal(err)
			}
			if r := whoami(fresh); r.Status != http.StatusOK {
				t.Fatalf("token minted after the revocation: %d %s", r.Status, r.Body)
			}
			if r := whoami(f.handshake(t, ts, f.A.PK, "")); r.Status != http.StatusOK {
				t.Fatalf("session opened after the revocation: %d %s", r.Status, r.Body)
			}
			if r := whoami(f.B.Bearer); r.Status != http.StatusOK {
				t.Fatalf("tenant B's token: %d %s", r.Status, r.Body)
			}
		})
	}
}

// TestAuthUnknownTenantToken: a token validly signed with the server's key for a tenant id that
// does not exist (never did, or was deleted) is a 401, not a 200 with an empty tenant.
func TestAuthUnknownTenantToken(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t))
	ghost, _, err := f.signer.Mint(auth.Claims{TenantID: f.B.T.ID + 1000, TenantSlug: "ghost", Type: auth.TokenAccess}, auth.AccessTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	gone := f.createTenant(t, "tenant-gone")
	if _, err := f.db.Pool.Exec(context.Background(), `DELETE FROM tenants WHERE id = $1`, gone.T.ID); err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"never existed": ghost, "deleted": gone.Bearer} {
		t.Run(name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/auth/whoami/", hdr("Authorization", "Bearer "+tok), nil)
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401; body %s", r.Status, r.Body)
			}
			if e := errorBody(t, r); e.Code != "unauthenticated" {
				t.Errorf("code %q, want unauthenticated", e.Code)
			}
		})
	}
}
