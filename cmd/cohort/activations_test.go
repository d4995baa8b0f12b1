package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cohort-dev/cohort/internal/connector/platformfake"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// apiClient bounds every API call, so a stack that stopped answering fails the test instead of
// hanging it.
var apiClient = &http.Client{Timeout: 15 * time.Second}

// apiRecorder sends API requests to a dev stack and keeps every response body, so a test can
// check that no answer ever carried a secret.
type apiRecorder struct {
	s      *devStack
	mu     sync.Mutex
	bodies []string
}

// do sends method path with body ("" = none) and decodes a JSON answer into out (when not nil);
// it returns the status.
func (a *apiRecorder) do(t *testing.T, method, path, authz, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, a.s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	a.mu.Lock()
	a.bodies = append(a.bodies, fmt.Sprintf("%s %s -> %d %s", method, path, resp.StatusCode, raw))
	a.mu.Unlock()
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode >= 500 {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return resp.StatusCode
}

func (a *apiRecorder) all() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.bodies, "\n")
}

type connectorRecord struct {
	ID           int64          `json:"id"`
	SegmentID    int64          `json:"segment_id"`
	Kind         string         `json:"kind"`
	Name         string         `json:"name"`
	Status       string         `json:"status"`
	Config       map[string]any `json:"config"`
	LastSyncedAt *time.Time     `json:"last_synced_at"`
	LastError    *string        `json:"last_error"`
}

type syncRunRecord struct {
	ID           int64      `json:"id"`
	ConnectorID  int64      `json:"connector_id"`
	SegmentRunID *int64     `json:"segment_run_id"`
	Trigger      string     `json:"trigger"`
	WorkflowID   string     `json:"workflow_id"`
	Status       string     `json:"status"`
	StartedAt    *time.Time `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	Added        int64      `json:"added"`
	Removed      int64      `json:"removed"`
	Skipped      int64      `json:"skipped"`
	Failed       int64      `json:"failed"`
	Error        *string    `json:"error"`
}

type apiError struct {
	Error struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
}

// activationEnv is the dev environment that lets the worker reach the loopback fakes.
func activationEnv(klaviyoURL string) map[string]string {
	env := map[string]string{"COHORT_ALLOW_PRIVATE_NETWORKS": "true"}
	if klaviyoURL != "" {
		env["COHORT_KLAVIYO_API_URL"] = klaviyoURL
	}
	return env
}

// userID is the test user n (zero-padded, so ids sort like numbers).
func userID(n int) string { return fmt.Sprintf("u%02d", n) }

// emailOf is user n's e-mail: odd users have one, even users none.
func emailOf(n int) string {
	if n%2 == 0 {
		return ""
	}
	return fmt.Sprintf("%s@example.com", userID(n))
}

// tierDef is the segment of the users whose tier trait is gold.
const tierDef = `{"logic":"AND","conditions":[{"type":"trait","trait":"tier","operator":"eq","value":"gold"}]}`

// identify sends one context_identified event per user of tiers (tier and, for odd users, email)
// at occurredAt, and waits until the warehouse holds wantTotal events of the tenant.
func (a *apiRecorder) identify(t *testing.T, tiers map[int]string, occurredAt time.Time, wantTotal int) {
	t.Helper()
	var events []map[string]any
	for n, tier := range tiers {
		payload := map[string]any{"tier": tier}
		if e := emailOf(n); e != "" {
			payload["email"] = e
		}
		events = append(events, map[string]any{"user_id": userID(n), "event_type": "context_identified",
			"occurred_at": occurredAt.UTC().Format(time.RFC3339), "payload": payload})
	}
	body, _ := json.Marshal(map[string]any{"events": events})
	if code := a.do(t, http.MethodPost, "/api/ingestion/track/batch/", "ApiKey "+a.s.secret, string(body), nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	eventually(t, fmt.Sprintf("%d events loaded", wantTotal), func() bool {
		return countRows(t, a.s.dbURL, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, a.s.tenantID) == wantTotal
	})
}

// newTierSegment creates the gold-tier rule segment and waits for its first compute and for its
// compute workflow to end (so no later activation can join that compute's fan-out).
func (a *apiRecorder) newTierSegment(t *testing.T, tc client.Client, bearer string) int64 {
	t.Helper()
	var seg segmentRecord
	if code := a.do(t, http.MethodPost, "/api/segments/", bearer, fmt.Sprintf(`{"name":"Gold tier","tenant":%d,"segment_type":"rule"}`, a.s.tenantID), &seg); code != http.StatusCreated {
		t.Fatalf("create segment: %d", code)
	}
	if code := a.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, `{"definition":`+tierDef+`}`, &seg); code != http.StatusOK {
		t.Fatalf("patch segment: %d", code)
	}
	a.s.waitSegment(t, bearer, seg.ID, 1)
	waitWorkflowClosed(t, tc, fmt.Sprintf("segment-compute:%d:%d", a.s.tenantID, seg.ID))
	return seg.ID
}

// members lists the segment's members through the API.
func (a *apiRecorder) members(t *testing.T, bearer string, segmentID int64) []string {
	t.Helper()
	var page struct {
		Results []struct {
			UserID string `json:"user_id"`
		} `json:"results"`
		NextCursor *string `json:"next_cursor"`
	}
	if code := a.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/members/?limit=1000", segmentID), bearer, "", &page); code != http.StatusOK || page.NextCursor != nil {
		t.Fatalf("members: %d %+v", code, page)
	}
	out := []string{}
	for _, r := range page.Results {
		out = append(out, r.UserID)
	}
	sort.Strings(out)
	return out
}

// compute asks for a recompute of the segment.
func (a *apiRecorder) compute(t *testing.T, bearer string, segmentID int64) {
	t.Helper()
	if code := a.do(t, http.MethodPost, fmt.Sprintf("/api/segments/%d/compute/", segmentID), bearer, "", nil); code != http.StatusAccepted {
		t.Fatalf("compute: %d", code)
	}
}

func (a *apiRecorder) connector(t *testing.T, bearer string, id int64) connectorRecord {
	t.Helper()
	var c connectorRecord
	if code := a.do(t, http.MethodGet, fmt.Sprintf("/api/activations/%d/", id), bearer, "", &c); code != http.StatusOK {
		t.Fatalf("GET connector %d: %d", id, code)
	}
	return c
}

func (a *apiRecorder) runs(t *testing.T, bearer string, id int64) []syncRunRecord {
	t.Helper()
	var runs []syncRunRecord
	if code := a.do(t, http.MethodGet, fmt.Sprintf("/api/activations/%d/runs/?limit=100", id), bearer, "", &runs); code != http.StatusOK {
		t.Fatalf("GET runs of connector %d: %d", id, code)
	}
	return runs
}

// waitRun waits until the connector's newest run is newer than after and has finished, and
// returns it.
func (a *apiRecorder) waitRun(t *testing.T, bearer string, id, after int64) syncRunRecord {
	t.Helper()
	var last syncRunRecord
	eventually(t, fmt.Sprintf("a finished sync run of connector %d after run %d", id, after), func() bool {
		runs := a.runs(t, bearer, id)
		if len(runs) == 0 {
			return false
		}
		last = runs[0]
		return last.ID > after && (last.Status == "succeeded" || last.Status == "failed")
	})
	return last
}

// waitSucceeded is waitRun that fails the test unless the run succeeded.
func (a *apiRecorder) waitSucceeded(t *testing.T, bearer string, id, after int64) syncRunRecord {
	t.Helper()
	run := a.waitRun(t, bearer, id, after)
	if run.Status != "succeeded" {
		t.Fatalf("sync run %d of connector %d: %s (error %v)", run.ID, id, run.Status, testenv.Deref(run.Error))
	}
	return run
}

// dialTemporal connects to the dev's embedded Temporal.
func dialTemporal(t *testing.T, s *devStack) client.Client {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: s.temporal, Namespace: "default", Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return tc
}

// waitWorkflowClosed waits until the latest run of workflow id has ended.
func waitWorkflowClosed(t *testing.T, tc client.Client, id string) {
	t.Helper()
	eventually(t, "workflow "+id+" closed", func() bool {
		d, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
		return err == nil && d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	})
}

// listWorkflows returns the workflow executions matching a visibility query.
func listWorkflows(t *testing.T, tc client.Client, query string) []*workflowservice.ListWorkflowExecutionsResponse {
	t.Helper()
	var pages []*workflowservice.ListWorkflowExecutionsResponse
	var token []byte
	for {
		resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", Query: query, NextPageToken: token,
		})
		if err != nil {
			t.Fatalf("list workflows %q: %v", query, err)
		}
		pages = append(pages, resp)
		if token = resp.NextPageToken; len(token) == 0 {
			return pages
		}
	}
}

// workflowIDs lists the IDs (sorted, each once per execution) matching query.
func workflowIDs(t *testing.T, tc client.Client, query string) []string {
	t.Helper()
	out := []string{}
	for _, p := range listWorkflows(t, tc, query) {
		for _, e := range p.Executions {
			out = append(out, e.Execution.WorkflowId)
		}
	}
	sort.Strings(out)
	return out
}

// historyText is every event of every execution matching query, as protojson, followed by the
// decoded content of each base64 value (payloads are bytes, which protojson encodes in base64).
func historyText(t *testing.T, tc client.Client, query string) (string, int) {
	t.Helper()
	var sb strings.Builder
	n := 0
	for _, p := range listWorkflows(t, tc, query) {
		for _, e := range p.Executions {
			n++
			it := tc.GetWorkflowHistory(context.Background(), e.Execution.WorkflowId, e.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatalf("history of %s: %v", e.Execution.WorkflowId, err)
				}
				raw, err := protojson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				sb.Write(raw)
				sb.WriteByte('\n')
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				decodeBase64Strings(v, &sb)
			}
		}
	}
	return sb.String(), n
}

func decodeBase64Strings(v any, sb *strings.Builder) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			decodeBase64Strings(e, sb)
		}
	case []any:
		for _, e := range x {
			decodeBase64Strings(e, sb)
		}
	case string:
		if b, err := base64.StdEncoding.DecodeString(x); err == nil && len(b) > 0 {
			sb.Write(b)
			sb.WriteByte('\n')
		}
	}
}

// usersRange is users from..to (inclusive).
func usersRange(from, to int) []string {
	out := []string{}
	for n := from; n <= to; n++ {
		out = append(out, userID(n))
	}
	return out
}

// emailsOf is the sorted e-mails of the users of ns that have one.
func emailsOf(ns ...int) []string {
	out := []string{}
	for _, n := range ns {
		if e := emailOf(n); e != "" {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}

func intRange(from, to int) []int {
	var out []int
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func countNoEmail(ns []int) int64 {
	var c int64
	for _, n := range ns {
		if emailOf(n) == "" {
			c++
		}
	}
	return c
}

// talonItems is what the Talon.One fake was asked since its last Reset: profile ids added and
// deleted, per audience.
func talonItems(t *testing.T, f *platformfake.TalonOne) (adds, deletes map[int64][]string) {
	t.Helper()
	adds, deletes = map[int64][]string{}, map[int64][]string{}
	for _, r := range f.Requests() {
		if r.Method != http.MethodPost || r.Status/100 != 2 {
			continue
		}
		var doc struct {
			Data []struct {
				Action               string `json:"action"`
				ProfileIntegrationID string `json:"profileIntegrationId"`
				AudienceID           int64  `json:"audienceId"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatalf("talon.one request body %s: %v", r.Body, err)
		}
		for _, it := range doc.Data {
			if it.Action == "add" {
				adds[it.AudienceID] = append(adds[it.AudienceID], it.ProfileIntegrationID)
			} else {
				deletes[it.AudienceID] = append(deletes[it.AudienceID], it.ProfileIntegrationID)
			}
		}
	}
	for _, m := range []map[int64][]string{adds, deletes} {
		for k := range m {
			sort.Strings(m[k])
		}
	}
	return adds, deletes
}

