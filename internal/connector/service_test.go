package connector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
)

const (
	klaviyoKey  = "pk_live_a1b2c3d4e5f6g7h8i9j0"
	klaviyoKey2 = "pk_live_ROTATED_zz99yy88xx77"
)

// storedColumns reads a connector row's config and secrets columns as stored.
func (f *fixture) storedColumns(id int64) (config, secrets string) {
	f.t.Helper()
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT config::text, secrets::text FROM activation_connectors WHERE id = $1`, id).
		Scan(&config, &secrets); err != nil {
		f.t.Fatalf("read connector %d: %v", id, err)
	}
	return config, secrets
}

func (f *fixture) sealedKey(id int64) string {
	f.t.Helper()
	_, secrets := f.storedColumns(id)
	var m map[string]string
	if err := json.Unmarshal([]byte(secrets), &m); err != nil {
		f.t.Fatalf("secrets column %q: %v", secrets, err)
	}
	return m["api_key"]
}

func (f *fixture) apiKey(tenant, id int64) string {
	f.t.Helper()
	c, err := f.svc.Credentials(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatalf("credentials of %d: %v", id, err)
	}
	return c.Secrets["api_key"]
}

func TestSecretsAreSealedAndMasked(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "Klaviyo", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)

	if c.Config["api_key"] != connector.Masked {
		t.Errorf("returned api_key %v, want %q", c.Config["api_key"], connector.Masked)
	}
	for name, v := range map[string]any{"create": c, "get": f.get(tenant, c.ID)} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), klaviyoKey) {
			t.Errorf("%s record carries the key: %s", name, b)
		}
	}
	list, err := f.svc.List(f.ctx, tenant, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(list); strings.Contains(string(b), klaviyoKey) || len(list) != 1 || list[0].Config["api_key"] != connector.Masked {
		t.Errorf("listed records %s: want one, masked", b)
	}

	config, secrets := f.storedColumns(c.ID)
	if strings.Contains(config, klaviyoKey) || strings.Contains(config, "api_key") {
		t.Errorf("config column %s holds the key", config)
	}
	if config != `{"list_id": "L1"}` {
		t.Errorf("config column %s, want only list_id", config)
	}
	if strings.Contains(secrets, klaviyoKey) {
		t.Errorf("secrets column %s holds the key in clear", secrets)
	}
	sealed := f.sealedKey(c.ID)
	if !strings.HasPrefix(sealed, "v1:k1:") || sealed == klaviyoKey {
		t.Errorf("sealed api_key %q, want a v1:k1: sealed value", sealed)
	}

	creds, err := f.svc.Credentials(f.ctx, tenant, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := &connector.Credentials{ConnectorID: c.ID, SegmentID: seg, Kind: connector.KindKlaviyo,
		Config: map[string]any{"list_id": "L1"}, Secrets: map[string]string{"api_key": klaviyoKey}}
	if !reflect.DeepEqual(creds, want) {
		t.Errorf("credentials %+v, want %+v", creds, want)
	}

	// Sealing twice gives different ciphertexts (random nonce), both opening to their key.
	c2 := f.create(tenant, seg, connector.KindKlaviyo, "Klaviyo 2", `{"list_id":"L2","api_key":"`+klaviyoKey+`"}`)
	if f.sealedKey(c2.ID) == sealed {
		t.Errorf("two connectors with the same key have the same sealed value")
	}
}

// TestSealedKeyIsBoundToItsRow copies a sealed key to other rows: it must not open there.
func TestSealedKeyIsBoundToItsRow(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	other := f.tenant("other")
	seg := f.segment(tenant, "vip")
	otherSeg := f.segment(other, "theirs")
	src := f.create(tenant, seg, connector.KindKlaviyo, "Source", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	_, srcSecrets := f.storedColumns(src.ID)

	cases := []struct {
		name   string
		tenant int64
		target *connector.Connector
	}{
		{"same tenant", tenant, f.create(tenant, seg, connector.KindKlaviyo, "Target", `{"list_id":"L2","api_key":"`+klaviyoKey2+`"}`)},
		{"other tenant", other, f.create(other, otherSeg, connector.KindKlaviyo, "Theirs", `{"list_id":"L3","api_key":"`+klaviyoKey2+`"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.exec(`UPDATE activation_connectors SET secrets = $1::jsonb WHERE id = $2`, srcSecrets, tc.target.ID)
			_, err := f.svc.Credentials(f.ctx, tc.tenant, tc.target.ID)
			if !errors.Is(err, secretbox.ErrDecrypt) {
				t.Fatalf("credentials with a copied sealed key: %v, want secretbox.ErrDecrypt", err)
			}
			if strings.Contains(err.Error(), klaviyoKey) || strings.Contains(err.Error(), srcSecrets) {
				t.Errorf("error %q reveals the key or its sealed value", err)
			}
		})
	}
	if got := f.apiKey(tenant, src.ID); got != klaviyoKey {
		t.Errorf("source key %q, want %q", got, klaviyoKey)
	}
}

