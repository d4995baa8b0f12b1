package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
)

// Kind is the kind of credential a request authenticated with.
type Kind int

const (
	KindSecretKey Kind = iota + 1 // Authorization: ApiKey sk_... (or X-API-Key where allowed)
	KindPublicKey                 // Authorization: ApiKey pk_... (handshake only)
	KindSession                   // Authorization: Bearer <session token from a pk_ handshake>
	KindBearer                    // Authorization: Bearer <access token or external IdP token>
)

func (k Kind) String() string {
	switch k {
	case KindSecretKey:
		return "secret key (ApiKey sk_)"
	case KindPublicKey:
		return "public key (ApiKey pk_)"
	case KindSession:
		return "session token"
	case KindBearer:
		return "Bearer token"
	}
	return "unknown"
}

// Credential is an authenticated caller.
type Credential struct {
	Kind       Kind
	TenantID   int64
	TenantSlug string
	KeyID      string // the API key (or, for sessions, the pk_ key) used
	UserID     string // sessions only
	Verified   bool   // sessions only: UserID proven by a signature
	// BoundAnonymousID is set on anonymous sessions only (a tenant that requires signed user ids,
	// a handshake with an anonymous_id and no user_id): every event must have it as its subject.
	BoundAnonymousID string
}

// KeyRecord is a stored API key as the authenticator needs it.
type KeyRecord struct {
	KeyID      string
	Kind       KeyKind
	TenantID   int64
	TenantSlug string
	Hash       []byte
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
}

// Usable reports whether the key may authenticate at time now.
func (k KeyRecord) Usable(now time.Time) bool {
	if k.RevokedAt != nil && !k.RevokedAt.After(now) {
		return false
	}
	if k.ExpiresAt != nil && !k.ExpiresAt.After(now) {
		return false
	}
	return true
}

// KeyStore finds stored keys; errs.ErrNotFound when there is none.
type KeyStore interface {
	LookupKey(ctx context.Context, keyID string) (KeyRecord, error)
}

// TenantResolver finds the tenants that tokens name: ResolveTenant maps an external token's tenant
// claim (slug or id) to a tenant; TokenGeneration gives the current token generation of the
// tenant a Cohort token names (bumped to revoke every token minted before). Both return
// errs.ErrNotFound when there is no such tenant.
type TenantResolver interface {
	ResolveTenant(ctx context.Context, ref string) (id int64, slug string, err error)
	TokenGeneration(ctx context.Context, tenantID int64) (int64, error)
}

// IdentityStore gives the handshake a tenant's signed-user-id settings.
type IdentityStore interface {
	IdentitySettings(ctx context.Context, tenantID int64) (secret []byte, required bool, err error)
}

// Authenticator turns request headers into a Credential.
type Authenticator struct {
	keys     KeyStore
	tenants  TenantResolver
	identity IdentityStore
	signer   *Signer
	jwks     *JWKSVerifier // nil when no external IdP is configured
	now      func() time.Time
	cacheTTL time.Duration

	keyCache ttlCache[string, KeyRecord] // by key id
	genCache ttlCache[int64, int64]      // token generation by tenant id
}

// ttlCache holds store lookups, found or not, until their expiry.
type ttlCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]cached[V]
}

type cached[V any] struct {
	v       V
	found   bool
	expires time.Time
}

func (c *ttlCache[K, V]) get(k K, now time.Time) (cached[V], bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	return e, ok && now.Before(e.expires)
}

func (c *ttlCache[K, V]) put(k K, e cached[V]) {
	c.mu.Lock()
	if c.m == nil || len(c.m) > 100_000 { // bound memory under key-guessing traffic
		c.m = map[K]cached[V]{}
	}
	c.m[k] = e
	c.mu.Unlock()
}

func (c *ttlCache[K, V]) forget(k K) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// load asks the store (load) and caches the answer: a hit for ttl, a miss (errs.ErrNotFound) for
// at most 5 s. Any other store error is returned and not cached.
func (c *ttlCache[K, V]) load(k K, now time.Time, ttl time.Duration, load func() (V, error)) (V, bool, error) {
	v, err := load()
	found := err == nil
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		var zero V
		return zero, false, err
	}
	if !found {
		ttl = min(ttl, 5*time.Second)
	}
	c.put(k, cached[V]{v: v, found: found, expires: now.Add(ttl)})
	return v, found, nil
}

