package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWKSConfig configures verification of tokens from an external identity provider.
type JWKSConfig struct {
	URL         string
	Issuer      string
	Audience    string // optional
	TenantClaim string // claim holding the tenant slug or numeric id
	HTTPClient  *http.Client
	Now         func() time.Time
	// RefreshInterval bounds how often the key set is fetched again; an unknown kid forces a
	// refresh at most once per MinRefresh.
	RefreshInterval time.Duration
	MinRefresh      time.Duration
}

// JWKSVerifier verifies RS256/ES256 tokens against a remote JSON Web Key Set, cached.
type JWKSVerifier struct {
	cfg       JWKSConfig
	mu        sync.Mutex
	keys      map[string]any
	fetched   time.Time // last successful fetch
	attempted time.Time // last fetch attempt, successful or not
}

// NewJWKSVerifier returns a verifier; keys are fetched lazily.
func NewJWKSVerifier(cfg JWKSConfig) (*JWKSVerifier, error) {
	if cfg.URL == "" || cfg.Issuer == "" {
		return nil, errors.New("jwks: url and issuer are required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = time.Hour
	}
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = 30 * time.Second
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = "cohort_tenant"
	}
	return &JWKSVerifier{cfg: cfg}, nil
}

// Verify checks the token and returns the tenant reference (slug or id as a string) from the
// configured claim.
func (v *JWKSVerifier) Verify(ctx context.Context, token string) (string, error) {
	claims := jwt.MapClaims{}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"RS256", "ES256"}),
		jwt.WithIssuer(v.cfg.Issuer),
		jwt.WithTimeFunc(v.cfg.Now),
		jwt.WithLeeway(30 * time.Second),
		jwt.WithExpirationRequired(),
	}
	if v.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.cfg.Audience))
	}
	_, err := jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	}, opts...)
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return "", ErrTokenExpired
		}
		return "", fmt.Errorf("invalid token: %w", err)
	}
	switch ref := claims[v.cfg.TenantClaim].(type) {
	case string:
		if ref != "" {
			return ref, nil
		}
	case float64:
		return fmt.Sprintf("%d", int64(ref)), nil
	}
	return "", fmt.Errorf("invalid token: claim %q missing", v.cfg.TenantClaim)
}

func (v *JWKSVerifier) key(ctx context.Context, kid string) (any, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.cfg.Now()
	stale := now.Sub(v.fetched) > v.cfg.RefreshInterval
	if k, ok := v.keys[kid]; ok && !stale {
		return k, nil
	}
	// At most one fetch per MinRefresh, whether the last one worked or not: neither unknown key
	// ids nor an outage of the provider turn every request into a call to it.
	if now.Sub(v.attempted) > v.cfg.MinRefresh {
		v.attempted = now
		if err := v.refresh(ctx); err != nil {
			if k, ok := v.keys[kid]; ok { // serve the last good set while the provider is down
				return k, nil
			}
			return nil, err
		}
	}
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if kid == "" && len(v.keys) == 1 {
		for _, k := range v.keys {
			return k, nil
		}
	}
	return nil, fmt.Errorf("unknown signing key %q", kid)
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (v *JWKSVerifier) refresh(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("jwks request: %w", err)
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch jwks: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch jwks: status %d", resp.StatusCode)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("decode jwks: %w", err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			continue
		}
		keys[k.Kid] = pub
	}
	v.keys = keys
	v.fetched = v.cfg.Now()
	return nil
}

func (k jwk) publicKey() (any, error) {
	dec := base64.RawURLEncoding.DecodeString
	switch k.Kty {
	case "RSA":
		n, err := dec(k.N)
		if err != nil {
			return nil, err
		}
		e, err := dec(k.E)
		if err != nil {
			return nil, err
		}
		if len(e) > 4 {
			return nil, errors.New("rsa exponent too large")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err := dec(k.X)
		if err != nil {
			return nil, err
		}
		y, err := dec(k.Y)
		if err != nil {
			return nil, err
		}
		pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		if !pub.Curve.IsOnCurve(pub.X, pub.Y) { //nolint:staticcheck // validating untrusted input
			return nil, errors.New("ec point not on curve")
		}
		return pub, nil
	}
	return nil, fmt.Errorf("unsupported key type %q", k.Kty)
}
