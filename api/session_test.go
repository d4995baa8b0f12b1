package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
)

// opaqueReader hides the body's length so the client sends it chunked.
type opaqueReader struct{ io.Reader }

// TestSessionHandshake drives POST /api/auth/session/ through the real router: the token, its use
// on whoami, signed user ids, and the body errors (400 invalid_json, 413 too_large).
func TestSessionHandshake(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	signed := f.createTenant(t, "tenant-signed")
	if err := f.tenants.SetRequireSignedUserID(ctx, signed.T.Slug, true); err != nil {
		t.Fatal(err)
	}
	const maxBody = 1 << 10
	ts := serve(t, f.newServer(t, func(d *Deps) { d.MaxBodyBytes = maxBody }))

	now := time.Now().Unix()
	sigBody := func(secret, userID string, ts int64) string {
		return fmt.Sprintf(`{"user_id":%q,"user_id_sig":%q,"user_id_ts":%d}`, userID, auth.SignUserID([]byte(secret), userID, ts), ts)
	}
	big := `{"user_id":"` + strings.Repeat("a", 2*maxBody) + `"}`

	tests := []struct {
		name       string
		pk         string
		body       string
		chunked    bool
		wantStatus int
		wantCode   string   // error code, for errors
		wantFields []string // field names the 400 must name
		wantUser   string   // user_id of the session, for 201
		wantVerif  bool
	}{
		{name: "no body", pk: f.A.PK, wantStatus: http.StatusCreated},
		{name: "empty object", pk: f.A.PK, body: `{}`, wantStatus: http.StatusCreated},
		{name: "user id", pk: f.A.PK, body: `{"user_id":"u-42","anonymous_id":"anon-1"}`, wantStatus: http.StatusCreated, wantUser: "u-42"},
		{name: "unsigned user id chunked", pk: f.A.PK, body: `{"user_id":"u-43"}`, chunked: true, wantStatus: http.StatusCreated, wantUser: "u-43"},
		{name: "optional signature valid", pk: f.A.PK, body: sigBody(f.A.IdentitySecret, "u-1", now), wantStatus: http.StatusCreated, wantUser: "u-1", wantVerif: true},
		{name: "optional signature wrong", pk: f.A.PK, body: sigBody(f.B.IdentitySecret, "u-1", now), wantStatus: http.StatusUnauthorized, wantCode: "bad_signature"},
		{name: "required signature missing", pk: signed.PK, body: `{"user_id":"u-1"}`, wantStatus: http.StatusUnauthorized, wantCode: "signature_required"},
		{name: "required signature without ts", pk: signed.PK, body: `{"user_id":"u-1","user_id_sig":"00"}`, wantStatus: http.StatusUnauthorized, wantCode: "signature_required"},
		{name: "required signature no user id", pk: signed.PK, body: `{}`, wantStatus: http.StatusBadRequest, wantCode: "validation_failed", wantFields: []string{"user_id"}},
		{name: "required signature no body", pk: signed.PK, wantStatus: http.StatusBadRequest, wantCode: "validation_failed", wantFields: []string{"user_id"}},
		{name: "required signature anonymous id alone", pk: signed.PK, body: `{"anonymous_id":"anon-1"}`, wantStatus: http.StatusCreated},
		{name: "required signature anonymous id and unsigned user id", pk: signed.PK, body: `{"user_id":"u-1","anonymous_id":"anon-1"}`, wantStatus: http.StatusUnauthorized, wantCode: "signature_required"},
		{name: "required signature valid", pk: signed.PK, body: sigBody(signed.IdentitySecret, "u-7", now), wantStatus: http.StatusCreated, wantUser: "u-7", wantVerif: true},
		{name: "required signature uppercase hex", pk: signed.PK, body: fmt.Sprintf(`{"user_id":"u-7","user_id_sig":%q,"user_id_ts":%d}`, strings.ToUpper(auth.SignUserID([]byte(signed.IdentitySecret), "u-7", now)), now), wantStatus: http.StatusCreated, wantUser: "u-7", wantVerif: true},
		{name: "required signature stale ts", pk: signed.PK, body: sigBody(signed.IdentitySecret, "u-7", now-int64(11*time.Minute/time.Second)), wantStatus: http.StatusUnauthorized, wantCode: "signature_expired"},
		{name: "required signature future ts", pk: signed.PK, body: sigBody(signed.IdentitySecret, "u-7", now+int64(11*time.Minute/time.Second)), wantStatus: http.StatusUnauthorized, wantCode: "signature_expired"},
		{name: "required signature for another user", pk: signed.PK, body: strings.Replace(sigBody(signed.IdentitySecret, "u-7", now), `"u-7"`, `"u-8"`, 1), wantStatus: http.StatusUnauthorized, wantCode: "bad_signature"},
		{name: "required signature other tenant's secret", pk: signed.PK, body: sigBody(f.A.IdentitySecret, "u-7", now), wantStatus: http.StatusUnauthorized, wantCode: "bad_signature"},
		{name: "malformed json truncated", pk: f.A.PK, body: `{"user_id":`, wantStatus: http.StatusBadRequest, wantCode: "invalid_json"},
		{name: "malformed json syntax", pk: f.A.PK, body: `{user_id: "u"}`, wantStatus: http.StatusBadRequest, wantCode: "invalid_json"},
		{name: "malformed json chunked", pk: f.A.PK, body: `{"user_id":`, chunked: true, wantStatus: http.StatusBadRequest, wantCode: "invalid_json"},
		{name: "array body", pk: f.A.PK, body: `[]`, wantStatus: http.StatusBadRequest, wantCode: "invalid_json"},
		{name: "wrong type user_id", pk: f.A.PK, body: `{"user_id":42}`, wantStatus: http.StatusBadRequest, wantCode: "invalid_json", wantFields: []string{"user_id"}},
		{name: "wrong type user_id_ts", pk: signed.PK, body: `{"user_id":"u","user_id_sig":"ab","user_id_ts":"soon"}`, wantStatus: http.StatusBadRequest, wantCode: "invalid_json", wantFields: []string{"user_id_ts"}},
		{name: "user id too long", pk: f.A.PK, body: `{"user_id":"` + strings.Repeat("u", 256) + `"}`, wantStatus: http.StatusBadRequest, wantCode: "validation_failed", wantFields: []string{"user_id"}},
		{name: "too large with content length", pk: f.A.PK, body: big, wantStatus: http.StatusRequestEntityTooLarge, wantCode: "too_large"},
		{name: "too large chunked", pk: f.A.PK, body: big, chunked: true, wantStatus: http.StatusRequestEntityTooLarge, wantCode: "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = opaqueReader{body}
			}
			req, err := http.NewRequest(http.MethodPost, ts.URL+"/api/auth/session/", body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.chunked {
				req.ContentLength = -1
				req.TransferEncoding = []string{"chunked"}
			} else if req.ContentLength != int64(len(tt.body)) {
				t.Fatalf("request ContentLength %d, want %d", req.ContentLength, len(tt.body))
			}
			req.Header.Set("Authorization", "ApiKey "+tt.pk)
			req.Header.Set("Content-Type", "application/json")
			r := sendReq(t, ts, req)
			if r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			if tt.wantStatus != http.StatusCreated {
				e := errorBody(t, r)
				if e.Code != tt.wantCode {
					t.Errorf("code %q, want %q (message %q)", e.Code, tt.wantCode, e.Message)
				}
				for _, fld := range tt.wantFields {
					if _, ok := e.Fields[fld]; !ok {
						t.Errorf("fields %v do not name %q", e.Fields, fld)
					}
				}
				return
			}
			var sess auth.Session
			if err := json.Unmarshal(r.Body, &sess); err != nil {
				t.Fatalf("body %s: %v", r.Body, err)
			}
			if sess.Token == "" || sess.TokenType != "Bearer" || sess.ExpiresIn != 3600 {
				t.Errorf("session %+v: want a Bearer token with expires_in 3600", sess)
			}
			if d := time.Until(sess.ExpiresAt); d < 59*time.Minute || d > 61*time.Minute {
				t.Errorf("expires_at %s is %s from now, want about 1 h", sess.ExpiresAt, d)
			}
			if sess.UserID != tt.wantUser || sess.Verified != tt.wantVerif {
				t.Errorf("user_id %q verified %v, want %q %v", sess.UserID, sess.Verified, tt.wantUser, tt.wantVerif)
			}
			if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}

			// The token works on whoami as a session of the key's tenant, bound to the user.
			w := send(t, ts, http.MethodGet, "/api/auth/whoami/", hdr("Authorization", "Bearer "+sess.Token), nil)
			if w.Status != http.StatusOK {
				t.Fatalf("whoami with the session token: %d %s", w.Status, w.Body)
			}
			var who whoamiResponse
			if err := json.Unmarshal(w.Body, &who); err != nil {
				t.Fatal(err)
			}
			wantTenant := f.A
			if tt.pk == signed.PK {
				wantTenant = signed
			}
			want := whoamiResponse{TenantID: wantTenant.T.ID, TenantSlug: wantTenant.T.Slug, Credential: "session", KeyID: wantTenant.PKID, UserID: tt.wantUser}
			if who != want {
				t.Errorf("whoami %+v, want %+v", who, want)
			}
		})
	}
}