// Deps of the Authenticator.
type Deps struct {
	Keys     KeyStore
	Tenants  TenantResolver
	Identity IdentityStore
	Signer   *Signer
	JWKS     *JWKSVerifier
	Now      func() time.Time
	// CacheTTL bounds how long a key or token generation lookup is reused; revocation of a key or
	// of a tenant's tokens reaches every replica within it.
	CacheTTL time.Duration
}

func NewAuthenticator(d Deps) *Authenticator {
	if d.CacheTTL == 0 {
		d.CacheTTL = 30 * time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Authenticator{
		keys: d.Keys, tenants: d.Tenants, identity: d.Identity, signer: d.Signer, jwks: d.JWKS,
		now: d.Now, cacheTTL: d.CacheTTL,
	}
}

// ErrNoCredentials is returned when a request carries no credential at all.
var ErrNoCredentials = fmt.Errorf("%w: no credentials: send Authorization: ApiKey <key> or Bearer <token>", errs.ErrUnauthenticated)

func unauthenticated(format string, args ...any) error {
	return errs.Coded(errs.ErrUnauthenticated, "unauthenticated", format, args...)
}

// tokenExpired answers a well-signed token past its expiry, Cohort's or the identity provider's;
// clients refresh on its code.
func tokenExpired() error {
	return errs.Coded(errs.ErrUnauthenticated, "token_expired", "token expired: obtain a new one")
}

// Authenticate checks the Authorization header value (and, when allowXAPIKey, the X-API-Key value).
func (a *Authenticator) Authenticate(ctx context.Context, authorization, xAPIKey string, allowXAPIKey bool) (Credential, error) {
	authorization = strings.TrimSpace(authorization)
	if authorization == "" {
		if allowXAPIKey && xAPIKey != "" {
			return a.apiKey(ctx, strings.TrimSpace(xAPIKey))
		}
		return Credential{}, ErrNoCredentials
	}
	scheme, value, ok := strings.Cut(authorization, " ")
	value = strings.TrimSpace(value)
	if !ok || value == "" {
		return Credential{}, unauthenticated("malformed Authorization header: want 'ApiKey <key>' or 'Bearer <token>'")
	}
	switch strings.ToLower(scheme) {
	case "apikey":
		return a.apiKey(ctx, value)
	case "bearer":
		return a.bearer(ctx, value)
	}
	return Credential{}, unauthenticated("unsupported Authorization scheme %q: want ApiKey or Bearer", scheme)
}

func (a *Authenticator) apiKey(ctx context.Context, plain string) (Credential, error) {
	kind, keyID, ok := ParseKey(plain)
	if !ok {
		return Credential{}, unauthenticated("invalid API key")
	}
	rec, err := a.lookup(ctx, keyID)
	if err != nil {
		return Credential{}, err
	}
	if !hmac.Equal(rec.Hash, HashKey(plain)) || rec.Kind != kind {
		return Credential{}, unauthenticated("invalid API key")
	}
	if !rec.Usable(a.now()) {
		return Credential{}, unauthenticated("API key revoked or expired")
	}
	c := Credential{Kind: KindSecretKey, TenantID: rec.TenantID, TenantSlug: rec.TenantSlug, KeyID: keyID}
	if kind == KeyPublic {
		c.Kind = KindPublicKey
	}
	return c, nil
}

func (a *Authenticator) lookup(ctx context.Context, keyID string) (KeyRecord, error) {
	now := a.now()
	e, ok := a.keyCache.get(keyID, now)
	if !ok {
		var err error
		e.v, e.found, err = a.keyCache.load(keyID, now, a.cacheTTL, func() (KeyRecord, error) { return a.keys.LookupKey(ctx, keyID) })
		if err != nil {
			return KeyRecord{}, fmt.Errorf("look up api key: %w", errors.Join(errs.ErrUnavailable, err))
		}
	}
	if !e.found {
		return KeyRecord{}, unauthenticated("invalid API key")
	}
	return e.v, nil
}

// Forget drops a key from the cache (after revocation in this process).
func (a *Authenticator) Forget(keyID string) { a.keyCache.forget(keyID) }

// generation is the tenant's current token generation; found is false when there is no such
// tenant. fresh skips the cache (and refreshes it).
func (a *Authenticator) generation(ctx context.Context, tenantID int64, fresh bool) (gen int64, found bool, err error) {
	now := a.now()
	if !fresh {
		if e, ok := a.genCache.get(tenantID, now); ok {
			return e.v, e.found, nil
		}
	}
	gen, found, err = a.genCache.load(tenantID, now, a.cacheTTL, func() (int64, error) { return a.tenants.TokenGeneration(ctx, tenantID) })
	if err != nil {
		return 0, false, fmt.Errorf("look up tenant %d: %w", tenantID, errors.Join(errs.ErrUnavailable, err))
	}
	return gen, found, nil
}

// checkGeneration refuses a token Cohort minted for a tenant that does not exist, or before the
// tenant's tokens were last revoked (tenants rotate-keys, tenants revoke-tokens). Tokens minted
// before generations existed carry none, which reads as 0, the generation every tenant starts at:
// they stay valid until the tenant's first revocation.
func (a *Authenticator) checkGeneration(ctx context.Context, c *Claims) error {
	gen, found, err := a.generation(ctx, c.TenantID, false)
	if err == nil && found && c.Generation > gen {
		// Minted after a revocation this process has not seen yet: ask the store.
		gen, found, err = a.generation(ctx, c.TenantID, true)
	}
	switch {
	case err != nil:
		return err
	case !found:
		return unauthenticated("token names an unknown tenant")
	case c.Generation != gen:
		return unauthenticated("token revoked: obtain a new one")
	}
	return nil
}

func (a *Authenticator) bearer(ctx context.Context, token string) (Credential, error) {
	if IsCohortToken(token) {
		c, err := a.signer.Verify(token)
		if err != nil {
			if errors.Is(err, ErrTokenExpired) {
				return Credential{}, tokenExpired()
			}
			return Credential{}, unauthenticated("invalid token")
		}
		if err := a.checkGeneration(ctx, c); err != nil {
			return Credential{}, err
		}
		if c.Type == TokenSession {
			// A session lives only as long as the public key it came from.
			rec, err := a.lookup(ctx, c.KeyID)
			if err != nil || rec.TenantID != c.TenantID || !rec.Usable(a.now()) {
				if errors.Is(err, errs.ErrUnavailable) {
					return Credential{}, err
				}
				return Credential{}, unauthenticated("session revoked: its public key is no longer valid")
			}
			cred := Credential{Kind: KindSession, TenantID: c.TenantID, TenantSlug: c.TenantSlug, KeyID: c.KeyID, UserID: c.UserID, Verified: c.Verified}
			if c.AnonOnly {
				cred.BoundAnonymousID = c.AnonID
			}
			return cred, nil
		}
		return Credential{Kind: KindBearer, TenantID: c.TenantID, TenantSlug: c.TenantSlug}, nil
	}
	if a.jwks == nil {
		return Credential{}, unauthenticated("invalid token")
	}
	ref, err := a.jwks.Verify(ctx, token)
	if err != nil {
		if errors.Is(err, ErrTokenExpired) {
			return Credential{}, tokenExpired()
		}
		return Credential{}, unauthenticated("invalid token")
	}
	id, slug, err := a.tenants.ResolveTenant(ctx, ref)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return Credential{}, unauthenticated("token names an unknown tenant")
		}
		return Credential{}, fmt.Errorf("resolve tenant: %w", errors.Join(errs.ErrUnavailable, err))
	}
	return Credential{Kind: KindBearer, TenantID: id, TenantSlug: slug}, nil
}

