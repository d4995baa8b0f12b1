package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/page"
)

// TestPagesAPIGenerationInput: a page of an AIQuery without searchable words is a 400 on query in
// the one error shape, naming the text (nothing started); GET shows the count of queued
// embeddings a generation waits for as pending_embeddings (null when none).
func TestPagesAPIGenerationInput(t *testing.T) {
	e := pagesServer(t, page.Options{})
	f, ts := e.f, e.ts
	bad := e.query(t, f.A, `{"text":"?! ..."}`)
	r := jsonCall(t, ts, http.MethodPost, "/api/ai-pages/pages/", bearer(f.A), fmt.Sprintf(`{"query":%d}`, bad.ID))
	var env errorEnvelope
	if r.Status != http.StatusBadRequest || json.Unmarshal(r.Body, &env) != nil || env.Error == nil ||
		!strings.Contains(env.Error.Fields["query"], `"?! ..." has no words the search can use`) {
		t.Fatalf("create from a query without words: %d %s", r.Status, r.Body)
	}
	if pages, _ := e.gen.calls(); len(pages) != 0 {
		t.Fatalf("generation started: %v", pages)
	}

	q := e.query(t, f.A, `{"text":"linen dresses"}`)
	p := e.page(t, f.A, fmt.Sprintf(`{"query":%d}`, q.ID))
	get := func() map[string]any {
		t.Helper()
		var body map[string]any
		ok(t, jsonCall(t, ts, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", p.ID), bearer(f.A), ""), http.StatusOK, &body)
		return body
	}
	if v, present := get()["pending_embeddings"]; !present || v != nil {
		t.Fatalf("pending_embeddings %v (present %v), want null", v, present)
	}
	if err := e.svc.SetPendingEmbeddings(context.Background(), f.A.T.ID, p.ID, 12); err != nil {
		t.Fatal(err)
	}
	if body := get(); body["pending_embeddings"] != 12.0 || body["status"] != page.StatusGenerating {
		t.Fatalf("while waiting: status %v, pending_embeddings %v", body["status"], body["pending_embeddings"])
	}
}
