// Package secretbox encrypts small secrets at rest (connector API keys, tokens)
// with AES-256-GCM under a named key, so keys can be rotated without
// re-encrypting every row at once.
//
// A sealed value is a self-describing string:
//
//	v1:<keyid>:<base64url(nonce || ciphertext || tag)>
//
// where the nonce is 12 random bytes and base64url has no padding. The
// optional additional authenticated data (AAD) is not stored; it binds the
// ciphertext to its context (for example "tenant:12/connector:5/api_key"), so
// a value copied to another row does not open there.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length in bytes of every key a Box accepts (AES-256).
const KeySize = 32

const (
	version   = "v1"
	nonceSize = 12
	tagSize   = 16
)

var (
	// ErrUnknownKey means the sealed value names a key id the Box does not hold.
	ErrUnknownKey = errors.New("secretbox: unknown key id")
	// ErrMalformed means the sealed value is not in the v1:<keyid>:<payload> format.
	ErrMalformed = errors.New("secretbox: malformed sealed value")
	// ErrDecrypt means authentication failed: wrong key, wrong AAD or tampered data.
	ErrDecrypt = errors.New("secretbox: decryption failed")
	// ErrInvalidKey means a key given to New is unusable.
	ErrInvalidKey = errors.New("secretbox: invalid key")
)

// DeriveKey derives a 32-byte purpose-specific key from a master secret with
// HKDF-SHA256 (no salt, info = purpose), so one master secret can serve token
// signing, blob URL signing and secret encryption independently. The same
// master and purpose always give the same key; different purposes give
// unrelated keys.
//
// DeriveKey does not judge the master secret: callers must reject an empty or
// short one (at least 32 random bytes is recommended) when loading config.
func DeriveKey(master []byte, purpose string) []byte {
	key, err := hkdf.Key(sha256.New, master, nil, purpose, KeySize)
	if err != nil {
		// Unreachable for SHA-256 and 32 bytes outside of GODEBUG=fips140=only
		// with a master secret shorter than 112 bits, which is a configuration
		// bug that must not silently produce a weak key.
		panic("secretbox: derive key: " + err.Error())
	}
	return key
}

// KeyID returns a short stable identifier for key: the first 8 hex characters
// of its SHA-256. Use it as the id in New and as the activeID.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// Box seals and opens secrets. It is safe for concurrent use.
type Box struct {
	aeads    map[string]cipher.AEAD
	activeID string
}

// New returns a Box holding keys by id (each exactly 32 bytes). New seals use
// activeID; every other id stays readable, which is how keys are rotated: add
// the new key, make it active, keep the old one until rows are re-sealed.
// Key ids must be non-empty and must not contain ':'. The key bytes are not
// retained beyond the AES key schedule.
func New(keys map[string][]byte, activeID string) (*Box, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("new box: no keys: %w", ErrInvalidKey)
	}
	aeads := make(map[string]cipher.AEAD, len(keys))
	for id, key := range keys {
		if id == "" || strings.ContainsAny(id, ":") {
			return nil, fmt.Errorf("new box: key id %q: must be non-empty without ':': %w", id, ErrInvalidKey)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("new box: key %q: length %d, want %d: %w", id, len(key), KeySize, ErrInvalidKey)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("new box: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("new box: key %q: %w", id, err)
		}
		aeads[id] = aead
	}
	if _, ok := aeads[activeID]; !ok {
		return nil, fmt.Errorf("new box: active key id %q not among keys: %w", activeID, ErrUnknownKey)
	}
	return &Box{aeads: aeads, activeID: activeID}, nil
}

// ActiveID returns the id of the key used for new seals.
func (b *Box) ActiveID() string { return b.activeID }

// Seal encrypts plaintext under the active key, bound to aad (which may be
// nil), and returns "v1:<keyid>:<base64url(nonce||ciphertext)>". The 12-byte
// nonce is random, so sealing the same input twice gives different outputs.
func (b *Box) Seal(plaintext []byte, aad []byte) (string, error) {
	aead, ok := b.aeads[b.activeID]
	if !ok {
		return "", fmt.Errorf("seal: key %q: %w", b.activeID, ErrUnknownKey)
	}
	// NewGCMWithRandomNonce draws the 12-byte nonce from the crypto/rand
	// source and prepends it: the output is nonce || ciphertext || tag.
	payload := aead.Seal(nil, nil, plaintext, aad)
	return version + ":" + b.activeID + ":" + base64.RawURLEncoding.EncodeToString(payload), nil
}

// Open decrypts a value produced by Seal with the same aad. It returns an
// error wrapping ErrMalformed, ErrUnknownKey or ErrDecrypt; error messages
// never contain the plaintext, the payload or key material.
func (b *Box) Open(sealed string, aad []byte) ([]byte, error) {
	ver, rest, ok := strings.Cut(sealed, ":")
	if !ok {
		return nil, fmt.Errorf("open: missing version: %w", ErrMalformed)
	}
	if ver != version {
		return nil, fmt.Errorf("open: unsupported version: %w", ErrMalformed)
	}
	id, enc, ok := strings.Cut(rest, ":")
	if !ok || id == "" {
		return nil, fmt.Errorf("open: missing key id: %w", ErrMalformed)
	}
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("open: payload is not base64url: %w", ErrMalformed)
	}
	if len(payload) < nonceSize+tagSize {
		return nil, fmt.Errorf("open: payload too short: %w", ErrMalformed)
	}
	aead, ok := b.aeads[id]
	if !ok {
		return nil, fmt.Errorf("open: key %q: %w", id, ErrUnknownKey)
	}
	plaintext, err := aead.Open(nil, nil, payload, aad)
	if err != nil {
		return nil, fmt.Errorf("open: key %q: %w", id, ErrDecrypt)
	}
	return plaintext, nil
}

// SealString is Seal for string plaintext and aad.
func (b *Box) SealString(plaintext, aad string) (string, error) {
	return b.Seal([]byte(plaintext), []byte(aad))
}

// OpenString is Open returning a string, with a string aad.
func (b *Box) OpenString(sealed, aad string) (string, error) {
	p, err := b.Open(sealed, []byte(aad))
	if err != nil {
		return "", err
	}
	return string(p), nil
}

// ResealString re-encrypts a value under the active key (after the master key was rotated):
// it opens sealed with whichever key it names and seals the plaintext anew. A value already under
// the active key is returned as it is, with changed false.
func (b *Box) ResealString(sealed, aad string) (out string, changed bool, err error) {
	if strings.HasPrefix(sealed, version+":"+b.activeID+":") {
		if _, err := b.Open(sealed, []byte(aad)); err != nil {
			return "", false, err
		}
		return sealed, false, nil
	}
	plain, err := b.Open(sealed, []byte(aad))
	if err != nil {
		return "", false, err
	}
	out, err = b.Seal(plain, []byte(aad))
	clear(plain)
	return out, err == nil, err
}

// Format keeps key material out of logs: every fmt verb prints only the
// active key id and the number of keys.
func (b *Box) Format(f fmt.State, _ rune) {
	if b == nil {
		fmt.Fprint(f, "secretbox.Box(nil)")
		return
	}
	fmt.Fprintf(f, "secretbox.Box{active: %q, keys: %d}", b.activeID, len(b.aeads))
}
