package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// fakeKeys is an in-memory auth.KeyStore that counts lookups.
type fakeKeys struct {
	mu    sync.Mutex
	recs  map[string]auth.KeyRecord
	calls map[string]int
	err   error
}

func newFakeKeys() *fakeKeys {
	return &fakeKeys{recs: map[string]auth.KeyRecord{}, calls: map[string]int{}}
}

func (f *fakeKeys) LookupKey(_ context.Context, keyID string) (auth.KeyRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[keyID]++
	if f.err != nil {
		return auth.KeyRecord{}, f.err
	}
	rec, ok := f.recs[keyID]
	if !ok {
		return auth.KeyRecord{}, fmt.Errorf("key %s: %w", keyID, errs.ErrNotFound)
	}
	return rec, nil
}

func (f *fakeKeys) add(t *testing.T, kind auth.KeyKind, tenantID int64, slug string) auth.NewKey {
	t.Helper()
	k, err := auth.GenerateKey(kind)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.recs[k.KeyID] = auth.KeyRecord{KeyID: k.KeyID, Kind: kind, TenantID: tenantID, TenantSlug: slug, Hash: k.Hash}
	f.mu.Unlock()
	return k
}

func (f *fakeKeys) update(keyID string, mut func(*auth.KeyRecord)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.recs[keyID]
	mut(&rec)
	f.recs[keyID] = rec
}

func (f *fakeKeys) remove(keyID string) {
	f.mu.Lock()
	delete(f.recs, keyID)
	f.mu.Unlock()
}

func (f *fakeKeys) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeKeys) callsFor(keyID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[keyID]
}

// fakeTenants is an in-memory auth.TenantResolver; every tenant of refs has the token
// generation gens[id] (0 when absent).
type fakeTenants struct {
	mu       sync.Mutex
	refs     map[string]fakeTenant
	gens     map[int64]int64
	err      error
	calls    int
	genCalls map[int64]int
}

type fakeTenant struct {
	id   int64
	slug string
}

func (f *fakeTenants) ResolveTenant(_ context.Context, ref string) (int64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return 0, "", f.err
	}
	t, ok := f.refs[ref]
	if !ok {
		return 0, "", fmt.Errorf("tenant %q: %w", ref, errs.ErrNotFound)
	}
	return t.id, t.slug, nil
}

func (f *fakeTenants) TokenGeneration(_ context.Context, tenantID int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.genCalls == nil {
		f.genCalls = map[int64]int{}
	}
	f.genCalls[tenantID]++
	if f.err != nil {
		return 0, f.err
	}
	for _, t := range f.refs {
		if t.id == tenantID {
			return f.gens[tenantID], nil
		}
	}
	return 0, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
}

// bump revokes the tenant's tokens, as tenant.Service.RevokeTokens does.
func (f *fakeTenants) bump(tenantID int64) {
	f.mu.Lock()
	if f.gens == nil {
		f.gens = map[int64]int64{}
	}
	f.gens[tenantID]++
	f.mu.Unlock()
}

func (f *fakeTenants) generationLookups(tenantID int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.genCalls[tenantID]
}

// fakeIdentity is an in-memory auth.IdentityStore.
type fakeIdentity struct {
	mu       sync.Mutex
	secrets  map[int64][]byte
	required map[int64]bool
	err      error
}

func (f *fakeIdentity) IdentitySettings(_ context.Context, tenantID int64) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, false, f.err
	}
	s, ok := f.secrets[tenantID]
	if !ok {
		return nil, false, fmt.Errorf("tenant %d: %w", tenantID, errs.ErrNotFound)
	}
	return s, f.required[tenantID], nil
}

const (
	acmeID   = int64(7)
	acmeSlug = "acme"
	betaID   = int64(8)
	betaSlug = "beta"
	cacheTTL = 30 * time.Second
)

var (
	acmeIdentitySecret = []byte("acme-identity-secret")
	betaIdentitySecret = []byte("beta-identity-secret")
)

// fixture is an Authenticator over fakes, with a JWKS provider and a tenant acme (id 7) that has
// one sk_ and one pk_ key, and a tenant beta (id 8) that requires signed user ids.
type fixture struct {
	clk      *testenv.Clock
	keys     *fakeKeys
	tenants  *fakeTenants
	identity *fakeIdentity
	signer   *auth.Signer
	idp      signingKey
	idpEC    signingKey
	jwks     *jwksServer
	a        *auth.Authenticator
	testingT *testing.T

	acmeSK, acmePK, betaSK, betaPK auth.NewKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{clk: testenv.NewClock(t0), keys: newFakeKeys()}
	f.tenants = &fakeTenants{refs: map[string]fakeTenant{
		acmeSlug: {acmeID, acmeSlug}, strconv.FormatInt(acmeID, 10): {acmeID, acmeSlug},
		betaSlug: {betaID, betaSlug}, strconv.FormatInt(betaID, 10): {betaID, betaSlug},
	}}
	f.identity = &fakeIdentity{
		secrets:  map[int64][]byte{acmeID: acmeIdentitySecret, betaID: betaIdentitySecret},
		required: map[int64]bool{betaID: true},
	}
	f.signer = newSigner(t, signingSecret, f.clk)
	f.idp = newRSAKey(t, "idp-rsa", 0)
	f.idpEC = newECKey(t, "idp-ec")
	f.jwks = newJWKSServer(t, f.idp.jwk(t), f.idpEC.jwk(t))
	jv := newJWKS(t, f.jwks, f.clk, nil)
	f.a = auth.NewAuthenticator(auth.Deps{
		Keys: f.keys, Tenants: f.tenants, Identity: f.identity, Signer: f.signer, JWKS: jv,
		Now: f.clk.Now, CacheTTL: cacheTTL,
	})
	f.acmeSK = f.keys.add(t, auth.KeySecret, acmeID, acmeSlug)
	f.acmePK = f.keys.add(t, auth.KeyPublic, acmeID, acmeSlug)
	f.betaSK = f.keys.add(t, auth.KeySecret, betaID, betaSlug)
	f.betaPK = f.keys.add(t, auth.KeyPublic, betaID, betaSlug)
	return f
}

