package connector_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/connector"
)

// TestCreateValidation checks every rule of a create body: the field errors it gives (keyed
// config.<field> for config fields), or the config it stores when it is valid.
func TestCreateValidation(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	other := f.tenant("other")
	otherSeg := f.segment(other, "theirs")

	const (
		klaviyoOK = `{"list_id":"Xy7Abc","api_key":"pk_live_0123456789"}`
		brazeOK   = `{"rest_endpoint":"https://rest.iad-01.braze.com","api_key":"b-key-0123456789"}`
		talonOK   = `{"base_url":"https://acme.europe-west1.talon.one","api_key":"t1-key-0123456789","audience_id":42}`
	)
	long := strings.Repeat("x", 4097)
	cases := []struct {
		name      string
		kind      string
		cname     string // connector name; "" means "Sync"
		noName    bool   // send an empty name
		segment   *int64 // nil: seg
		noSegment bool
		config    string // "" means no config at all
		allowHTTP bool
		want      []string       // field errors; nil means valid
		wantCfg   map[string]any // the returned config of a valid create
	}{
		// required fields per kind
		{name: "klaviyo valid", kind: "klaviyo", config: klaviyoOK,
			wantCfg: map[string]any{"list_id": "Xy7Abc", "api_key": "***"}},
		{name: "klaviyo missing list_id", kind: "klaviyo", config: `{"api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		{name: "klaviyo missing api_key", kind: "klaviyo", config: `{"list_id":"L1"}`, want: []string{"config.api_key"}},
		{name: "klaviyo empty config", kind: "klaviyo", config: `{}`, want: []string{"config.api_key", "config.list_id"}},
		{name: "braze missing rest_endpoint", kind: "braze", config: `{"api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "braze missing api_key", kind: "braze", config: `{"rest_endpoint":"https://rest.iad-01.braze.com"}`, want: []string{"config.api_key"}},
		{name: "talon missing everything", kind: "talon_one", config: `{}`, want: []string{"config.api_key", "config.audience_id", "config.base_url"}},
		{name: "talon missing audience_id", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key"}`, want: []string{"config.audience_id"}},
		{name: "required field null on create", kind: "klaviyo", config: `{"list_id":null,"api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		// the config object itself
		{name: "config absent", kind: "klaviyo", want: []string{"config"}},
		{name: "config null", kind: "braze", config: `null`, want: []string{"config"}},
		{name: "config array", kind: "talon_one", config: `[1,2]`, want: []string{"config"}},
		{name: "config string", kind: "klaviyo", config: `"list_id=1"`, want: []string{"config"}},
		// wrong types
		{name: "list_id number", kind: "klaviyo", config: `{"list_id":123,"api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		{name: "list_id object", kind: "klaviyo", config: `{"list_id":{"id":"L"},"api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		{name: "list_id empty", kind: "klaviyo", config: `{"list_id":"","api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		{name: "list_id with a space", kind: "klaviyo", config: `{"list_id":"my list","api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		{name: "list_id with a slash", kind: "klaviyo", config: `{"list_id":"a/b","api_key":"pk_x_0123"}`, want: []string{"config.list_id"}},
		{name: "api_key number", kind: "klaviyo", config: `{"list_id":"L1","api_key":12345}`, want: []string{"config.api_key"}},
		{name: "api_key boolean", kind: "braze", config: `{"rest_endpoint":"https://r.braze.com","api_key":true}`, want: []string{"config.api_key"}},
		{name: "api_key empty", kind: "klaviyo", config: `{"list_id":"L1","api_key":"   "}`, want: []string{"config.api_key"}},
		{name: "api_key with inner space", kind: "klaviyo", config: `{"list_id":"L1","api_key":"pk 123"}`, want: []string{"config.api_key"}},
		{name: "api_key too long", kind: "klaviyo", config: fmt.Sprintf(`{"list_id":"L1","api_key":%q}`, long), want: []string{"config.api_key"}},
		{name: "api_key masked on create", kind: "klaviyo", config: `{"list_id":"L1","api_key":"***"}`, want: []string{"config.api_key"}},
		{name: "rest_endpoint number", kind: "braze", config: `{"rest_endpoint":443,"api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "attribute number", kind: "braze", config: `{"rest_endpoint":"https://r.braze.com","api_key":"b-key-0123","attribute":1}`, want: []string{"config.attribute"}},
		{name: "attribute with spaces", kind: "braze", config: `{"rest_endpoint":"https://r.braze.com","api_key":"b-key-0123","attribute":"in segment"}`, want: []string{"config.attribute"}},
		{name: "braze segment_id number", kind: "braze", config: `{"rest_endpoint":"https://r.braze.com","api_key":"b-key-0123","segment_id":5}`, want: []string{"config.segment_id"}},
		// unknown fields
		{name: "unknown field", kind: "klaviyo", config: `{"list_id":"L1","api_key":"pk_x_0123","public_key":"x"}`, want: []string{"config.public_key"}},
		{name: "other kind's field", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":1,"list_id":"L1"}`, want: []string{"config.list_id"}},
		// URLs
		{name: "http refused by default", kind: "braze", config: `{"rest_endpoint":"http://rest.iad-01.braze.com","api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "http allowed with AllowHTTP", kind: "braze", allowHTTP: true, config: `{"rest_endpoint":"http://127.0.0.1:8080/","api_key":"b-key-0123"}`,
			wantCfg: map[string]any{"rest_endpoint": "http://127.0.0.1:8080", "api_key": "***", "attribute": "@default"}},
		{name: "ftp refused even with AllowHTTP", kind: "talon_one", allowHTTP: true, config: `{"base_url":"ftp://x.talon.one","api_key":"t1-key","audience_id":1}`, want: []string{"config.base_url"}},
		{name: "URL with userinfo", kind: "talon_one", config: `{"base_url":"https://admin:pw@x.talon.one","api_key":"t1-key","audience_id":1}`, want: []string{"config.base_url"}},
		{name: "URL with user only", kind: "braze", config: `{"rest_endpoint":"https://key@rest.braze.com","api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "URL with query", kind: "talon_one", config: `{"base_url":"https://x.talon.one/?key=1","api_key":"t1-key","audience_id":1}`, want: []string{"config.base_url"}},
		{name: "URL with fragment", kind: "braze", config: `{"rest_endpoint":"https://rest.braze.com/#x","api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "URL without scheme", kind: "braze", config: `{"rest_endpoint":"rest.iad-01.braze.com","api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "URL without host", kind: "braze", config: `{"rest_endpoint":"https://","api_key":"b-key-0123"}`, want: []string{"config.rest_endpoint"}},
		{name: "URL empty", kind: "talon_one", config: `{"base_url":"","api_key":"t1-key","audience_id":1}`, want: []string{"config.base_url"}},
		{name: "https URL trailing slash trimmed", kind: "talon_one", config: `{"base_url":"https://acme.talon.one/","api_key":"t1-key","audience_id":7}`,
			wantCfg: map[string]any{"base_url": "https://acme.talon.one", "api_key": "***", "audience_id": int64(7)}},
		// audience_id
		{name: "audience_id number", kind: "talon_one", config: talonOK,
			wantCfg: map[string]any{"base_url": "https://acme.europe-west1.talon.one", "api_key": "***", "audience_id": int64(42)}},
		{name: "audience_id numeric string", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":"42"}`,
			wantCfg: map[string]any{"base_url": "https://x.talon.one", "api_key": "***", "audience_id": int64(42)}},
		{name: "audience_id numeric string with spaces", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":" 9 "}`,
			wantCfg: map[string]any{"base_url": "https://x.talon.one", "api_key": "***", "audience_id": int64(9)}},
		{name: "audience_id 0", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":0}`, want: []string{"config.audience_id"}},
		{name: "audience_id -1", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":-1}`, want: []string{"config.audience_id"}},
		{name: "audience_id 1.5", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":1.5}`, want: []string{"config.audience_id"}},
		{name: "audience_id abc", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":"abc"}`, want: []string{"config.audience_id"}},
		{name: "audience_id string 1.5", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":"1.5"}`, want: []string{"config.audience_id"}},
		{name: "audience_id string 0", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":"0"}`, want: []string{"config.audience_id"}},
		{name: "audience_id empty string", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":""}`, want: []string{"config.audience_id"}},
		{name: "audience_id boolean", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":true}`, want: []string{"config.audience_id"}},
		{name: "audience_id array", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":[1]}`, want: []string{"config.audience_id"}},
		{name: "audience_id too large for a float", kind: "talon_one", config: `{"base_url":"https://x.talon.one","api_key":"t1-key","audience_id":1e300}`, want: []string{"config.audience_id"}},
		// Braze attribute default
		{name: "braze attribute default", kind: "braze", config: brazeOK,
			wantCfg: map[string]any{"rest_endpoint": "https://rest.iad-01.braze.com", "api_key": "***", "attribute": "@default"}},
		{name: "braze attribute and segment_id kept", kind: "braze", config: `{"rest_endpoint":"https://rest.fra-01.braze.eu","api_key":"b-key-0123","attribute":"vip_members","segment_id":"seg-uuid-1"}`,
			wantCfg: map[string]any{"rest_endpoint": "https://rest.fra-01.braze.eu", "api_key": "***", "attribute": "vip_members", "segment_id": "seg-uuid-1"}},
		// kind, name, segment
		{name: "kind missing", kind: "", config: klaviyoOK, want: []string{"kind"}},
		{name: "kind unknown", kind: "mailchimp", config: klaviyoOK, want: []string{"kind"}},
		{name: "kind wrong case", kind: "Klaviyo", config: klaviyoOK, want: []string{"kind"}},
		{name: "name empty", kind: "klaviyo", noName: true, config: klaviyoOK, want: []string{"name"}},
		{name: "name blank", kind: "klaviyo", cname: "   ", config: klaviyoOK, want: []string{"name"}},
		{name: "name too long", kind: "klaviyo", cname: strings.Repeat("n", connector.MaxNameLength+1), config: klaviyoOK, want: []string{"name"}},
		{name: "name multibyte too long", kind: "klaviyo", cname: strings.Repeat("é", connector.MaxNameLength/2+1), config: klaviyoOK, want: []string{"name"}},
		{name: "name with NUL", kind: "klaviyo", cname: "a\x00b", config: klaviyoOK, want: []string{"name"}},
		{name: "name at the limit", kind: "klaviyo", cname: strings.Repeat("n", connector.MaxNameLength), config: klaviyoOK,
			wantCfg: map[string]any{"list_id": "Xy7Abc", "api_key": "***"}},
		{name: "segment_id missing", kind: "klaviyo", noSegment: true, config: klaviyoOK, want: []string{"segment_id"}},
		{name: "segment_id zero", kind: "klaviyo", segment: new(int64(0)), config: klaviyoOK, want: []string{"segment_id"}},
		{name: "segment of another tenant", kind: "klaviyo", segment: &otherSeg, config: klaviyoOK, want: []string{"segment_id"}},
		{name: "segment that does not exist", kind: "klaviyo", segment: new(otherSeg + 1000), config: klaviyoOK, want: []string{"segment_id"}},
		{name: "several errors at once", kind: "braze", noName: true, noSegment: true, config: `{"rest_endpoint":"http://x","extra":1}`,
			want: []string{"config.api_key", "config.extra", "config.rest_endpoint", "name", "segment_id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := connector.NewService(f.db.Gorm, f.db.Pool, f.box, f.clock.Now, connector.Options{AllowHTTP: tc.allowHTTP})
			in := connector.CreateInput{Kind: tc.kind, Name: "Sync"}
			if tc.cname != "" {
				in.Name = tc.cname
			}
			if tc.noName {
				in.Name = ""
			}
			if !tc.noSegment {
				in.SegmentID = &seg
				if tc.segment != nil {
					in.SegmentID = tc.segment
				}
			}
			if tc.config != "" {
				in.Config = json.RawMessage(tc.config)
			}
			before := f.count(`SELECT count(*) FROM activation_connectors`)
			c, err := svc.Create(f.ctx, tenant, in)
			if tc.want != nil {
				if c != nil {
					t.Errorf("invalid create returned a connector %+v", c)
				}
				if got := fieldErrors(t, err); !slices.Equal(got, tc.want) {
					t.Fatalf("field errors %v (%v), want %v", got, err, tc.want)
				}
				if n := f.count(`SELECT count(*) FROM activation_connectors`); n != before {
					t.Errorf("an invalid create stored a row (%d -> %d)", before, n)
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			want := map[string]any{}
			for k, v := range tc.wantCfg {
				if v == "@default" {
					v = connector.DefaultBrazeAttribute(seg)
				}
				want[k] = v
			}
			if !reflect.DeepEqual(c.Config, want) {
				t.Errorf("config %#v, want %#v", c.Config, want)
			}
			if c.Kind != tc.kind || c.SegmentID != seg || c.Status != connector.StatusInactive || c.LastError != nil || c.LastSyncedAt != nil {
				t.Errorf("connector %+v: want kind %s, segment %d, inactive, no error, never synced", c, tc.kind, seg)
			}
			if c.Name != strings.TrimSpace(in.Name) {
				t.Errorf("name %q, want %q", c.Name, strings.TrimSpace(in.Name))
			}
			if !c.CreatedAt.Equal(fixtureStart) {
				t.Errorf("created_at %v, want the service clock %v", c.CreatedAt, fixtureStart)
			}
			// The stored record reads back the same.
			if got := f.get(tenant, c.ID); !reflect.DeepEqual(got.Config, want) {
				t.Errorf("stored config %#v, want %#v", got.Config, want)
			}
		})
	}
}

// TestBrazeDefaultAttributeIsPerSegment checks the Braze default attribute names the connector's
// own segment (and that the stored name is trimmed).
func TestBrazeDefaultAttributeIsPerSegment(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	a, b := f.segment(tenant, "a"), f.segment(tenant, "b")
	const cfg = `{"rest_endpoint":"https://rest.iad-01.braze.com","api_key":"b-key-0123456789"}`
	ca := f.create(tenant, a, connector.KindBraze, "  Braze A  ", cfg)
	cb := f.create(tenant, b, connector.KindBraze, "Braze B", cfg)
	if ca.Name != "Braze A" {
		t.Errorf("name %q, want it trimmed to %q", ca.Name, "Braze A")
	}
	if got, want := ca.Config["attribute"], fmt.Sprintf("cohort_segment_%d", a); got != want {
		t.Errorf("segment %d attribute %v, want %s", a, got, want)
	}
	if got, want := cb.Config["attribute"], fmt.Sprintf("cohort_segment_%d", b); got != want {
		t.Errorf("segment %d attribute %v, want %s", b, got, want)
	}
	if got := connector.DefaultBrazeAttribute(12); got != "cohort_segment_12" {
		t.Errorf("DefaultBrazeAttribute(12) = %q", got)
	}
}

// TestCreateTimestampsUseTheServiceClock: a new connector's created_at and updated_at are both
// the service clock's now, and the record Create returns is the one GET returns.
//
// Create stores the sealed secrets with UpdateColumn, which leaves updated_at alone (a plain
// Model(...).Update would set it to GORM's own wall clock), and the service clock is cut to
// microseconds as Postgres stores it, so the returned record is the stored one.
func TestCreateTimestampsUseTheServiceClock(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	c := f.create(tenant, seg, connector.KindKlaviyo, "K", `{"list_id":"L1","api_key":"pk_live_0123456789"}`)
	if !c.CreatedAt.Equal(fixtureStart) || !c.UpdatedAt.Equal(fixtureStart) {
		t.Errorf("returned created_at %v updated_at %v, want both the service clock %v", c.CreatedAt, c.UpdatedAt, fixtureStart)
	}
	got := f.get(tenant, c.ID)
	if !got.CreatedAt.Equal(fixtureStart) || !got.UpdatedAt.Equal(fixtureStart) {
		t.Errorf("stored created_at %v updated_at %v, want both the service clock %v", got.CreatedAt, got.UpdatedAt, fixtureStart)
	}
	if !sameRecord(got, c) {
		t.Errorf("GET differs from what Create returned:\n got %+v\nwant %+v", got, c)
	}
}

func TestIsSecretField(t *testing.T) {
	for name, want := range map[string]bool{
		"api_key": true, "API_KEY": true, "client_secret": true, "access_token": true, "password": true,
		"credentials": true, "private_key_pem": true,
		"list_id": false, "segment_id": false, "audience_id": false, "base_url": false, "rest_endpoint": false,
		"attribute": false, "key_id": false, "name": false,
	} {
		if got := connector.IsSecretField(name); got != want {
			t.Errorf("IsSecretField(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestURLsTheAdaptersCannotUse: URLs the adapters would turn into a request to the wrong place.
//
// An empty query ("https://x.talon.one?", which would make the adapter post to path "/"), an
// empty fragment and a host without a name ("https://:443") are refused at validation, keyed
// config.base_url, like a non-empty query or fragment.
func TestURLsTheAdaptersCannotUse(t *testing.T) {
	f := newFixture(t, connector.Options{})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	for _, u := range []string{"https://x.talon.one?", "https://x.talon.one/#", "https://:443"} {
		t.Run(u, func(t *testing.T) {
			_, err := f.svc.Create(f.ctx, tenant, connector.CreateInput{SegmentID: &seg, Kind: connector.KindTalonOne, Name: "T",
				Config: json.RawMessage(fmt.Sprintf(`{"base_url":%q,"api_key":"t1-key","audience_id":1}`, u))})
			if err == nil {
				t.Fatalf("base_url %q accepted", u)
			}
			if got := fieldErrors(t, err); !slices.Equal(got, []string{"config.base_url"}) {
				t.Errorf("field errors %v, want config.base_url", got)
			}
		})
	}
}
