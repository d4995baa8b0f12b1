package load_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// idTenant creates a tenant row (the signed-link rule reads its setting).
func idTenant(t *testing.T, pool *pgxpool.Pool, slug string, signed bool) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO tenants (slug, name, webhook_secret_sealed, identity_secret_sealed, require_signed_user_id)
		VALUES ($1, $1, 'x', 'x', $2) RETURNING id`, slug, signed).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// anonEvent is an event sent with an anonymous id only.
func anonEvent(tenant int64, id, anon, typ string, occurred time.Duration, payload string) warehouse.Event {
	e := whEvent(tenant, id, anon, typ, at(occurred), at(occurred), payload)
	e.AnonymousID = anon
	return e
}

// identify is an identify carrying both ids.
func identify(tenant int64, id, user, anon string, occurred time.Duration, traits, auth string) warehouse.Event {
	e := whEvent(tenant, id, user, ingest.ContextIdentified, at(occurred), at(occurred), traits)
	e.AnonymousID, e.LinkAuth = anon, auth
	return e
}

type statRow struct {
	user, eventType string
	events          int64
	first, last     time.Time
}

func userEventStats(t *testing.T, pool *pgxpool.Pool, tenant int64) map[string]statRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT user_id, event_type, events, first_at, last_at
		FROM warehouse.user_event_stats WHERE tenant_id = $1`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]statRow{}
	for rows.Next() {
		var r statRow
		if err := rows.Scan(&r.user, &r.eventType, &r.events, &r.first, &r.last); err != nil {
			t.Fatal(err)
		}
		out[r.user+"/"+r.eventType] = r
	}
	return out
}

type idProfile struct {
	traits      map[string]any
	first, last time.Time
}

func profiles(t *testing.T, pool *pgxpool.Pool, tenant int64) map[string]idProfile {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT user_id, traits, first_seen_at, last_seen_at FROM profiles WHERE tenant_id = $1`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]idProfile{}
	for rows.Next() {
		var u string
		var raw []byte
		var p idProfile
		if err := rows.Scan(&u, &raw, &p.first, &p.last); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(raw, &p.traits)
		out[u] = p
	}
	return out
}

func links(t *testing.T, pool *pgxpool.Pool, tenant int64) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT anonymous_id, user_id || '/' || source FROM identity_links WHERE tenant_id = $1`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var a, u string
		if err := rows.Scan(&a, &u); err != nil {
			t.Fatal(err)
		}
		out[a] = u
	}
	return out
}

func identitySink(pool *pgxpool.Pool, max int, errlog *ingest.ErrorLog) *load.Sink {
	return load.NewSink(pool, whpg.New(pool), load.WithIdentity(identity.New(identity.Config{MaxLinkedIDs: max}), errlog))
}