func (f *fixture) accessToken(t *testing.T, tenantID int64, slug string) string {
	t.Helper()
	tok, _, err := f.signer.Mint(auth.Claims{TenantID: tenantID, TenantSlug: slug, Type: auth.TokenAccess}, auth.AccessTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *fixture) pkCredential(t *testing.T, k auth.NewKey) auth.Credential {
	t.Helper()
	c, err := f.a.Authenticate(context.Background(), "ApiKey "+k.Plain, "", false)
	if err != nil {
		t.Fatalf("authenticate %s: %v", k.KeyID, err)
	}
	if c.Kind != auth.KindPublicKey {
		t.Fatalf("kind = %v, want public key", c.Kind)
	}
	return c
}

func (f *fixture) session(t *testing.T, k auth.NewKey, req auth.SessionRequest) auth.Session {
	t.Helper()
	s, err := f.a.StartSession(context.Background(), f.pkCredential(t, k), req)
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	return s
}

// errCode is the machine code of a CodedError in err's chain, "" if none.
func errCode(err error) string {
	var ce *errs.CodedError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func TestAuthenticateHeaders(t *testing.T) {
	f := newFixture(t)
	access := f.accessToken(t, acmeID, acmeSlug)
	sess := f.session(t, f.acmePK, auth.SessionRequest{UserID: "user-42", AnonymousID: "anon-1"})
	external := f.idp.sign(t, idpClaims(t0, acmeSlug))
	externalNumeric := f.idpEC.sign(t, idpClaims(t0, acmeID))
	externalUnknownTenant := f.idp.sign(t, idpClaims(t0, "nobody"))
	externalWrongIssuer := f.idp.sign(t, func() jwt.MapClaims { c := idpClaims(t0, acmeSlug); c["iss"] = "https://evil/"; return c }())
	externalExpired := f.idp.sign(t, func() jwt.MapClaims { c := idpClaims(t0, acmeSlug); c["exp"] = t0.Add(-time.Hour).Unix(); return c }())
	otherSigner := newSigner(t, otherSecret, f.clk)
	forged, _, err := otherSigner.Mint(auth.Claims{TenantID: acmeID, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatalf("mint forged token: %v", err)
	}
	expiredAccess := hsToken(t, jwt.SigningMethodHS256, signingSecret, auth.Claims{TenantID: acmeID, Type: auth.TokenAccess, RegisteredClaims: func() jwt.RegisteredClaims {
		r := cohortRegistered(t0.Add(-2 * time.Hour))
		return r
	}()})
	// HS256 keyed with the IdP's public key, claiming the IdP's issuer: must not pass as external.
	confused := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, idpClaims(t0, acmeSlug))
		tok.Header["kid"] = f.idp.kid
		s, err := tok.SignedString(publicKeyDER(t, f.idp.pub))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	wrongSecret := f.acmeSK.KeyID + "_" + strings.Repeat("0", 48)
	unknownKey := "sk_ffffffffffff_" + strings.Repeat("a", 48)

	type want struct {
		kind   auth.Kind
		tenant int64
		slug   string
		keyID  string
		userID string
		code   string // for errors: expected CodedError code ("" = don't care)
		noCred bool   // for errors: ErrNoCredentials
	}
	tests := []struct {
		name          string
		authorization string
		xAPIKey       string
		allowX        bool
		want          want // kind 0 means an unauthenticated error
	}{
		{name: "ApiKey sk_", authorization: "ApiKey " + f.acmeSK.Plain, want: want{kind: auth.KindSecretKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmeSK.KeyID}},
		{name: "ApiKey pk_", authorization: "ApiKey " + f.acmePK.Plain, want: want{kind: auth.KindPublicKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmePK.KeyID}},
		{name: "ApiKey sk_ of another tenant", authorization: "ApiKey " + f.betaSK.Plain, want: want{kind: auth.KindSecretKey, tenant: betaID, slug: betaSlug, keyID: f.betaSK.KeyID}},
		{name: "lower-case apikey scheme", authorization: "apikey " + f.acmeSK.Plain, want: want{kind: auth.KindSecretKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmeSK.KeyID}},
		{name: "upper-case APIKEY scheme", authorization: "APIKEY " + f.acmeSK.Plain, want: want{kind: auth.KindSecretKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmeSK.KeyID}},
		{name: "extra spaces around the key", authorization: "  ApiKey   " + f.acmeSK.Plain + "  ", want: want{kind: auth.KindSecretKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmeSK.KeyID}},
		{name: "Bearer access token", authorization: "Bearer " + access, want: want{kind: auth.KindBearer, tenant: acmeID, slug: acmeSlug}},
		{name: "lower-case bearer scheme", authorization: "bearer " + access, want: want{kind: auth.KindBearer, tenant: acmeID, slug: acmeSlug}},
		{name: "Bearer session token", authorization: "Bearer " + sess.Token, want: want{kind: auth.KindSession, tenant: acmeID, slug: acmeSlug, keyID: f.acmePK.KeyID, userID: "user-42"}},
		{name: "Bearer external RS256 slug", authorization: "Bearer " + external, want: want{kind: auth.KindBearer, tenant: acmeID, slug: acmeSlug}},
		{name: "Bearer external ES256 numeric tenant", authorization: "Bearer " + externalNumeric, want: want{kind: auth.KindBearer, tenant: acmeID, slug: acmeSlug}},
		{name: "X-API-Key sk_ where allowed", xAPIKey: f.acmeSK.Plain, allowX: true, want: want{kind: auth.KindSecretKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmeSK.KeyID}},
		{name: "X-API-Key with spaces where allowed", xAPIKey: " " + f.acmeSK.Plain + " ", allowX: true, want: want{kind: auth.KindSecretKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmeSK.KeyID}},
		{name: "X-API-Key pk_ where allowed is reported as a public key", xAPIKey: f.acmePK.Plain, allowX: true, want: want{kind: auth.KindPublicKey, tenant: acmeID, slug: acmeSlug, keyID: f.acmePK.KeyID}},
		{name: "Authorization wins over X-API-Key", authorization: "Bearer " + access, xAPIKey: f.betaSK.Plain, allowX: true, want: want{kind: auth.KindBearer, tenant: acmeID, slug: acmeSlug}},

		{name: "no headers", want: want{noCred: true}},
		{name: "blank Authorization", authorization: "   ", want: want{noCred: true}},
		{name: "X-API-Key where not allowed", xAPIKey: f.acmeSK.Plain, allowX: false, want: want{noCred: true}},
		{name: "X-API-Key garbage where allowed", xAPIKey: "garbage", allowX: true, want: want{code: "unauthenticated"}},
		{name: "bad Authorization does not fall back to X-API-Key", authorization: "Bearer garbage", xAPIKey: f.acmeSK.Plain, allowX: true, want: want{code: "unauthenticated"}},
		{name: "Bearer with no token", authorization: "Bearer", want: want{code: "unauthenticated"}},
		{name: "Bearer and a space", authorization: "Bearer ", want: want{code: "unauthenticated"}},
		{name: "ApiKey with no key", authorization: "ApiKey", want: want{code: "unauthenticated"}},
		{name: "unknown scheme Basic", authorization: "Basic dXNlcjpwYXNz", want: want{code: "unauthenticated"}},
		{name: "unknown scheme Token", authorization: "Token " + f.acmeSK.Plain, want: want{code: "unauthenticated"}},
		{name: "bare key without scheme", authorization: f.acmeSK.Plain, want: want{code: "unauthenticated"}},
		{name: "tab instead of space", authorization: "Bearer\t" + access, want: want{code: "unauthenticated"}},
		{name: "ApiKey malformed", authorization: "ApiKey sk_nope", want: want{code: "unauthenticated"}},
		{name: "ApiKey unknown well-formed key", authorization: "ApiKey " + unknownKey, want: want{code: "unauthenticated"}},
		{name: "ApiKey right id, wrong secret", authorization: "ApiKey " + wrongSecret, want: want{code: "unauthenticated"}},
		{name: "ApiKey with a JWT", authorization: "ApiKey " + access, want: want{code: "unauthenticated"}},
		{name: "Bearer with an sk_ key", authorization: "Bearer " + f.acmeSK.Plain, want: want{code: "unauthenticated"}},
		{name: "Bearer garbage", authorization: "Bearer garbage", want: want{code: "unauthenticated"}},
		{name: "Bearer token forged with another key", authorization: "Bearer " + forged, want: want{code: "unauthenticated"}},
		{name: "Bearer expired access token", authorization: "Bearer " + expiredAccess, want: want{code: "token_expired"}},
		{name: "Bearer expired external token", authorization: "Bearer " + externalExpired, want: want{code: "token_expired"}},
		{name: "Bearer external token of an unknown tenant", authorization: "Bearer " + externalUnknownTenant, want: want{code: "unauthenticated"}},
		{name: "Bearer external token with the wrong issuer", authorization: "Bearer " + externalWrongIssuer, want: want{code: "unauthenticated"}},
		{name: "Bearer HS256 keyed with the IdP public key", authorization: "Bearer " + confused, want: want{code: "unauthenticated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.a.Authenticate(context.Background(), tt.authorization, tt.xAPIKey, tt.allowX)
			if tt.want.kind == 0 {
				if err == nil {
					t.Fatalf("Authenticate accepted: %+v", c)
				}
				if !errors.Is(err, errs.ErrUnauthenticated) {
					t.Fatalf("err = %v, want errs.ErrUnauthenticated", err)
				}
				if errors.Is(err, errs.ErrUnavailable) {
					t.Fatalf("err = %v is also ErrUnavailable", err)
				}
				if tt.want.noCred && !errors.Is(err, auth.ErrNoCredentials) {
					t.Fatalf("err = %v, want ErrNoCredentials", err)
				}
				if tt.want.code != "" && errCode(err) != tt.want.code {
					t.Fatalf("code = %q, want %q (err %v)", errCode(err), tt.want.code, err)
				}
				if c != (auth.Credential{}) {
					t.Fatalf("credential %+v returned with an error", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate = %v", err)
			}
			w := tt.want
			if c.Kind != w.kind || c.TenantID != w.tenant || c.TenantSlug != w.slug || c.KeyID != w.keyID || c.UserID != w.userID {
				t.Fatalf("credential = %+v, want kind %v tenant %d/%s key %q user %q", c, w.kind, w.tenant, w.slug, w.keyID, w.userID)
			}
		})
	}
}

func TestAuthenticateExternalWithoutJWKS(t *testing.T) {
	clk := testenv.NewClock(t0)
	keys := newFakeKeys()
	tenants := &fakeTenants{refs: map[string]fakeTenant{"one": {1, "one"}}}
	a := auth.NewAuthenticator(auth.Deps{Keys: keys, Tenants: tenants, Identity: &fakeIdentity{}, Signer: newSigner(t, signingSecret, clk), Now: clk.Now})
	idp := newRSAKey(t, "k", 0)
	_, err := a.Authenticate(context.Background(), "Bearer "+idp.sign(t, idpClaims(t0, acmeSlug)), "", false)
	if !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("external token without a configured IdP: err = %v, want unauthenticated", err)
	}
	// Cohort's own tokens still work.
	tok, _, err := newSigner(t, signingSecret, clk).Mint(auth.Claims{TenantID: 1, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	c, err := a.Authenticate(context.Background(), "Bearer "+tok, "", false)
	if err != nil || c.Kind != auth.KindBearer || c.TenantID != 1 {
		t.Fatalf("access token = %+v, %v", c, err)
	}
}

func TestAuthenticateKeyValidity(t *testing.T) {
	past := t0.Add(-time.Minute)
	future := t0.Add(time.Minute)
	tests := []struct {
		name   string
		mut    func(*auth.KeyRecord)
		wantOK bool
	}{
		{name: "active", mut: func(*auth.KeyRecord) {}, wantOK: true},
		{name: "revoked a minute ago", mut: func(r *auth.KeyRecord) { r.RevokedAt = &past }},
		{name: "revoked right now", mut: func(r *auth.KeyRecord) { n := t0; r.RevokedAt = &n }},
		{name: "revocation scheduled in the future", mut: func(r *auth.KeyRecord) { r.RevokedAt = &future }, wantOK: true},
		{name: "expired a minute ago", mut: func(r *auth.KeyRecord) { r.ExpiresAt = &past }},
		{name: "expires right now", mut: func(r *auth.KeyRecord) { n := t0; r.ExpiresAt = &n }},
		{name: "expires in a minute", mut: func(r *auth.KeyRecord) { r.ExpiresAt = &future }, wantOK: true},
		{name: "stored hash does not match", mut: func(r *auth.KeyRecord) { r.Hash = auth.HashKey("something else") }},
		{name: "stored kind does not match the prefix", mut: func(r *auth.KeyRecord) { r.Kind = auth.KeyPublic }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.keys.update(f.acmeSK.KeyID, tt.mut)
			c, err := f.a.Authenticate(context.Background(), "ApiKey "+f.acmeSK.Plain, "", false)
			if tt.wantOK {
				if err != nil || c.Kind != auth.KindSecretKey {
					t.Fatalf("Authenticate = %+v, %v; want secret key", c, err)
				}
				return
			}
			if !errors.Is(err, errs.ErrUnauthenticated) {
				t.Fatalf("Authenticate = %+v, %v; want unauthenticated", c, err)
			}
		})
	}
}

func TestAuthenticateKeyExpiresWhileCached(t *testing.T) {
	f := newFixture(t)
	exp := t0.Add(10 * time.Second) // well inside the cache TTL
	f.keys.update(f.acmeSK.KeyID, func(r *auth.KeyRecord) { r.ExpiresAt = &exp })
	ctx := context.Background()
	if _, err := f.a.Authenticate(ctx, "ApiKey "+f.acmeSK.Plain, "", false); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	f.clk.Advance(10 * time.Second)
	if _, err := f.a.Authenticate(ctx, "ApiKey "+f.acmeSK.Plain, "", false); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("at expiry (still cached): err = %v, want unauthenticated", err)
	}
	if got := f.keys.callsFor(f.acmeSK.KeyID); got != 1 {
		t.Fatalf("store lookups = %d, want 1 (expiry is checked against the cached record)", got)
	}
}

func TestAuthenticateRevocationReachesCache(t *testing.T) {
	tests := []struct {
		name    string
		after   func(f *fixture)
		wantNow bool // whether the key still works right after revocation
	}{
		{name: "within the cache TTL the cached record is used", after: func(*fixture) {}, wantNow: true},
		{name: "after the cache TTL", after: func(f *fixture) { f.clk.Advance(cacheTTL) }},
		{name: "after Forget", after: func(f *fixture) { f.a.Forget(f.acmeSK.KeyID) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := f.a.Authenticate(ctx, "ApiKey "+f.acmeSK.Plain, "", false); err != nil {
				t.Fatal(err)
			}
			now := f.clk.Now()
			f.keys.update(f.acmeSK.KeyID, func(r *auth.KeyRecord) { r.RevokedAt = &now })
			tt.after(f)
			_, err := f.a.Authenticate(ctx, "ApiKey "+f.acmeSK.Plain, "", false)
			if tt.wantNow {
				if err != nil {
					t.Fatalf("err = %v, want the cached record to authenticate", err)
				}
				return
			}
			if !errors.Is(err, errs.ErrUnauthenticated) {
				t.Fatalf("err = %v, want unauthenticated after revocation", err)
			}
		})
	}
}

func TestSessionEndsWithItsPublicKey(t *testing.T) {
	tests := []struct {
		name   string
		revoke func(f *fixture)
		after  func(f *fixture)
	}{
		{
			name: "pk_ revoked, after the cache TTL",
			revoke: func(f *fixture) {
				n := f.clk.Now()
				f.keys.update(f.acmePK.KeyID, func(r *auth.KeyRecord) { r.RevokedAt = &n })
			},
			after: func(f *fixture) { f.clk.Advance(cacheTTL + time.Second) },
		},
		{
			name: "pk_ revoked, after Forget",
			revoke: func(f *fixture) {
				n := f.clk.Now()
				f.keys.update(f.acmePK.KeyID, func(r *auth.KeyRecord) { r.RevokedAt = &n })
			},
			after: func(f *fixture) { f.a.Forget(f.acmePK.KeyID) },
		},
		{
			name: "pk_ expired by rotation",
			revoke: func(f *fixture) {
				e := f.clk.Now().Add(5 * time.Second)
				f.keys.update(f.acmePK.KeyID, func(r *auth.KeyRecord) { r.ExpiresAt = &e })
			},
			after: func(f *fixture) { f.a.Forget(f.acmePK.KeyID); f.clk.Advance(5 * time.Second) },
		},
		{
			name:   "pk_ deleted",
			revoke: func(f *fixture) { f.keys.remove(f.acmePK.KeyID) },
			after:  func(f *fixture) { f.a.Forget(f.acmePK.KeyID) },
		},
		{
			name:   "pk_ now belongs to another tenant",
			revoke: func(f *fixture) { f.keys.update(f.acmePK.KeyID, func(r *auth.KeyRecord) { r.TenantID = betaID }) },
			after:  func(f *fixture) { f.a.Forget(f.acmePK.KeyID) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			s := f.session(t, f.acmePK, auth.SessionRequest{UserID: "u1"})
			c, err := f.a.Authenticate(ctx, "Bearer "+s.Token, "", false)
			if err != nil || c.Kind != auth.KindSession {
				t.Fatalf("fresh session = %+v, %v", c, err)
			}
			tt.revoke(f)
			tt.after(f)
			_, err = f.a.Authenticate(ctx, "Bearer "+s.Token, "", false)
			if !errors.Is(err, errs.ErrUnauthenticated) {
				t.Fatalf("session after its key went away: err = %v, want unauthenticated", err)
			}
			if errCode(err) == "token_expired" {
				t.Fatalf("a revoked session is not an expired token: %v", err)
			}
		})
	}
}

func TestSessionTokenExpires(t *testing.T) {
	f := newFixture(t)
	s := f.session(t, f.acmePK, auth.SessionRequest{})
	f.clk.Advance(auth.SessionTokenTTL + time.Minute)
	_, err := f.a.Authenticate(context.Background(), "Bearer "+s.Token, "", false)
	if !errors.Is(err, errs.ErrUnauthenticated) || errCode(err) != "token_expired" {
		t.Fatalf("expired session: err = %v (code %q), want unauthenticated with code token_expired", err, errCode(err))
	}
}

func TestStoreFailureIsUnavailable(t *testing.T) {
	dbDown := errors.New("connection refused")
	tests := []struct {
		name   string
		header func(f *fixture) string
		break_ func(f *fixture)
	}{
		{
			name:   "ApiKey lookup",
			header: func(f *fixture) string { return "ApiKey " + f.acmeSK.Plain },
			break_: func(f *fixture) { f.keys.setErr(dbDown) },
		},
		{
			name: "session's key lookup",
			header: func(f *fixture) string {
				s := f.session(f.testingT, f.acmePK, auth.SessionRequest{})
				f.a.Forget(f.acmePK.KeyID)
				return "Bearer " + s.Token
			},
			break_: func(f *fixture) { f.keys.setErr(dbDown) },
		},
		{
			name:   "external token's tenant lookup",
			header: func(f *fixture) string { return "Bearer " + f.idp.sign(f.testingT, idpClaims(t0, acmeSlug)) },
			break_: func(f *fixture) { f.tenants.mu.Lock(); f.tenants.err = dbDown; f.tenants.mu.Unlock() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.testingT = t
			h := tt.header(f)
			tt.break_(f)
			_, err := f.a.Authenticate(context.Background(), h, "", false)
			if !errors.Is(err, errs.ErrUnavailable) {
				t.Fatalf("err = %v, want errs.ErrUnavailable", err)
			}
			if errors.Is(err, errs.ErrUnauthenticated) {
				t.Fatalf("err = %v must not be unauthenticated (the client would drop a valid credential)", err)
			}
			// Failures are not cached: once the store is back the credential works.
			f.keys.setErr(nil)
			f.tenants.mu.Lock()
			f.tenants.err = nil
			f.tenants.mu.Unlock()
			if _, err := f.a.Authenticate(context.Background(), h, "", false); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
		})
	}
}

func TestKeyCache(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	auth1 := func(plain string) error {
		_, err := f.a.Authenticate(ctx, "ApiKey "+plain, "", false)
		return err
	}
	if err := auth1(f.acmeSK.Plain); err != nil {
		t.Fatal(err)
	}
	if err := auth1(f.acmeSK.Plain); err != nil {
		t.Fatal(err)
	}
	if got := f.keys.callsFor(f.acmeSK.KeyID); got != 1 {
		t.Fatalf("lookups after two authentications = %d, want 1", got)
	}
	// A wrong secret for a cached key id is rejected without another lookup.
	if err := auth1(f.acmeSK.KeyID + "_" + strings.Repeat("1", 48)); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v", err)
	}
	if got := f.keys.callsFor(f.acmeSK.KeyID); got != 1 {
		t.Fatalf("lookups = %d, want 1", got)
	}
	// Another key has its own entry.
	if err := auth1(f.acmePK.Plain); err != nil {
		t.Fatal(err)
	}
	if got := f.keys.callsFor(f.acmePK.KeyID); got != 1 {
		t.Fatalf("pk lookups = %d, want 1", got)
	}
	// After the TTL the store is asked again.
	f.clk.Advance(cacheTTL)
	if err := auth1(f.acmeSK.Plain); err != nil {
		t.Fatal(err)
	}
	if got := f.keys.callsFor(f.acmeSK.KeyID); got != 2 {
		t.Fatalf("lookups after TTL = %d, want 2", got)
	}
	// Forget drops the entry.
	f.a.Forget(f.acmeSK.KeyID)
	if err := auth1(f.acmeSK.Plain); err != nil {
		t.Fatal(err)
	}
	if got := f.keys.callsFor(f.acmeSK.KeyID); got != 3 {
		t.Fatalf("lookups after Forget = %d, want 3", got)
	}
	// Malformed keys are refused and never reach the store.
	if err := auth1("sk_garbage"); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("malformed key: err = %v, want unauthenticated", err)
	}
	f.keys.mu.Lock()
	for id := range f.keys.calls {
		if !strings.HasPrefix(id, "sk_") && !strings.HasPrefix(id, "pk_") {
			t.Errorf("store was asked for %q", id)
		}
	}
	f.keys.mu.Unlock()
}

func TestKeyCacheNegative(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k, err := auth.GenerateKey(auth.KeySecret) // not in the store yet
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := f.a.Authenticate(ctx, "ApiKey "+k.Plain, "", false); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if got := f.keys.callsFor(k.KeyID); got != 1 {
		t.Fatalf("lookups of an unknown key = %d, want 1 (cached miss)", got)
	}
	// The key is created; a miss is cached only briefly (at most 5s), not for the full TTL.
	f.keys.mu.Lock()
	f.keys.recs[k.KeyID] = auth.KeyRecord{KeyID: k.KeyID, Kind: auth.KeySecret, TenantID: acmeID, TenantSlug: acmeSlug, Hash: k.Hash}
	f.keys.mu.Unlock()
	f.clk.Advance(5 * time.Second)
	if c, err := f.a.Authenticate(ctx, "ApiKey "+k.Plain, "", false); err != nil || c.TenantID != acmeID {
		t.Fatalf("new key after the miss expired = %+v, %v", c, err)
	}
}

func TestSignUserID(t *testing.T) {
	tests := []struct {
		name   string
		secret []byte
		user   string
		ts     int64
	}{
		{name: "simple", secret: []byte("s3cret"), user: "user-1", ts: 1700000000},
		{name: "user with colon", secret: []byte("k"), user: "a:b", ts: 1},
		{name: "empty user", secret: []byte("k"), user: "", ts: 42},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := hmac.New(sha256.New, tt.secret)
			m.Write([]byte(tt.user + ":" + strconv.FormatInt(tt.ts, 10)))
			want := hex.EncodeToString(m.Sum(nil))
			if got := auth.SignUserID(tt.secret, tt.user, tt.ts); got != want {
				t.Fatalf("SignUserID = %s, want lowercase hex HMAC-SHA256 of \"user_id:ts\" %s", got, want)
			}
		})
	}
}