// brazeValues is what the Braze fake was asked since its last Reset: the external ids set to
// true and to false.
func brazeValues(t *testing.T, f *platformfake.Braze, attr string) (trues, falses []string) {
	t.Helper()
	trues, falses = []string{}, []string{}
	for _, r := range f.Requests() {
		if r.Method != http.MethodPost || r.Status/100 != 2 {
			continue
		}
		var doc struct {
			Attributes []map[string]any `json:"attributes"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatalf("braze request body %s: %v", r.Body, err)
		}
		for _, a := range doc.Attributes {
			id, _ := a["external_id"].(string)
			switch a[attr] {
			case true:
				trues = append(trues, id)
			case false:
				falses = append(falses, id)
			default:
				t.Errorf("braze attributes object %v without a boolean %s", a, attr)
			}
		}
	}
	sort.Strings(trues)
	sort.Strings(falses)
	return trues, falses
}

// klaviyoCalls is what the Klaviyo fake was asked since its last Reset: the e-mails imported
// and the profile ids removed from the list.
func klaviyoCalls(t *testing.T, f *platformfake.Klaviyo, listID string) (imported, removedIDs []string) {
	t.Helper()
	imported, removedIDs = []string{}, []string{}
	for _, r := range f.Requests() {
		if r.Status/100 != 2 {
			continue
		}
		switch {
		case r.Method == http.MethodPost && strings.HasPrefix(r.Path, "/api/profile-bulk-import-jobs"):
			var doc struct {
				Data struct {
					Attributes struct {
						Profiles struct {
							Data []struct {
								Attributes struct {
									Email string `json:"email"`
								} `json:"attributes"`
							} `json:"data"`
						} `json:"profiles"`
					} `json:"attributes"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &doc); err != nil {
				t.Fatalf("klaviyo import body %s: %v", r.Body, err)
			}
			for _, p := range doc.Data.Attributes.Profiles.Data {
				imported = append(imported, p.Attributes.Email)
			}
		case r.Method == http.MethodDelete:
			if want := "/api/lists/" + listID + "/relationships/profiles"; trimSlashPath(r.Path) != want {
				t.Errorf("klaviyo DELETE %s, want %s", r.Path, want)
			}
			var doc struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &doc); err != nil {
				t.Fatalf("klaviyo delete body %s: %v", r.Body, err)
			}
			for _, p := range doc.Data {
				removedIDs = append(removedIDs, p.ID)
			}
		}
	}
	sort.Strings(imported)
	sort.Strings(removedIDs)
	return imported, removedIDs
}

