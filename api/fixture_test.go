package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/tenant"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testClock is real time shifted by an adjustable offset.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) Set(offset time.Duration) {
	c.mu.Lock()
	c.offset = offset
	c.mu.Unlock()
}

// tenantCreds are one tenant and every credential the tests present for it.
type tenantCreds struct {
	T              tenant.Tenant
	SK, PK         string // plain API keys
	SKID, PKID     string // their public key ids
	IdentitySecret string
	Bearer         string // access token minted by Service.MintToken
	Session        string // session token from the real POST /api/auth/session/
}

// fixture is the real stack under the router: a fresh migrated Postgres, the tenant service,
// the token signer, the local blob store, and two tenants (A and B) with live credentials.
type fixture struct {
	db        *store.DB
	tenants   *tenant.Service
	tokenKey  []byte
	signer    *auth.Signer
	blobKey   []byte
	blobClock *testClock
	blobDir   string
	blob      *blob.Local
	A, B      tenantCreds
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{db: testenv.OpenDB(t), blobClock: &testClock{}}
	master := make([]byte, 32)
	if _, err := rand.Read(master); err != nil {
		t.Fatal(err)
	}
	boxKey := secretbox.DeriveKey(master, "cohort/secretbox/v1")
	box, err := secretbox.New(map[string][]byte{secretbox.KeyID(boxKey): boxKey}, secretbox.KeyID(boxKey))
	if err != nil {
		t.Fatalf("secretbox.New: %v", err)
	}
	f.tokenKey = secretbox.DeriveKey(master, "cohort/jwt/v1")
	if f.signer, err = auth.NewSigner(f.tokenKey, time.Now); err != nil {
		t.Fatalf("auth.NewSigner: %v", err)
	}
	f.tenants = tenant.NewService(f.db.Gorm, box, time.Now)
	f.blobKey = secretbox.DeriveKey(master, "cohort/blob-urls/v1")
	f.blobDir = filepath.Join(t.TempDir(), "blobs")
	f.blob, err = blob.NewLocal(blob.LocalConfig{Dir: f.blobDir, BaseURL: "http://cohort.test", SigningKey: f.blobKey, Now: f.blobClock.Now})
	if err != nil {
		t.Fatalf("blob.NewLocal: %v", err)
	}
	f.A = f.createTenant(t, "tenant-a")
	f.B = f.createTenant(t, "tenant-b")
	setup := serve(t, f.newServer(t))
	f.A.Session = f.handshake(t, setup, f.A.PK, `{"user_id":"user-a"}`)
	f.B.Session = f.handshake(t, setup, f.B.PK, `{"user_id":"user-b"}`)
	return f
}

func (f *fixture) createTenant(t testing.TB, slug string) tenantCreds {
	t.Helper()
	c, err := f.tenants.Create(context.Background(), slug, strings.ToUpper(slug))
	if err != nil {
		t.Fatalf("create tenant %s: %v", slug, err)
	}
	tok, _, err := f.tenants.MintToken(c.Tenant, f.signer)
	if err != nil {
		t.Fatalf("mint token: %v", err)
	}
	return tenantCreds{T: c.Tenant, SK: c.SecretKey, PK: c.PublicKey, SKID: keyID(t, c.SecretKey), PKID: keyID(t, c.PublicKey),
		IdentitySecret: c.IdentitySecret, Bearer: tok}
}

func keyID(t testing.TB, plain string) string {
	t.Helper()
	_, id, ok := auth.ParseKey(plain)
	if !ok {
		t.Fatalf("not a key: %q", plain)
	}
	return id
}

// authenticator is a fresh Authenticator (empty key cache) over the fixture's tenants.
func (f *fixture) authenticator(now func() time.Time, cacheTTL time.Duration) *auth.Authenticator {
	if now == nil {
		now = time.Now
	}
	return auth.NewAuthenticator(auth.Deps{Keys: f.tenants, Tenants: f.tenants, Identity: f.tenants, Signer: f.signer, Now: now, CacheTTL: cacheTTL})
}