func TestStartSession(t *testing.T) {
	now := t0.Unix()
	sig := func(secret []byte, user string, ts int64) string { return auth.SignUserID(secret, user, ts) }
	long := strings.Repeat("x", 256)
	max := strings.Repeat("x", 255)

	type want struct {
		verified  bool
		userID    string
		boundAnon string // the anonymous id an anonymous session is bound to
		kind      error  // error kind; nil means success
		code      string // CodedError code, "" = don't care
		field     string // ValidationError field
	}
	tests := []struct {
		name string
		pk   func(f *fixture) auth.NewKey // the tenant's public key used (acme: optional sig, beta: required)
		req  auth.SessionRequest
		want want
	}{
		// acme: signed user id not required
		{name: "optional: anonymous", pk: acmePK, req: auth.SessionRequest{AnonymousID: "anon-1"}},
		{name: "optional: empty body", pk: acmePK, req: auth.SessionRequest{}},
		{name: "optional: user id without sig is unverified", pk: acmePK, req: auth.SessionRequest{UserID: "u1"}, want: want{userID: "u1"}},
		{name: "optional: valid sig verifies", pk: acmePK, req: auth.SessionRequest{UserID: "u1", UserIDSig: sig(acmeIdentitySecret, "u1", now), UserIDTs: now}, want: want{userID: "u1", verified: true}},
		{name: "optional: bad sig is refused", pk: acmePK, req: auth.SessionRequest{UserID: "u1", UserIDSig: sig([]byte("wrong"), "u1", now), UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
		{name: "optional: user id at 255 chars", pk: acmePK, req: auth.SessionRequest{UserID: max}, want: want{userID: max}},
		{name: "optional: user id over 255 chars", pk: acmePK, req: auth.SessionRequest{UserID: long}, want: want{kind: errs.ErrInvalid, field: "user_id"}},
		{name: "optional: anonymous id over 255 chars", pk: acmePK, req: auth.SessionRequest{AnonymousID: long}, want: want{kind: errs.ErrInvalid, field: "anonymous_id"}},

		// beta: signed user id required
		{name: "required: valid", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now), UserIDTs: now}, want: want{userID: "u9", verified: true}},
		{name: "required: uppercase-hex sig accepted", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: strings.ToUpper(sig(betaIdentitySecret, "u9", now)), UserIDTs: now}, want: want{userID: "u9", verified: true}},
		{name: "required: ts 9 minutes old", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now-540), UserIDTs: now - 540}, want: want{userID: "u9", verified: true}},
		{name: "required: ts 9 minutes ahead", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now+540), UserIDTs: now + 540}, want: want{userID: "u9", verified: true}},
		{name: "required: anonymous id alone is an anonymous session", pk: betaPK, req: auth.SessionRequest{AnonymousID: "anon"}, want: want{boundAnon: "anon"}},
		{name: "required: anonymous id with a ts but no sig is an anonymous session", pk: betaPK, req: auth.SessionRequest{AnonymousID: "anon", UserIDTs: now}, want: want{boundAnon: "anon"}},
		{name: "required: anonymous id with a control character", pk: betaPK, req: auth.SessionRequest{AnonymousID: "anon\x01"}, want: want{kind: errs.ErrInvalid, field: "anonymous_id"}},
		{name: "required: anonymous id of invalid UTF-8", pk: betaPK, req: auth.SessionRequest{AnonymousID: "anon\xff"}, want: want{kind: errs.ErrInvalid, field: "anonymous_id"}},
		{name: "required: missing user_id", pk: betaPK, req: auth.SessionRequest{}, want: want{kind: errs.ErrInvalid, field: "user_id"}},
		{name: "required: anonymous id with a sig but no user_id", pk: betaPK, req: auth.SessionRequest{AnonymousID: "anon", UserIDSig: sig(betaIdentitySecret, "", now), UserIDTs: now}, want: want{kind: errs.ErrInvalid, field: "user_id"}},
		{name: "required: anonymous id with an unsigned user_id", pk: betaPK, req: auth.SessionRequest{UserID: "u9", AnonymousID: "anon"}, want: want{kind: errs.ErrUnauthenticated, code: "signature_required"}},
		{name: "required: anonymous id with a bad sig", pk: betaPK, req: auth.SessionRequest{UserID: "u9", AnonymousID: "anon", UserIDSig: sig(acmeIdentitySecret, "u9", now), UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
		{name: "required: signed user with an anonymous id is not anonymous", pk: betaPK, req: auth.SessionRequest{UserID: "u9", AnonymousID: "anon", UserIDSig: sig(betaIdentitySecret, "u9", now), UserIDTs: now}, want: want{userID: "u9", verified: true}},
		{name: "required: missing user_id with a sig", pk: betaPK, req: auth.SessionRequest{UserIDSig: sig(betaIdentitySecret, "", now), UserIDTs: now}, want: want{kind: errs.ErrInvalid, field: "user_id"}},
		{name: "required: missing sig", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "signature_required"}},
		{name: "required: missing ts", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", 0)}, want: want{kind: errs.ErrUnauthenticated, code: "signature_required"}},
		{name: "required: ts 11 minutes old", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now-660), UserIDTs: now - 660}, want: want{kind: errs.ErrUnauthenticated, code: "signature_expired"}},
		{name: "required: ts 11 minutes in the future", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now+660), UserIDTs: now + 660}, want: want{kind: errs.ErrUnauthenticated, code: "signature_expired"}},
		{name: "required: sig made with another tenant's secret", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(acmeIdentitySecret, "u9", now), UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
		{name: "required: sig for another user", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u10", now), UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
		{name: "required: sig for another ts", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now-1), UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
		{name: "required: sig not hex", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: "zzzz", UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
		{name: "required: truncated sig", pk: betaPK, req: auth.SessionRequest{UserID: "u9", UserIDSig: sig(betaIdentitySecret, "u9", now)[:63], UserIDTs: now}, want: want{kind: errs.ErrUnauthenticated, code: "bad_signature"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			pk := tt.pk(f)
			s, err := f.a.StartSession(ctx, f.pkCredential(t, pk), tt.req)
			if tt.want.kind != nil {
				if !errors.Is(err, tt.want.kind) {
					t.Fatalf("StartSession = %+v, %v; want kind %v", s, err, tt.want.kind)
				}
				if tt.want.code != "" && errCode(err) != tt.want.code {
					t.Fatalf("code = %q, want %q (err %v)", errCode(err), tt.want.code, err)
				}
				if tt.want.field != "" {
					var ve *errs.ValidationError
					if !errors.As(err, &ve) || ve.Fields[tt.want.field] == "" {
						t.Fatalf("err = %v, want a ValidationError on %s", err, tt.want.field)
					}
				}
				if s.Token != "" {
					t.Fatalf("a token was issued along with the error")
				}
				return
			}
			if err != nil {
				t.Fatalf("StartSession = %v", err)
			}
			if s.TokenType != "Bearer" || s.ExpiresIn != int(auth.SessionTokenTTL/time.Second) || !s.ExpiresAt.Equal(t0.Add(auth.SessionTokenTTL)) {
				t.Errorf("session = %+v, want Bearer, expires_in %d, expires_at %v", s, int(auth.SessionTokenTTL/time.Second), t0.Add(auth.SessionTokenTTL))
			}
			if s.UserID != tt.want.userID || s.Verified != tt.want.verified || s.AnonymousID != tt.want.boundAnon {
				t.Errorf("session user = %q verified %v anonymous %q, want %q %v %q", s.UserID, s.Verified, s.AnonymousID, tt.want.userID, tt.want.verified, tt.want.boundAnon)
			}
			c, err := f.a.Authenticate(ctx, "Bearer "+s.Token, "", false)
			if err != nil {
				t.Fatalf("session token does not authenticate: %v", err)
			}
			want := auth.Credential{Kind: auth.KindSession, TenantID: pk2tenant(pk, f), TenantSlug: pk2slug(pk, f), KeyID: pk.KeyID, UserID: tt.want.userID, Verified: tt.want.verified, BoundAnonymousID: tt.want.boundAnon}
			if c != want {
				t.Fatalf("credential = %+v, want %+v", c, want)
			}
			claims, err := f.signer.Verify(s.Token)
			if err != nil || claims.AnonID != tt.req.AnonymousID || claims.Type != auth.TokenSession {
				t.Fatalf("claims = %+v, %v; want session with anon id %q", claims, err, tt.req.AnonymousID)
			}
		})
	}
}

func acmePK(f *fixture) auth.NewKey { return f.acmePK }
func betaPK(f *fixture) auth.NewKey { return f.betaPK }

func pk2tenant(pk auth.NewKey, f *fixture) int64 {
	if pk.KeyID == f.betaPK.KeyID {
		return betaID
	}
	return acmeID
}

func pk2slug(pk auth.NewKey, f *fixture) string {
	if pk.KeyID == f.betaPK.KeyID {
		return betaSlug
	}
	return acmeSlug
}

func TestStartSessionRequiresPublicKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	access := f.accessToken(t, acmeID, acmeSlug)
	sess := f.session(t, f.acmePK, auth.SessionRequest{})
	tests := []struct {
		name   string
		header string
	}{
		{name: "sk_ key", header: "ApiKey " + f.acmeSK.Plain},
		{name: "access token", header: "Bearer " + access},
		{name: "session token", header: "Bearer " + sess.Token},
		{name: "external token", header: "Bearer " + f.idp.sign(t, idpClaims(t0, acmeSlug))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.a.Authenticate(ctx, tt.header, "", false)
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.a.StartSession(ctx, c, auth.SessionRequest{UserID: "u1"})
			if !errors.Is(err, errs.ErrForbidden) || errCode(err) != "forbidden" {
				t.Fatalf("StartSession(%v) = %+v, %v; want forbidden", c.Kind, s, err)
			}
		})
	}
	// The zero credential is refused too.
	if _, err := f.a.StartSession(ctx, auth.Credential{}, auth.SessionRequest{}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("zero credential: %v", err)
	}
}

