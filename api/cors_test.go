package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

const testOrigin = "https://shop.example"

// recordingPublisher keeps what the ingestion service publishes.
type recordingPublisher struct {
	mu     sync.Mutex
	events []warehouse.Event
}

func (p *recordingPublisher) Publish(_ context.Context, _ int64, events []warehouse.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, events...)
	return nil
}

func (p *recordingPublisher) Check(context.Context) error { return nil }

func (p *recordingPublisher) take() []warehouse.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.events
	p.events = nil
	return out
}

// ingestServer is the real API with the ingestion endpoints over a recording publisher.
func (f *fixture) ingestServer(t *testing.T, opts ...func(*Deps)) (*httptest.Server, *recordingPublisher) {
	t.Helper()
	pub := &recordingPublisher{}
	errlog := ingest.NewErrorLog(f.db.Pool, slog.New(slog.DiscardHandler), time.Now)
	t.Cleanup(func() { _ = errlog.Close(context.Background()) })
	opts = append([]func(*Deps){func(d *Deps) {
		svc := ingest.NewService(pub, errlog, time.Now)
		d.Ingest = &IngestionDeps{Service: svc, Segment: segmentcompat.NewService(svc, time.Now)}
	}}, opts...)
	return serve(t, f.newServer(t, opts...)), pub
}

func eventsJSON(user string, n int) string {
	evs := make([]string, n)
	for i := range evs {
		evs[i] = fmt.Sprintf(`{"user_id":%q,"event_type":"page_view","payload":{"i":%d}}`, user, i)
	}
	return "[" + strings.Join(evs, ",") + "]"
}

