// Package blob stores export files and uploaded files behind one small
// interface, Store. Production uses Google Cloud Storage (GCS) with V4 signed
// URLs; the embedded default (Local) keeps objects in a local directory and
// hands out HMAC-signed, expiring URLs that the API serves itself.
//
// Keys are validated identically by every adapter (see ValidateKey), so a key
// that works on a laptop works in production and the other way round.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Store is blob storage for exports and uploaded files.
type Store interface {
	// Put writes the object (overwriting), returning bytes written. An empty
	// contentType is stored as DefaultContentType.
	Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error)
	// Open returns the object's content; ErrNotFound when missing.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// OpenRange returns length bytes of the object from offset (fewer at its end; a negative
	// length reads to the end); ErrNotFound when missing. A CSV import resumes with it, and
	// reads the samples it analyses without downloading the whole file.
	OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Stat returns the object's metadata; ErrNotFound when missing.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object; a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// SignedURL returns a URL a browser can GET without other credentials,
	// valid for ttl (at most MaxSignedURLTTL). It does not check that the
	// object exists.
	SignedURL(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// Info describes a stored object.
type Info struct {
	Key         string
	Size        int64
	ContentType string
	Updated     time.Time
}

// Sentinel errors. Adapters wrap them with context; match with errors.Is.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("blob not found")
	// ErrInvalidKey: the key breaks the rules of ValidateKey.
	ErrInvalidKey = errors.New("invalid blob key")
	// ErrBadSignature: a signed URL is malformed or its signature does not match.
	ErrBadSignature = errors.New("bad blob url signature")
	// ErrExpired: a correctly signed URL is past its expiry.
	ErrExpired = errors.New("blob url expired")
	// ErrInvalidTTL: a signed URL lifetime is not positive or exceeds MaxSignedURLTTL.
	ErrInvalidTTL = errors.New("invalid blob url ttl")
)

const (
	// MaxKeyLen is the longest key in bytes.
	MaxKeyLen = 512
	// MaxSignedURLTTL is the longest signed URL lifetime. It is the GCS V4
	// limit, applied by every adapter so the embedded default behaves the same.
	MaxSignedURLTTL = 7 * 24 * time.Hour
	// DefaultContentType is stored when Put is given an empty content type.
	DefaultContentType = "application/octet-stream"
)

// ValidateKey reports whether key is a usable object key: a relative slash
// path of segments made of [A-Za-z0-9._-], with no empty, "." or ".."
// segments (so no leading or trailing slash and no "//"), at most MaxKeyLen
// bytes. The errors wrap ErrInvalidKey.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, limit is %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c != '/' && !keyByte(c) {
			return fmt.Errorf("%w: %q has a disallowed character at byte %d", ErrInvalidKey, key, i)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

func keyByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '.', c == '_', c == '-':
		return true
	}
	return false
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxSignedURLTTL {
		return fmt.Errorf("%w: %s, must be in (0, %s]", ErrInvalidTTL, ttl, MaxSignedURLTTL)
	}
	return nil
}

func orDefaultContentType(ct string) string {
	if ct == "" {
		return DefaultContentType
	}
	return ct
}