func errorTypes(t *testing.T, errlog *ingest.ErrorLog, tenant int64) []string {
	t.Helper()
	if err := errlog.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := errlog.List(context.Background(), tenant, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range recs {
		out = append(out, r.ErrorType)
	}
	return out
}

// An anonymous visitor's history counts for the user once an identify links the two: the stored
// events keep their subject, the rollups and the profile merge into the user's, later anonymous
// events count for the user, and a redelivered identify links once.
func TestSinkIdentifyLinksAndMerges(t *testing.T) {
	pool := openPool(t)
	tenant := idTenant(t, pool, "acme", false)
	errlog := newErrorLog(t, pool, time.Now)
	sink := identitySink(pool, 100, errlog)

	// Anonymous history, and the user's own earlier event.
	apply(t, sink, []warehouse.Event{
		anonEvent(tenant, "a1", "anon-1", "page_viewed", 0, `{"price": 10}`),
		anonEvent(tenant, "a2", "anon-1", "page_viewed", time.Hour, `{"price": 30}`),
		identify(tenant, "a3", "anon-1", "", 30*time.Minute, `{"plan":"free","color":"red"}`, ""),
		whEvent(tenant, "u1", "user-1", "page_viewed", at(2*time.Hour), at(2*time.Hour), `{"price": 5}`),
	})
	// The anonymous traits were set by an identify sent as anon-1 (no user yet).
	var traitTimesBefore string
	_ = pool.QueryRow(context.Background(), `SELECT trait_times::text FROM profiles WHERE tenant_id = $1 AND user_id = 'anon-1'`, tenant).Scan(&traitTimesBefore)
	if traitTimesBefore == "" {
		t.Fatal("no profile for anon-1 before the link")
	}
	// The user's identify: older plan than anon's? No: it sets plan later, and leaves color alone.
	signup := identify(tenant, "i1", "user-1", "anon-1", 3*time.Hour, `{"plan":"pro"}`, "")
	for range 2 { // the second is a redelivery: stored once, linked once
		apply(t, sink, []warehouse.Event{signup})
	}
	if got := links(t, pool, tenant); len(got) != 1 || got["anon-1"] != "user-1/identify" {
		t.Fatalf("links = %v, want anon-1 -> user-1 (identify)", got)
	}
	stats := userEventStats(t, pool, tenant)
	pv := stats["user-1/page_viewed"]
	if pv.events != 3 || !pv.first.Equal(at(0)) || !pv.last.Equal(at(2*time.Hour)) {
		t.Errorf("user-1 page_viewed = %+v, want 3 events from t0 to t0+2h", pv)
	}
	for k := range stats {
		if strings.HasPrefix(k, "anon-1/") {
			t.Errorf("anon-1 still has rollup %s after the merge", k)
		}
	}
	var n, total int64
	if err := pool.QueryRow(context.Background(), `SELECT n, total FROM warehouse.user_property_stats
		WHERE tenant_id = $1 AND user_id = 'user-1' AND event_type = 'page_viewed' AND property = 'price'`, tenant).Scan(&n, &total); err != nil || n != 3 || total != 45 {
		t.Errorf("user-1 price stats n=%d total=%d (%v), want 3 and 45", n, total, err)
	}
	if c := queryInt(t, pool, `SELECT count(*) FROM warehouse.user_property_stats WHERE tenant_id = $1 AND user_id = 'anon-1'`, tenant); c != 0 {
		t.Errorf("anon-1 keeps %d property rollups", c)
	}
	ps := profiles(t, pool, tenant)
	if _, ok := ps["anon-1"]; ok {
		t.Error("anon-1's profile was not merged away")
	}
	u := ps["user-1"]
	if u.traits["plan"] != "pro" || u.traits["color"] != "red" || !u.first.Equal(at(0)) || !u.last.Equal(at(3*time.Hour)) {
		t.Errorf("user-1 profile = %+v, want plan pro (set later), color red (from anon-1), seen t0..t0+3h", u)
	}
	// The events keep the subject they were sent as.
	if c := queryInt(t, pool, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1 AND user_id = 'anon-1'`, tenant); c != 3 {
		t.Errorf("%d events stored as anon-1, want 3", c)
	}
	// Later anonymous events (a visitor's still on the bus) count for the user.
	apply(t, sink, []warehouse.Event{anonEvent(tenant, "a4", "anon-1", "page_viewed", 4*time.Hour, `{"price": 1}`)})
	if pv := userEventStats(t, pool, tenant)["user-1/page_viewed"]; pv.events != 4 || !pv.last.Equal(at(4*time.Hour)) {
		t.Errorf("after a later anonymous event: user-1 page_viewed = %+v, want 4 events", pv)
	}
	if _, ok := userEventStats(t, pool, tenant)["anon-1/page_viewed"]; ok {
		t.Error("a later anonymous event wrote a rollup under the linked id")
	}
	if types := errorTypes(t, errlog, tenant); len(types) != 0 {
		t.Errorf("error log %v, want nothing", types)
	}
}

// Refusals: a second claim on an id, a user past the limit (never merged), an unsigned browser
// link where signing is required. The events are stored either way.
func TestSinkIdentityRefusals(t *testing.T) {
	pool := openPool(t)
	tenant := idTenant(t, pool, "acme", false)
	signed := idTenant(t, pool, "signed", true)
	errlog := newErrorLog(t, pool, time.Now)
	sink := identitySink(pool, 2, errlog)

	for _, tc := range []struct {
		name      string
		tenant    int64
		events    []warehouse.Event
		wantLinks map[string]string
		wantError string
		// unmerged is an anonymous id whose rollups must stay its own
		unmerged string
	}{
		{name: "first links", tenant: tenant, events: []warehouse.Event{
			identify(tenant, "c1", "user-1", "anon-1", 0, `{}`, ""),
			identify(tenant, "c2", "user-1", "anon-2", time.Minute, `{}`, ""),
		}, wantLinks: map[string]string{"anon-1": "user-1/identify", "anon-2": "user-1/identify"}},
		{name: "conflict", tenant: tenant, events: []warehouse.Event{
			identify(tenant, "c3", "user-2", "anon-1", 2*time.Minute, `{}`, ""),
		}, wantLinks: map[string]string{"anon-1": "user-1/identify", "anon-2": "user-1/identify"}, wantError: identity.RefusedConflict},
		{name: "super-node limit", tenant: tenant, events: []warehouse.Event{
			anonEvent(tenant, "c4", "anon-3", "page_viewed", 0, `{}`),
			identify(tenant, "c5", "user-1", "anon-3", 3*time.Minute, `{}`, ""),
		}, wantLinks: map[string]string{"anon-1": "user-1/identify", "anon-2": "user-1/identify"}, wantError: identity.RefusedLimit, unmerged: "anon-3"},
		{name: "unsigned browser link", tenant: signed, events: []warehouse.Event{
			anonEvent(signed, "s1", "anon-9", "page_viewed", 0, `{}`),
			identify(signed, "s2", "user-9", "anon-9", time.Minute, `{}`, warehouse.LinkSession),
		}, wantLinks: map[string]string{}, wantError: identity.RefusedUnsigned, unmerged: "anon-9"},
		{name: "signed browser link", tenant: signed, events: []warehouse.Event{
			identify(signed, "s3", "user-9", "anon-9", 2*time.Minute, `{}`, warehouse.LinkVerified),
		}, wantLinks: map[string]string{"anon-9": "user-9/identify"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := errorTypes(t, errlog, tc.tenant)
			if n := apply(t, sink, tc.events); n != len(tc.events) {
				t.Errorf("stored %d of %d events", n, len(tc.events))
			}
			got := links(t, pool, tc.tenant)
			if len(got) != len(tc.wantLinks) {
				t.Errorf("links = %v, want %v", got, tc.wantLinks)
			}
			for k, v := range tc.wantLinks {
				if got[k] != v {
					t.Errorf("links = %v, want %v", got, tc.wantLinks)
				}
			}
			after := errorTypes(t, errlog, tc.tenant)
			added := len(after) - len(before)
			switch {
			case tc.wantError == "" && added != 0:
				t.Errorf("error log gained %v", after)
			case tc.wantError != "" && (added != 1 || !contains(after, tc.wantError)):
				t.Errorf("error log %v, want one %s more", after, tc.wantError)
			}
			if tc.unmerged != "" {
				if _, ok := userEventStats(t, pool, tc.tenant)[tc.unmerged+"/page_viewed"]; !ok {
					t.Errorf("%s's rollups were merged although its link was refused", tc.unmerged)
				}
			}
		})
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// linkingWarehouse is an external warehouse that keeps a copy of the identity graph (as BigQuery's
// identity_links does).
type linkingWarehouse struct {
	externalWarehouse
	links []identity.Link
	fail  error
}

func (w *linkingWarehouse) WriteLinks(_ context.Context, links []identity.Link) error {
	if w.fail != nil {
		return w.fail
	}
	w.links = append(w.links, links...)
	return nil
}

// With an external warehouse, each new link is written to it in the loader's transaction: a
// failed write makes no link, and a redelivery writes none again.
func TestSinkLinksToExternalWarehouse(t *testing.T) {
	pool := openPool(t)
	tenant := idTenant(t, pool, "acme", false)
	wh := &linkingWarehouse{}
	sink := load.NewSink(pool, whpg.NewLedger(wh), load.WithIdentity(identity.New(identity.Config{}), nil))
	batch := []warehouse.Event{identify(tenant, "i1", "user-1", "anon-1", 0, `{}`, "")}

	wh.fail = errors.New("bigquery: 503")
	if _, err := sink.Apply(context.Background(), batch); err == nil {
		t.Fatal("Apply succeeded while the warehouse refused the link")
	}
	if got := links(t, pool, tenant); len(got) != 0 {
		t.Fatalf("links %v after a failed warehouse write, want none", got)
	}
	wh.fail = nil
	for range 2 {
		apply(t, sink, batch)
	}
	if len(wh.links) != 1 || wh.links[0].ID != "anon-1" || wh.links[0].UserID != "user-1" || wh.links[0].Source != identity.SourceIdentify {
		t.Errorf("warehouse links %+v, want anon-1 -> user-1 once", wh.links)
	}
	if got := links(t, pool, tenant); got["anon-1"] != "user-1/identify" {
		t.Errorf("links %v", got)
	}
}
