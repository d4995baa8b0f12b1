package api

import (
	"log/slog"
	"net/http"
	"net/url"
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
