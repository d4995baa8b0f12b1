package blob

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SignedPathPrefix is the path under LocalConfig.BaseURL at which the API
// serves Local objects: GET SignedPathPrefix + key, with the expires and sig
// query parameters checked by (*Local).Verify.
const SignedPathPrefix = "/api/blobs/"

// MinSigningKeyLen is the shortest accepted LocalConfig.SigningKey in bytes
// (the HMAC-SHA256 output size, as RFC 2104 recommends).
const MinSigningKeyLen = 32

// LocalConfig configures the embedded local-directory store.
type LocalConfig struct {
	// Dir holds the objects; it is created (0o750) when missing.
	Dir string
	// BaseURL is the public origin of the API, e.g. http://127.0.0.1:8080,
	// optionally with a path prefix. Signed URLs are
	// BaseURL + SignedPathPrefix + key + "?expires=...&sig=...".
	BaseURL string
	// SigningKey is the HMAC-SHA256 key for signed URLs, at least
	// MinSigningKeyLen bytes. Every process serving the URLs needs the same key.
	SigningKey []byte
	// PreviousSigningKeys still verify URLs signed before the secret key was rotated (at most
	// a link's lifetime); URLs are signed with SigningKey only.
	PreviousSigningKeys [][]byte
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Local is a Store on a local directory: the embedded default for
// `cohort dev` and tests.
//
// Each object is one file whose name is the SHA-256 of its key, so the key
// never becomes part of a filesystem path (no traversal, no clash between
// "a" and "a/b", which GCS allows side by side). The file starts with a small
// header holding the key, content type and update time, followed by the
// content; it is written to a temporary file and renamed into place, so
// readers see either the old object or the new one, never a mix.
type Local struct {
	dir     string
	baseURL string
	key     []byte
	prev    [][]byte
	now     func() time.Time
}

var _ Store = (*Local)(nil)

// NewLocal validates cfg and creates cfg.Dir.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Dir == "" {
		return nil, errors.New("local blob store: dir is required")
	}
	if len(cfg.SigningKey) < MinSigningKeyLen {
		return nil, fmt.Errorf("local blob store: signing key has %d bytes, need at least %d", len(cfg.SigningKey), MinSigningKeyLen)
	}
	base, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("local blob store: %w", err)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("local blob store: dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("local blob store: %w", err)
	}
	var prev [][]byte
	for _, k := range cfg.PreviousSigningKeys {
		if len(k) < MinSigningKeyLen {
			return nil, fmt.Errorf("local blob store: a previous signing key has %d bytes, need at least %d", len(k), MinSigningKeyLen)
		}
		prev = append(prev, append([]byte(nil), k...))
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Local{
		dir:     dir,
		baseURL: base,
		key:     append([]byte(nil), cfg.SigningKey...),
		prev:    prev,
		now:     now,
	}, nil
}