// TestWhoamiCredentials: whoami names each accepted credential kind.
func TestWhoamiCredentials(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t))
	tests := []struct {
		name  string
		authz string
		want  whoamiResponse
	}{
		{name: "secret key", authz: "ApiKey " + f.A.SK, want: whoamiResponse{TenantID: f.A.T.ID, TenantSlug: f.A.T.Slug, Credential: "secret_key", KeyID: f.A.SKID}},
		{name: "bearer", authz: "Bearer " + f.B.Bearer, want: whoamiResponse{TenantID: f.B.T.ID, TenantSlug: f.B.T.Slug, Credential: "bearer"}},
		{name: "session", authz: "Bearer " + f.B.Session, want: whoamiResponse{TenantID: f.B.T.ID, TenantSlug: f.B.T.Slug, Credential: "session", KeyID: f.B.PKID, UserID: "user-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/auth/whoami/", hdr("Authorization", tt.authz), nil)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			var got whoamiResponse
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("whoami %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSessionRejectsTrailingJSON: a body that is not one JSON value is malformed JSON (400
// invalid_json), not a request whose first value is used and the rest dropped.
func TestSessionRejectsTrailingJSON(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t))
	tests := []struct {
		name string
		body string
	}{
		{name: "trailing garbage", body: `{"user_id":"u-1"} xyz`},
		{name: "two objects", body: `{"user_id":"u-1"}{"user_id":"u-2"}`},
		{name: "trailing brace", body: `{"user_id":"u-1"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := send(t, ts, http.MethodPost, "/api/auth/session/", hdr("Authorization", "ApiKey "+f.A.PK, "Content-Type", "application/json"), strings.NewReader(tt.body))
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400 invalid_json: the first JSON value was used and the rest ignored", r.Status)
			}
			if e := errorBody(t, r); e.Code != "invalid_json" {
				t.Errorf("code %q, want invalid_json", e.Code)
			}
		})
	}
}