func trimSlashPath(p string) string { return strings.TrimSuffix(p, "/") }

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if got == nil {
		got = []string{}
	}
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// checkRun checks a finished run's trigger and counts.
func checkRun(t *testing.T, name string, run syncRunRecord, trigger string, added, removed, skipped int64) {
	t.Helper()
	if run.Trigger != trigger || run.Added != added || run.Removed != removed || run.Skipped != skipped || run.Failed != 0 {
		t.Errorf("%s run: trigger %s added %d removed %d skipped %d failed %d; want %s %d %d %d 0",
			name, run.Trigger, run.Added, run.Removed, run.Skipped, run.Failed, trigger, added, removed, skipped)
	}
	if run.StartedAt == nil || run.FinishedAt == nil {
		t.Errorf("%s run %d: started_at %v finished_at %v", name, run.ID, run.StartedAt, run.FinishedAt)
	}
}

// TestActivationsEndToEnd: connectors of the three platforms (loopback fakes) sync a segment's
// membership after every recompute and on demand, through the real router, worker and embedded
// Temporal: exact membership on every platform, diffs only after the first sync, the error state
// and recovery, tenant isolation, validation, and no API key in any answer, log line or workflow
// history.
func TestActivationsEndToEnd(t *testing.T) {
	const (
		klaviyoKey = "pk_e2eKlaviyoSecret0123456789abcdef"
		brazeKey   = "braze-e2e-rest-key-7f9c2b1d4e6a8c0e"
		talonKey   = "talon-e2e-integration-key-5d3b1f9a"
		listID     = "Xy12Ab"
		audience   = int64(4711)
		urlSecret  = "urlEmbeddedSecret2468ace"
	)
	keys := []string{klaviyoKey, brazeKey, talonKey, urlSecret}
	kl := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: klaviyoKey})
	t.Cleanup(kl.Close)
	kl.CreateList(listID)
	bz := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: brazeKey})
	t.Cleanup(bz.Close)
	to := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: talonKey})
	t.Cleanup(to.Close)
	to.CreateAudience(audience)

	logs := &syncBuffer{}
	s := startDevWith(t, activationEnv(kl.URL()), logs)
	a := &apiRecorder{s: s}
	bearer := "Bearer " + s.token
	tc := dialTemporal(t, s)
	now := time.Now()

	// 30 users: 1-20 gold, 21-30 silver; odd users have an e-mail.
	tiers := map[int]string{}
	for n := 1; n <= 30; n++ {
		tiers[n] = map[bool]string{true: "gold", false: "silver"}[n <= 20]
	}
	a.identify(t, tiers, now.Add(-3*time.Hour), 30)
	segID := a.newTierSegment(t, tc, bearer)
	sameStrings(t, "segment members", a.members(t, bearer, segID), usersRange(1, 20))

	// Validation: config fields are checked per kind.
	var bad apiError
	if code := a.do(t, http.MethodPost, "/api/activations/", bearer, fmt.Sprintf(`{"segment_id":%d,"kind":"klaviyo","name":"no key","config":{"list_id":%q}}`, segID, listID), &bad); code != http.StatusBadRequest || bad.Error.Fields["config.api_key"] == "" {
		t.Fatalf("create without api_key: %d %+v, want 400 with fields[config.api_key]", code, bad)
	}
	bad = apiError{}
	if code := a.do(t, http.MethodPost, "/api/activations/", bearer, fmt.Sprintf(`{"segment_id":%d,"kind":"talon_one","name":"masked key","config":{"base_url":%q,"api_key":"***","audience_id":1}}`, segID, to.URL()), &bad); code != http.StatusBadRequest || bad.Error.Fields["config.api_key"] == "" {
		t.Errorf("create with api_key ***: %d %+v, want 400 with fields[config.api_key]", code, bad)
	}
	bad = apiError{}
	if code := a.do(t, http.MethodPost, "/api/activations/", bearer, fmt.Sprintf(`{"segment_id":%d,"kind":"mailchimp","name":"x","config":{}}`, segID), &bad); code != http.StatusBadRequest || bad.Error.Fields["kind"] == "" {
		t.Errorf("create of an unknown kind: %d %+v, want 400 with fields[kind]", code, bad)
	}
	// A key put in the URL is refused without being echoed (it is one of the secrets checked at
	// the end).
	bad = apiError{}
	if code := a.do(t, http.MethodPost, "/api/activations/", bearer, fmt.Sprintf(`{"segment_id":%d,"kind":"braze","name":"key in url","config":{"rest_endpoint":"https://user:%s@rest.iad-01.braze.com","api_key":"k-1234567"}}`, segID, urlSecret), &bad); code != http.StatusBadRequest || bad.Error.Fields["config.rest_endpoint"] == "" {
		t.Errorf("create with credentials in the URL: %d %+v, want 400 with fields[config.rest_endpoint]", code, bad)
	}
	if code := a.do(t, http.MethodPost, "/api/activations/", bearer, fmt.Sprintf(`{"segment_id":%d,"kind":"klaviyo","name":%q,"config":{"list_id":"L","api_key":"k-1234567"}}`, segID, strings.Repeat("x", 70<<10)), nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("create with a 70 KB body: %d, want 413", code)
	}

	// Create one connector per platform: inactive, key masked.
	create := func(kind, name string, cfg map[string]any) connectorRecord {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"segment_id": segID, "kind": kind, "name": name, "config": cfg})
		var c connectorRecord
		if code := a.do(t, http.MethodPost, "/api/activations/", bearer, string(body), &c); code != http.StatusCreated {
			t.Fatalf("create %s connector: %d", kind, code)
		}
		if c.ID == 0 || c.Kind != kind || c.SegmentID != segID || c.Status != "inactive" || c.Config["api_key"] != "***" || c.LastSyncedAt != nil || c.LastError != nil {
			t.Fatalf("new %s connector: %+v", kind, c)
		}
		return c
	}
	klc := create("klaviyo", "Klaviyo gold list", map[string]any{"list_id": listID, "api_key": klaviyoKey})
	bzc := create("braze", "Braze gold attribute", map[string]any{"rest_endpoint": bz.URL(), "api_key": brazeKey})
	toc := create("talon_one", "Talon.One gold audience", map[string]any{"base_url": to.URL() + "/", "api_key": talonKey, "audience_id": audience})
	attr := fmt.Sprintf("cohort_segment_%d", segID)
	if bzc.Config["attribute"] != attr {
		t.Errorf("braze attribute %v, want the default %s", bzc.Config["attribute"], attr)
	}
	if toc.Config["base_url"] != to.URL() || toc.Config["audience_id"] != float64(audience) {
		t.Errorf("talon.one config %v", toc.Config)
	}
	conns := []connectorRecord{klc, bzc, toc}
	var list []connectorRecord
	if code := a.do(t, http.MethodGet, fmt.Sprintf("/api/activations/?segment_id=%d", segID), bearer, "", &list); code != http.StatusOK || len(list) != 3 ||
		list[0].ID != klc.ID || list[1].ID != bzc.ID || list[2].ID != toc.ID {
		t.Fatalf("list: %d %+v", code, list)
	}
	for _, c := range list {
		if c.Config["api_key"] != "***" {
			t.Errorf("listed connector %d config %v", c.ID, c.Config)
		}
	}
	// Nothing synced while inactive.
	if n := len(kl.Requests()) + len(bz.Requests()) + len(to.Requests()); n != 0 {
		t.Fatalf("%d platform requests before any connector was active", n)
	}

	// Activate all three, then recompute: the compute fans out to each.
	for _, c := range conns {
		var got connectorRecord
		if code := a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", c.ID), bearer, `{"status":"active"}`, &got); code != http.StatusOK || got.Status != "active" {
			t.Fatalf("activate %s: %d %+v", c.Kind, code, got)
		}
	}
	a.compute(t, bearer, segID)
	first := map[int64]syncRunRecord{}
	for _, c := range conns {
		first[c.ID] = a.waitSucceeded(t, bearer, c.ID, 0)
	}
	for _, c := range conns {
		eventually(t, c.Kind+" connector synced", func() bool {
			got := a.connector(t, bearer, c.ID)
			return got.LastSyncedAt != nil && got.Status == "active" && got.LastError == nil
		})
	}
	gold1 := intRange(1, 20)
	checkRun(t, "klaviyo first", first[klc.ID], "recompute", 10, 0, countNoEmail(gold1))
	checkRun(t, "braze first", first[bzc.ID], "recompute", 20, 0, 0)
	checkRun(t, "talon.one first", first[toc.ID], "recompute", 20, 0, 0)
	for _, c := range conns {
		r := first[c.ID]
		if r.SegmentRunID == nil || r.WorkflowID != fmt.Sprintf("activation-sync:%d:%d:%d", s.tenantID, c.ID, *r.SegmentRunID) || r.Error != nil {
			t.Errorf("%s first run: %+v", c.Kind, r)
		}
		if runs := a.runs(t, bearer, c.ID); len(runs) != 1 {
			t.Errorf("%s has %d runs after one recompute, want 1", c.Kind, len(runs))
		}
	}
	sameStrings(t, "klaviyo list after the first sync", kl.ListMembers(listID), emailsOf(gold1...))
	sameStrings(t, "braze users with the attribute after the first sync", bz.UsersWith(attr, true), usersRange(1, 20))
	sameStrings(t, "talon.one audience after the first sync", to.AudienceMembers(audience), usersRange(1, 20))
	waitWorkflowClosed(t, tc, fmt.Sprintf("segment-compute:%d:%d", s.tenantID, segID))

	// Move users 1-5 out and 21-25 in: each platform is sent exactly that difference.
	kl.Reset()
	bz.Reset()
	to.Reset()
	removedEmails := emailsOf(1, 2, 3, 4, 5)
	var removedIDs []string
	for _, e := range removedEmails {
		id, ok := kl.ProfileID(e)
		if !ok {
			t.Fatalf("klaviyo has no profile for %s", e)
		}
		removedIDs = append(removedIDs, id)
	}
	sort.Strings(removedIDs)
	move := map[int]string{}
	for n := 1; n <= 5; n++ {
		move[n], move[20+n] = "silver", "gold"
	}
	a.identify(t, move, now.Add(-2*time.Hour), 40)
	a.compute(t, bearer, segID)
	second := map[int64]syncRunRecord{}
	for _, c := range conns {
		second[c.ID] = a.waitSucceeded(t, bearer, c.ID, first[c.ID].ID)
	}
	gold2 := intRange(6, 25)
	sameStrings(t, "segment members after the move", a.members(t, bearer, segID), usersRange(6, 25))
	checkRun(t, "klaviyo second", second[klc.ID], "recompute", 3, 3, countNoEmail(gold2))
	checkRun(t, "braze second", second[bzc.ID], "recompute", 5, 5, 0)
	checkRun(t, "talon.one second", second[toc.ID], "recompute", 5, 5, 0)
	sameStrings(t, "klaviyo list after the move", kl.ListMembers(listID), emailsOf(gold2...))
	sameStrings(t, "braze users with the attribute after the move", bz.UsersWith(attr, true), usersRange(6, 25))
	sameStrings(t, "braze users with the attribute false after the move", bz.UsersWith(attr, false), usersRange(1, 5))
	sameStrings(t, "talon.one audience after the move", to.AudienceMembers(audience), usersRange(6, 25))
	imported, deletedIDs := klaviyoCalls(t, kl, listID)
	sameStrings(t, "klaviyo e-mails imported by the second sync", imported, emailsOf(21, 22, 23, 24, 25))
	sameStrings(t, "klaviyo profile ids removed by the second sync", deletedIDs, removedIDs)
	trues, falses := brazeValues(t, bz, attr)
	sameStrings(t, "braze users set true by the second sync", trues, usersRange(21, 25))
	sameStrings(t, "braze users set false by the second sync", falses, usersRange(1, 5))
	adds, deletes := talonItems(t, to)
	sameStrings(t, "talon.one profiles added by the second sync", adds[audience], usersRange(21, 25))
	sameStrings(t, "talon.one profiles deleted by the second sync", deletes[audience], usersRange(1, 5))
	if len(adds) > 1 || len(deletes) > 1 {
		t.Errorf("talon.one audiences touched: adds %v deletes %v", adds, deletes)
	}
	waitWorkflowClosed(t, tc, fmt.Sprintf("segment-compute:%d:%d", s.tenantID, segID))

	// Pause Talon.One and change the segment (26 in, 6 out): the recompute syncs Klaviyo and Braze
	// only, leaving Talon.One a pending difference.
	var paused connectorRecord
	if code := a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", toc.ID), bearer, `{"status":"inactive"}`, &paused); code != http.StatusOK || paused.Status != "inactive" {
		t.Fatalf("pause talon.one: %d %+v", code, paused)
	}
	a.identify(t, map[int]string{6: "silver", 26: "gold"}, now.Add(-time.Hour), 42)
	a.compute(t, bearer, segID)
	third := map[int64]syncRunRecord{}
	for _, c := range []connectorRecord{klc, bzc} {
		third[c.ID] = a.waitSucceeded(t, bearer, c.ID, second[c.ID].ID)
	}
	waitWorkflowClosed(t, tc, fmt.Sprintf("segment-compute:%d:%d", s.tenantID, segID))
	gold3 := usersRange(7, 26)
	checkRun(t, "klaviyo third", third[klc.ID], "recompute", 0, 0, countNoEmail(intRange(7, 26))) // 6 and 26 have no e-mail
	checkRun(t, "braze third", third[bzc.ID], "recompute", 1, 1, 0)
	sameStrings(t, "braze users with the attribute after the third change", bz.UsersWith(attr, true), gold3)
	if runs := a.runs(t, bearer, toc.ID); len(runs) != 2 {
		t.Errorf("paused talon.one connector has %d runs, want 2 (no sync while inactive)", len(runs))
	}
	sameStrings(t, "talon.one audience while paused", to.AudienceMembers(audience), usersRange(6, 25))

	// Talon.One rejects the key (echoing it back): a manual sync fails at once, the connector
	// goes to error with the platform's message, scrubbed of the key.
	var active connectorRecord
	if code := a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", toc.ID), bearer, `{"status":"active"}`, &active); code != http.StatusOK || active.Status != "active" {
		t.Fatalf("reactivate talon.one: %d %+v", code, active)
	}
	to.Reset()
	const rejection = "is not a valid Integration API key for this deployment"
	to.Inject(platformfake.Fault{Status: http.StatusUnauthorized, Count: -1, Message: "API key " + talonKey + " " + rejection})
	var queued struct {
		Status     string `json:"status"`
		RunID      int64  `json:"run_id"`
		WorkflowID string `json:"workflow_id"`
	}
	if code := a.do(t, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", toc.ID), bearer, "", &queued); code != http.StatusAccepted || queued.Status != "queued" || queued.RunID == 0 ||
		queued.WorkflowID != fmt.Sprintf("activation-sync:%d:%d:manual-%d", s.tenantID, toc.ID, queued.RunID) {
		t.Fatalf("sync: %d %+v", code, queued)
	}
	var failedConn connectorRecord
	eventually(t, "talon.one connector in error", func() bool {
		failedConn = a.connector(t, bearer, toc.ID)
		return failedConn.Status == "error"
	})
	if failedConn.LastError == nil || !strings.Contains(*failedConn.LastError, rejection) || !strings.Contains(*failedConn.LastError, "401") {
		t.Errorf("last_error %q, want the platform's 401 message", testenv.Deref(failedConn.LastError))
	}
	failedRun := a.waitRun(t, bearer, toc.ID, second[toc.ID].ID)
	if failedRun.ID != queued.RunID || failedRun.Status != "failed" || failedRun.Trigger != "manual" || failedRun.SegmentRunID != nil ||
		failedRun.WorkflowID != queued.WorkflowID || failedRun.Error == nil || *failedRun.Error != testenv.Deref(failedConn.LastError) || failedRun.Added != 0 || failedRun.Removed != 0 {
		t.Errorf("failed run: %+v (error %q), want run %d failed with last_error", failedRun, testenv.Deref(failedRun.Error), queued.RunID)
	}
	if n := to.RequestCount(http.MethodPost, "/v2/customer_audiences"); n != 1 {
		t.Errorf("talon.one got %d requests for the rejected sync, want 1 (a 4xx is not retried)", n)
	}
	sameStrings(t, "talon.one audience after the rejected sync", to.AudienceMembers(audience), usersRange(6, 25))

	// Recovery: the key works again; activating clears the error, and a manual sync succeeds
	// with the pending difference.
	to.ClearFaults()
	var reactivated map[string]any
	if code := a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", toc.ID), bearer, `{"status":"active"}`, &reactivated); code != http.StatusOK || reactivated["status"] != "active" {
		t.Fatalf("reactivate after the error: %d %+v", code, reactivated)
	}
	if v, ok := reactivated["last_error"]; !ok || v != nil {
		t.Errorf("last_error after reactivation = %v (present %v), want null", v, ok)
	}
	queued.RunID = 0
	if code := a.do(t, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", toc.ID), bearer, "", &queued); code != http.StatusAccepted || queued.RunID <= failedRun.ID {
		t.Fatalf("sync after recovery: %d %+v", code, queued)
	}
	recovered := a.waitSucceeded(t, bearer, toc.ID, failedRun.ID)
	if recovered.ID != queued.RunID {
		t.Errorf("recovered run %d, want %d", recovered.ID, queued.RunID)
	}
	checkRun(t, "talon.one manual", recovered, "manual", 1, 1, 0)
	if got := a.connector(t, bearer, toc.ID); got.Status != "active" || got.LastError != nil || got.LastSyncedAt == nil || !got.LastSyncedAt.After(*first[toc.ID].FinishedAt) {
		t.Errorf("talon.one after recovery: %+v (last_error %q)", got, testenv.Deref(got.LastError))
	}
	sameStrings(t, "talon.one audience after recovery", to.AudienceMembers(audience), gold3)
	sameStrings(t, "klaviyo list at the end", kl.ListMembers(listID), emailsOf(intRange(7, 26)...))
	for _, f := range []interface{ Violations() []string }{kl, bz, to} {
		if v := f.Violations(); len(v) != 0 {
			t.Errorf("platform contract violations: %q", v)
		}
	}

	bad = apiError{}
	if code := a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", toc.ID), bearer, `{"status":"error"}`, &bad); code != http.StatusBadRequest || bad.Error.Fields["status"] == "" {
		t.Errorf("PATCH status error: %d %+v, want 400 with fields[status]", code, bad)
	}

	// Tenant isolation: another tenant sees none of the connectors.
	_, otherToken := s.otherTenant(t, "other-shop")
	ob := "Bearer " + otherToken
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, fmt.Sprintf("/api/activations/%d/", klc.ID), ""},
		{http.MethodPatch, fmt.Sprintf("/api/activations/%d/", klc.ID), `{"status":"inactive"}`},
		{http.MethodDelete, fmt.Sprintf("/api/activations/%d/", klc.ID), ""},
		{http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", klc.ID), ""},
		{http.MethodGet, fmt.Sprintf("/api/activations/%d/runs/", klc.ID), ""},
	} {
		if code := a.do(t, c.method, c.path, ob, c.body, nil); code != http.StatusNotFound {
			t.Errorf("other tenant %s %s: %d, want 404", c.method, c.path, code)
		}
	}
	for _, q := range []string{"", fmt.Sprintf("?segment_id=%d", segID)} {
		var other []connectorRecord
		if code := a.do(t, http.MethodGet, "/api/activations/"+q, ob, "", &other); code != http.StatusOK || other == nil || len(other) != 0 {
			t.Errorf("other tenant's list%s: %d %+v, want 200 []", q, code, other)
		}
	}
	bad = apiError{}
	if code := a.do(t, http.MethodPost, "/api/activations/", ob, fmt.Sprintf(`{"segment_id":%d,"kind":"talon_one","name":"steal","config":{"base_url":%q,"api_key":"k-other-1234","audience_id":1}}`, segID, to.URL()), &bad); code != http.StatusBadRequest || bad.Error.Fields["segment_id"] == "" {
		t.Errorf("other tenant creating a connector of the first tenant's segment: %d %+v, want 400 segment_id", code, bad)
	}
	if got := a.connector(t, bearer, klc.ID); got.Status != "active" {
		t.Errorf("klaviyo connector after the other tenant's attempts: %+v", got)
	}
	if runs := a.runs(t, bearer, klc.ID); len(runs) != 3 {
		t.Errorf("klaviyo connector has %d runs, want 3 (the other tenant's sync must not run)", len(runs))
	}

	// The search attribute finds each connector's syncs: exactly the workflows of its runs.
	for _, c := range conns {
		var want []string
		for _, r := range a.runs(t, bearer, c.ID) {
			want = append(want, r.WorkflowID)
		}
		sort.Strings(want)
		var got []string
		eventually(t, fmt.Sprintf("CohortConnector=%d lists the connector's syncs", c.ID), func() bool {
			got = workflowIDs(t, tc, fmt.Sprintf("CohortConnector=%d", c.ID))
			return slices.Equal(got, want)
		})
		if got := workflowIDs(t, tc, fmt.Sprintf("CohortConnector=%d AND CohortSegment=%d AND CohortTenant=%d AND WorkflowType='ActivationSync'", c.ID, segID, s.tenantID)); !slices.Equal(got, want) {
			t.Errorf("%s syncs by all three search attributes = %q, want %q", c.Kind, got, want)
		}
	}

	// Secrets: no answer, log line or workflow history ever carried a key.
	var histories strings.Builder
	executions := 0
	for _, c := range conns {
		text, n := historyText(t, tc, fmt.Sprintf("CohortConnector=%d", c.ID))
		histories.WriteString(text)
		executions += n
	}
	text, n := historyText(t, tc, fmt.Sprintf("CohortTenant=%d", s.tenantID))
	histories.WriteString(text)
	// klaviyo and braze: 3 recomputes; talon.one: 2 recomputes and 2 manual syncs.
	if executions != 10 || n < executions {
		t.Errorf("histories read: %d activation syncs (want 10), %d workflows of the tenant", executions, n)
	}
	if !strings.Contains(histories.String(), rejection) {
		t.Error("the workflow histories do not hold the platform's rejection (is the history check reading them?)")
	}
	logText := logs.String()
	if !strings.Contains(logText, "level=DEBUG") || !strings.Contains(logText, "/api/activations/") {
		t.Error("the dev's log holds no debug lines or no activation requests (is it routed to the buffer?)")
	}
	bodies := a.all()
	for _, k := range keys {
		for _, src := range []struct{ name, text string }{
			{"an API response", bodies},
			{"the dev's log", logText},
			{"an activation sync's workflow history", histories.String()},
		} {
			if i := strings.Index(src.text, k); i >= 0 {
				lo, hi := max(0, i-200), min(len(src.text), i+len(k)+200)
				t.Errorf("%s holds the key %s…: %s", src.name, k[:8], src.text[lo:hi])
			}
		}
	}
	// The keys did reach the platforms (so their absence above means something).
	for _, c := range []struct {
		name, header string
		reqs         []platformfake.Request
	}{
		{"klaviyo", "Klaviyo-API-Key " + klaviyoKey, kl.Requests()},
		{"braze", "Bearer " + brazeKey, bz.Requests()},
		{"talon.one", "ApiKey-v1 " + talonKey, to.Requests()},
	} {
		if len(c.reqs) == 0 || c.reqs[len(c.reqs)-1].Header.Get("Authorization") != c.header {
			t.Errorf("%s: no request with the connector's key", c.name)
		}
	}

	// Delete: the connector and its runs are gone; the platform keeps its audience.
	if code := a.do(t, http.MethodDelete, fmt.Sprintf("/api/activations/%d/", toc.ID), bearer, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	for _, p := range []string{fmt.Sprintf("/api/activations/%d/", toc.ID), fmt.Sprintf("/api/activations/%d/runs/", toc.ID)} {
		if code := a.do(t, http.MethodGet, p, bearer, "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s after delete: %d, want 404", p, code)
		}
	}
	sameStrings(t, "talon.one audience after the connector's deletion", to.AudienceMembers(audience), gold3)
}

