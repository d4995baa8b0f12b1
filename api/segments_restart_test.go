package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

// flakyStarter fails its starts while down (Temporal unreachable, or the namespace without
// Cohort's search attributes) and counts those that succeed.
type flakyStarter struct {
	fuzzStarter
	mu      sync.Mutex
	down    bool
	started int
}

func (s *flakyStarter) Recompute(_ context.Context, tenantID, segmentID int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return "", fmt.Errorf("start segment recompute: %w: search attribute CohortTenant is not defined", errs.ErrUnavailable)
	}
	s.started++
	return fmt.Sprintf("segment-compute:%d:%d", tenantID, segmentID), nil
}

// A PATCH whose compute could not start answers 503 (the definition is stored, the segment is in
// error); the client's retry of the very same request starts the compute.
func TestSegmentPatchRetriedAfter503StartsCompute(t *testing.T) {
	f := newFixture(t)
	st := &flakyStarter{down: true}
	svc := segment.NewService(f.db.Gorm, f.db.Pool, time.Now, st)
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Segments = &SegmentsDeps{Service: svc} }))
	auth := bearer(f.A)

	r := send(t, ts, http.MethodPost, "/api/segments/", auth, strings.NewReader(fmt.Sprintf(`{"name":"Buyers","segment_type":"rule","tenant":%d}`, f.A.T.ID)))
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var seg struct {
		ID      int64  `json:"id"`
		Status  string `json:"status"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(r.Body, &seg); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/segments/%d/", seg.ID)
	body := (`{"definition":{"conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}],"logic":"and"}}`)

	r = send(t, ts, http.MethodPatch, path, auth, strings.NewReader(body))
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("PATCH with the start failing: %d %s, want 503", r.Status, r.Body)
	}
	st.mu.Lock()
	st.down = false
	st.mu.Unlock()

	r = send(t, ts, http.MethodPatch, path, auth, strings.NewReader(body))
	if r.Status != http.StatusOK {
		t.Fatalf("the same PATCH again: %d %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &seg); err != nil {
		t.Fatal(err)
	}
	if seg.Status != segment.StatusQueued || seg.Version != 1 || st.started != 1 {
		t.Fatalf("status %s version %d, %d computes started; want queued, version 1 (stored once), one compute", seg.Status, seg.Version, st.started)
	}
}
