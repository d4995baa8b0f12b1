// Package auth authenticates callers: API keys (sk_ secret, pk_ public), Bearer JWTs that Cohort
// mints (HS256) or that an external identity provider signs (RS256/ES256 through JWKS), and the
// short-lived session tokens that public keys are exchanged for.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeyKind is the kind of an API key.
type KeyKind string

const (
	KeySecret KeyKind = "secret" // sk_: server side only
	KeyPublic KeyKind = "public" // pk_: browsers; only exchanged for session tokens
)

func (k KeyKind) prefix() string {
	if k == KeySecret {
		return "sk_"
	}
	return "pk_"
}

const (
	keyIDLen     = 12 // hex chars of the lookup id
	keySecretLen = 48 // hex chars of the secret part (192 bits)
)

// NewKey is a freshly generated key: Plain is shown once, only KeyID and Hash are stored.
type NewKey struct {
	Kind  KeyKind
	Plain string // sk_<key_id>_<secret>
	KeyID string // sk_<key_id>, unique, used to find the stored hash
	Hash  []byte // SHA-256 of Plain
}

// GenerateKey makes a new random key of the kind.
func GenerateKey(kind KeyKind) (NewKey, error) {
	buf := make([]byte, keyIDLen/2+keySecretLen/2)
	if _, err := rand.Read(buf); err != nil {
		return NewKey{}, fmt.Errorf("generate key: %w", err)
	}
	id := kind.prefix() + hex.EncodeToString(buf[:keyIDLen/2])
	plain := id + "_" + hex.EncodeToString(buf[keyIDLen/2:])
	return NewKey{Kind: kind, Plain: plain, KeyID: id, Hash: HashKey(plain)}, nil
}

// HashKey is the stored form of a key.
func HashKey(plain string) []byte {
	sum := sha256.Sum256([]byte(plain))
	return sum[:]
}

// ParseKey splits a presented key into its kind and lookup id. ok is false for anything that is
// not shaped like a key we issue, so garbage never reaches the database.
func ParseKey(plain string) (kind KeyKind, keyID string, ok bool) {
	switch {
	case strings.HasPrefix(plain, "sk_"):
		kind = KeySecret
	case strings.HasPrefix(plain, "pk_"):
		kind = KeyPublic
	default:
		return "", "", false
	}
	if len(plain) != 3+keyIDLen+1+keySecretLen || plain[3+keyIDLen] != '_' {
		return "", "", false
	}
	if !isHex(plain[3:3+keyIDLen]) || !isHex(plain[3+keyIDLen+1:]) {
		return "", "", false
	}
	return kind, plain[:3+keyIDLen], true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RandomSecret returns n random bytes hex-encoded, for webhook and identity secrets.
func RandomSecret(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}