func TestStartSessionIdentityStoreFailure(t *testing.T) {
	f := newFixture(t)
	pk := f.pkCredential(t, f.acmePK)
	f.identity.mu.Lock()
	f.identity.err = errors.New("connection refused")
	f.identity.mu.Unlock()
	s, err := f.a.StartSession(context.Background(), pk, auth.SessionRequest{UserID: "u1"})
	if err == nil || s.Token != "" {
		t.Fatalf("StartSession with the identity store down = %+v, %v; want an error and no token", s, err)
	}
	if errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("a store failure must not look like bad credentials: %v", err)
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		kind auth.Kind
		want string
	}{
		{auth.KindSecretKey, "secret key (ApiKey sk_)"},
		{auth.KindPublicKey, "public key (ApiKey pk_)"},
		{auth.KindSession, "session token"},
		{auth.KindBearer, "Bearer token"},
		{auth.Kind(0), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.kind.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyRecordUsable(t *testing.T) {
	now := t0
	before, after := now.Add(-time.Nanosecond), now.Add(time.Nanosecond)
	tests := []struct {
		name string
		rec  auth.KeyRecord
		want bool
	}{
		{name: "no limits", rec: auth.KeyRecord{}, want: true},
		{name: "revoked before", rec: auth.KeyRecord{RevokedAt: &before}},
		{name: "revoked at now", rec: auth.KeyRecord{RevokedAt: &now}},
		{name: "revoked after", rec: auth.KeyRecord{RevokedAt: &after}, want: true},
		{name: "expired before", rec: auth.KeyRecord{ExpiresAt: &before}},
		{name: "expires at now", rec: auth.KeyRecord{ExpiresAt: &now}},
		{name: "expires after", rec: auth.KeyRecord{ExpiresAt: &after}, want: true},
		{name: "expires after but revoked", rec: auth.KeyRecord{ExpiresAt: &after, RevokedAt: &before}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rec.Usable(now); got != tt.want {
				t.Fatalf("Usable = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTokenGeneration: a token Cohort minted is refused once its tenant's token generation has
// moved past the one it carries (rotate-keys, revoke-tokens), within the cache TTL; a token of a
// tenant that does not exist is refused; tokens minted before generations existed carry no claim
// and count as generation 0, valid until the tenant's first bump.
func TestTokenGeneration(t *testing.T) {
	ctx := context.Background()
	access := func(f *fixture, gen int64) string {
		t.Helper()
		tok, _, err := f.signer.Mint(auth.Claims{TenantID: acmeID, TenantSlug: acmeSlug, Type: auth.TokenAccess, Generation: gen}, auth.AccessTokenTTL)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	authn := func(f *fixture, tok string) (auth.Credential, error) {
		return f.a.Authenticate(ctx, "Bearer "+tok, "", false)
	}
	wantRevoked := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, errs.ErrUnauthenticated) || errCode(err) != "unauthenticated" || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("err = %v (code %q), want unauthenticated: token revoked", err, errCode(err))
		}
	}

	t.Run("a token minted before generations carries no claim and is valid at generation 0", func(t *testing.T) {
		f := newFixture(t)
		legacy := hsToken(t, jwt.SigningMethodHS256, signingSecret, jwt.MapClaims{
			"tid": acmeID, "tsl": acmeSlug, "typ": "access", "iss": "cohort", "aud": "cohort-api",
			"iat": t0.Unix(), "exp": t0.Add(auth.AccessTokenTTL).Unix(),
		})
		if c, err := authn(f, legacy); err != nil || c.Kind != auth.KindBearer || c.TenantID != acmeID {
			t.Fatalf("legacy token at generation 0 = %+v, %v; want a Bearer credential of acme", c, err)
		}
		// Generation 0 is not even written into new tokens: old and new read alike.
		payload, err := jwt.NewParser().DecodeSegment(strings.Split(access(f, 0), ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(payload), `"gen"`) {
			t.Fatalf("a generation-0 token carries a gen claim: %s", payload)
		}
		f.tenants.bump(acmeID)
		f.clk.Advance(cacheTTL)
		_, err = authn(f, legacy)
		wantRevoked(t, err)
	})

	t.Run("bump: the old token works while cached, is refused after the TTL, a new one works", func(t *testing.T) {
		f := newFixture(t)
		old := access(f, 0)
		if _, err := authn(f, old); err != nil {
			t.Fatal(err)
		}
		f.tenants.bump(acmeID)
		f.clk.Advance(cacheTTL - time.Second)
		if _, err := authn(f, old); err != nil {
			t.Fatalf("within the cache TTL: %v (revocation reaches a replica within the TTL)", err)
		}
		f.clk.Advance(time.Second)
		_, err := authn(f, old)
		wantRevoked(t, err)
		if c, err := authn(f, access(f, 1)); err != nil || c.TenantID != acmeID {
			t.Fatalf("token of the new generation = %+v, %v", c, err)
		}
		// Two bumps later a generation-1 token is refused too; the other tenant is untouched.
		f.tenants.bump(acmeID)
		f.clk.Advance(cacheTTL)
		_, err = authn(f, access(f, 1))
		wantRevoked(t, err)
		if _, err := authn(f, f.accessToken(t, betaID, betaSlug)); err != nil {
			t.Fatalf("another tenant's token: %v", err)
		}
	})

	t.Run("a token newer than the cached generation refreshes the cache at once", func(t *testing.T) {
		f := newFixture(t)
		old := access(f, 0)
		if _, err := authn(f, old); err != nil {
			t.Fatal(err)
		}
		f.tenants.bump(acmeID)
		// Minted elsewhere after the bump: this process has generation 0 cached.
		if _, err := authn(f, access(f, 1)); err != nil {
			t.Fatalf("new token with a stale cache: %v", err)
		}
		// The refreshed cache now refuses the old token without waiting for the TTL.
		_, err := authn(f, old)
		wantRevoked(t, err)
		// A token from the future (a generation the store has not reached) is refused.
		_, err = authn(f, access(f, 5))
		wantRevoked(t, err)
	})

	t.Run("generations are cached per tenant for the TTL", func(t *testing.T) {
		f := newFixture(t)
		tok := access(f, 0)
		for range 3 {
			if _, err := authn(f, tok); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.tenants.generationLookups(acmeID); got != 1 {
			t.Fatalf("generation lookups for 3 requests = %d, want 1", got)
		}
		f.clk.Advance(cacheTTL)
		if _, err := authn(f, tok); err != nil {
			t.Fatal(err)
		}
		if got := f.tenants.generationLookups(acmeID); got != 2 {
			t.Fatalf("generation lookups after the TTL = %d, want 2", got)
		}
	})

	t.Run("a validly signed token of a tenant that does not exist is refused", func(t *testing.T) {
		f := newFixture(t)
		for _, typ := range []string{auth.TokenAccess, auth.TokenSession} {
			tok, _, err := f.signer.Mint(auth.Claims{TenantID: 999, TenantSlug: "ghost", Type: typ, KeyID: f.acmePK.KeyID}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				c, err := authn(f, tok)
				if !errors.Is(err, errs.ErrUnauthenticated) || errCode(err) != "unauthenticated" || c != (auth.Credential{}) {
					t.Fatalf("%s token of tenant 999 = %+v, %v; want unauthenticated", typ, c, err)
				}
			}
		}
		if got := f.tenants.generationLookups(999); got != 1 {
			t.Fatalf("lookups of the unknown tenant = %d, want 1 (the miss is cached)", got)
		}
	})

	t.Run("session tokens carry the generation and end with a bump", func(t *testing.T) {
		f := newFixture(t)
		f.tenants.bump(acmeID)
		s := f.session(t, f.acmePK, auth.SessionRequest{UserID: "u1"})
		claims, err := f.signer.Verify(s.Token)
		if err != nil || claims.Generation != 1 {
			t.Fatalf("session claims = %+v, %v; want generation 1", claims, err)
		}
		if _, err := authn(f, s.Token); err != nil {
			t.Fatal(err)
		}
		f.tenants.bump(acmeID)
		// The handshake reads the generation from the store, not from the cache.
		fresh := f.session(t, f.acmePK, auth.SessionRequest{UserID: "u1"})
		if _, err := authn(f, fresh.Token); err != nil {
			t.Fatalf("session opened after the bump: %v", err)
		}
		_, err = authn(f, s.Token)
		wantRevoked(t, err)
	})

	t.Run("a store failure is unavailable, not unauthenticated, and is not cached", func(t *testing.T) {
		f := newFixture(t)
		tok := access(f, 0)
		f.tenants.mu.Lock()
		f.tenants.err = errors.New("connection refused")
		f.tenants.mu.Unlock()
		_, err := authn(f, tok)
		if !errors.Is(err, errs.ErrUnavailable) || errors.Is(err, errs.ErrUnauthenticated) {
			t.Fatalf("err = %v, want unavailable only", err)
		}
		f.tenants.mu.Lock()
		f.tenants.err = nil
		f.tenants.mu.Unlock()
		if _, err := authn(f, tok); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	})
}
