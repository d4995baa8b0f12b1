package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func newJWKS(t *testing.T, srv *jwksServer, clk *testenv.Clock, mut func(*auth.JWKSConfig)) *auth.JWKSVerifier {
	t.Helper()
	cfg := auth.JWKSConfig{
		URL:             srv.URL,
		Issuer:          idpIssuer,
		Audience:        idpAudience,
		HTTPClient:      srv.Client(),
		Now:             clk.Now,
		RefreshInterval: time.Hour,
		MinRefresh:      time.Minute,
	}
	if mut != nil {
		mut(&cfg)
	}
	v, err := auth.NewJWKSVerifier(cfg)
	if err != nil {
		t.Fatalf("NewJWKSVerifier: %v", err)
	}
	return v
}

func TestNewJWKSVerifierRequiresURLAndIssuer(t *testing.T) {
	tests := []struct {
		name    string
		cfg     auth.JWKSConfig
		wantErr bool
	}{
		{name: "no url", cfg: auth.JWKSConfig{Issuer: idpIssuer}, wantErr: true},
		{name: "no issuer", cfg: auth.JWKSConfig{URL: "http://127.0.0.1:1/jwks"}, wantErr: true},
		{name: "url and issuer", cfg: auth.JWKSConfig{URL: "http://127.0.0.1:1/jwks", Issuer: idpIssuer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := auth.NewJWKSVerifier(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestJWKSVerify(t *testing.T) {
	rsaK := newRSAKey(t, "rsa-1", 0)
	ecK := newECKey(t, "ec-1")
	strangerRSA := newRSAKey(t, "rsa-1", 1) // not published, claims the published kid
	strangerEC := newECKey(t, "ec-1")
	srv := newJWKSServer(t, rsaK.jwk(t), ecK.jwk(t))

	claims := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := idpClaims(t0, "acme")
		if mut != nil {
			mut(c)
		}
		return c
	}
	// Algorithm confusion: an HS256 token whose HMAC key is the RSA public key as published/PEM/DER.
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: publicKeyDER(t, rsaK.pub)})
	confusion := func(key []byte, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noneTok := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil))
		tok.Header["kid"] = "rsa-1"
		s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	// ES256 header on the RSA kid: the key type does not match the algorithm.
	ecOnRSAKid := signingKey{kid: "rsa-1", method: jwt.SigningMethodES256, priv: strangerEC.priv}
	// PS256 signed by the published RSA key: not an accepted algorithm.
	ps256 := signingKey{kid: "rsa-1", method: jwt.SigningMethodPS256, priv: rsaK.priv}

	tests := []struct {
		name        string
		token       string
		mut         func(*auth.JWKSConfig)
		want        string
		wantExpired bool
	}{
		{name: "RS256 slug", token: rsaK.sign(t, claims(nil)), want: "acme"},
		{name: "ES256 slug", token: ecK.sign(t, claims(nil)), want: "acme"},
		{name: "RS256 numeric tenant", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["cohort_tenant"] = 42 })), want: "42"},
		{name: "ES256 numeric tenant", token: ecK.sign(t, claims(func(c jwt.MapClaims) { c["cohort_tenant"] = 1234567 })), want: "1234567"},
		{name: "numeric string tenant", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["cohort_tenant"] = "42" })), want: "42"},
		{name: "audience list containing ours", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = []string{"other", idpAudience} })), want: "acme"},
		{name: "custom tenant claim", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["org"] = "beta" })), mut: func(c *auth.JWKSConfig) { c.TenantClaim = "org" }, want: "beta"},
		{name: "no audience configured accepts any audience", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "whatever" })), mut: func(c *auth.JWKSConfig) { c.Audience = "" }, want: "acme"},
		{name: "expired inside leeway", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(-10 * time.Second).Unix() })), want: "acme"},

		{name: "wrong issuer", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example/" }))},
		{name: "missing issuer", token: ecK.sign(t, claims(func(c jwt.MapClaims) { delete(c, "iss") }))},
		{name: "wrong audience", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "someone-else" }))},
		{name: "missing audience", token: ecK.sign(t, claims(func(c jwt.MapClaims) { delete(c, "aud") }))},
		{name: "expired RS256", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() })), wantExpired: true},
		{name: "expired ES256", token: ecK.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Minute).Unix() })), wantExpired: true},
		{name: "missing exp", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{name: "not valid yet", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["nbf"] = t0.Add(time.Hour).Unix() }))},
		{name: "missing tenant claim", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { delete(c, "cohort_tenant") }))},
		{name: "empty tenant claim", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["cohort_tenant"] = "" }))},
		{name: "tenant claim of the wrong type", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["cohort_tenant"] = map[string]any{"id": 1} }))},
		{name: "tenant claim boolean", token: rsaK.sign(t, claims(func(c jwt.MapClaims) { c["cohort_tenant"] = true }))},
		{name: "RS256 signed by an unpublished key with a published kid", token: strangerRSA.sign(t, claims(nil))},
		{name: "ES256 signed by an unpublished key with a published kid", token: strangerEC.sign(t, claims(nil))},
		{name: "ES256 header on an RSA kid", token: ecOnRSAKid.sign(t, claims(nil))},
		{name: "PS256 is not accepted", token: ps256.sign(t, claims(nil))},
		{name: "HS256 keyed with the RSA public key PEM", token: confusion(rsaPEM, "rsa-1")},
		{name: "HS256 keyed with the RSA public key DER", token: confusion(publicKeyDER(t, rsaK.pub), "rsa-1")},
		{name: "HS256 keyed with the RSA modulus", token: confusion([]byte(rsaK.jwk(t)["n"]), "rsa-1")},
		{name: "HS256 keyed with the EC public key DER", token: confusion(publicKeyDER(t, ecK.pub), "ec-1")},
		{name: "alg none", token: noneTok},
		{name: "unknown kid", token: signingKey{kid: "nope", method: jwt.SigningMethodRS256, priv: rsaK.priv}.sign(t, claims(nil))},
		{name: "garbage", token: "garbage"},
		{name: "empty", token: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newJWKS(t, srv, testenv.NewClock(t0), tt.mut)
			got, err := v.Verify(context.Background(), tt.token)
			if tt.want != "" {
				if err != nil {
					t.Fatalf("Verify = %v, want %q", err, tt.want)
				}
				if got != tt.want {
					t.Fatalf("tenant ref = %q, want %q", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted the token (tenant %q)", got)
			}
			if got != "" {
				t.Errorf("tenant ref %q returned along with the error", got)
			}
			if isExp := errors.Is(err, auth.ErrTokenExpired); isExp != tt.wantExpired {
				t.Fatalf("errors.Is(err, ErrTokenExpired) = %v, want %v (err %v)", isExp, tt.wantExpired, err)
			}
		})
	}
}