// SessionRequest is the body of POST /api/auth/session/.
type SessionRequest struct {
	UserID      string `json:"user_id"`
	AnonymousID string `json:"anonymous_id"`
	UserIDSig   string `json:"user_id_sig"`
	UserIDTs    int64  `json:"user_id_ts"`
}

// Session is the handshake's answer.
type Session struct {
	Token     string    `json:"token"`
	TokenType string    `json:"token_type"`
	ExpiresAt time.Time `json:"expires_at"`
	ExpiresIn int       `json:"expires_in"`
	UserID    string    `json:"user_id,omitempty"`
	Verified  bool      `json:"user_id_verified"`
	// AnonymousID is set for an anonymous session: the one subject its events may name.
	AnonymousID string `json:"anonymous_id,omitempty"`
}

// SignatureWindow is how far user_id_ts may be from now.
const SignatureWindow = 10 * time.Minute

// SignUserID is what a customer's backend computes: hex HMAC-SHA256 of "user_id:ts".
func SignUserID(secret []byte, userID string, ts int64) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(userID + ":" + strconv.FormatInt(ts, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// StartSession exchanges an authenticated public key for a session token.
func (a *Authenticator) StartSession(ctx context.Context, pk Credential, req SessionRequest) (Session, error) {
	if pk.Kind != KindPublicKey {
		return Session{}, errs.Coded(errs.ErrForbidden, "forbidden", "the session handshake takes a public key (ApiKey pk_...)")
	}
	fields := errs.Fields{}
	if len(req.UserID) > 255 {
		fields.Add("user_id", "at most 255 characters")
	}
	if len(req.AnonymousID) > 255 {
		fields.Add("anonymous_id", "at most 255 characters")
	}
	if err := fields.Err(); err != nil {
		return Session{}, err
	}
	secret, required, err := a.identity.IdentitySettings(ctx, pk.TenantID)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return Session{}, unauthenticated("the public key's tenant no longer exists")
		}
		return Session{}, fmt.Errorf("identity settings: %w", errors.Join(errs.ErrUnavailable, err))
	}
	verified, anonOnly := false, false
	switch {
	case required && req.UserID == "" && req.UserIDSig == "" && req.AnonymousID != "":
		// An anonymous visitor of a tenant that requires signed user ids: a session bound to its
		// anonymous id, with no user, so that nothing unsigned can claim a user through it. The id
		// follows ingestion's rules: a session for an id every event would be refused on is no use.
		if err := ident.CheckUserID(req.AnonymousID); err != nil {
			return Session{}, errs.Invalid("anonymous_id", err.Error())
		}
		anonOnly = true
	case req.UserIDSig != "" || required:
		if req.UserID == "" {
			return Session{}, errs.Invalid("user_id", "required: this tenant requires a signed user_id, or an anonymous_id alone for an anonymous session")
		}
		if req.UserIDSig == "" || req.UserIDTs == 0 {
			return Session{}, errs.Coded(errs.ErrUnauthenticated, "signature_required", "this tenant requires user_id_sig and user_id_ts")
		}
		ts := time.Unix(req.UserIDTs, 0)
		if d := a.now().Sub(ts); d > SignatureWindow || d < -SignatureWindow {
			return Session{}, errs.Coded(errs.ErrUnauthenticated, "signature_expired", "user_id_ts is more than 10 minutes from now")
		}
		want := SignUserID(secret, req.UserID, req.UserIDTs)
		if !hmac.Equal([]byte(want), []byte(strings.ToLower(req.UserIDSig))) {
			return Session{}, errs.Coded(errs.ErrUnauthenticated, "bad_signature", "user_id_sig does not match")
		}
		verified = true
	}
	// The session carries the tenant's current token generation, read from the store so that a
	// revocation this process has cached for a while does not end the new session at once.
	gen, found, err := a.generation(ctx, pk.TenantID, true)
	if err != nil {
		return Session{}, err
	}
	if !found {
		return Session{}, unauthenticated("the public key's tenant no longer exists")
	}
	tok, exp, err := a.signer.Mint(Claims{
		TenantID: pk.TenantID, TenantSlug: pk.TenantSlug, Type: TokenSession, KeyID: pk.KeyID,
		UserID: req.UserID, Verified: verified, AnonID: req.AnonymousID, AnonOnly: anonOnly, Generation: gen,
	}, SessionTokenTTL)
	if err != nil {
		return Session{}, err
	}
	s := Session{Token: tok, TokenType: "Bearer", ExpiresAt: exp.UTC(), ExpiresIn: int(SessionTokenTTL / time.Second), UserID: req.UserID, Verified: verified}
	if anonOnly {
		s.AnonymousID = req.AnonymousID
	}
	return s, nil
}
