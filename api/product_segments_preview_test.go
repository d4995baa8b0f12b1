package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestProductSegmentPreviewForms: POST /api/product-segments/preview/ takes {definition, limit}
// as POST /api/segments/preview/ does, and the bare definition as before; a limit outside 0..100
// or of another type is a 400 keyed by limit.
func TestProductSegmentPreviewForms(t *testing.T) {
	e := productSegmentServer(t)
	f, ts := e.f, e.ts
	redDef := `{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`
	type preview struct {
		MatchedCount int64    `json:"matched_count"`
		SampleSKUs   []string `json:"sample_skus"`
		SQL          string   `json:"sql"`
	}
	reds := "P01,P02,P04,P05,P07,P08,P10,P11"
	for _, tc := range []struct {
		name, body, samples string
	}{
		{"bare definition", redDef, reds},
		{"wrapped without a limit", `{"definition":` + redDef + `}`, reds},
		{"wrapped with a limit", `{"definition":` + redDef + `,"limit":3}`, "P01,P02,P04"},
		{"wrapped with limit 0", `{"limit":0,"definition":` + redDef + `}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pv preview
			ok(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", bearer(f.A), tc.body), http.StatusOK, &pv)
			if pv.MatchedCount != 8 || strings.Join(pv.SampleSKUs, ",") != tc.samples || pv.SampleSKUs == nil || !strings.Contains(pv.SQL, "p.tenant_id = $1") {
				t.Errorf("preview %+v, want 8 matches and samples %q", pv, tc.samples)
			}
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"limit -1", `{"definition":` + redDef + `,"limit":-1}`},
		{"limit 101", `{"definition":` + redDef + `,"limit":101}`},
		{"limit 2.5", `{"definition":` + redDef + `,"limit":2.5}`},
		{"limit as a string", `{"definition":` + redDef + `,"limit":"3"}`},
		{"limit true", `{"definition":` + redDef + `,"limit":true}`},
		{"limit 1e400", `{"definition":` + redDef + `,"limit":1e400}`},
	} {
		t.Run("bad "+tc.name, func(t *testing.T) {
			wantError(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", bearer(f.A), tc.body), http.StatusBadRequest, "validation_failed", "limit")
		})
	}
	// The raw body follows the API's one UTF-8 rule (checkJSONText), named by its path.
	for _, bad := range []string{`\ud800`, "\xff"} {
		t.Run("value not UTF-8 "+strings.ToValidUTF8(bad, "?"), func(t *testing.T) {
			body := `{"definition":{"conditions":[{"field":"color","operator":"eq","value":"r` + bad + `"}]}}`
			e := wantError(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", bearer(f.A), body),
				http.StatusBadRequest, "invalid_json", "definition.conditions[0].value")
			if e.Fields["definition.conditions[0].value"] != "must be valid UTF-8" {
				t.Errorf("fields %v", e.Fields)
			}
		})
	}
	t.Run("an unknown key beside definition", func(t *testing.T) {
		wantError(t, jsonCall(t, ts, http.MethodPost, "/api/product-segments/preview/", bearer(f.A), `{"definition":`+redDef+`,"sample":3}`),
			http.StatusBadRequest, "validation_failed", "sample")
	})
}
