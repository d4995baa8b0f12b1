package blob

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// GCSConfig configures the Google Cloud Storage store.
type GCSConfig struct {
	// Bucket is the bucket name (required).
	Bucket string
	// Client is used when set; the caller keeps ownership and closes it.
	// Otherwise NewGCS creates one with storage.NewClient(ctx, ClientOptions...)
	// and (*GCS).Close closes it.
	Client *storage.Client
	// ClientOptions are passed to storage.NewClient when Client is nil.
	ClientOptions []option.ClientOption
	// GoogleAccessID is the service account email that signs URLs. Optional:
	// when empty it is detected from the client's credentials or the metadata
	// server (GKE Workload Identity).
	GoogleAccessID string
	// PrivateKey is the service account's RSA key in PEM (PKCS#8 or PKCS#1).
	// Optional: when empty, SignedURL has the library sign through the IAM
	// Credentials signBlob API as GoogleAccessID (or the detected account),
	// which needs roles/iam.serviceAccountTokenCreator on that account.
	PrivateKey []byte
	// ChunkSize is the upload buffer per Put: objects larger than it are sent
	// with a resumable upload in chunks of this size (rounded up by the
	// library to a multiple of 256 KiB). 0 keeps the library default, 16 MiB.
	ChunkSize int
	// Now is the clock; nil means time.Now. It must follow the system clock:
	// the storage library dates V4 signatures with time.Now itself.
	Now func() time.Time
}

// GCS is the production Store on a Google Cloud Storage bucket.
type GCS struct {
	client     *storage.Client
	ownsClient bool
	bucket     *storage.BucketHandle
	accessID   string
	privateKey []byte
	chunkSize  int
	now        func() time.Time
}

var _ Store = (*GCS)(nil)

// NewGCS validates cfg and, unless cfg.Client is set, creates a storage
// client. It makes no request to GCS.
func NewGCS(ctx context.Context, cfg GCSConfig) (*GCS, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("gcs blob store: bucket is required")
	}
	if cfg.ChunkSize < 0 {
		return nil, fmt.Errorf("gcs blob store: negative chunk size %d", cfg.ChunkSize)
	}
	var privateKey []byte // nil, not empty, when unset: the library tells them apart
	if len(cfg.PrivateKey) > 0 {
		if cfg.GoogleAccessID == "" {
			return nil, errors.New("gcs blob store: private key given without google access id")
		}
		if err := checkRSAKey(cfg.PrivateKey); err != nil {
			return nil, fmt.Errorf("gcs blob store: private key: %w", err)
		}
		privateKey = append([]byte(nil), cfg.PrivateKey...)
	}
	client, owns := cfg.Client, false
	if client == nil {
		c, err := storage.NewClient(ctx, cfg.ClientOptions...)
		if err != nil {
			return nil, fmt.Errorf("gcs blob store: %w", err)
		}
		client, owns = c, true
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &GCS{
		client:     client,
		ownsClient: owns,
		bucket:     client.Bucket(cfg.Bucket),
		accessID:   cfg.GoogleAccessID,
		privateKey: privateKey,
		chunkSize:  cfg.ChunkSize,
		now:        now,
	}, nil
}

// checkRSAKey mirrors what the storage library accepts when signing.
func checkRSAKey(pemBytes []byte) error {
	der := pemBytes
	if block, _ := pem.Decode(pemBytes); block != nil {
		der = block.Bytes
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		k1, err1 := x509.ParsePKCS1PrivateKey(der)
		if err1 != nil {
			return fmt.Errorf("not a pkcs#8 or pkcs#1 rsa key: %w", err)
		}
		key = k1
	}
	if _, ok := key.(*rsa.PrivateKey); !ok {
		return fmt.Errorf("%T is not an rsa key", key)
	}
	return nil
}

// Close closes the storage client if NewGCS created it.
func (g *GCS) Close() error {
	if g.ownsClient {
		return g.client.Close()
	}
	return nil
}

// Put uploads the object, replacing any previous version. If reading r fails
// or ctx is cancelled the upload is abandoned and no object is written.
func (g *GCS) Put(ctx context.Context, key string, r io.Reader, contentType string) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := g.bucket.Object(key).NewWriter(ctx)
	w.ContentType = orDefaultContentType(contentType)
	if g.chunkSize > 0 {
		w.ChunkSize = g.chunkSize
	}
	n, err := io.Copy(w, r)
	if err != nil {
		cancel() // abandons the upload; Close then reports the cancellation
		_ = w.Close()
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("put %s: %w", key, err)
	}
	return n, nil
}

// Open returns a reader of the object's content; it reads within ctx.
func (g *GCS) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	r, err := g.bucket.Object(key).NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, notFound(err))
	}
	return r, nil
}

// OpenRange returns length bytes of the object from offset (see Store.OpenRange).
func (g *GCS) OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("open %s: negative offset %d", key, offset)
	}
	if length < 0 {
		length = -1
	}
	r, err := g.bucket.Object(key).NewRangeReader(ctx, offset, length)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, notFound(err))
	}
	return r, nil
}

// Stat returns the object's metadata.
func (g *GCS) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	a, err := g.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", key, notFound(err))
	}
	return Info{Key: a.Name, Size: a.Size, ContentType: a.ContentType, Updated: a.Updated}, nil
}

// Delete removes the object; a missing object is not an error.
func (g *GCS) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	err := g.bucket.Object(key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// SignedURL returns a V4 signed GET URL valid for ttl (at most
// MaxSignedURLTTL, the GCS limit). Signing is offline with PrivateKey, else
// through the IAM Credentials API.
func (g *GCS) SignedURL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if err := checkTTL(ttl); err != nil {
		return "", err
	}
	// The library writes X-Goog-Expires as the whole seconds between Expires
	// and its own reading of the clock, truncating. Just under one second of
	// slack makes that exactly ttl (rounded up to a second) instead of ttl-1,
	// and stays inside its seven-days-plus-one-second cutoff.
	expires := g.now().Add(ttl + time.Second - time.Nanosecond)
	u, err := g.bucket.SignedURL(key, &storage.SignedURLOptions{
		Scheme:         storage.SigningSchemeV4,
		Method:         http.MethodGet,
		Expires:        expires,
		GoogleAccessID: g.accessID,
		PrivateKey:     g.privateKey,
	})
	if err != nil {
		return "", fmt.Errorf("sign url for %s: %w", key, err)
	}
	return u, nil
}

// notFound maps the library's missing-object error to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return ErrNotFound
	}
	return err
}