func TestJWKSUnknownKidRefreshesAtMostOncePerMinRefresh(t *testing.T) {
	oldK := newRSAKey(t, "old", 0)
	newK := newECKey(t, "new")
	srv := newJWKSServer(t, oldK.jwk(t))
	clk := testenv.NewClock(t0)
	v := newJWKS(t, srv, clk, func(c *auth.JWKSConfig) { c.MinRefresh = time.Minute; c.RefreshInterval = time.Hour })
	ctx := context.Background()

	if _, err := v.Verify(ctx, oldK.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
		t.Fatalf("first verify: %v", err)
	}
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("fetches after first verify = %d, want 1", got)
	}
	// Cached: more tokens of the known key do not fetch again.
	for i := 0; i < 5; i++ {
		if _, err := v.Verify(ctx, oldK.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
			t.Fatalf("cached verify: %v", err)
		}
	}
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("fetches after cached verifies = %d, want 1", got)
	}

	// The provider rotates its keys.
	srv.setKeys(t, oldK.jwk(t), newK.jwk(t))

	// Within MinRefresh of the last fetch an unknown kid does not fetch.
	clk.Advance(30 * time.Second)
	for i := 0; i < 3; i++ {
		if _, err := v.Verify(ctx, newK.sign(t, idpClaims(clk.Now(), "acme"))); err == nil {
			t.Fatal("unknown kid accepted without a refresh")
		}
	}
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("fetches for an unknown kid within MinRefresh = %d, want 1", got)
	}

	// Past MinRefresh the unknown kid forces one refresh, and the new key works.
	clk.Advance(31 * time.Second)
	if ref, err := v.Verify(ctx, newK.sign(t, idpClaims(clk.Now(), "acme"))); err != nil || ref != "acme" {
		t.Fatalf("verify with the rotated key = %q, %v; want acme, nil", ref, err)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("fetches after rotation = %d, want 2", got)
	}

	// Garbage kids right after that refresh do not hammer the provider.
	stranger := signingKey{kid: "attacker", method: jwt.SigningMethodRS256, priv: oldK.priv}
	for i := 0; i < 10; i++ {
		if _, err := v.Verify(ctx, stranger.sign(t, idpClaims(clk.Now(), "acme"))); err == nil {
			t.Fatal("unknown kid accepted")
		}
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("fetches after 10 unknown kids within MinRefresh = %d, want 2", got)
	}
	// Both old and new keys keep verifying from cache.
	for _, k := range []signingKey{oldK, newK} {
		if _, err := v.Verify(ctx, k.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
			t.Fatalf("verify with %s: %v", k.kid, err)
		}
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("fetches = %d, want 2", got)
	}
}