func basic(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// TestCORSPreflight: preflights of the browser-callable endpoints are answered for any origin;
// other endpoints get none.
func TestCORSPreflight(t *testing.T) {
	f := newFixture(t)
	ts, _ := f.ingestServer(t)
	for _, path := range []string{"/api/ingestion/track/", "/api/ingestion/track/batch/", "/api/auth/session/", "/v1/batch", "/v1/track", "/v1/identify", "/v1/page"} {
		t.Run(path, func(t *testing.T) {
			r := send(t, ts, http.MethodOptions, path, hdr("Origin", testOrigin, "Access-Control-Request-Method", "POST",
				"Access-Control-Request-Headers", "authorization,content-type,content-encoding"), nil)
			if r.Status != http.StatusNoContent {
				t.Fatalf("status %d, want 204; body %s", r.Status, r.Body)
			}
			want := map[string]string{
				"Access-Control-Allow-Origin":  testOrigin,
				"Access-Control-Allow-Methods": "POST, OPTIONS",
				"Access-Control-Allow-Headers": "Authorization, Content-Type, Content-Encoding, X-API-Key",
				"Access-Control-Max-Age":       "600",
				"Vary":                         "Origin",
			}
			for k, v := range want {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if r.Header.Get("Access-Control-Allow-Credentials") != "" {
				t.Error("preflight allows credentials; Cohort uses no cookies")
			}
		})
	}
	for _, path := range []string{"/api/segments/", "/api/auth/whoami/", "/api/ingestion/stats/", "/api/ingestion/track"} {
		t.Run("not browser-callable "+path, func(t *testing.T) {
			r := send(t, ts, http.MethodOptions, path, hdr("Origin", testOrigin, "Access-Control-Request-Method", "POST"), nil)
			if r.Status == http.StatusNoContent || r.Status >= 500 {
				t.Errorf("status %d, want a 4xx", r.Status)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("Access-Control-Allow-Origin %q on a route that is not browser-callable", got)
			}
		})
	}
}

// TestCORSActualRequests: the answer is readable by the page (Access-Control-Allow-Origin) for
// public keys and session tokens, errors included, and never for secret keys or Bearer tokens.
func TestCORSActualRequests(t *testing.T) {
	f := newFixture(t)
	ts, _ := f.ingestServer(t)
	event := `{"user_id":"user-a","event_type":"page_view"}`
	batch := `{"events":` + eventsJSON("user-a", 2) + `}`
	tests := []struct {
		name       string
		method     string
		path       string
		h          http.Header
		body       string
		wantStatus int // 0: any status below 500
		wantACAO   bool
	}{
		{"track session", "POST", "/api/ingestion/track/", hdr("Authorization", "Bearer "+f.A.Session), event, 202, true},
		{"batch session", "POST", "/api/ingestion/track/batch/", hdr("Authorization", "Bearer "+f.A.Session), batch, 202, true},
		{"handshake pk", "POST", "/api/auth/session/", hdr("Authorization", "ApiKey "+f.A.PK), `{}`, 201, true},
		{"track pk refused but readable", "POST", "/api/ingestion/track/", hdr("Authorization", "ApiKey "+f.A.PK), event, 403, true},
		{"track no credentials", "POST", "/api/ingestion/track/", nil, event, 401, true},
		{"batch no credentials", "POST", "/api/ingestion/track/batch/", nil, batch, 401, true},
		{"track invalid session token", "POST", "/api/ingestion/track/", hdr("Authorization", "Bearer not-a-token"), event, 401, true},
		{"track bad event with session", "POST", "/api/ingestion/track/", hdr("Authorization", "Bearer "+f.A.Session), `{"user_id":`, 400, true},
		{"handshake unknown pk", "POST", "/api/auth/session/", hdr("Authorization", "ApiKey pk_0000000000000000_"+strings.Repeat("0", 64)), `{}`, 401, true},
		{"track sk", "POST", "/api/ingestion/track/", hdr("Authorization", "ApiKey "+f.A.SK), event, 202, false},
		{"batch sk", "POST", "/api/ingestion/track/batch/", hdr("Authorization", "ApiKey "+f.A.SK), batch, 202, false},
		{"batch sk bad body", "POST", "/api/ingestion/track/batch/", hdr("Authorization", "ApiKey "+f.A.SK), `{`, 400, false},
		{"track unknown sk", "POST", "/api/ingestion/track/", hdr("Authorization", "ApiKey sk_bogus"), event, 401, false},
		{"handshake sk", "POST", "/api/auth/session/", hdr("Authorization", "ApiKey "+f.A.SK), `{}`, 403, false},
		{"track bearer", "POST", "/api/ingestion/track/", hdr("Authorization", "Bearer "+f.A.Bearer), event, 403, false},
		{"v1 basic sk", "POST", "/v1/batch", hdr("Authorization", basic(f.A.SK), "Content-Type", "application/json"), `{"batch":[]}`, 0, false},
		{"v1 x-api-key sk", "POST", "/v1/track", hdr("X-API-Key", f.A.SK), `{}`, 0, false},
		{"whoami session not browser-callable", "GET", "/api/auth/whoami/", hdr("Authorization", "Bearer "+f.A.Session), "", 200, false},
		{"errors bearer not browser-callable", "GET", "/api/ingestion/errors/", hdr("Authorization", "Bearer "+f.A.Bearer), "", 200, false},
		{"segments not browser-callable", "GET", "/api/segments/", hdr("Authorization", "Bearer "+f.A.Bearer), "", 404, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set("Origin", testOrigin)
			r := send(t, ts, tt.method, tt.path, h, strings.NewReader(tt.body))
			if tt.wantStatus != 0 && r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			if r.Status >= 500 {
				t.Fatalf("status %d; body %s", r.Status, r.Body)
			}
			if r.Status >= 400 && r.Status != 404 {
				errorBody(t, r)
			}
			got := r.Header.Get("Access-Control-Allow-Origin")
			if tt.wantACAO {
				if got != testOrigin || r.Header.Get("Vary") != "Origin" {
					t.Errorf("Access-Control-Allow-Origin %q Vary %q, want %q and Origin", got, r.Header.Get("Vary"), testOrigin)
				}
				if exp := r.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(exp, "Retry-After") {
					t.Errorf("Access-Control-Expose-Headers %q, want Retry-After exposed", exp)
				}
			} else if got != "" {
				t.Errorf("Access-Control-Allow-Origin %q, want none", got)
			}
		})
	}

	// Without an Origin (a server), nothing changes.
	r := send(t, ts, http.MethodPost, "/api/ingestion/track/", hdr("Authorization", "Bearer "+f.A.Session), strings.NewReader(event))
	if r.Status != http.StatusAccepted || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("server call: status %d ACAO %q, want 202 and none", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestBeaconBatch: the batch endpoint takes a session token in the body and a text/plain content
// type, as navigator.sendBeacon sends them, and refuses anything but a session token there.
func TestBeaconBatch(t *testing.T) {
	f := newFixture(t)
	ts, pub := f.ingestServer(t)

	// A server whose clock is two hours ahead: the fixture's sessions are expired there.
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	laterSigner, err := auth.NewSigner(f.tokenKey, later)
	if err != nil {
		t.Fatal(err)
	}
	tsLater, pubLater := f.ingestServer(t, func(d *Deps) {
		d.Auth = auth.NewAuthenticator(auth.Deps{Keys: f.tenants, Tenants: f.tenants, Identity: f.tenants, Signer: laterSigner, Now: later})
	})

	events := eventsJSON("user-a", 3)
	tests := []struct {
		name        string
		srv         *httptest.Server
		h           http.Header
		body        string
		wantStatus  int
		wantCode    string
		wantQueued  int
		wantTenant  int64
		wantACAO    bool
		noOriginHdr bool
	}{
		{name: "token first text/plain charset", body: `{"session_token":"` + f.A.Session + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain;charset=UTF-8"), wantStatus: 202, wantQueued: 3, wantTenant: f.A.T.ID, wantACAO: true},
		{name: "token first with spaces text/plain", body: "{ \"session_token\" : \"" + f.B.Session + "\" ,\n \"events\": " + eventsJSON("user-b", 2) + " }",
			h: hdr("Content-Type", "text/plain"), wantStatus: 202, wantQueued: 2, wantTenant: f.B.T.ID, wantACAO: true},
		{name: "token last", body: `{"events":` + events + `,"session_token":"` + f.A.Session + `"}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 202, wantQueued: 3, wantTenant: f.A.T.ID, wantACAO: true},
		{name: "token only", body: `{"session_token":"` + f.A.Session + `"}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 400, wantCode: "validation_failed", wantACAO: true},
		{name: "no origin", body: `{"session_token":"` + f.A.Session + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 202, wantQueued: 3, wantTenant: f.A.T.ID, noOriginHdr: true},
		{name: "header wins over body token", body: `{"session_token":"` + f.B.Session + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain", "Authorization", "ApiKey "+f.A.SK), wantStatus: 202, wantQueued: 3, wantTenant: f.A.T.ID},
		{name: "expired token", srv: tsLater, body: `{"session_token":"` + f.A.Session + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "token_expired", wantACAO: true},
		{name: "garbage token", body: `{"session_token":"nope","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "empty token", body: `{"session_token":"","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "escaped token", body: `{"session_token":"a\"b","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "secret key in body", body: `{"session_token":"` + f.A.SK + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated"},
		{name: "secret key in body last", body: `{"events":` + events + `,"session_token":"` + f.A.SK + `"}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated"},
		{name: "public key in body", body: `{"session_token":"` + f.A.PK + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "bearer token in body", body: `{"session_token":"` + f.A.Bearer + `","events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated"},
		{name: "no token", body: `{"events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "token not a string", body: `{"session_token":42,"events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "token null", body: `{"session_token":null,"events":` + events + `}`,
			h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "not json", body: `session_token=abc`, h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "empty body", body: ``, h: hdr("Content-Type", "text/plain"), wantStatus: 401, wantCode: "unauthenticated", wantACAO: true},
		{name: "truncated after token", body: `{"session_token":"` + f.A.Session + `",`, h: hdr("Content-Type", "text/plain"), wantStatus: 400, wantCode: "invalid_json", wantACAO: true},
		{name: "bad gzip", body: `{"session_token":"x"}`, h: hdr("Content-Type", "text/plain", "Content-Encoding", "gzip"), wantStatus: 400, wantCode: "invalid_encoding", wantACAO: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, p := ts, pub
			if tt.srv != nil {
				srv, p = tt.srv, pubLater
			}
			h := tt.h.Clone()
			if !tt.noOriginHdr {
				h.Set("Origin", testOrigin)
			}
			r := send(t, srv, http.MethodPost, "/api/ingestion/track/batch/", h, strings.NewReader(tt.body))
			if r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			got := p.take()
			if tt.wantStatus >= 400 {
				if e := errorBody(t, r); e.Code != tt.wantCode {
					t.Errorf("code %q, want %q (%s)", e.Code, tt.wantCode, e.Message)
				}
				if len(got) != 0 {
					t.Errorf("%d events published by a refused request", len(got))
				}
			} else {
				if len(got) != tt.wantQueued {
					t.Fatalf("%d events published, want %d; body %s", len(got), tt.wantQueued, r.Body)
				}
				for _, e := range got {
					if e.TenantID != tt.wantTenant {
						t.Errorf("event of tenant %d, want %d", e.TenantID, tt.wantTenant)
					}
				}
			}
			if acao := r.Header.Get("Access-Control-Allow-Origin"); (acao != "") != tt.wantACAO {
				t.Errorf("Access-Control-Allow-Origin %q, want set: %v", acao, tt.wantACAO)
			}
		})
	}
}

// TestCORSAllowedOrigins: a tenant that lists its origins has its pk_/session answers readable
// only there; preflights stay open to any origin, and other tenants are unaffected.
func TestCORSAllowedOrigins(t *testing.T) {
	f := newFixture(t)
	if _, err := f.tenants.SetAllowedOrigins(context.Background(), f.A.T.Slug, []string{"https://Shop.example/", "http://localhost:3000"}); err != nil {
		t.Fatal(err)
	}
	ts, pub := f.ingestServer(t, func(d *Deps) { d.Origins = f.tenants })
	const evil = "https://evil.example"
	batchOf := func(user string) string { return `{"events":` + eventsJSON(user, 1) + `}` }
	tests := []struct {
		name       string
		path       string
		origin     string
		h          http.Header
		body       string
		wantStatus int
		wantACAO   bool
	}{
		{"listed origin session", "/api/ingestion/track/batch/", testOrigin, hdr("Authorization", "Bearer "+f.A.Session), batchOf("user-a"), 202, true},
		{"second listed origin", "/api/ingestion/track/batch/", "http://localhost:3000", hdr("Authorization", "Bearer "+f.A.Session), batchOf("user-a"), 202, true},
		{"unlisted origin session", "/api/ingestion/track/batch/", evil, hdr("Authorization", "Bearer "+f.A.Session), batchOf("user-a"), 202, false},
		{"unlisted origin handshake", "/api/auth/session/", evil, hdr("Authorization", "ApiKey "+f.A.PK), `{}`, 201, false},
		{"listed origin handshake", "/api/auth/session/", testOrigin, hdr("Authorization", "ApiKey "+f.A.PK), `{}`, 201, true},
		{"unlisted origin beacon", "/api/ingestion/track/batch/", evil, hdr("Content-Type", "text/plain"), `{"session_token":"` + f.A.Session + `","events":` + eventsJSON("user-a", 1) + `}`, 202, false},
		{"listed origin beacon", "/api/ingestion/track/batch/", testOrigin, hdr("Content-Type", "text/plain"), `{"session_token":"` + f.A.Session + `","events":` + eventsJSON("user-a", 1) + `}`, 202, true},
		{"tenant without a list", "/api/ingestion/track/batch/", evil, hdr("Authorization", "Bearer "+f.B.Session), batchOf("user-b"), 202, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h.Clone()
			h.Set("Origin", tt.origin)
			r := send(t, ts, http.MethodPost, tt.path, h, strings.NewReader(tt.body))
			if r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); (got == tt.origin) != tt.wantACAO || (got != "" && got != tt.origin) {
				t.Errorf("Access-Control-Allow-Origin %q, want readable by %s: %v", got, tt.origin, tt.wantACAO)
			}
		})
	}
	pub.take()
	r := send(t, ts, http.MethodOptions, "/api/ingestion/track/batch/", hdr("Origin", evil, "Access-Control-Request-Method", "POST"), nil)
	if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != evil {
		t.Errorf("preflight from an unlisted origin: %d %q, want 204 answered (a preflight names no tenant)", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
}

// BenchmarkBeaconBatchDecode: a beacon body with session_token first costs what a plain batch
// body costs (read in place, one decode); with the token elsewhere it takes encoding/json's path.
func BenchmarkBeaconBatchDecode(b *testing.B) {
	events := eventsJSON("user-a", ingest.MaxBatchEvents)
	bodies := map[string]string{
		"header":       `{"events":` + events + `}`,
		"beacon_first": `{"session_token":"tok","events":` + events + `}`,
		"beacon_last":  `{"events":` + events + `,"session_token":"tok"}`,
	}
	for _, name := range []string{"header", "beacon_first", "beacon_last"} {
		src := []byte(bodies[name])
		buf := make([]byte, len(src))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				copy(buf, src)
				_, found := wire.TakeSessionToken(buf)
				if name == "beacon_last" && !found {
					if _, found, ok := wire.SessionTokenOf(buf); !ok || !found {
						b.Fatal("no token")
					}
				}
				evs, _, err := ingest.DecodeBatch(buf, ingest.Caller{TenantID: 1}, time.Now())
				if err != nil || len(evs) != ingest.MaxBatchEvents {
					b.Fatalf("%d events, %v", len(evs), err)
				}
			}
		})
	}
}
