package auth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token types Cohort mints.
const (
	TokenAccess  = "access"  // Bearer token of a tenant's operator or backend (cohort tenants token)
	TokenSession = "session" // short-lived, from a pk_ handshake, for the client library's event calls
)

const (
	issuer   = "cohort"
	audience = "cohort-api"
	// AccessTokenTTL is the lifetime of tokens minted by `cohort tenants create|token`.
	AccessTokenTTL = 24 * time.Hour
	// SessionTokenTTL is the lifetime of session tokens from POST /api/auth/session/.
	SessionTokenTTL = time.Hour
)

// Claims of tokens Cohort mints.
type Claims struct {
	TenantID   int64  `json:"tid"`
	TenantSlug string `json:"tsl,omitempty"`
	Type       string `json:"typ"`
	KeyID      string `json:"kid,omitempty"` // session: the pk_ key it came from
	UserID     string `json:"uid,omitempty"` // session: the user it is bound to, if any
	Verified   bool   `json:"uvf,omitempty"` // session: UserID was proven by a signature
	AnonID     string `json:"aid,omitempty"`
	// AnonOnly: an anonymous session of a tenant that requires signed user ids, whose events may
	// name AnonID as their subject and nothing else.
	AnonOnly bool `json:"aon,omitempty"`
	// Generation is the tenant's token generation when the token was minted; a token of an older
	// generation is revoked. Absent (0) in tokens minted before generations existed.
	Generation int64 `json:"gen,omitempty"`
	jwt.RegisteredClaims
}

// Signer mints and verifies HS256 tokens.
type Signer struct {
	key []byte
	now func() time.Time
	// previous keys still verify tokens minted before the secret key was rotated (never mint).
	previous [][]byte
}

// AcceptPrevious makes the signer also verify tokens signed with earlier keys, while the tokens
// minted before a rotation of the secret key run out (24 h at most). It mints with its own key.
func (s *Signer) AcceptPrevious(keys ...[]byte) error {
	for _, k := range keys {
		if len(k) < 32 {
			return errors.New("previous token signing key must be at least 32 bytes")
		}
	}
	s.previous = append(s.previous, keys...)
	return nil
}

func (s *Signer) verificationKey(*jwt.Token) (any, error) {
	if len(s.previous) == 0 {
		return s.key, nil
	}
	set := jwt.VerificationKeySet{Keys: []jwt.VerificationKey{s.key}}
	for _, k := range s.previous {
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// NewSigner takes the signing key (at least 32 bytes) and the clock.
func NewSigner(key []byte, now func() time.Time) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("token signing key must be at least 32 bytes")
	}
	return &Signer{key: key, now: now}, nil
}

// Mint signs claims valid for ttl from now.
func (s *Signer) Mint(c Claims, ttl time.Duration) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(ttl)
	jti := make([]byte, 12)
	if _, err := rand.Read(jti); err != nil {
		return "", time.Time{}, fmt.Errorf("token id: %w", err)
	}
	c.RegisteredClaims = jwt.RegisteredClaims{
		Issuer:    issuer,
		Audience:  jwt.ClaimStrings{audience},
		Subject:   fmt.Sprintf("tenant:%d", c.TenantID),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(exp),
		ID:        hex.EncodeToString(jti),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return tok, exp, nil
}

// ErrTokenExpired is returned for a well-signed token past its expiry.
var ErrTokenExpired = errors.New("token expired")

// Verify checks signature, issuer, audience and expiry of a token Cohort minted.
func (s *Signer) Verify(token string) (*Claims, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, s.verificationKey,
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(audience),
		jwt.WithTimeFunc(s.now),
		jwt.WithLeeway(30*time.Second),
		jwt.WithExpirationRequired(),
	)
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return nil, ErrTokenExpired
		}
		return nil, fmt.Errorf("invalid token: %w", err)
	}
	if c.TenantID <= 0 || (c.Type != TokenAccess && c.Type != TokenSession) {
		return nil, errors.New("invalid token: bad claims")
	}
	return &c, nil
}

// IsCohortToken reports whether an unverified token claims to be one Cohort minted (HS256, our
// issuer), so that the caller knows which verifier to use.
func IsCohortToken(token string) bool {
	var c jwt.RegisteredClaims
	t, _, err := jwt.NewParser().ParseUnverified(token, &c)
	if err != nil {
		return false
	}
	return t.Method.Alg() == "HS256" && c.Issuer == issuer
}
