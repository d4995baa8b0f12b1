package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
	"github.com/cohort-dev/cohort/internal/warehouse"
	"github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// loadingPublisher applies what it is given through the loader's sink at once (the bus and the
// loader in one step), and remembers it.
type loadingPublisher struct {
	sink   *load.Sink
	mu     sync.Mutex
	events []warehouse.Event
}

func (p *loadingPublisher) Publish(ctx context.Context, _ int64, events []warehouse.Event) error {
	if _, err := p.sink.Apply(ctx, events); err != nil {
		return err
	}
	p.mu.Lock()
	p.events = append(p.events, events...)
	p.mu.Unlock()
	return nil
}

func (p *loadingPublisher) Check(context.Context) error { return nil }

func (p *loadingPublisher) take() []warehouse.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.events
	p.events = nil
	return out
}

func newIdentityEnv(t *testing.T) (*fixture, *loadingPublisher, *ingest.ErrorLog, *Server) {
	t.Helper()
	f := newFixture(t)
	errlog := ingest.NewErrorLog(f.db.Pool, slog.New(slog.DiscardHandler), time.Now)
	t.Cleanup(func() { _ = errlog.Close(context.Background()) })
	pub := &loadingPublisher{sink: load.NewSink(f.db.Pool, postgres.New(f.db.Pool),
		load.WithIdentity(identity.New(identity.Config{}), errlog))}
	svc := ingest.NewService(pub, errlog, time.Now)
	s := f.newServer(t, func(d *Deps) {
		d.Ingest = &IngestionDeps{Service: svc, Segment: segmentcompat.NewService(svc, time.Now)}
		d.Profiles = &ProfilesDeps{Reader: identity.NewProfiles(f.db.Pool)}
	})
	return f, pub, errlog, s
}

// TestTrackAnonymousID: an event may name its subject by anonymous_id alone (202, stored under
// it); with neither id it is a 400 on user_id.
func TestTrackAnonymousID(t *testing.T) {
	f, pub, _, s := newIdentityEnv(t)
	ts := serve(t, s)
	for _, tc := range []struct {
		name, path, body     string
		status               int
		wantUser, wantAnon   string
		wantField, wantInMsg string
	}{
		{name: "anonymous only", path: "/api/ingestion/track/", body: `{"anonymous_id":"anon-1","event_type":"page_viewed"}`,
			status: http.StatusAccepted, wantUser: "anon-1", wantAnon: "anon-1"},
		{name: "both ids", path: "/api/ingestion/track/", body: `{"user_id":"u1","anonymous_id":"anon-1","event_type":"page_viewed"}`,
			status: http.StatusAccepted, wantUser: "u1", wantAnon: "anon-1"},
		{name: "neither id", path: "/api/ingestion/track/", body: `{"event_type":"page_viewed"}`,
			status: http.StatusBadRequest, wantField: "user_id", wantInMsg: "user_id or anonymous_id is required"},
		{name: "anonymous id too long", path: "/api/ingestion/track/", body: `{"anonymous_id":"` + strings.Repeat("a", 256) + `","event_type":"page_viewed"}`,
			status: http.StatusBadRequest, wantField: "anonymous_id"},
		{name: "batch anonymous only", path: "/api/ingestion/track/batch/", body: `{"events":[{"anonymous_id":"anon-2","event_type":"page_viewed"}]}`,
			status: http.StatusAccepted, wantUser: "anon-2", wantAnon: "anon-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodPost, tc.path, apiKey(f.A), strings.NewReader(tc.body))
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.status != http.StatusAccepted {
				var body struct {
					Error struct {
						Fields map[string]string `json:"fields"`
					} `json:"error"`
				}
				if err := json.Unmarshal(r.Body, &body); err != nil || body.Error.Fields[tc.wantField] == "" {
					t.Fatalf("body %s: want fields.%s", r.Body, tc.wantField)
				}
				if !strings.Contains(body.Error.Fields[tc.wantField], tc.wantInMsg) {
					t.Errorf("fields.%s = %q, want it to say %q", tc.wantField, body.Error.Fields[tc.wantField], tc.wantInMsg)
				}
				return
			}
			evs := pub.take()
			if len(evs) != 1 || evs[0].UserID != tc.wantUser || evs[0].AnonymousID != tc.wantAnon {
				t.Fatalf("published %+v, want one event by (%s, %s)", evs, tc.wantUser, tc.wantAnon)
			}
			var anon string
			if err := f.db.Pool.QueryRow(context.Background(), `SELECT anonymous_id FROM warehouse.events WHERE tenant_id = $1 AND event_id = $2`,
				f.A.T.ID, evs[0].EventID).Scan(&anon); err != nil || anon != tc.wantAnon {
				t.Errorf("stored anonymous_id %q (%v), want %q", anon, err, tc.wantAnon)
			}
		})
	}
}