func TestJWKSRefreshIntervalDropsRemovedKeys(t *testing.T) {
	a := newRSAKey(t, "a", 0)
	b := newECKey(t, "b")
	srv := newJWKSServer(t, a.jwk(t), b.jwk(t))
	clk := testenv.NewClock(t0)
	v := newJWKS(t, srv, clk, nil)
	ctx := context.Background()
	if _, err := v.Verify(ctx, a.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
		t.Fatal(err)
	}
	// The provider retires key a.
	srv.setKeys(t, b.jwk(t))
	clk.Advance(30 * time.Minute)
	if _, err := v.Verify(ctx, a.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
		t.Fatalf("before RefreshInterval the cached key a should still verify: %v", err)
	}
	clk.Advance(31 * time.Minute) // past RefreshInterval (1h) since the fetch
	if _, err := v.Verify(ctx, a.sign(t, idpClaims(clk.Now(), "acme"))); err == nil {
		t.Fatal("retired key a still verifies after the key set went stale and was refetched")
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("fetches = %d, want 2", got)
	}
	if _, err := v.Verify(ctx, b.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
		t.Fatalf("key b: %v", err)
	}
}

func TestJWKSProviderDownKeepsCachedKeys(t *testing.T) {
	k := newRSAKey(t, "k", 0)
	ec := newECKey(t, "e")
	unknown := newECKey(t, "unknown")
	tests := []struct {
		name string
		down func(*jwksServer)
	}{
		{name: "provider answers 503", down: func(s *jwksServer) { s.setStatus(http.StatusServiceUnavailable) }},
		{name: "provider answers garbage", down: func(s *jwksServer) { s.setBody([]byte("<html>oops</html>")) }},
		{name: "provider unreachable", down: func(s *jwksServer) { s.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, k.jwk(t), ec.jwk(t))
			clk := testenv.NewClock(t0)
			v := newJWKS(t, srv, clk, nil)
			ctx := context.Background()
			if _, err := v.Verify(ctx, k.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
				t.Fatal(err)
			}
			tt.down(srv)
			clk.Advance(2 * time.Hour) // the cached set is stale: a refresh is attempted and fails
			for _, key := range []signingKey{k, ec} {
				ref, err := v.Verify(ctx, key.sign(t, idpClaims(clk.Now(), "acme")))
				if err != nil || ref != "acme" {
					t.Fatalf("verify with cached key %s while the provider is down = %q, %v; want acme, nil", key.kid, ref, err)
				}
			}
			if _, err := v.Verify(ctx, unknown.sign(t, idpClaims(clk.Now(), "acme"))); err == nil {
				t.Fatal("unknown kid accepted while the provider is down")
			}
		})
	}
}

