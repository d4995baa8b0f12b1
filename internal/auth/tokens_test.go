package auth_test

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/testenv"
)

var (
	signingSecret = bytes.Repeat([]byte("k"), 32)
	otherSecret   = bytes.Repeat([]byte("o"), 32)
)

func newSigner(t *testing.T, key []byte, clk *testenv.Clock) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(key, clk.Now)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	return s
}

func TestNewSignerKeyLength(t *testing.T) {
	tests := []struct {
		name    string
		key     []byte
		wantErr bool
	}{
		{name: "nil", key: nil, wantErr: true},
		{name: "31 bytes", key: make([]byte, 31), wantErr: true},
		{name: "32 bytes", key: make([]byte, 32)},
		{name: "64 bytes", key: make([]byte, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := auth.NewSigner(tt.key, time.Now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewSigner err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && s == nil {
				t.Fatal("NewSigner returned nil signer")
			}
		})
	}
}

func TestSignerRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		claims auth.Claims
		ttl    time.Duration
	}{
		{name: "access token", claims: auth.Claims{TenantID: 7, TenantSlug: "acme", Type: auth.TokenAccess}, ttl: auth.AccessTokenTTL},
		{
			name:   "session token with user",
			claims: auth.Claims{TenantID: 9, TenantSlug: "beta", Type: auth.TokenSession, KeyID: "pk_0123456789ab", UserID: "u-1", Verified: true, AnonID: "anon-1"},
			ttl:    auth.SessionTokenTTL,
		},
		{name: "session token anonymous", claims: auth.Claims{TenantID: 1, Type: auth.TokenSession, KeyID: "pk_aaaaaaaaaaaa", AnonID: "a"}, ttl: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testenv.NewClock(t0)
			s := newSigner(t, signingSecret, clk)
			tok, exp, err := s.Mint(tt.claims, tt.ttl)
			if err != nil {
				t.Fatalf("Mint: %v", err)
			}
			if !exp.Equal(t0.Add(tt.ttl)) {
				t.Errorf("exp = %v, want %v", exp, t0.Add(tt.ttl))
			}
			if !auth.IsCohortToken(tok) {
				t.Errorf("IsCohortToken(minted) = false")
			}
			clk.Advance(tt.ttl - time.Second)
			got, err := s.Verify(tok)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got.TenantID != tt.claims.TenantID || got.TenantSlug != tt.claims.TenantSlug || got.Type != tt.claims.Type ||
				got.KeyID != tt.claims.KeyID || got.UserID != tt.claims.UserID || got.Verified != tt.claims.Verified || got.AnonID != tt.claims.AnonID {
				t.Errorf("claims = %+v, want %+v", got, tt.claims)
			}
			if got.Issuer != "cohort" {
				t.Errorf("iss = %q, want cohort", got.Issuer)
			}
			if len(got.Audience) != 1 || got.Audience[0] != "cohort-api" {
				t.Errorf("aud = %v, want [cohort-api]", got.Audience)
			}
			if got.ExpiresAt == nil || !got.ExpiresAt.Time.Equal(t0.Add(tt.ttl)) {
				t.Errorf("exp claim = %v, want %v", got.ExpiresAt, t0.Add(tt.ttl))
			}
			if got.ID == "" {
				t.Errorf("jti is empty")
			}
		})
	}
}

func TestSignerMintsUniqueTokenIDs(t *testing.T) {
	s := newSigner(t, signingSecret, testenv.NewClock(t0))
	c := auth.Claims{TenantID: 1, Type: auth.TokenAccess}
	a, _, errA := s.Mint(c, time.Hour)
	b, _, errB := s.Mint(c, time.Hour)
	if errA != nil || errB != nil {
		t.Fatalf("Mint: %v, %v", errA, errB)
	}
	if a == b {
		t.Fatal("two tokens minted at the same instant are identical (no jti)")
	}
}

// hsToken signs claims with HS256 (or another HMAC method) and the given key.
func hsToken(t *testing.T, method jwt.SigningMethod, key []byte, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cohortRegistered(now time.Time) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{
		Issuer:    "cohort",
		Audience:  jwt.ClaimStrings{"cohort-api"},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}
}