// slowPlatform is a reverse proxy to a fake that answers every request after a latency (a real
// deployment answers in hundreds of milliseconds, not microseconds) and counts the requests in
// flight.
type slowPlatform struct {
	*httptest.Server
	mu             sync.Mutex
	inFlight, peak int
}

func newSlowPlatform(t *testing.T, latency time.Duration, target string) *slowPlatform {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	p := &slowPlatform{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.inFlight++
		p.peak = max(p.peak, p.inFlight)
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.inFlight--
			p.mu.Unlock()
		}()
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *slowPlatform) counts() (inFlight, peak int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight, p.peak
}

// fanOut is a dev stack with a gold-tier segment of 20 members (users 1-20) and active Talon.One
// connectors on it.
type fanOut struct {
	s      *devStack
	a      *apiRecorder
	tc     client.Client
	bearer string
	segID  int64
}

func newFanOut(t *testing.T) *fanOut {
	t.Helper()
	s := startDevWith(t, activationEnv(""), nil)
	f := &fanOut{s: s, a: &apiRecorder{s: s}, bearer: "Bearer " + s.token, tc: dialTemporal(t, s)}
	tiers := map[int]string{}
	for n := 1; n <= 30; n++ {
		tiers[n] = map[bool]string{true: "gold", false: "silver"}[n <= 20]
	}
	f.a.identify(t, tiers, time.Now().Add(-time.Hour), 30)
	f.segID = f.a.newTierSegment(t, f.tc, f.bearer)
	return f
}