// TestIdentifyLinkAuth: an identify with both ids from a browser session carries whether the
// session's signature proved its user id, for the loader's signed-link rule; a server key's does
// not need to.
func TestIdentifyLinkAuth(t *testing.T) {
	f, pub, _, s := newIdentityEnv(t)
	ts := serve(t, s)
	now := time.Now().Unix()
	signed := f.handshake(t, ts, f.A.PK, `{"user_id":"user-s","user_id_sig":"`+auth.SignUserID([]byte(f.A.IdentitySecret), "user-s", now)+`","user_id_ts":`+strconv.FormatInt(now, 10)+`}`)
	unsigned := f.handshake(t, ts, f.A.PK, `{"anonymous_id":"anon-1"}`)
	identify := func(user string) string {
		return `{"user_id":"` + user + `","anonymous_id":"anon-1","event_type":"context_identified","payload":{}}`
	}
	for _, tc := range []struct {
		name, authz, body, want string
	}{
		{"secret key", "ApiKey " + f.A.SK, identify("user-k"), ""},
		{"verified session", "Bearer " + signed, identify("user-s"), warehouse.LinkVerified},
		{"unverified session", "Bearer " + unsigned, identify("user-u"), warehouse.LinkSession},
		{"session, not an identify", "Bearer " + unsigned, `{"user_id":"user-u","anonymous_id":"anon-1","event_type":"page_viewed"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodPost, "/api/ingestion/track/", hdr("Authorization", tc.authz), strings.NewReader(tc.body))
			if r.Status != http.StatusAccepted {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			evs := pub.take()
			if len(evs) != 1 || evs[0].LinkAuth != tc.want {
				t.Fatalf("published %+v, want link_auth %q", evs, tc.want)
			}
		})
	}
}

type profileBody struct {
	UserID      string         `json:"user_id"`
	Traits      map[string]any `json:"traits"`
	FirstSeenAt *time.Time     `json:"first_seen_at"`
	LastSeenAt  *time.Time     `json:"last_seen_at"`
	LinkedIDs   []struct {
		ID       string    `json:"id"`
		Source   string    `json:"source"`
		LinkedAt time.Time `json:"linked_at"`
	} `json:"linked_ids"`
}

// TestAliasAndProfile: /v1/alias links previousId to userId; GET /api/profiles/{id}/ answers the
// canonical profile for either id, with the linked ids, and 404 for an unknown id or another
// tenant's.
func TestAliasAndProfile(t *testing.T) {
	f, _, _, s := newIdentityEnv(t)
	ts := serve(t, s)
	for _, m := range []struct{ path, body string }{
		{"/v1/page", `{"anonymousId":"anon-1","name":"Home","timestamp":"2026-01-01T10:00:00Z"}`},
		{"/v1/identify", `{"anonymousId":"anon-1","traits":{"color":"red"},"timestamp":"2026-01-01T10:01:00Z"}`},
		{"/v1/track", `{"userId":"user-1","event":"Order Completed","timestamp":"2026-01-02T10:00:00Z"}`},
		{"/v1/alias", `{"previousId":"anon-1","userId":"user-1","timestamp":"2026-01-02T11:00:00Z"}`},
	} {
		decodeSegmentResult(t, send(t, ts, http.MethodPost, m.path, segBasic(f.A.SK), strings.NewReader(m.body)))
	}
	for _, tc := range []struct {
		name, id string
		h        http.Header
		status   int
	}{
		{"by user id, bearer", "user-1", bearer(f.A), http.StatusOK},
		{"by linked id, secret key", "anon-1", apiKey(f.A), http.StatusOK},
		{"unknown id", "nobody", bearer(f.A), http.StatusNotFound},
		{"another tenant's", "user-1", bearer(f.B), http.StatusNotFound},
		{"session token refused", "user-1", hdr("Authorization", "Bearer "+f.A.Session), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/profiles/"+tc.id+"/", tc.h, nil)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.status != http.StatusOK {
				if tc.status == http.StatusNotFound && !strings.Contains(string(r.Body), `"not_found"`) {
					t.Errorf("body %s, want code not_found", r.Body)
				}
				return
			}
			var p profileBody
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			if p.UserID != "user-1" || p.Traits["color"] != "red" || len(p.LinkedIDs) != 1 || p.LinkedIDs[0].ID != "anon-1" || p.LinkedIDs[0].Source != identity.SourceAlias {
				t.Errorf("profile %s, want user-1 with color red and anon-1 linked by alias", r.Body)
			}
			if p.FirstSeenAt == nil || !p.FirstSeenAt.Equal(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)) ||
				p.LastSeenAt == nil || !p.LastSeenAt.Equal(time.Date(2026, 1, 2, 11, 0, 0, 0, time.UTC)) {
				t.Errorf("profile seen %v..%v, want the anonymous history's start to the alias", p.FirstSeenAt, p.LastSeenAt)
			}
		})
	}
}

// TestAnonymousSessionOnSignedTenant: on a tenant that requires signed user ids, a pk_ handshake
// with an anonymous_id alone gets a session bound to that id; through it anonymous events are
// accepted and anything naming a user (or another anonymous id) is refused and logged; a signed
// session for the user then links the anonymous id by identify.
func TestAnonymousSessionOnSignedTenant(t *testing.T) {
	f, pub, errlog, s := newIdentityEnv(t)
	ctx := context.Background()
	signed := f.createTenant(t, "tenant-signed-anon")
	if err := f.tenants.SetRequireSignedUserID(ctx, signed.T.Slug, true); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s)

	r := send(t, ts, http.MethodPost, "/api/auth/session/", hdr("Authorization", "ApiKey "+signed.PK), strings.NewReader(`{"anonymous_id":"anon-v"}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("anonymous handshake: status %d: %s", r.Status, r.Body)
	}
	var sess auth.Session
	if err := json.Unmarshal(r.Body, &sess); err != nil || sess.Token == "" || sess.UserID != "" || sess.Verified || sess.AnonymousID != "anon-v" {
		t.Fatalf("anonymous handshake body %s (%v): want a token bound to anon-v with no user", r.Body, err)
	}
	anon := hdr("Authorization", "Bearer "+sess.Token)

	const (
		pageView     = `{"anonymous_id":"anon-v","event_type":"page_viewed","payload":{"path":"/"}}`
		identifyBoth = `{"user_id":"user-v","anonymous_id":"anon-v","event_type":"context_identified","payload":{"plan":"pro"}}`
	)
	for _, tc := range []struct {
		name, path, body string
		status           int
		wantField        string // the refused field of a 400
		wantSkipped      []int  // a batch's skipped indexes, all user_mismatch
		wantPublished    int
	}{
		{name: "anonymous page view", path: "/api/ingestion/track/", body: pageView, status: http.StatusAccepted, wantPublished: 1},
		{name: "identify with a user id", path: "/api/ingestion/track/", body: identifyBoth, status: http.StatusBadRequest, wantField: "user_id"},
		{name: "a user's page view", path: "/api/ingestion/track/", body: `{"user_id":"user-v","event_type":"page_viewed"}`, status: http.StatusBadRequest, wantField: "user_id"},
		{name: "another anonymous id", path: "/api/ingestion/track/", body: `{"anonymous_id":"anon-w","event_type":"page_viewed"}`, status: http.StatusBadRequest, wantField: "anonymous_id"},
		{name: "batch skips the identify", path: "/api/ingestion/track/batch/", body: `{"events":[` + pageView + `,` + identifyBoth + `]}`,
			status: http.StatusAccepted, wantSkipped: []int{1}, wantPublished: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodPost, tc.path, anon, strings.NewReader(tc.body))
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.status == http.StatusBadRequest {
				e := errorBody(t, r)
				if e.Code != "user_mismatch" || e.Fields[tc.wantField] == "" {
					t.Fatalf("error %+v, want user_mismatch on %s", e, tc.wantField)
				}
				if tc.wantField == "user_id" && !strings.Contains(e.Fields["user_id"], "a user id needs a session whose user_id is signed") {
					t.Errorf("fields.user_id = %q, want it to say a signed session is needed", e.Fields["user_id"])
				}
			}
			if tc.wantSkipped != nil {
				var res ingest.BatchResult
				if err := json.Unmarshal(r.Body, &res); err != nil {
					t.Fatal(err)
				}
				if res.Skipped != len(tc.wantSkipped) || len(res.Errors) != len(tc.wantSkipped) {
					t.Fatalf("batch result %s, want skipped %v", r.Body, tc.wantSkipped)
				}
				for i, e := range res.Errors {
					if e.Index != tc.wantSkipped[i] || e.Code != "user_mismatch" {
						t.Errorf("errors[%d] = %+v, want index %d user_mismatch", i, e, tc.wantSkipped[i])
					}
				}
			}
			evs := pub.take()
			if len(evs) != tc.wantPublished {
				t.Fatalf("published %+v, want %d events", evs, tc.wantPublished)
			}
			for _, e := range evs {
				if e.UserID != "anon-v" || e.AnonymousID != "anon-v" || e.TenantID != signed.T.ID {
					t.Errorf("published %+v, want an event of anon-v alone for the signed tenant", e)
				}
			}
		})
	}

	// The refusals are in the tenant's ingestion errors, as session user mismatches.
	if err := errlog.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := errlog.List(ctx, signed.T.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	mismatches := 0
	for _, rec := range recs {
		if rec.ErrorType == ingest.ErrorSessionUser && strings.Contains(rec.Detail, "user_mismatch") {
			mismatches++
		}
	}
	if mismatches != 4 {
		t.Errorf("error log %+v, want 4 session user mismatches", recs)
	}

	// No link was made through the anonymous session.
	if r := send(t, ts, http.MethodGet, "/api/profiles/user-v/", hdr("Authorization", "Bearer "+signed.Bearer), nil); r.Status != http.StatusNotFound {
		t.Fatalf("profile of user-v before the signed identify: status %d %s, want 404", r.Status, r.Body)
	}

	// The user signs up: a signed session for the user, and the identify with both ids links them.
	now := time.Now().Unix()
	tok := f.handshake(t, ts, signed.PK, `{"user_id":"user-v","anonymous_id":"anon-v","user_id_sig":"`+auth.SignUserID([]byte(signed.IdentitySecret), "user-v", now)+`","user_id_ts":`+strconv.FormatInt(now, 10)+`}`)
	if r := send(t, ts, http.MethodPost, "/api/ingestion/track/", hdr("Authorization", "Bearer "+tok), strings.NewReader(identifyBoth)); r.Status != http.StatusAccepted {
		t.Fatalf("signed identify: status %d: %s", r.Status, r.Body)
	}
	if evs := pub.take(); len(evs) != 1 || evs[0].LinkAuth != warehouse.LinkVerified {
		t.Fatalf("published %+v, want one verified identify", evs)
	}
	r = send(t, ts, http.MethodGet, "/api/profiles/anon-v/", hdr("Authorization", "Bearer "+signed.Bearer), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("profile by the anonymous id: status %d: %s", r.Status, r.Body)
	}
	var p profileBody
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	if p.UserID != "user-v" || len(p.LinkedIDs) != 1 || p.LinkedIDs[0].ID != "anon-v" || p.LinkedIDs[0].Source != identity.SourceIdentify {
		t.Errorf("profile %s, want user-v with anon-v linked by identify", r.Body)
	}
}