func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("base url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("base url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("base url %q: need an absolute http or https url", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("base url %q: must not have user info, a query or a fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u.String(), nil
}

// path returns the file holding key: <dir>/<h[:2]>/<h>, h = hex(sha256(key)).
func (l *Local) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(l.dir, h[:2], h)
}

// Put writes the object atomically (temporary file, fsync, rename).
func (l *Local) Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	hdr, err := encodeHeader(localHeader{Key: key, ContentType: orDefaultContentType(contentType), Updated: l.now().UTC()})
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	dst := l.path(key)
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	tmp := f.Name()
	closed, renamed := false, false
	defer func() {
		if !closed {
			_ = f.Close()
		}
		if !renamed {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(hdr); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	n, err := io.Copy(f, ctxReader{ctx: ctx, r: r})
	if err != nil {
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Chmod(0o640); err != nil {
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	renamed = true
	return n, nil
}

// Open returns the object's content. The returned reader also implements
// io.Seeker and io.ReaderAt, so it can be passed to http.ServeContent.
func (l *Local) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	f, _, off, size, err := l.openFile(key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	return &localReader{SectionReader: io.NewSectionReader(f, off, size), f: f}, nil
}

// OpenRange returns length bytes of the object from offset (see Store.OpenRange).
func (l *Local) OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("open %s: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	f, _, off, size, err := l.openFile(key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	offset = min(offset, size)
	n := size - offset
	if length >= 0 {
		n = min(n, length)
	}
	return &localReader{SectionReader: io.NewSectionReader(f, off+offset, n), f: f}, nil
}

// Stat returns the object's metadata.
func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	f, h, _, size, err := l.openFile(key)
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	_ = f.Close()
	return Info{Key: h.Key, Size: size, ContentType: h.ContentType, Updated: h.Updated}, nil
}

// Delete removes the object; a missing object is not an error.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := os.Remove(l.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// SignedURL returns BaseURL + SignedPathPrefix + key + "?expires=<unix
// seconds>&sig=<hex HMAC-SHA256 of key + "\n" + expires>". The expiry is
// now+ttl rounded up to a whole second.
func (l *Local) SignedURL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if err := checkTTL(ttl); err != nil {
		return "", err
	}
	exp := l.now().Add(ttl)
	secs := exp.Unix()
	if exp.Nanosecond() != 0 {
		secs++
	}
	expires := strconv.FormatInt(secs, 10)
	// Keys are [A-Za-z0-9._-] segments joined by "/": nothing to escape.
	return l.baseURL + SignedPathPrefix + key + "?expires=" + expires + "&sig=" + hex.EncodeToString(l.mac(key, expires)), nil
}

// Verify checks the expires and sig query parameters of a URL made by
// SignedURL for key (the request path with SignedPathPrefix removed). It
// returns an error wrapping ErrInvalidKey for a bad key, ErrBadSignature for a
// malformed or wrong signature or expiry, and ErrExpired once the injected
// clock reaches the expiry. The signature is checked before the expiry, so a
// forged URL never reports ErrExpired.
func (l *Local) Verify(key, expires, sig string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	secs, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || secs <= 0 || strconv.FormatInt(secs, 10) != expires {
		return fmt.Errorf("%w: malformed expires %q", ErrBadSignature, expires)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: malformed sig", ErrBadSignature)
	}
	if !l.signedByUs(got, key, expires) {
		return ErrBadSignature
	}
	if !l.now().Before(time.Unix(secs, 0)) {
		return fmt.Errorf("%w: at %s", ErrExpired, time.Unix(secs, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// signedByUs compares sig with the MAC under the signing key and each previous key, every one in
// constant time.
func (l *Local) signedByUs(sig []byte, key, expires string) bool {
	ok := hmac.Equal(sig, l.mac(key, expires))
	for _, k := range l.prev {
		ok = hmac.Equal(sig, macWith(k, key, expires)) || ok
	}
	return ok
}

func (l *Local) mac(key, expires string) []byte { return macWith(l.key, key, expires) }

func macWith(signingKey []byte, key, expires string) []byte {
	m := hmac.New(sha256.New, signingKey)
	m.Write([]byte(key))
	m.Write([]byte{'\n'})
	m.Write([]byte(expires))
	return m.Sum(nil)
}

// openFile opens key's file and reads its header, returning the file, the
// header, the content offset and the content size. Missing files wrap
// ErrNotFound.
func (l *Local) openFile(key string) (*os.File, localHeader, int64, int64, error) {
	f, err := os.Open(l.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, localHeader{}, 0, 0, ErrNotFound
	}
	if err != nil {
		return nil, localHeader{}, 0, 0, err
	}
	h, off, err := readHeader(f)
	if err == nil && h.Key != key {
		err = fmt.Errorf("corrupt blob file %s: holds key %q", f.Name(), h.Key)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		_ = f.Close()
		return nil, localHeader{}, 0, 0, err
	}
	return f, h, off, fi.Size() - off, nil
}

// File layout: localMagic, a big-endian uint32 header length, the JSON
// header, then the content.
const (
	localMagic        = "cohort-blob/1\n"
	maxLocalHeaderLen = 64 << 10
)

type localHeader struct {
	Key         string    `json:"key"`
	ContentType string    `json:"content_type"`
	Updated     time.Time `json:"updated"`
}

func encodeHeader(h localHeader) ([]byte, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if len(js) > maxLocalHeaderLen {
		return nil, fmt.Errorf("metadata is %d bytes, limit is %d (content type too long?)", len(js), maxLocalHeaderLen)
	}
	buf := make([]byte, 0, len(localMagic)+4+len(js))
	buf = append(buf, localMagic...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(js)))
	return append(buf, js...), nil
}

func readHeader(f *os.File) (localHeader, int64, error) {
	var pre [len(localMagic) + 4]byte
	if _, err := io.ReadFull(f, pre[:]); err != nil {
		return localHeader{}, 0, fmt.Errorf("corrupt blob file %s: %w", f.Name(), err)
	}
	if string(pre[:len(localMagic)]) != localMagic {
		return localHeader{}, 0, fmt.Errorf("corrupt blob file %s: bad magic", f.Name())
	}
	n := binary.BigEndian.Uint32(pre[len(localMagic):])
	if n > maxLocalHeaderLen {
		return localHeader{}, 0, fmt.Errorf("corrupt blob file %s: header length %d", f.Name(), n)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(f, js); err != nil {
		return localHeader{}, 0, fmt.Errorf("corrupt blob file %s: %w", f.Name(), err)
	}
	var h localHeader
	if err := json.Unmarshal(js, &h); err != nil {
		return localHeader{}, 0, fmt.Errorf("corrupt blob file %s: %w", f.Name(), err)
	}
	return h, int64(len(pre)) + int64(n), nil
}

// localReader serves an object's content from its open file.
type localReader struct {
	*io.SectionReader
	f *os.File
}

func (r *localReader) Close() error { return r.f.Close() }

// ctxReader stops a copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