// talonConnector creates an active Talon.One connector of the segment.
func (f *fanOut) talonConnector(t *testing.T, name, baseURL, key string, audience int64) int64 {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"segment_id": f.segID, "kind": "talon_one", "name": name,
		"config": map[string]any{"base_url": baseURL, "api_key": key, "audience_id": audience}})
	var c connectorRecord
	if code := f.a.do(t, http.MethodPost, "/api/activations/", f.bearer, string(body), &c); code != http.StatusCreated {
		t.Fatalf("create connector %s: %d", name, code)
	}
	if code := f.a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", c.ID), f.bearer, `{"status":"active"}`, nil); code != http.StatusOK {
		t.Fatalf("activate connector %s: %d", name, code)
	}
	return c.ID
}

// waitAllSucceeded waits until every connector of ids has a succeeded run, failing the test at
// the first failed run or when bound has passed since start.
func (f *fanOut) waitAllSucceeded(t *testing.T, ids []int64, start time.Time, bound time.Duration) {
	t.Helper()
	pending := map[int64]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	lastSeen := map[int64]string{}
	for {
		for id := range pending {
			runs := f.a.runs(t, f.bearer, id)
			if len(runs) == 0 {
				lastSeen[id] = "no run"
				continue
			}
			lastSeen[id] = runs[0].Status
			switch runs[0].Status {
			case "succeeded":
				delete(pending, id)
			case "failed":
				t.Fatalf("connector %d failed: %s", id, testenv.Deref(runs[0].Error))
			}
		}
		if len(pending) == 0 {
			return
		}
		if time.Since(start) > bound {
			var stuck []string
			for id := range pending {
				stuck = append(stuck, fmt.Sprintf("%d:%s", id, lastSeen[id]))
			}
			sort.Strings(stuck)
			t.Fatalf("%d of %d connectors not synced %s after the recompute (connector:last run status %v)", len(pending), len(ids), bound, stuck)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestActivationsFanOut: one recompute fans out to 20 active Talon.One connectors; the 19 with a
// working (if slow) platform all sync within a bound while the one whose platform answers 500 is
// still retrying, unaffected by it.
func TestActivationsFanOut(t *testing.T) {
	const (
		goodKey = "talon-fanout-good-key-2b4d6f8a"
		badKey  = "talon-fanout-bad-key-1a3c5e7b"
		good    = 19
		bound   = 25 * time.Second
	)
	ok := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: goodKey})
	t.Cleanup(ok.Close)
	for id := int64(1); id <= good; id++ {
		ok.CreateAudience(id)
	}
	slow := newSlowPlatform(t, 1500*time.Millisecond, ok.URL())
	down := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: badKey})
	t.Cleanup(down.Close)
	down.CreateAudience(1)
	down.Inject(platformfake.Fault{Status: http.StatusInternalServerError, Count: -1})

	f := newFanOut(t)
	var ids []int64
	for i := 1; i <= good; i++ {
		ids = append(ids, f.talonConnector(t, fmt.Sprintf("audience %d", i), slow.URL, goodKey, int64(i)))
	}
	badID := f.talonConnector(t, "down", down.URL(), badKey, 1)

	start := time.Now()
	f.a.compute(t, f.bearer, f.segID)
	f.waitAllSucceeded(t, ids, start, bound)
	_, peak := slow.counts()
	t.Logf("%d connectors synced %v after the recompute (at most %d platform calls at once)", good, time.Since(start).Round(time.Millisecond), peak)

	// The failing connector is still retrying: its platform was called, its run is running, its
	// workflow has not ended, and the connector is not in error yet.
	badRuns := f.a.runs(t, f.bearer, badID)
	if len(badRuns) != 1 || badRuns[0].Status != "running" {
		t.Errorf("failing connector's runs when the good ones were done: %+v, want one running (still retrying)", badRuns)
	}
	if got := f.a.connector(t, f.bearer, badID); got.Status != "active" || got.LastError != nil {
		t.Errorf("failing connector while retrying: status %s last_error %q", got.Status, testenv.Deref(got.LastError))
	}
	if n := down.RequestCount(http.MethodPost, "/v2/customer_audiences"); n < 1 {
		t.Errorf("the failing platform got %d requests, want at least 1", n)
	}
	if len(badRuns) == 1 {
		d, err := f.tc.DescribeWorkflowExecution(context.Background(), badRuns[0].WorkflowID, "")
		if err != nil {
			t.Fatal(err)
		}
		if st := d.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Errorf("failing connector's workflow %s, want running (retrying)", st)
		}
		if len(d.PendingActivities) != 1 || d.PendingActivities[0].ActivityType.GetName() != "PushSync" || d.PendingActivities[0].LastFailure == nil ||
			!strings.Contains(d.PendingActivities[0].LastFailure.GetMessage(), "HTTP 500") {
			t.Errorf("failing connector's pending activities %v, want PushSync retrying after its HTTP 500", d.PendingActivities)
		}
		// End it now rather than let it back off for minutes.
		if err := f.tc.TerminateWorkflow(context.Background(), badRuns[0].WorkflowID, "", "test over"); err != nil {
			t.Errorf("terminate: %v", err)
		}
	}

	for i, id := range ids {
		sameStrings(t, fmt.Sprintf("audience %d of connector %d", i+1, id), ok.AudienceMembers(int64(i+1)), usersRange(1, 20))
		runs := f.a.runs(t, f.bearer, id)
		if len(runs) != 1 || runs[0].Added != 20 || runs[0].Trigger != "recompute" {
			t.Errorf("connector %d runs %+v, want one recompute run adding 20", id, runs)
		}
	}
	sameStrings(t, "the failing platform's audience", down.AudienceMembers(1), nil)
	if v := ok.Violations(); len(v) != 0 {
		t.Errorf("talon.one contract violations: %q", v)
	}
}