// While the provider is down, the verifier must not fetch on every request: a failed refresh is
// retried at most once per MinRefresh, like an unknown kid. Otherwise every request (including
// ones with made-up kids) makes an HTTP call to the provider while holding the verifier's lock, so
// an identity provider that hangs stalls every external Bearer request in turn for the HTTP timeout.
func TestJWKSProviderDownDoesNotFetchOnEveryRequest(t *testing.T) {
	k := newRSAKey(t, "k", 0)
	srv := newJWKSServer(t, k.jwk(t))
	clk := testenv.NewClock(t0)
	v := newJWKS(t, srv, clk, func(c *auth.JWKSConfig) { c.MinRefresh = time.Minute; c.RefreshInterval = time.Hour })
	ctx := context.Background()
	if _, err := v.Verify(ctx, k.sign(t, idpClaims(clk.Now(), "acme"))); err != nil {
		t.Fatal(err)
	}
	srv.setStatus(http.StatusServiceUnavailable)

	tests := []struct {
		name  string
		token func() string
	}{
		{name: "known kid, stale set", token: func() string { return k.sign(t, idpClaims(clk.Now(), "acme")) }},
		{name: "unknown kid", token: func() string {
			return signingKey{kid: "made-up", method: jwt.SigningMethodRS256, priv: k.priv}.sign(t, idpClaims(clk.Now(), "acme"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(2 * time.Hour) // stale again, and well past MinRefresh
			before := srv.hits.Load()
			for i := 0; i < 10; i++ {
				_, _ = v.Verify(ctx, tt.token())
				clk.Advance(time.Second) // ten requests within one MinRefresh
			}
			if got := srv.hits.Load() - before; got > 1 {
				t.Fatalf("%d fetches of a failing JWKS for 10 requests within MinRefresh, want at most 1", got)
			}
		})
	}
}

func TestJWKSKeySetParsing(t *testing.T) {
	rsaK := newRSAKey(t, "r", 0)
	ecK := newECKey(t, "e")
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString

	withField := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for kk, vv := range m {
			out[kk] = vv
		}
		out[k] = v
		return out
	}
	tests := []struct {
		name   string
		keys   []map[string]string
		signer signingKey
		kid    string // header kid to use ("" keeps signer's)
		wantOK bool
	}{
		{name: "RSA key", keys: []map[string]string{rsaK.jwk(t)}, signer: rsaK, wantOK: true},
		{name: "EC key", keys: []map[string]string{ecK.jwk(t)}, signer: ecK, wantOK: true},
		{name: "key without use", keys: []map[string]string{withField(rsaK.jwk(t), "use", "")}, signer: rsaK, wantOK: true},
		{name: "encryption key is skipped", keys: []map[string]string{withField(rsaK.jwk(t), "use", "enc")}, signer: rsaK},
		{name: "EC key on another curve is skipped", keys: []map[string]string{withField(ecK.jwk(t), "crv", "P-384")}, signer: ecK},
		{name: "EC point not on the curve is skipped", keys: []map[string]string{withField(ecK.jwk(t), "y", enc([]byte{1, 2, 3}))}, signer: ecK},
		{name: "bad base64 modulus is skipped", keys: []map[string]string{withField(rsaK.jwk(t), "n", "!!!")}, signer: rsaK},
		{name: "unknown key type is skipped", keys: []map[string]string{withField(rsaK.jwk(t), "kty", "oct")}, signer: rsaK},
		{name: "a bad key does not spoil the good ones", keys: []map[string]string{withField(ecK.jwk(t), "crv", "P-521"), rsaK.jwk(t)}, signer: rsaK, wantOK: true},
		{name: "token without kid and a single key", keys: []map[string]string{rsaK.jwk(t)}, signer: signingKey{method: rsaK.method, priv: rsaK.priv}, wantOK: true},
		{name: "token without kid and two keys", keys: []map[string]string{rsaK.jwk(t), ecK.jwk(t)}, signer: signingKey{method: rsaK.method, priv: rsaK.priv}},
		{name: "empty key set", keys: nil, signer: rsaK},
		{name: "P-384 signer against P-256 set", keys: []map[string]string{ecK.jwk(t)}, signer: signingKey{kid: "e", method: jwt.SigningMethodES384, priv: p384}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, tt.keys...)
			v := newJWKS(t, srv, testenv.NewClock(t0), nil)
			ref, err := v.Verify(context.Background(), tt.signer.sign(t, idpClaims(t0, "acme")))
			if tt.wantOK && (err != nil || ref != "acme") {
				t.Fatalf("Verify = %q, %v; want acme, nil", ref, err)
			}
			if !tt.wantOK && err == nil {
				t.Fatalf("Verify accepted the token")
			}
		})
	}
}

func TestJWKSMalformedDocument(t *testing.T) {
	k := newRSAKey(t, "k", 0)
	tests := []struct {
		name string
		body string
	}{
		{name: "not JSON", body: "not json"},
		{name: "keys not a list", body: `{"keys": {"kid": "k"}}`},
		{name: "empty object", body: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t)
			srv.setBody([]byte(tt.body))
			v := newJWKS(t, srv, testenv.NewClock(t0), nil)
			if _, err := v.Verify(context.Background(), k.sign(t, idpClaims(t0, "acme"))); err == nil {
				t.Fatal("Verify accepted a token against a malformed key set")
			}
		})
	}
}
