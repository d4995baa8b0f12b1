package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/segment"
)

// TestSegmentMembershipUserID: the membership lookup takes the user ids ingestion accepts and
// refuses the others (control characters, invalid UTF-8, too long) with 400 invalid_user_id.
func TestSegmentMembershipUserID(t *testing.T) {
	f := newFixture(t)
	svc := segment.NewService(f.db.Gorm, f.db.Pool, time.Now, nil)
	cache := segment.NewMembershipCache(svc, f.db.Pool, slog.New(slog.DiscardHandler), segment.CacheOptions{})
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Segments = &SegmentsDeps{Service: svc, Cache: cache} }))
	cases := []struct {
		name     string
		rawQuery string // the query string as sent
		want     int
	}{
		{"plain", "user_id=u1", http.StatusOK},
		{"email", "user_id=" + url.QueryEscape("ada@example.com"), http.StatusOK},
		{"255 characters", "user_id=" + strings.Repeat("a", 255), http.StatusOK},
		{"missing", "", http.StatusBadRequest},
		{"empty", "user_id=", http.StatusBadRequest},
		{"newline", "user_id=a%0ab", http.StatusBadRequest},
		{"NUL", "user_id=a%00b", http.StatusBadRequest},
		{"tab", "user_id=%09a", http.StatusBadRequest},
		{"DEL", "user_id=a%7F", http.StatusBadRequest},
		{"C1 control", "user_id=a%C2%85", http.StatusBadRequest},
		{"invalid UTF-8", "user_id=a%FFb", http.StatusBadRequest},
		{"256 characters", "user_id=" + strings.Repeat("a", 256), http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/segments/membership/?"+tc.rawQuery, hdr("Authorization", "ApiKey "+f.A.SK), nil)
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d (body %s)", r.Status, tc.want, r.Body)
			}
			if tc.want == http.StatusBadRequest {
				e := errorBody(t, r)
				if e.Code != "invalid_user_id" || e.Fields["user_id"] == "" {
					t.Fatalf("error %+v, want invalid_user_id naming user_id", e)
				}
			}
		})
	}
}

// TestSegmentMembershipIdentity: a lookup by an anonymous id linked to a user (as user_id or as
// anonymous_id) answers the user's segments, naming the user as canonical_user_id; the user's own
// id and an unlinked id answer without it.
func TestSegmentMembershipIdentity(t *testing.T) {
	f := newFixture(t)
	svc := segment.NewService(f.db.Gorm, f.db.Pool, time.Now, nil)
	cache := segment.NewMembershipCache(svc, f.db.Pool, slog.New(slog.DiscardHandler), segment.CacheOptions{})
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Segments = &SegmentsDeps{Service: svc, Cache: cache} }))
	tenant := f.A.T.ID
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO segments (tenant_id, name, segment_type, status, version, created_at, updated_at) VALUES ($1, 's1', 'rule', 'ready', 0, now(), now()), ($1, 's2', 'rule', 'ready', 0, now(), now())`,
		`INSERT INTO identity_links (tenant_id, anonymous_id, user_id, source, linked_at) VALUES ($1, 'anon-1', 'ada', 'identify', now())`,
	} {
		if _, err := f.db.Pool.Exec(ctx, sql, tenant); err != nil {
			t.Fatal(err)
		}
	}
	var s1, s2 int64
	if err := f.db.Pool.QueryRow(ctx, `SELECT min(id), max(id) FROM segments WHERE tenant_id = $1`, tenant).Scan(&s1, &s2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at)
		VALUES ($1, $2, 'ada', now()), ($1, $3, 'ada', now()), ($1, $2, 'anon-2', now())`, tenant, s1, s2); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		UserID          string  `json:"user_id"`
		CanonicalUserID *string `json:"canonical_user_id"`
		SegmentIDs      []int64 `json:"segment_ids"`
	}
	ada := "ada"
	cases := []struct {
		name     string
		rawQuery string
		want     answer
	}{
		{"user id", "user_id=ada", answer{UserID: "ada", SegmentIDs: []int64{s1, s2}}},
		{"linked id as user_id", "user_id=anon-1", answer{UserID: "anon-1", CanonicalUserID: &ada, SegmentIDs: []int64{s1, s2}}},
		{"linked id as anonymous_id", "anonymous_id=anon-1", answer{UserID: "anon-1", CanonicalUserID: &ada, SegmentIDs: []int64{s1, s2}}},
		{"unlinked anonymous id", "anonymous_id=anon-2", answer{UserID: "anon-2", SegmentIDs: []int64{s1}}},
		{"unknown id", "anonymous_id=anon-3", answer{UserID: "anon-3", SegmentIDs: []int64{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/segments/membership/?"+tc.rawQuery, hdr("Authorization", "ApiKey "+f.A.SK), nil)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d (body %s)", r.Status, r.Body)
			}
			var got answer
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("answer %s, want %+v", r.Body, tc.want)
			}
		})
	}
	// Another tenant's link resolves nothing here.
	r := send(t, ts, http.MethodGet, "/api/segments/membership/?anonymous_id=anon-1", hdr("Authorization", "ApiKey "+f.B.SK), nil)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "canonical_user_id") || !strings.Contains(string(r.Body), `"segment_ids":[]`) {
		t.Fatalf("other tenant: %d %s", r.Status, r.Body)
	}
	bad := []struct {
		name, rawQuery, code, field string
	}{
		{"both parameters", "user_id=ada&anonymous_id=anon-1", "invalid_user_id", "anonymous_id"},
		{"empty anonymous_id", "anonymous_id=", "invalid_anonymous_id", "anonymous_id"},
		{"anonymous_id with a newline", "anonymous_id=a%0ab", "invalid_anonymous_id", "anonymous_id"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/segments/membership/?"+tc.rawQuery, hdr("Authorization", "ApiKey "+f.A.SK), nil)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400 (body %s)", r.Status, r.Body)
			}
			if e := errorBody(t, r); e.Code != tc.code || e.Fields[tc.field] == "" {
				t.Fatalf("error %+v, want %s naming %s", e, tc.code, tc.field)
			}
		})
	}
}
