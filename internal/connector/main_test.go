package connector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/klaviyo"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixtureStart is the service clock's start: whole seconds, so it survives a timestamptz round
// trip unchanged.
var fixtureStart = time.Date(2026, 4, 1, 9, 30, 0, 0, time.UTC)

// fixture is a fresh migrated database with a connector service over it.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	db    *store.DB
	box   *secretbox.Box
	clock *testenv.Clock
	svc   *connector.Service
}

func testBox(t *testing.T) *secretbox.Box {
	t.Helper()
	key := make([]byte, secretbox.KeySize)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	box, err := secretbox.New(map[string][]byte{"k1": key}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	return box
}

func newFixture(t *testing.T, o connector.Options) *fixture {
	t.Helper()
	db := testenv.OpenDB(t)
	clock := testenv.NewClock(fixtureStart)
	box := testBox(t)
	return &fixture{t: t, ctx: context.Background(), db: db, box: box, clock: clock,
		svc: connector.NewService(db.Gorm, db.Pool, box, clock.Now, o)}
}

func (f *fixture) exec(sql string, args ...any) { f.t.Helper(); testenv.Exec(f.t, f.db, sql, args...) }

func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	return testenv.Count(f.t, f.db, sql, args...)
}

func (f *fixture) tenant(slug string) int64 {
	f.t.Helper()
	return testenv.Tenant(f.t, f.db, slug)
}

func (f *fixture) segment(tenant int64, name string) int64 {
	f.t.Helper()
	var id int64
	if err := f.db.Pool.QueryRow(f.ctx, `INSERT INTO segments (tenant_id, name, segment_type, status)
		VALUES ($1, $2, 'rule', 'ready') RETURNING id`, tenant, name).Scan(&id); err != nil {
		f.t.Fatalf("create segment %s: %v", name, err)
	}
	return id
}

// addMembers puts users into the segment.
func (f *fixture) addMembers(tenant, segment int64, users ...string) {
	f.t.Helper()
	f.exec(`INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at)
		SELECT $1, $2, u, $4 FROM unnest($3::text[]) u`, tenant, segment, users, fixtureStart)
}

// removeMembers takes users out of the segment.
func (f *fixture) removeMembers(tenant, segment int64, users ...string) {
	f.t.Helper()
	f.exec(`DELETE FROM segment_members WHERE tenant_id = $1 AND segment_id = $2 AND user_id = ANY($3)`, tenant, segment, users)
}

// profiles gives each user an email trait (users mapped to "" get a profile without one).
func (f *fixture) profiles(tenant int64, emails map[string]string) {
	f.t.Helper()
	for user, email := range emails {
		traits := `{"plan":"pro"}`
		if email != "" {
			b, _ := json.Marshal(map[string]string{"email": email, "plan": "pro"})
			traits = string(b)
		}
		f.exec(`INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at) VALUES ($1, $2, $3::jsonb, $4, $4)
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET traits = EXCLUDED.traits`, tenant, user, traits, fixtureStart)
	}
}

// segmentMembers are the segment's users, sorted.
func (f *fixture) segmentMembers(tenant, segment int64) []string {
	f.t.Helper()
	return f.strings(`SELECT user_id FROM segment_members WHERE tenant_id = $1 AND segment_id = $2`, tenant, segment)
}

// present are the users the connector's record says the platform holds, sorted.
func (f *fixture) present(connectorID int64) []string {
	f.t.Helper()
	return f.strings(`SELECT user_id FROM activation_members WHERE connector_id = $1 AND present`, connectorID)
}

// strings runs a one-column text query and returns the values sorted (byte order).
func (f *fixture) strings(sql string, args ...any) []string {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, sql, args...)
	if err != nil {
		f.t.Fatalf("query %q: %v", sql, err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// create makes a connector from a JSON config and fails the test on error.
func (f *fixture) create(tenant, segment int64, kind, name, config string) *connector.Connector {
	f.t.Helper()
	c, err := f.svc.Create(f.ctx, tenant, connector.CreateInput{SegmentID: &segment, Kind: kind, Name: name, Config: json.RawMessage(config)})
	if err != nil {
		f.t.Fatalf("create %s connector: %v", kind, err)
	}
	return c
}

// setStatus sets a connector's status through the API path (PATCH).
func (f *fixture) setStatus(tenant, id int64, status string) {
	f.t.Helper()
	if _, err := f.svc.Update(f.ctx, tenant, id, connector.UpdateInput{Status: &status}); err != nil {
		f.t.Fatalf("set status %s: %v", status, err)
	}
}

// begin starts a manual sync run of the connector with a fresh workflow id.
func (f *fixture) begin(tenant, id int64, workflowID string) *connector.SyncRun {
	f.t.Helper()
	run, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: tenant, ConnectorID: id, Trigger: connector.TriggerManual,
		WorkflowID: workflowID, TemporalRunID: "run-1"})
	if err != nil {
		f.t.Fatalf("begin sync: %v", err)
	}
	return run
}

// run reloads a sync run.
func (f *fixture) run(tenant, id int64) *connector.SyncRun {
	f.t.Helper()
	r, err := f.svc.Run(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatalf("load run %d: %v", id, err)
	}
	return r
}

// get reloads a connector.
func (f *fixture) get(tenant, id int64) *connector.Connector {
	f.t.Helper()
	c, err := f.svc.Get(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatalf("get connector %d: %v", id, err)
	}
	return c
}

// platforms is the adapter factory of the tests: a plain client (loopback allowed), fresh
// token buckets and fast Klaviyo polling.
func platformsFor(klaviyoURL string) *connector.Platforms {
	return &connector.Platforms{
		HTTP:           &http.Client{Timeout: 20 * time.Second},
		KlaviyoBaseURL: klaviyoURL,
		Limiters:       platform.NewLimiters(),
		Klaviyo:        klaviyo.Options{PollInterval: time.Millisecond, PollMax: 5 * time.Millisecond},
	}
}

// adapter opens the connector's credentials and builds its adapter.
func (f *fixture) adapter(p *connector.Platforms, tenant, id int64) platform.Platform {
	f.t.Helper()
	creds, err := f.svc.Credentials(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatalf("credentials: %v", err)
	}
	a, err := p.New(creds)
	if err != nil {
		f.t.Fatalf("adapter: %v", err)
	}
	return a
}

// fieldErrors returns the field keys of a validation error, failing the test if err is not one.
func fieldErrors(t *testing.T, err error) []string {
	t.Helper()
	var ve *errs.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T), want a *errs.ValidationError", err, err)
	}
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("error %v does not match errs.ErrInvalid", err)
	}
	keys := make([]string, 0, len(ve.Fields))
	for k := range ve.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// users returns n user ids prefix0001..., sorted.
func users(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, from+i)
	}
	return out
}

// sameRecord compares two API records as the API serialises them (times compare by instant,
// whatever their location).
func sameRecord(a, b *connector.Connector) bool {
	norm := func(c *connector.Connector) string {
		cp := *c
		cp.CreatedAt, cp.UpdatedAt = cp.CreatedAt.UTC(), cp.UpdatedAt.UTC()
		if cp.LastSyncedAt != nil {
			cp.LastSyncedAt = new(cp.LastSyncedAt.UTC())
		}
		j, _ := json.Marshal(cp)
		return string(j)
	}
	return norm(a) == norm(b)
}
