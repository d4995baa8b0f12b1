package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signedTarget returns the path and query of a signed URL from the Local store.
func (f *fixture) signedTarget(t *testing.T, key string, ttl time.Duration) string {
	t.Helper()
	raw, err := f.blob.SignedURL(context.Background(), key, ttl)
	if err != nil {
		t.Fatalf("SignedURL(%q): %v", key, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI()
}

// forge signs an arbitrary key with the store's real signing key, as SignedURL would if it
// accepted the key: what an attacker who somehow held a valid signature could send.
func (f *fixture) forge(key string, expires int64) string {
	e := strconv.FormatInt(expires, 10)
	m := hmac.New(sha256.New, f.blobKey)
	m.Write([]byte(key + "\n" + e))
	return "?expires=" + e + "&sig=" + hex.EncodeToString(m.Sum(nil))
}

// TestBlobDownloads serves signed, expiring links of the embedded blob store.
func TestBlobDownloads(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const key = "exports/tenant-1/report.csv"
	content := []byte("user_id,segment\nu-1,vip\nu-2,vip\n")
	if _, err := f.blob.Put(ctx, key, bytes.NewReader(content), "text/csv"); err != nil {
		t.Fatal(err)
	}
	// A file beside the store's directory that traversal must never reach.
	secret := []byte("TOP-SECRET-OUTSIDE-THE-STORE")
	outside := filepath.Join(filepath.Dir(f.blobDir), "secret.txt")
	if err := os.WriteFile(outside, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, f.newServer(t))

	valid := f.signedTarget(t, key, time.Hour)
	u, _ := url.Parse(valid)
	q := u.Query()
	sig := q.Get("sig")
	flipped := string(rune(sig[0]^1)) + sig[1:]
	withQuery := func(mod func(url.Values)) string {
		v := u.Query()
		mod(v)
		return u.Path + "?" + v.Encode()
	}
	exp := time.Now().Add(time.Hour).Unix()

	tests := []struct {
		name       string
		target     string
		header     http.Header
		clock      time.Duration // blob store clock offset during the request
		wantStatus int
		wantBody   []byte
		wantRange  string // Content-Range of a 206
	}{
		{name: "valid", target: valid, wantStatus: http.StatusOK, wantBody: content},
		{name: "valid with credentials ignored", target: valid, header: hdr("Authorization", "Basic abc"), wantStatus: http.StatusOK, wantBody: content},
		{name: "range", target: valid, header: hdr("Range", "bytes=0-6"), wantStatus: http.StatusPartialContent, wantBody: content[:7],
			wantRange: "bytes 0-6/" + strconv.Itoa(len(content))},
		{name: "suffix range", target: valid, header: hdr("Range", "bytes=-4"), wantStatus: http.StatusPartialContent, wantBody: content[len(content)-4:],
			wantRange: "bytes " + strconv.Itoa(len(content)-4) + "-" + strconv.Itoa(len(content)-1) + "/" + strconv.Itoa(len(content))},
		{name: "unsatisfiable range", target: valid, header: hdr("Range", "bytes=9999-"), wantStatus: http.StatusRequestedRangeNotSatisfiable},
		{name: "tampered sig", target: withQuery(func(v url.Values) { v.Set("sig", flipped) }), wantStatus: http.StatusForbidden},
		{name: "missing sig", target: withQuery(func(v url.Values) { v.Del("sig") }), wantStatus: http.StatusForbidden},
		{name: "missing expires", target: withQuery(func(v url.Values) { v.Del("expires") }), wantStatus: http.StatusForbidden},
		{name: "extended expires", target: withQuery(func(v url.Values) { v.Set("expires", strconv.FormatInt(exp+86400, 10)) }), wantStatus: http.StatusForbidden},
		{name: "malformed expires", target: withQuery(func(v url.Values) { v.Set("expires", "+"+v.Get("expires")) }), wantStatus: http.StatusForbidden},
		{name: "sig of another key", target: "/api/blobs/exports/tenant-2/report.csv?" + q.Encode(), wantStatus: http.StatusForbidden},
		{name: "expired", target: valid, clock: time.Hour + time.Second, wantStatus: http.StatusForbidden},
		{name: "unknown key valid sig", target: f.signedTarget(t, "exports/tenant-1/missing.csv", time.Hour), wantStatus: http.StatusNotFound},
		{name: "traversal dotdot", target: "/api/blobs/../secret.txt" + f.forge("../secret.txt", exp), wantStatus: http.StatusNotFound},
		{name: "traversal nested dotdot", target: "/api/blobs/exports/../../secret.txt" + f.forge("exports/../../secret.txt", exp), wantStatus: http.StatusNotFound},
		{name: "traversal encoded", target: "/api/blobs/%2e%2e%2fsecret.txt" + f.forge("../secret.txt", exp), wantStatus: http.StatusNotFound},
		{name: "absolute path as key", target: "/api/blobs/" + outside + f.forge(outside, exp), wantStatus: http.StatusNotFound},
		{name: "file path as a valid key", target: "/api/blobs/" + strings.TrimPrefix(outside, "/") + f.forge(strings.TrimPrefix(outside, "/"), exp), wantStatus: http.StatusNotFound},
		{name: "traversal unsigned", target: "/api/blobs/../../../../etc/passwd", wantStatus: http.StatusNotFound},
		{name: "empty key", target: "/api/blobs/" + f.forge("", exp), wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.blobClock.Set(tt.clock)
			defer f.blobClock.Set(0)
			r := send(t, ts, http.MethodGet, tt.target, tt.header, nil)
			if bytes.Contains(r.Body, secret) {
				t.Fatalf("served a file outside the store: %s", r.Body)
			}
			if r.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.Status, tt.wantStatus, r.Body)
			}
			if r.Status >= 400 {
				if r.Status != http.StatusRequestedRangeNotSatisfiable {
					errorBody(t, r)
				}
				return
			}
			if !bytes.Equal(r.Body, tt.wantBody) {
				t.Errorf("body %q, want %q", r.Body, tt.wantBody)
			}
			if ct := r.Header.Get("Content-Type"); ct != "text/csv" {
				t.Errorf("Content-Type %q, want text/csv", ct)
			}
			if cd := r.Header.Get("Content-Disposition"); cd != `attachment; filename="report.csv"` {
				t.Errorf("Content-Disposition %q", cd)
			}
			if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			if cr := r.Header.Get("Content-Range"); cr != tt.wantRange {
				t.Errorf("Content-Range %q, want %q", cr, tt.wantRange)
			}
		})
	}

	t.Run("no local blob store", func(t *testing.T) {
		ts := serve(t, f.newServer(t, func(d *Deps) { d.LocalBlob = nil }))
		r := send(t, ts, http.MethodGet, valid, nil, nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("status %d, want 404; body %s", r.Status, r.Body)
		}
		if e := errorBody(t, r); e.Code != "not_found" {
			t.Errorf("code %q", e.Code)
		}
	})
}