func TestSignerVerifyRejects(t *testing.T) {
	clk := testenv.NewClock(t0)
	s := newSigner(t, signingSecret, clk)
	other := newSigner(t, otherSecret, clk)
	valid, _, err := s.Mint(auth.Claims{TenantID: 7, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fromOther, _, err := other.Mint(auth.Claims{TenantID: 7, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rsa := newRSAKey(t, "", 0)

	withReg := func(mut func(*jwt.RegisteredClaims), tid int64, typ string) auth.Claims {
		r := cohortRegistered(t0)
		mut(&r)
		return auth.Claims{TenantID: tid, Type: typ, RegisteredClaims: r}
	}
	keep := func(*jwt.RegisteredClaims) {}

	noneTok, err := jwt.NewWithClaims(jwt.SigningMethodNone, withReg(keep, 7, auth.TokenAccess)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	tamperedPayload := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"tid":8,"typ":"access","iss":"cohort","aud":["cohort-api"],"exp":9999999999}`)) + "." + parts[2]
	strippedSig := parts[0] + "." + parts[1] + "."

	tests := []struct {
		name        string
		token       string
		wantExpired bool
	}{
		{name: "signed with another key", token: fromOther},
		{name: "alg none", token: noneTok},
		{name: "RS256 header", token: rsa.sign(t, withReg(keep, 7, auth.TokenAccess))},
		{name: "HS384 with the right key", token: hsToken(t, jwt.SigningMethodHS384, signingSecret, withReg(keep, 7, auth.TokenAccess))},
		{name: "HS512 with the right key", token: hsToken(t, jwt.SigningMethodHS512, signingSecret, withReg(keep, 7, auth.TokenAccess))},
		{name: "wrong issuer", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.Issuer = "evil" }, 7, auth.TokenAccess))},
		{name: "no issuer", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.Issuer = "" }, 7, auth.TokenAccess))},
		{name: "wrong audience", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.Audience = jwt.ClaimStrings{"other-api"} }, 7, auth.TokenAccess))},
		{name: "no audience", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.Audience = nil }, 7, auth.TokenAccess))},
		{name: "missing exp", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.ExpiresAt = nil }, 7, auth.TokenAccess))},
		{name: "not valid yet", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.NotBefore = jwt.NewNumericDate(t0.Add(10 * time.Minute)) }, 7, auth.TokenAccess))},
		{name: "tenant id zero", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(keep, 0, auth.TokenAccess))},
		{name: "negative tenant id", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(keep, -3, auth.TokenAccess))},
		{name: "unknown token type", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(keep, 7, "admin"))},
		{name: "empty token type", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(keep, 7, ""))},
		{name: "tampered payload", token: tamperedPayload},
		{name: "signature stripped", token: strippedSig},
		{name: "empty string", token: ""},
		{name: "garbage", token: "not-a-token"},
		{name: "three dots of garbage", token: "a.b.c"},
		{name: "an API key", token: "sk_0123456789ab_" + strings.Repeat("0", 48)},
		{name: "expired", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, withReg(func(r *jwt.RegisteredClaims) { r.ExpiresAt = jwt.NewNumericDate(t0.Add(-time.Minute)) }, 7, auth.TokenAccess)), wantExpired: true},
		{name: "expired and signed with another key is not 'expired'", token: hsToken(t, jwt.SigningMethodHS256, otherSecret, withReg(func(r *jwt.RegisteredClaims) { r.ExpiresAt = jwt.NewNumericDate(t0.Add(-time.Minute)) }, 7, auth.TokenAccess))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.Verify(tt.token)
			if err == nil {
				t.Fatalf("Verify accepted the token: %+v", c)
			}
			if c != nil {
				t.Errorf("Verify returned claims along with the error")
			}
			if got := errors.Is(err, auth.ErrTokenExpired); got != tt.wantExpired {
				t.Fatalf("errors.Is(err, ErrTokenExpired) = %v, want %v (err %v)", got, tt.wantExpired, err)
			}
		})
	}
	// The valid token itself passes, so the rows above fail for the reason they name.
	if _, err := s.Verify(valid); err != nil {
		t.Fatalf("Verify(valid) = %v", err)
	}
}

func TestSignerExpiryWithInjectedClock(t *testing.T) {
	tests := []struct {
		name        string
		after       time.Duration
		wantExpired bool
	}{
		{name: "just minted", after: 0},
		{name: "one second before expiry", after: time.Hour - time.Second},
		{name: "within the 30s leeway", after: time.Hour + 20*time.Second},
		{name: "past the leeway", after: time.Hour + 31*time.Second, wantExpired: true},
		{name: "a day later", after: 24 * time.Hour, wantExpired: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testenv.NewClock(t0)
			s := newSigner(t, signingSecret, clk)
			tok, _, err := s.Mint(auth.Claims{TenantID: 3, Type: auth.TokenSession, KeyID: "pk_000000000000"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(tt.after)
			_, err = s.Verify(tok)
			if tt.wantExpired {
				if !errors.Is(err, auth.ErrTokenExpired) {
					t.Fatalf("Verify = %v, want ErrTokenExpired", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify = %v, want nil", err)
			}
		})
	}
}

func TestIsCohortToken(t *testing.T) {
	clk := testenv.NewClock(t0)
	s := newSigner(t, signingSecret, clk)
	minted, _, err := s.Mint(auth.Claims{TenantID: 1, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rsa := newRSAKey(t, "r", 0)
	ec := newECKey(t, "e")
	reg := cohortRegistered(t0)
	otherIss := reg
	otherIss.Issuer = idpIssuer

	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{name: "minted by Signer", token: minted, want: true},
		{name: "HS256 with cohort issuer, any key", token: hsToken(t, jwt.SigningMethodHS256, otherSecret, reg), want: true},
		{name: "HS256 with another issuer", token: hsToken(t, jwt.SigningMethodHS256, signingSecret, otherIss)},
		{name: "HS384 with cohort issuer", token: hsToken(t, jwt.SigningMethodHS384, signingSecret, reg)},
		{name: "RS256 with cohort issuer", token: rsa.sign(t, reg)},
		{name: "ES256 with cohort issuer", token: ec.sign(t, reg)},
		{name: "RS256 external", token: rsa.sign(t, otherIss)},
		{name: "empty", token: ""},
		{name: "garbage", token: "garbage"},
		{name: "api key", token: "sk_0123456789ab_" + strings.Repeat("a", 48)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := auth.IsCohortToken(tt.token); got != tt.want {
				t.Fatalf("IsCohortToken = %v, want %v", got, tt.want)
			}
		})
	}
}

// publicKeyDER is the PKIX encoding of a public key, what an attacker would use as an HMAC key in an
// algorithm-confusion attack.
func publicKeyDER(t *testing.T, pub any) []byte {
	t.Helper()
	b, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// After a rotation of the secret key, tokens minted with the previous key keep verifying (until
// they expire) once it is accepted; new tokens are minted with the new key only.
func TestSignerAcceptsPreviousKeys(t *testing.T) {
	clk := testenv.NewClock(t0)
	oldSigner := newSigner(t, otherSecret, clk)
	oldToken, _, err := oldSigner.Mint(auth.Claims{TenantID: 7, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rotated := newSigner(t, signingSecret, clk)
	if _, err := rotated.Verify(oldToken); err == nil {
		t.Fatal("a token of another key verified without AcceptPrevious")
	}
	if err := rotated.AcceptPrevious(make([]byte, 31)); err == nil {
		t.Fatal("a 31-byte previous key was accepted")
	}
	if err := rotated.AcceptPrevious(otherSecret); err != nil {
		t.Fatal(err)
	}
	c, err := rotated.Verify(oldToken)
	if err != nil || c.TenantID != 7 {
		t.Fatalf("old token after AcceptPrevious: %+v, %v", c, err)
	}
	newToken, _, err := rotated.Mint(auth.Claims{TenantID: 7, Type: auth.TokenAccess}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSigner(t, signingSecret, clk).Verify(newToken); err != nil {
		t.Fatalf("a new token does not verify with the new key alone: %v", err)
	}
	if _, err := oldSigner.Verify(newToken); err == nil {
		t.Fatal("a new token verified with the previous key: it was minted with the old one")
	}
	clk.Advance(2 * time.Hour)
	if _, err := rotated.Verify(oldToken); !errors.Is(err, auth.ErrTokenExpired) {
		t.Fatalf("expired old token: %v, want ErrTokenExpired", err)
	}
}
