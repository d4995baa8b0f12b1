package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

type segmentRecord struct {
	ID             int64           `json:"id"`
	Tenant         int64           `json:"tenant"`
	SegmentType    string          `json:"segment_type"`
	Definition     json.RawMessage `json:"definition"`
	Version        int             `json:"version"`
	Status         string          `json:"status"`
	ComputedCount  int64           `json:"computed_count"`
	LastComputedAt *time.Time      `json:"last_computed_at"`
	LastError      *string         `json:"last_error"`
}

func (s *devStack) waitSegment(t *testing.T, bearer string, id int64, version int) segmentRecord {
	t.Helper()
	var seg segmentRecord
	defer func() {
		if t.Failed() {
			t.Logf("segment %d last seen: %+v (error %v)", id, seg, seg.LastError)
			for _, q := range []string{"SELECT count(*) FROM segment_runs", "SELECT count(*) FROM segment_runs WHERE status = 'running'"} {
				t.Logf("%s: %d", q, countRows(t, s.dbURL, q))
			}
		}
	}()
	eventually(t, fmt.Sprintf("segment %d computed at version %d", id, version), func() bool {
		seg = segmentRecord{}
		s.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/", id), bearer, nil, nil, &seg)
		if seg.Status == "error" {
			t.Fatalf("segment %d failed: %v", id, *seg.LastError)
		}
		return seg.Status == "ready" && seg.Version == version && seg.LastComputedAt != nil
	})
	return seg
}

func (s *devStack) otherTenant(t *testing.T, slug string) (secret, token string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"tenants", "create", "--slug", slug}, &out, &errb); code != 0 {
		t.Fatalf("tenants create: %s", errb.String())
	}
	var created struct {
		SecretKey string `json:"secret_key"`
		Token     string `json:"token"`
	}
	if err := json.Unmarshal(out.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	return created.SecretKey, created.Token
}