// newServer builds the real API with a fresh Authenticator; opts adjust the Deps.
func (f *fixture) newServer(t testing.TB, opts ...func(*Deps)) *Server {
	t.Helper()
	d := Deps{Auth: f.authenticator(nil, 0), LocalBlob: f.blob, ServeMetrics: true}
	for _, o := range opts {
		o(&d)
	}
	return New(d)
}

// serve starts s behind httptest; register probe routes before calling it.
func serve(t testing.TB, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// handshake runs the real POST /api/auth/session/ and returns the session token.
func (f *fixture) handshake(t testing.TB, ts *httptest.Server, pk, body string) string {
	t.Helper()
	r := send(t, ts, http.MethodPost, "/api/auth/session/", hdr("Authorization", "ApiKey "+pk), strings.NewReader(body))
	if r.Status != http.StatusCreated {
		t.Fatalf("handshake: status %d, body %s", r.Status, r.Body)
	}
	var s auth.Session
	if err := json.Unmarshal(r.Body, &s); err != nil || s.Token == "" {
		t.Fatalf("handshake body %s: %v", r.Body, err)
	}
	return s.Token
}

type result struct {
	Status int
	Header http.Header
	Body   []byte
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// send makes one request; target is a path with an optional query, sent as is (no cleaning).
func send(t testing.TB, ts *httptest.Server, method, target string, h http.Header, body io.Reader) result {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+target, body)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, target, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return sendReq(t, ts, req)
}

func sendReq(t testing.TB, ts *httptest.Server, req *http.Request) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	defer cancel()
	resp, err := ts.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body of %s %s: %v", req.Method, req.URL, err)
	}
	return result{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

type errorEnvelope struct {
	Error *struct {
		Code      string            `json:"code"`
		Message   string            `json:"message"`
		Fields    map[string]string `json:"fields"`
		RequestID string            `json:"request_id"`
	} `json:"error"`
}

// errorBody asserts the one error shape {"error":{"code","message","request_id"[,"fields"]}},
// nothing else, with the request id of the response header, and returns it.
func errorBody(t *testing.T, r result) ErrorDetail {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json (body %s)", ct, r.Body)
	}
	var env errorEnvelope
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("error body %s is not the error shape: %v", r.Body, err)
	}
	if env.Error == nil {
		t.Fatalf("error body %s has no \"error\" object", r.Body)
	}
	e := env.Error
	if e.Code == "" || e.Message == "" || e.RequestID == "" {
		t.Errorf("error body %s: code, message and request_id must all be set", r.Body)
	}
	if got := r.Header.Get("X-Request-ID"); e.RequestID != got {
		t.Errorf("error request_id %q != X-Request-ID header %q", e.RequestID, got)
	}
	return ErrorDetail{Code: e.Code, Message: e.Message, Fields: e.Fields, RequestID: e.RequestID}
}

// probeEcho is what probe routes answer: the credential require() set.
type probeEcho struct {
	Kind       string `json:"kind"`
	TenantID   int64  `json:"tenant_id"`
	TenantSlug string `json:"tenant_slug"`
	KeyID      string `json:"key_id"`
	UserID     string `json:"user_id"`
}

func kindName(k auth.Kind) string {
	switch k {
	case auth.KindSecretKey:
		return "secret_key"
	case auth.KindPublicKey:
		return "public_key"
	case auth.KindSession:
		return "session"
	case auth.KindBearer:
		return "bearer"
	}
	return "unknown"
}

// mountProbe registers GET /__probe/<name> behind require(p), echoing the credential. Call it
// before serve.
func mountProbe(s *Server, name string, p policy) string {
	path := "/__probe/" + name
	s.engine.GET(path, s.require(p), func(c *gin.Context) {
		cred := mustCredential(c)
		c.JSON(http.StatusOK, probeEcho{Kind: kindName(cred.Kind), TenantID: cred.TenantID, TenantSlug: cred.TenantSlug, KeyID: cred.KeyID, UserID: cred.UserID})
	})
	return path
}