func TestUpdate(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	const brazeCfg = `{"rest_endpoint":"https://rest.iad-01.braze.com","api_key":"b-key-0123456789","attribute":"vip","segment_id":"braze-seg-1"}`
	const talonCfg = `{"base_url":"https://acme.talon.one","api_key":"t1-key-0123456789","audience_id":42}`
	const klaviyoCfg = `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`

	type check func(t *testing.T, c *connector.Connector, key string)
	cases := []struct {
		name    string
		kind    string
		config  string
		in      connector.UpdateInput
		want    []string // field errors; nil: the update succeeds
		wantKey string   // the api_key Credentials opens afterwards
		check   check
	}{
		{name: "masked key keeps the stored key", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"api_key":"***"}`))}, wantKey: klaviyoKey,
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if !reflect.DeepEqual(c.Config, map[string]any{"list_id": "L1", "api_key": "***"}) {
					t.Errorf("config %v", c.Config)
				}
			}},
		{name: "masked key with another field change", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"list_id":"L9","api_key":"***"}`))}, wantKey: klaviyoKey,
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if c.Config["list_id"] != "L9" {
					t.Errorf("list_id %v, want L9", c.Config["list_id"])
				}
			}},
		{name: "config without the key keeps it", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"list_id":"L2"}`))}, wantKey: klaviyoKey},
		{name: "new key replaces the stored one", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"api_key":"` + klaviyoKey2 + `"}`))}, wantKey: klaviyoKey2,
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if c.Config["api_key"] != "***" {
					t.Errorf("api_key returned as %v", c.Config["api_key"])
				}
			}},
		{name: "null removes an optional field", kind: connector.KindBraze, config: brazeCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"segment_id":null}`))}, wantKey: "b-key-0123456789",
			check: func(t *testing.T, c *connector.Connector, _ string) {
				want := map[string]any{"rest_endpoint": "https://rest.iad-01.braze.com", "api_key": "***", "attribute": "vip"}
				if !reflect.DeepEqual(c.Config, want) {
					t.Errorf("config %v, want %v", c.Config, want)
				}
			}},
		{name: "null attribute falls back to the default", kind: connector.KindBraze, config: brazeCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"attribute":null}`))}, wantKey: "b-key-0123456789",
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if c.Config["attribute"] != connector.DefaultBrazeAttribute(seg) || c.Config["segment_id"] != "braze-seg-1" {
					t.Errorf("config %v, want the default attribute and segment_id kept", c.Config)
				}
			}},
		{name: "audience_id as a string", kind: connector.KindTalonOne, config: talonCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"audience_id":"77"}`))}, wantKey: "t1-key-0123456789",
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if c.Config["audience_id"] != int64(77) {
					t.Errorf("audience_id %#v, want 77", c.Config["audience_id"])
				}
			}},
		{name: "name trimmed", kind: connector.KindTalonOne, config: talonCfg,
			in: connector.UpdateInput{Name: new("  Renamed  ")}, wantKey: "t1-key-0123456789",
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if c.Name != "Renamed" {
					t.Errorf("name %q", c.Name)
				}
			}},
		{name: "status inactive", kind: connector.KindTalonOne, config: talonCfg,
			in: connector.UpdateInput{Status: new(connector.StatusInactive)}, wantKey: "t1-key-0123456789",
			check: func(t *testing.T, c *connector.Connector, _ string) {
				if c.Status != connector.StatusInactive {
					t.Errorf("status %q", c.Status)
				}
			}},
		{name: "null on a required field", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"list_id":null}`))}, want: []string{"config.list_id"}},
		{name: "null on the key", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"api_key":null}`))}, want: []string{"config.api_key"}},
		{name: "null on audience_id", kind: connector.KindTalonOne, config: talonCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"audience_id":null}`))}, want: []string{"config.audience_id"}},
		{name: "empty key", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"api_key":""}`))}, want: []string{"config.api_key"}},
		{name: "unknown field", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"audience_id":1}`))}, want: []string{"config.audience_id"}},
		{name: "http URL", kind: connector.KindBraze, config: brazeCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`{"rest_endpoint":"http://rest.iad-01.braze.com"}`))}, want: []string{"config.rest_endpoint"}},
		{name: "config not an object", kind: connector.KindBraze, config: brazeCfg,
			in: connector.UpdateInput{Config: new(json.RawMessage(`["x"]`))}, want: []string{"config"}},
		{name: "status error refused", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Status: new(connector.StatusError)}, want: []string{"status"}},
		{name: "status unknown", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Status: new("paused")}, want: []string{"status"}},
		{name: "name empty", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Name: new(" ")}, want: []string{"name"}},
		{name: "name too long", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Name: new(strings.Repeat("x", connector.MaxNameLength+1))}, want: []string{"name"}},
		{name: "valid status with an invalid config changes nothing", kind: connector.KindKlaviyo, config: klaviyoCfg,
			in: connector.UpdateInput{Status: new(connector.StatusActive), Config: new(json.RawMessage(`{"list_id":""}`))}, want: []string{"config.list_id"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := f.create(tenant, seg, tc.kind, fmt.Sprintf("c%d", i), tc.config)
			before := f.get(tenant, c.ID)
			beforeCfg, beforeSecrets := f.storedColumns(c.ID)
			f.clock.Advance(time.Minute)
			got, err := f.svc.Update(f.ctx, tenant, c.ID, tc.in)
			if tc.want != nil {
				if keys := fieldErrors(t, err); !slices.Equal(keys, tc.want) {
					t.Fatalf("field errors %v (%v), want %v", keys, err, tc.want)
				}
				afterCfg, afterSecrets := f.storedColumns(c.ID)
				if afterCfg != beforeCfg || afterSecrets != beforeSecrets {
					t.Errorf("a refused PATCH changed the row: config %s -> %s", beforeCfg, afterCfg)
				}
				if after := f.get(tenant, c.ID); !sameRecord(after, before) {
					t.Errorf("a refused PATCH changed the record:\n got %+v\nwant %+v", after, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if !got.UpdatedAt.Equal(f.clock.Now()) || !got.CreatedAt.Equal(c.CreatedAt) {
				t.Errorf("updated_at %v created_at %v, want %v and %v", got.UpdatedAt, got.CreatedAt, f.clock.Now(), c.CreatedAt)
			}
			if key := f.apiKey(tenant, c.ID); key != tc.wantKey {
				t.Errorf("stored key %q, want %q", key, tc.wantKey)
			}
			afterCfg, afterSecrets := f.storedColumns(c.ID)
			if strings.Contains(afterCfg+afterSecrets, tc.wantKey) {
				t.Errorf("row holds the key in clear: %s %s", afterCfg, afterSecrets)
			}
			if got.Config["api_key"] != connector.Masked {
				t.Errorf("returned api_key %v", got.Config["api_key"])
			}
			if reread := f.get(tenant, c.ID); !sameRecord(reread, got) {
				t.Errorf("returned record differs from the stored one:\n got %+v\nread %+v", got, reread)
			}
			if tc.check != nil {
				tc.check(t, got, tc.wantKey)
			}
		})
	}
}

func TestUpdateWithoutChangesKeepsTheRecord(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "K", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	before := f.get(tenant, c.ID)
	f.clock.Advance(time.Hour)
	got, err := f.svc.Update(f.ctx, tenant, c.ID, connector.UpdateInput{})
	if err != nil {
		t.Fatal(err)
	}
	if !sameRecord(got, before) || !sameRecord(f.get(tenant, c.ID), before) {
		t.Errorf("empty PATCH changed the record:\n got %+v\nwant %+v", got, before)
	}
}

// TestActivateClearsError: a failed sync puts an active connector in error with the message;
// PATCH status active brings it back and clears last_error.
func TestActivateClearsError(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "K", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	f.setStatus(tenant, c.ID, connector.StatusActive)
	run := f.begin(tenant, c.ID, "wf-1")
	if err := f.svc.FinishSync(f.ctx, tenant, run.ID, "klaviyo: HTTP 401: not_authenticated"); err != nil {
		t.Fatal(err)
	}
	got := f.get(tenant, c.ID)
	if got.Status != connector.StatusError || got.LastError == nil || *got.LastError != "klaviyo: HTTP 401: not_authenticated" {
		t.Fatalf("after a failed sync: status %q last_error %v, want error with the message", got.Status, got.LastError)
	}
	got, err := f.svc.Update(f.ctx, tenant, c.ID, connector.UpdateInput{Status: new(connector.StatusActive)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != connector.StatusActive || got.LastError != nil {
		t.Errorf("after PATCH active: status %q last_error %v, want active and no error", got.Status, got.LastError)
	}
	if got := f.get(tenant, c.ID); got.Status != connector.StatusActive || got.LastError != nil {
		t.Errorf("stored: status %q last_error %v", got.Status, got.LastError)
	}
}

// TestOtherTenantsConnectorIsNotFound: every call naming another tenant's connector (or run) is
// ErrNotFound and changes nothing.
func TestOtherTenantsConnectorIsNotFound(t *testing.T) {
	f := newFixture(t, connector.Options{})
	owner := f.tenant("owner")
	intruder := f.tenant("intruder")
	seg := f.segment(owner, "vip")
	c := f.create(owner, seg, connector.KindKlaviyo, "K", `{"list_id":"L1","api_key":"`+klaviyoKey+`"}`)
	run := f.begin(owner, c.ID, "wf-owner")
	before := f.get(owner, c.ID)

	calls := map[string]func() error{
		"Get": func() error { _, err := f.svc.Get(f.ctx, intruder, c.ID); return err },
		"Update": func() error {
			_, err := f.svc.Update(f.ctx, intruder, c.ID, connector.UpdateInput{Name: new("mine"), Status: new(connector.StatusActive)})
			return err
		},
		"Delete":      func() error { return f.svc.Delete(f.ctx, intruder, c.ID) },
		"Runs":        func() error { _, err := f.svc.Runs(f.ctx, intruder, c.ID, 10); return err },
		"Credentials": func() error { _, err := f.svc.Credentials(f.ctx, intruder, c.ID); return err },
		"RequestSync": func() error {
			_, err := f.withStarter(&fakeSyncStarter{}).RequestSync(f.ctx, intruder, c.ID)
			return err
		},
		"BeginSync": func() error {
			_, err := f.svc.BeginSync(f.ctx, connector.BeginInput{TenantID: intruder, ConnectorID: c.ID, Trigger: connector.TriggerManual, WorkflowID: "wf-x", TemporalRunID: "r"})
			return err
		},
		"Run":        func() error { _, err := f.svc.Run(f.ctx, intruder, run.ID); return err },
		"FinishSync": func() error { return f.svc.FinishSync(f.ctx, intruder, run.ID, "boom") },
		"Push": func() error {
			_, err := f.svc.Push(f.ctx, intruder, run.ID, &memPlatform{addChunk: 10, removeChunk: 10}, nil)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, errs.ErrNotFound) {
				t.Fatalf("%s of another tenant's connector: %v, want ErrNotFound", name, err)
			}
		})
	}
	got := f.get(owner, c.ID)
	if !sameRecord(got, before) {
		t.Errorf("the owner's connector changed:\n got %+v\nwant %+v", got, before)
	}
	if n := f.count(`SELECT count(*) FROM activation_sync_runs WHERE connector_id = $1`, c.ID); n != 1 {
		t.Errorf("%d runs, want only the owner's one", n)
	}
	if r := f.run(owner, run.ID); r.Status != connector.RunRunning || r.Error != nil {
		t.Errorf("owner's run %+v changed", r)
	}
	if list, err := f.svc.List(f.ctx, intruder, 0); err != nil || len(list) != 0 {
		t.Errorf("intruder's list %v %v, want empty", list, err)
	}
}

func TestListFiltersByTenantAndSegment(t *testing.T) {
	f := newFixture(t, connector.Options{})
	a := f.tenant("alpha")
	b := f.tenant("beta")
	a1, a2 := f.segment(a, "a1"), f.segment(a, "a2")
	b1 := f.segment(b, "b1")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	c1 := f.create(a, a1, connector.KindKlaviyo, "c1", cfg)
	c2 := f.create(a, a2, connector.KindKlaviyo, "c2", cfg)
	c3 := f.create(a, a1, connector.KindKlaviyo, "c3", cfg)
	c4 := f.create(b, b1, connector.KindKlaviyo, "c4", cfg)

	cases := []struct {
		name            string
		tenant, segment int64
		want            []int64
	}{
		{"tenant a, all", a, 0, []int64{c1.ID, c2.ID, c3.ID}},
		{"tenant a, segment a1", a, a1, []int64{c1.ID, c3.ID}},
		{"tenant a, segment a2", a, a2, []int64{c2.ID}},
		{"tenant b, all", b, 0, []int64{c4.ID}},
		{"tenant a, b's segment", a, b1, []int64{}},
		{"tenant b, a's segment", b, a1, []int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			list, err := f.svc.List(f.ctx, tc.tenant, tc.segment)
			if err != nil {
				t.Fatal(err)
			}
			ids := []int64{}
			for _, c := range list {
				ids = append(ids, c.ID)
				if c.Config["api_key"] != connector.Masked {
					t.Errorf("listed connector %d shows api_key %v", c.ID, c.Config["api_key"])
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("ids %v, want %v", ids, tc.want)
			}
		})
	}
}

func TestActiveTargets(t *testing.T) {
	f := newFixture(t, connector.Options{})
	a := f.tenant("alpha")
	b := f.tenant("beta")
	s1, s2 := f.segment(a, "s1"), f.segment(a, "s2")
	bs := f.segment(b, "bs")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	active1 := f.create(a, s1, connector.KindKlaviyo, "active1", cfg)
	inactive := f.create(a, s1, connector.KindKlaviyo, "inactive", cfg)
	active2 := f.create(a, s1, connector.KindKlaviyo, "active2", cfg)
	errored := f.create(a, s1, connector.KindKlaviyo, "errored", cfg)
	otherSeg := f.create(a, s2, connector.KindKlaviyo, "other segment", cfg)
	otherTenant := f.create(b, bs, connector.KindKlaviyo, "other tenant", cfg)
	for _, c := range []*connector.Connector{active1, active2, errored, otherSeg} {
		f.setStatus(a, c.ID, connector.StatusActive)
	}
	f.setStatus(b, otherTenant.ID, connector.StatusActive)
	f.exec(`UPDATE activation_connectors SET status = 'error' WHERE id = $1`, errored.ID)
	_ = inactive

	targets, err := f.svc.ActiveTargets(f.ctx, a, s1)
	if err != nil {
		t.Fatal(err)
	}
	want := []connector.Target{{ID: active1.ID, Name: "active1", Kind: connector.KindKlaviyo}, {ID: active2.ID, Name: "active2", Kind: connector.KindKlaviyo}}
	if !slices.Equal(targets, want) {
		t.Errorf("active connectors of s1: %+v, want %+v", targets, want)
	}
	if targets, _ := f.svc.ActiveTargets(f.ctx, a, bs); len(targets) != 0 {
		t.Errorf("tenant a, tenant b's segment: %+v, want none", targets)
	}
}

func TestDelete(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	c := f.create(tenant, seg, connector.KindKlaviyo, "K", cfg)
	keep := f.create(tenant, seg, connector.KindKlaviyo, "keep", cfg)
	f.addMembers(tenant, seg, "u1", "u2")
	run := f.begin(tenant, c.ID, "wf-del")
	if _, err := f.svc.Push(f.ctx, tenant, run.ID, &memPlatform{addChunk: 10, removeChunk: 10}, nil); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM activation_members WHERE connector_id = $1`, c.ID); n != 2 {
		t.Fatalf("%d activation members before delete, want 2", n)
	}

	if err := f.svc.Delete(f.ctx, tenant, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Get(f.ctx, tenant, c.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if err := f.svc.Delete(f.ctx, tenant, c.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	for table, n := range map[string]int64{
		"activation_sync_runs": f.count(`SELECT count(*) FROM activation_sync_runs WHERE connector_id = $1`, c.ID),
		"activation_members":   f.count(`SELECT count(*) FROM activation_members WHERE connector_id = $1`, c.ID),
	} {
		if n != 0 {
			t.Errorf("%d %s rows left after delete", n, table)
		}
	}
	if got := f.get(tenant, keep.ID); got.ID != keep.ID {
		t.Errorf("the other connector is gone")
	}
}

// TestDeletingTheSegmentDeletesItsConnectors: the foreign key cascades to connectors and runs.
func TestDeletingTheSegmentDeletesItsConnectors(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	gone := f.segment(tenant, "gone")
	stays := f.segment(tenant, "stays")
	cfg := `{"list_id":"L1","api_key":"` + klaviyoKey + `"}`
	c1 := f.create(tenant, gone, connector.KindKlaviyo, "c1", cfg)
	c2 := f.create(tenant, gone, connector.KindKlaviyo, "c2", cfg)
	c3 := f.create(tenant, stays, connector.KindKlaviyo, "c3", cfg)
	f.begin(tenant, c1.ID, "wf-c1")

	f.exec(`DELETE FROM segments WHERE tenant_id = $1 AND id = $2`, tenant, gone)

	list, err := f.svc.List(f.ctx, tenant, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != c3.ID {
		t.Errorf("connectors after deleting the segment: %+v, want only %d", list, c3.ID)
	}
	for _, id := range []int64{c1.ID, c2.ID} {
		if _, err := f.svc.Get(f.ctx, tenant, id); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("connector %d of the deleted segment: %v, want ErrNotFound", id, err)
		}
	}
	if n := f.count(`SELECT count(*) FROM activation_sync_runs WHERE connector_id = ANY($1)`, []int64{c1.ID, c2.ID}); n != 0 {
		t.Errorf("%d runs of deleted connectors left", n)
	}
}

// TestLargeAudienceIDSurvives: audience_id is validated as an int64 (up to 2^63-1), so one above
// 2^53 must read back exactly, and survive a PATCH of another field.
//
// The stored config is decoded with json.Number (decodeConfig), so the record, a PATCH of
// another field and Credentials all keep every digit (a float64 would round 2^53+1 down).
func TestLargeAudienceIDSurvives(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	const big = "9007199254740993" // 2^53 + 1
	c := f.create(tenant, seg, connector.KindTalonOne, "T", `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":`+big+`}`)
	if got := fmt.Sprint(c.Config["audience_id"]); got != big {
		t.Errorf("returned audience_id %s, want %s", got, big)
	}
	if _, err := f.svc.Update(f.ctx, tenant, c.ID, connector.UpdateInput{Config: new(json.RawMessage(`{"base_url":"https://y.talon.one"}`))}); err != nil {
		t.Fatal(err)
	}
	creds, err := f.svc.Credentials(f.ctx, tenant, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(creds.Config["audience_id"]); got != big {
		t.Errorf("audience_id after a PATCH of base_url: %s, want %s", got, big)
	}
}