// Ingest -> define -> preview -> compute -> membership/members/versions -> export -> download,
// through the real router, worker and embedded Temporal; then tenant isolation on every endpoint.
func TestSegmentsEndToEnd(t *testing.T) {
	s := startDev(t)
	sk := "ApiKey " + s.secret
	bearer := "Bearer " + s.token
	now := time.Now().UTC()
	ts := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	day := 24 * time.Hour

	// buyer1: 150 spent, last order 40 days ago -> lapsed big spender.
	// buyer2: 120 spent ("60.00" strings count), ordered 2 days ago -> not lapsed.
	// buyer3: 40 spent 50 days ago -> too little.  browser: page views only.
	events := []map[string]any{
		{"user_id": "buyer1", "event_type": "order_completed", "occurred_at": ts(60 * day), "payload": map[string]any{"amount": 100}},
		{"user_id": "buyer1", "event_type": "order_completed", "occurred_at": ts(40 * day), "payload": map[string]any{"amount": 50}},
		{"user_id": "buyer2", "event_type": "order_completed", "occurred_at": ts(45 * day), "payload": map[string]any{"amount": "60.00"}},
		{"user_id": "buyer2", "event_type": "order_completed", "occurred_at": ts(2 * day), "payload": map[string]any{"amount": 60}},
		{"user_id": "buyer3", "event_type": "order_completed", "occurred_at": ts(50 * day), "payload": map[string]any{"amount": 40}},
		{"user_id": "browser", "event_type": "page_view", "occurred_at": ts(1 * day), "payload": map[string]any{"path": "/pricing"}},
		{"user_id": "buyer1", "event_type": "context_identified", "payload": map[string]any{"plan": "pro", "email": "b1@example.com"}},
	}
	body, _ := json.Marshal(map[string]any{"events": events})
	if code := s.do(t, http.MethodPost, "/api/ingestion/track/batch/", sk, body, nil, nil); code != http.StatusAccepted {
		t.Fatalf("ingest: %d", code)
	}
	eventually(t, "events loaded", func() bool {
		return countRows(t, s.dbURL, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, s.tenantID) == len(events)
	})

	// Create: tenant must be the caller's.
	var seg segmentRecord
	if code := s.do(t, http.MethodPost, "/api/segments/", bearer, []byte(fmt.Sprintf(`{"name":"Lapsed big spenders","tenant":%d,"segment_type":"rule","description":"spent 100+, no order for 30 days"}`, s.tenantID+1000)), nil, nil); code != http.StatusForbidden {
		t.Fatalf("create for another tenant: %d, want 403", code)
	}
	if code := s.do(t, http.MethodPost, "/api/segments/", bearer, []byte(fmt.Sprintf(`{"name":"Lapsed big spenders","tenant":%d,"segment_type":"rule","description":"spent 100+, no order for 30 days"}`, s.tenantID)), nil, &seg); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if seg.Status != "draft" || seg.Version != 0 || string(seg.Definition) != "null" {
		t.Fatalf("new segment: %+v", seg)
	}

	def := `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100},{"type":"recency","event_type":"order_completed","operator":"gt","window_days":30}]}`

	// Preview: the seed's example, not saved.
	var pv struct {
		MatchedUsers  int64    `json:"matched_users"`
		SampleUserIDs []string `json:"sample_user_ids"`
		SQL           string   `json:"sql"`
	}
	if code := s.do(t, http.MethodPost, "/api/segments/preview/", bearer, []byte(`{"definition":`+def+`,"limit":5}`), nil, &pv); code != http.StatusOK {
		t.Fatalf("preview: %d", code)
	}
	if pv.MatchedUsers != 1 || len(pv.SampleUserIDs) != 1 || pv.SampleUserIDs[0] != "buyer1" || !strings.Contains(pv.SQL, "'order_completed'") {
		t.Fatalf("preview: %+v", pv)
	}
	// Invalid definitions point at the path.
	var bad struct {
		Error struct {
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if code := s.do(t, http.MethodPost, "/api/segments/preview/", bearer, []byte(`{"definition":{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":"lots"}]}}`), nil, &bad); code != http.StatusBadRequest || bad.Error.Fields["conditions[0].value"] == "" {
		t.Fatalf("invalid preview: %d %+v", code, bad)
	}

	// PATCH the definition: version 1, recomputed automatically.
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"definition":`+def+`}`), nil, &seg); code != http.StatusOK {
		t.Fatalf("patch: %d", code)
	}
	if seg.Version != 1 {
		t.Fatalf("version after patch: %d", seg.Version)
	}
	seg = s.waitSegment(t, bearer, seg.ID, 1)
	if seg.ComputedCount != 1 {
		t.Fatalf("computed_count %d, want 1", seg.ComputedCount)
	}

	// Compute on demand: 202 queued; a second request joins.
	var comp struct {
		Status     string `json:"status"`
		WorkflowID string `json:"workflow_id"`
	}
	if code := s.do(t, http.MethodPost, fmt.Sprintf("/api/segments/%d/compute/", seg.ID), bearer, nil, nil, &comp); code != http.StatusAccepted || comp.Status != "queued" {
		t.Fatalf("compute: %d %+v", code, comp)
	}
	if want := fmt.Sprintf("segment-compute:%d:%d", s.tenantID, seg.ID); comp.WorkflowID != want {
		t.Fatalf("workflow id %q, want %q", comp.WorkflowID, want)
	}
	s.waitSegment(t, bearer, seg.ID, 1)

	// Membership (secret key): first from the database, then cached; unknown users get [].
	type membership struct {
		UserID     string  `json:"user_id"`
		SegmentIDs []int64 `json:"segment_ids"`
		Cached     bool    `json:"cached"`
	}
	var m membership
	eventually(t, "membership cached", func() bool {
		m = membership{}
		s.do(t, http.MethodGet, "/api/segments/membership/?user_id=buyer1", sk, nil, nil, &m)
		return m.Cached
	})
	if len(m.SegmentIDs) != 1 || m.SegmentIDs[0] != seg.ID {
		t.Fatalf("membership of buyer1: %+v", m)
	}
	if code := s.do(t, http.MethodGet, "/api/segments/membership/?user_id=nobody", sk, nil, nil, &m); code != http.StatusOK || len(m.SegmentIDs) != 0 {
		t.Fatalf("membership of nobody: %d %+v", code, m)
	}
	if code := s.do(t, http.MethodGet, "/api/segments/membership/?user_id=buyer1", bearer, nil, nil, nil); code != http.StatusForbidden {
		t.Fatalf("membership with a bearer token: %d, want 403", code)
	}

	// Widen the definition (OR with a page view): version 2; the cache drops buyer1's entry.
	def2 := `{"logic":"OR","conditions":[` + def + `,{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"PRICING","window_days":7}]}`
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"definition":`+def2+`}`), nil, &seg); code != http.StatusOK {
		t.Fatalf("patch 2: %d", code)
	}
	seg = s.waitSegment(t, bearer, seg.ID, 2)
	if seg.ComputedCount != 2 {
		t.Fatalf("computed_count after widening %d, want 2", seg.ComputedCount)
	}
	eventually(t, "browser's membership visible", func() bool {
		m = membership{}
		s.do(t, http.MethodGet, "/api/segments/membership/?user_id=browser", sk, nil, nil, &m)
		return len(m.SegmentIDs) == 1
	})
	var diff int
	diff = countRows(t, s.dbURL, `SELECT count(*) FROM segment_member_changes WHERE segment_id = $1 AND entered AND user_id = 'browser'`, seg.ID)
	if diff != 1 {
		t.Fatalf("entered diff rows for browser: %d", diff)
	}

	// Members: keyset pages of 1.
	var page struct {
		Results []struct {
			UserID     string    `json:"user_id"`
			ComputedAt time.Time `json:"computed_at"`
		} `json:"results"`
		NextCursor *string `json:"next_cursor"`
		Count      int64   `json:"count"`
	}
	if code := s.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/members/?limit=1", seg.ID), bearer, nil, nil, &page); code != http.StatusOK || len(page.Results) != 1 || page.Results[0].UserID != "browser" || page.NextCursor == nil || page.Count != 2 {
		t.Fatalf("members page 1: %d %+v", code, page)
	}
	cursor := *page.NextCursor
	page.Results, page.NextCursor = nil, nil
	if code := s.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/members/?limit=1&cursor=%s", seg.ID, cursor), bearer, nil, nil, &page); code != http.StatusOK || len(page.Results) != 1 || page.Results[0].UserID != "buyer1" {
		t.Fatalf("members page 2: %d %+v", code, page)
	}
	if page.NextCursor != nil {
		t.Fatalf("next_cursor on the last page: %q", *page.NextCursor)
	}
	if code := s.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/members/?limit=1001", seg.ID), bearer, nil, nil, nil); code != http.StatusBadRequest {
		t.Fatalf("limit 1001: %d", code)
	}

	// Versions: newest first, with the count computed at each.
	var versions []struct {
		Version                int    `json:"version"`
		ComputedCountAtVersion *int64 `json:"computed_count_at_version"`
	}
	if code := s.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/versions/", seg.ID), bearer, nil, nil, &versions); code != http.StatusOK || len(versions) != 2 || versions[0].Version != 2 || versions[1].Version != 1 ||
		versions[0].ComputedCountAtVersion == nil || *versions[0].ComputedCountAtVersion != 2 || *versions[1].ComputedCountAtVersion != 1 {
		t.Fatalf("versions: %+v", versions)
	}

	// Export to parquet with a trait column, then download it twice (API and signed URL).
	type exportRecord struct {
		ExportID    int64   `json:"export_id"`
		Status      string  `json:"status"`
		RowCount    *int64  `json:"row_count"`
		DownloadURL *string `json:"download_url"`
	}
	var ex exportRecord
	if code := s.do(t, http.MethodPost, fmt.Sprintf("/api/segments/%d/export/", seg.ID), bearer, []byte(`{"format":"parquet","traits":["plan"]}`), nil, &ex); code != http.StatusAccepted || ex.ExportID == 0 {
		t.Fatalf("export: %d %+v", code, ex)
	}
	eventually(t, "export ready", func() bool {
		s.do(t, http.MethodGet, fmt.Sprintf("/api/segments/%d/export/?export_id=%d", seg.ID, ex.ExportID), bearer, nil, nil, &ex)
		if ex.Status == "error" {
			t.Fatalf("export failed")
		}
		return ex.Status == "ready"
	})
	if ex.RowCount == nil || *ex.RowCount != 2 || ex.DownloadURL == nil {
		t.Fatalf("ready export: %+v", ex)
	}
	file := s.download(t, fmt.Sprintf("/api/segments/exports/%d/download/", ex.ExportID), bearer)
	pf, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("downloaded parquet: %v", err)
	}
	if pf.NumRows() != 2 {
		t.Fatalf("parquet rows %d", pf.NumRows())
	}
	var names []string
	for _, f := range pf.Schema().Fields() {
		names = append(names, f.Name())
	}
	if strings.Join(names, ",") != "user_id,computed_at,plan" {
		t.Fatalf("parquet columns %v", names)
	}
	rows := make([]parquet.Row, 2)
	r := parquet.NewReader(bytes.NewReader(file))
	if n, _ := r.ReadRows(rows); n != 2 || rows[1][0].String() != "buyer1" || rows[1][2].String() != "pro" {
		t.Fatalf("parquet content: %d %v", n, rows)
	}
	signed := s.download(t, strings.TrimPrefix(*ex.DownloadURL, s.base), "")
	if !bytes.Equal(signed, file) {
		t.Fatal("the signed download_url serves a different file")
	}

	// ai segment: the local provider drafts a definition deterministically, saved as a draft.
	var aiSeg segmentRecord
	s.do(t, http.MethodPost, "/api/segments/", bearer, []byte(fmt.Sprintf(`{"name":"Recent spenders","tenant":%d,"segment_type":"ai","description":"spent over 100 on orders in the last 30 days"}`, s.tenantID)), nil, &aiSeg)
	if code := s.do(t, http.MethodPost, fmt.Sprintf("/api/segments/%d/draft/", aiSeg.ID), bearer, nil, nil, &aiSeg); code != http.StatusOK {
		t.Fatalf("draft: %d", code)
	}
	if aiSeg.Version != 1 || aiSeg.Status != "draft" || !strings.Contains(string(aiSeg.Definition), `"monetary"`) || !strings.Contains(string(aiSeg.Definition), `"window_days":30`) {
		t.Fatalf("drafted: %+v %s", aiSeg, aiSeg.Definition)
	}
	s.do(t, http.MethodPost, fmt.Sprintf("/api/segments/%d/compute/", aiSeg.ID), bearer, nil, nil, nil)
	if got := s.waitSegment(t, bearer, aiSeg.ID, 1); got.ComputedCount != 0 {
		// buyer2 spent 60 in the last 30 days, nobody more than 100.
		t.Fatalf("ai segment members %d, want 0", got.ComputedCount)
	}

	// refresh_every keeps a Temporal Schedule; off deletes it.
	var refreshed struct {
		RefreshEvery *string `json:"refresh_every"`
	}
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"refresh_every":"1h"}`), nil, &refreshed); code != http.StatusOK || refreshed.RefreshEvery == nil || *refreshed.RefreshEvery != "1h" {
		t.Fatalf("refresh_every: %d %+v", code, refreshed)
	}
	tc, err := client.Dial(client.Options{HostPort: s.temporal, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	sched := tc.ScheduleClient().GetHandle(context.Background(), fmt.Sprintf("segment-refresh:%d:%d", s.tenantID, seg.ID))
	desc, err := sched.Describe(context.Background())
	if err != nil {
		t.Fatalf("refresh schedule: %v", err)
	}
	if iv := desc.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != time.Hour {
		t.Fatalf("refresh schedule spec: %+v", desc.Schedule.Spec)
	}
	// A new interval updates the schedule in place (not deleted and created again).
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"refresh_every":"30m"}`), nil, &refreshed); code != http.StatusOK || refreshed.RefreshEvery == nil || *refreshed.RefreshEvery != "30m" {
		t.Fatalf("refresh_every 30m: %d %+v", code, refreshed)
	}
	desc2, err := sched.Describe(context.Background())
	if err != nil {
		t.Fatalf("refresh schedule after the change: %v", err)
	}
	if iv := desc2.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != 30*time.Minute {
		t.Fatalf("refresh schedule spec after the change: %+v", desc2.Schedule.Spec)
	}
	if !desc2.Info.CreatedAt.Equal(desc.Info.CreatedAt) || desc2.Schedule.Policy.Overlap != desc.Schedule.Policy.Overlap {
		t.Fatalf("the schedule was replaced, not updated: created %s then %s, overlap %v then %v",
			desc.Info.CreatedAt, desc2.Info.CreatedAt, desc.Schedule.Policy.Overlap, desc2.Schedule.Policy.Overlap)
	}
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"refresh_every":"off"}`), nil, &refreshed); code != http.StatusOK || refreshed.RefreshEvery != nil {
		t.Fatalf("refresh_every off: %d %+v", code, refreshed)
	}
	if _, err := sched.Describe(context.Background()); err == nil {
		t.Fatal("the refresh schedule survived refresh_every off")
	}
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"refresh_every":"2m"}`), nil, nil); code != http.StatusBadRequest {
		t.Fatalf("refresh_every 2m: %d, want 400", code)
	}

	// Tenant isolation: another tenant sees none of it.
	otherSK, otherToken := s.otherTenant(t, "other-shop")
	ob := "Bearer " + otherToken
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, fmt.Sprintf("/api/segments/%d/", seg.ID), ""},
		{http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), `{"name":"x"}`},
		{http.MethodDelete, fmt.Sprintf("/api/segments/%d/", seg.ID), ""},
		{http.MethodPost, fmt.Sprintf("/api/segments/%d/compute/", seg.ID), ""},
		{http.MethodGet, fmt.Sprintf("/api/segments/%d/members/", seg.ID), ""},
		{http.MethodPost, fmt.Sprintf("/api/segments/%d/export/", seg.ID), `{"format":"csv"}`},
		{http.MethodGet, fmt.Sprintf("/api/segments/%d/export/?export_id=%d", seg.ID, ex.ExportID), ""},
		{http.MethodGet, fmt.Sprintf("/api/segments/exports/%d/download/", ex.ExportID), ""},
		{http.MethodGet, fmt.Sprintf("/api/segments/%d/versions/", seg.ID), ""},
		{http.MethodPost, fmt.Sprintf("/api/segments/%d/draft/", aiSeg.ID), ""},
	} {
		if code := s.do(t, c.method, c.path, ob, []byte(c.body), nil, nil); code != http.StatusNotFound {
			t.Errorf("other tenant %s %s: %d, want 404", c.method, c.path, code)
		}
	}
	var list []segmentRecord
	if s.do(t, http.MethodGet, "/api/segments/", ob, nil, nil, &list); len(list) != 0 {
		t.Errorf("other tenant lists %d segments", len(list))
	}
	if s.do(t, http.MethodGet, "/api/segments/membership/?user_id=buyer1", "ApiKey "+otherSK, nil, nil, &m); len(m.SegmentIDs) != 0 {
		t.Errorf("membership leaks across tenants: %+v", m)
	}
	if code := s.do(t, http.MethodPost, "/api/segments/preview/", ob, []byte(`{"definition":`+def2+`}`), nil, &pv); code != http.StatusOK || pv.MatchedUsers != 0 {
		t.Errorf("other tenant's preview: %d %+v", code, pv)
	}
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"definition":{"conditions":[{"type":"in_segment","segment_id":`+fmt.Sprint(seg.ID)+`}]}}`), nil, nil); code != http.StatusBadRequest {
		t.Errorf("self-referencing in_segment: %d, want 400", code)
	}

	// Drafting is for ai segments: the drafting activity's check answers with its code.
	var draftErr struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if code := s.do(t, http.MethodPost, fmt.Sprintf("/api/segments/%d/draft/", seg.ID), bearer, nil, nil, &draftErr); code != http.StatusBadRequest || draftErr.Error.Code != "not_ai_segment" {
		t.Errorf("draft of a rule segment: %d %+v, want 400 not_ai_segment", code, draftErr)
	}

	// Delete (beyond the spec) removes members, its refresh schedule, and frees the cache.
	if code := s.do(t, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, []byte(`{"refresh_every":"1h"}`), nil, nil); code != http.StatusOK {
		t.Fatalf("refresh_every before the delete: %d", code)
	}
	if code := s.do(t, http.MethodDelete, fmt.Sprintf("/api/segments/%d/", seg.ID), bearer, nil, nil, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if _, err := sched.Describe(context.Background()); err == nil {
		t.Fatal("the refresh schedule survived the segment's deletion")
	}
	eventually(t, "membership emptied", func() bool {
		m = membership{}
		s.do(t, http.MethodGet, "/api/segments/membership/?user_id=buyer1", sk, nil, nil, &m)
		return len(m.SegmentIDs) == 0
	})
}

func (s *devStack) download(t *testing.T, path, authz string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.base+path, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}