// TestActivationSyncsLeaveTheDatabaseToOthers: while many syncs wait on a slow platform, the rest
// of the service (here the API, which shares the dev's connection pool with the worker; in
// production the worker's computes and event loading) still gets database connections: a sync
// must not hold a pooled connection while it waits for the platform.
func TestActivationSyncsLeaveTheDatabaseToOthers(t *testing.T) {
	const (
		key     = "talon-starve-key-9e8d7c6b5a"
		n       = 19
		latency = 3 * time.Second
	)
	ok := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: key})
	t.Cleanup(ok.Close)
	for id := int64(1); id <= n; id++ {
		ok.CreateAudience(id)
	}
	slow := newSlowPlatform(t, latency, ok.URL())
	f := newFanOut(t)
	var ids []int64
	for i := 1; i <= n; i++ {
		ids = append(ids, f.talonConnector(t, fmt.Sprintf("audience %d", i), slow.URL, key, int64(i)))
	}

	start := time.Now()
	f.a.compute(t, f.bearer, f.segID)
	// Wait until the platform calls stop increasing (every sync is in its call, or no more can
	// start) for half a second.
	var inFlight, since = 0, time.Now()
	eventually(t, "the syncs waiting on the platform", func() bool {
		cur, _ := slow.counts()
		if cur != inFlight {
			inFlight, since = cur, time.Now()
		}
		return cur == n || (cur > 0 && time.Since(since) > 500*time.Millisecond)
	})
	t0 := time.Now()
	f.a.connector(t, f.bearer, ids[0])
	waited := time.Since(t0)
	if waited > time.Second {
		t.Errorf("GET /api/activations/<id>/ took %v while %d of %d syncs waited on the platform (%v latency): "+
			"each sync holds a pooled database connection across its platform calls, so the syncs starve everything else of the pool "+
			"and at most pool-size syncs run at once", waited.Round(time.Millisecond), inFlight, n, latency)
	}
	f.waitAllSucceeded(t, ids, start, 30*time.Second)
	_, peak := slow.counts()
	t.Logf("API call during the syncs: %v; at most %d of %d platform calls at once; all synced after %v",
		waited.Round(time.Millisecond), peak, n, time.Since(start).Round(time.Millisecond))
}

