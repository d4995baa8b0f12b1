package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/block"
)

// TestListBlocks: the handler renders the registry, all six types in the registry's order.
func TestListBlocks(t *testing.T) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/ai-pages/blocks/", nil)
	(&Server{}).listBlocks(c)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	want, err := json.Marshal(block.Registry())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(w.Body.Bytes()), want) {
		t.Fatalf("body\n%s\nwant\n%s", w.Body.Bytes(), want)
	}
	var got []struct {
		Type        string                    `json:"type"`
		Label       string                    `json:"label"`
		Description string                    `json:"description"`
		PropsSchema map[string]map[string]any `json:"props_schema"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"hero", "product_grid", "text_section", "cta_banner", "feature_list", "testimonial"}
	if len(got) != len(wantTypes) {
		t.Fatalf("%d entries, want %d", len(got), len(wantTypes))
	}
	for i, e := range got {
		if e.Type != wantTypes[i] || e.Label == "" || e.Description == "" || len(e.PropsSchema) == 0 {
			t.Errorf("entry %d: %+v", i, e)
		}
		for name, p := range e.PropsSchema {
			if _, ok := p["type"].(string); !ok {
				t.Errorf("%s.%s has no type: %v", e.Type, name, p)
			}
			if _, ok := p["required"].(bool); !ok {
				t.Errorf("%s.%s has no required: %v", e.Type, name, p)
			}
		}
	}
	if got[1].PropsSchema["columns"]["default"] != 3.0 {
		t.Errorf("product_grid.columns default %v, want 3", got[1].PropsSchema["columns"]["default"])
	}
}

// TestBlocksRoute: GET /api/ai-pages/blocks/ through the real router answers Bearer tokens and
// secret keys with the registry, and refuses a missing credential (401) and a session token (403).
func TestBlocksRoute(t *testing.T) {
	f := newFixture(t)
	s := f.newServer(t, allRouteGroups)
	registered := false
	for _, r := range s.Routes() {
		if r.Method == http.MethodGet && r.Path == "/api/ai-pages/blocks/" {
			registered = true
		}
	}
	if !registered {
		t.Fatal("GET /api/ai-pages/blocks/ is not registered (s.require(policyPages), s.listBlocks)")
	}
	ts := serve(t, s)
	want, err := json.Marshal(block.Registry())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		h      http.Header
		status int
	}{
		{"bearer", bearer(f.A), http.StatusOK},
		{"secret key", hdr("Authorization", "ApiKey "+f.A.SK), http.StatusOK},
		{"no credential", nil, http.StatusUnauthorized},
		{"session token", hdr("Authorization", "Bearer "+f.A.Session), http.StatusForbidden},
		{"public key", hdr("Authorization", "ApiKey "+f.A.PK), http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, ts, http.MethodGet, "/api/ai-pages/blocks/", tc.h, nil)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.status == http.StatusOK && !bytes.Equal(bytes.TrimSpace(r.Body), want) {
				t.Fatalf("body\n%s\nwant\n%s", r.Body, want)
			}
		})
	}
}
