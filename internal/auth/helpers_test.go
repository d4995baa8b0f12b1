package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// t0 is a fixed, second-aligned instant the tests start at.
var t0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

// signingKey is a private key with the kid it is published under.
type signingKey struct {
	kid    string
	method jwt.SigningMethod
	priv   any
	pub    any
}

var (
	rsaKeysOnce sync.Once
	rsaKeys     [3]*rsa.PrivateKey
)

// rsaKey returns one of a few RSA keys generated once per test binary (generation is slow).
func rsaKey(t *testing.T, i int) *rsa.PrivateKey {
	t.Helper()
	rsaKeysOnce.Do(func() {
		for j := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys[j] = k
		}
	})
	return rsaKeys[i]
}

func newRSAKey(t *testing.T, kid string, i int) signingKey {
	t.Helper()
	k := rsaKey(t, i)
	return signingKey{kid: kid, method: jwt.SigningMethodRS256, priv: k, pub: &k.PublicKey}
}

func newECKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, method: jwt.SigningMethodES256, priv: k, pub: &k.PublicKey}
}

// jwkJSON is the JWK of the key's public half.
func (k signingKey) jwk(t *testing.T) map[string]string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{
			"kty": "RSA", "kid": k.kid, "use": "sig", "alg": "RS256",
			"n": enc(pub.N.Bytes()), "e": enc(big.NewInt(int64(pub.E)).Bytes()),
		}
	case *ecdsa.PublicKey:
		e, err := pub.ECDH()
		if err != nil {
			t.Fatal(err)
		}
		b := e.Bytes() // 0x04 || X || Y
		return map[string]string{
			"kty": "EC", "kid": k.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
			"x": enc(b[1:33]), "y": enc(b[33:65]),
		}
	}
	t.Fatalf("unsupported key %T", k.pub)
	return nil
}

// sign signs claims with the key, publishing its kid in the header.
func (k signingKey) sign(t *testing.T, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// jwksServer is a loopback identity provider serving a JWKS whose content and availability the
// test controls.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	hits   atomic.Int64
}

func newJWKSServer(t *testing.T, keys ...map[string]string) *jwksServer {
	t.Helper()
	s := &jwksServer{status: http.StatusOK}
	s.setKeys(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		status, body := s.status, s.body
		s.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "identity provider down", status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(t *testing.T, keys ...map[string]string) {
	t.Helper()
	if keys == nil {
		keys = []map[string]string{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	s.setBody(b)
}

func (s *jwksServer) setBody(b []byte) {
	s.mu.Lock()
	s.body = b
	s.mu.Unlock()
}

func (s *jwksServer) setStatus(code int) {
	s.mu.Lock()
	s.status = code
	s.mu.Unlock()
}

const (
	idpIssuer   = "https://idp.example.test/"
	idpAudience = "cohort-api-test"
)

// idpClaims are valid claims of the test identity provider for a tenant reference.
func idpClaims(now time.Time, tenant any) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": idpIssuer,
		"aud": idpAudience,
		"sub": "user-1",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	if tenant != nil {
		c["cohort_tenant"] = tenant
	}
	return c
}