// TestActivationsReplayAndReconfigure: a connector in error is left out of recomputes; a failed
// sync replayed with `temporal workflow reset` runs again as a replay and recovers the connector;
// a connector pointed at another audience sends that audience the whole segment, not only what
// changed since the last sync to the old one; a paused connector syncs on demand and stays
// paused; deleting the segment deletes its connectors.
func TestActivationsReplayAndReconfigure(t *testing.T) {
	const key = "talon-replay-key-4c6e8a0b2d"
	to := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: key})
	t.Cleanup(to.Close)
	to.CreateAudience(1)
	to.CreateAudience(2)
	f := newFanOut(t)
	id := f.talonConnector(t, "audience 1", to.URL(), key, 1)
	members := usersRange(1, 20)

	// The platform rejects the first sync: failed, connector in error.
	to.Inject(platformfake.Fault{Status: http.StatusForbidden, Count: -1, Message: "integration disabled"})
	f.a.compute(t, f.bearer, f.segID)
	failed := f.a.waitRun(t, f.bearer, id, 0)
	if failed.Status != "failed" || !strings.Contains(testenv.Deref(failed.Error), "integration disabled") {
		t.Fatalf("first run: %+v (error %q), want failed with the platform's message", failed, testenv.Deref(failed.Error))
	}
	eventually(t, "connector in error", func() bool { return f.a.connector(t, f.bearer, id).Status == "error" })
	waitWorkflowClosed(t, f.tc, failed.WorkflowID)

	// A connector in error is left out of recomputes: the compute starts no sync child.
	computeID := fmt.Sprintf("segment-compute:%d:%d", f.s.tenantID, f.segID)
	waitWorkflowClosed(t, f.tc, computeID)
	before, err := f.tc.DescribeWorkflowExecution(context.Background(), computeID, "")
	if err != nil {
		t.Fatal(err)
	}
	f.a.compute(t, f.bearer, f.segID)
	eventually(t, "a new compute run", func() bool {
		d, err := f.tc.DescribeWorkflowExecution(context.Background(), computeID, "")
		return err == nil && d.WorkflowExecutionInfo.Execution.RunId != before.WorkflowExecutionInfo.Execution.RunId &&
			d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	})
	children := 0
	hist := f.tc.GetWorkflowHistory(context.Background(), computeID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for hist.HasNext() {
		ev, err := hist.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
			children++
		}
	}
	if children != 0 {
		t.Errorf("the recompute started %d sync children with the only connector in error, want 0", children)
	}
	if runs := f.a.runs(t, f.bearer, id); len(runs) != 1 {
		t.Errorf("connector in error has %d runs after another recompute, want 1", len(runs))
	}

	// Replay it: reset to the first workflow task (what the workflow's doc says to do).
	to.ClearFaults()
	var firstTask int64
	it := f.tc.GetWorkflowHistory(context.Background(), failed.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && firstTask == 0 {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			firstTask = ev.GetEventId()
		}
	}
	if _, err := f.tc.ResetWorkflowExecution(context.Background(), &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 "default",
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: failed.WorkflowID},
		Reason:                    "platform fixed",
		WorkflowTaskFinishEventId: firstTask,
		RequestId:                 fmt.Sprintf("reset-%d", time.Now().UnixNano()),
	}); err != nil {
		t.Fatalf("reset %s: %v", failed.WorkflowID, err)
	}
	replay := f.a.waitSucceeded(t, f.bearer, id, failed.ID)
	if replay.Trigger != "replay" || replay.WorkflowID != failed.WorkflowID || replay.Added != 20 {
		t.Errorf("replayed run: %+v, want a replay of %s adding 20", replay, failed.WorkflowID)
	}
	if got := f.a.connector(t, f.bearer, id); got.Status != "active" || got.LastError != nil || got.LastSyncedAt == nil {
		t.Errorf("connector after the replay: %+v (last_error %q), want active and synced", got, testenv.Deref(got.LastError))
	}
	sameStrings(t, "audience 1 after the replay", to.AudienceMembers(1), members)

	// Point the connector at audience 2 and sync: audience 2 must receive every member.
	var patched connectorRecord
	if code := f.a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", id), f.bearer, `{"config":{"audience_id":2,"api_key":"***"}}`, &patched); code != http.StatusOK ||
		patched.Config["audience_id"] != float64(2) || patched.Config["api_key"] != "***" {
		t.Fatalf("patch audience: %d %+v", code, patched)
	}
	to.Reset()
	var queued struct {
		RunID int64 `json:"run_id"`
	}
	if code := f.a.do(t, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", id), f.bearer, "", &queued); code != http.StatusAccepted {
		t.Fatalf("sync: %d", code)
	}
	run := f.a.waitSucceeded(t, f.bearer, id, replay.ID)
	for _, r := range to.Requests() {
		if r.Header.Get("Authorization") != "ApiKey-v1 "+key {
			t.Errorf("after a PATCH with api_key *** the platform got Authorization %q, want the kept key", r.Header.Get("Authorization"))
		}
	}
	sameStrings(t, "audience 2 after the connector was pointed at it", to.AudienceMembers(2), members)
	if run.Added != 20 {
		t.Errorf("sync to the new audience added %d, want 20 (the new audience held nobody)", run.Added)
	}

	// A manual sync of a paused connector runs and leaves it paused.
	if code := f.a.do(t, http.MethodPatch, fmt.Sprintf("/api/activations/%d/", id), f.bearer, `{"status":"inactive"}`, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	if code := f.a.do(t, http.MethodPost, fmt.Sprintf("/api/activations/%d/sync/", id), f.bearer, "", nil); code != http.StatusAccepted {
		t.Fatalf("sync of a paused connector: %d", code)
	}
	paused := f.a.waitSucceeded(t, f.bearer, id, run.ID)
	if got := f.a.connector(t, f.bearer, id); got.Status != "inactive" || got.LastSyncedAt == nil || !got.LastSyncedAt.After(*run.StartedAt) {
		t.Errorf("paused connector after a manual sync (run %d): %+v, want inactive with a new last_synced_at", paused.ID, got)
	}

	// Deleting the segment deletes its connectors.
	if code := f.a.do(t, http.MethodDelete, fmt.Sprintf("/api/segments/%d/", f.segID), f.bearer, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete segment: %d", code)
	}
	if code := f.a.do(t, http.MethodGet, fmt.Sprintf("/api/activations/%d/", id), f.bearer, "", nil); code != http.StatusNotFound {
		t.Errorf("connector of a deleted segment: %d, want 404", code)
	}
	var left []connectorRecord
	if f.a.do(t, http.MethodGet, "/api/activations/", f.bearer, "", &left); len(left) != 0 {
		t.Errorf("connectors left after the segment's deletion: %+v", left)
	}
}
