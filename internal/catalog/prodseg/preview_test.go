package prodseg_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestProdsegPreviewRequestForms: the preview takes {"definition", "limit"} as the segment
// preview does, and the bare definition as before; limit bounds the sample of SKUs.
func TestProdsegPreviewRequestForms(t *testing.T) {
	f := newFixture(t)
	a := f.tenant("forms")
	f.putSchema(a, catalog.Field{Name: "color", Type: catalog.TypeString})
	var products []string
	for i := 1; i <= 120; i++ {
		products = append(products, fmt.Sprintf(`{"sku":"S%03d","name":"s","color":"red"}`, i))
	}
	f.bulk(a, products...)
	skus := func(n int) []string {
		out := []string{}
		for i := 1; i <= n; i++ {
			out = append(out, fmt.Sprintf("S%03d", i))
		}
		return out
	}

	ok := []struct {
		name, body string
		samples    int
	}{
		{"bare definition", redDef, 10},
		{"wrapped, no limit", `{"definition":` + redDef + `}`, 10},
		{"wrapped, limit null", `{"definition":` + redDef + `,"limit":null}`, 10},
		{"wrapped, limit 3", `{"limit":3,"definition":` + redDef + `}`, 3},
		{"wrapped, limit 0", `{"definition":` + redDef + `,"limit":0}`, 0},
		{"wrapped, limit 100", `{"definition":` + redDef + `,"limit":100}`, 100},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			pv := f.with(t).preview(a, tc.body)
			if pv.MatchedCount != 120 || !slices.Equal(pv.SampleSKUs, skus(tc.samples)) {
				t.Errorf("preview %d %v, want 120 and the first %d SKUs", pv.MatchedCount, pv.SampleSKUs, tc.samples)
			}
		})
	}

	bad := []struct {
		name, body string
		want       map[string]string
	}{
		{"limit below 0", `{"definition":` + redDef + `,"limit":-1}`, map[string]string{"limit": "from 0 to 100"}},
		{"limit above 100", `{"definition":` + redDef + `,"limit":101}`, map[string]string{"limit": "from 0 to 100"}},
		{"limit a fraction", `{"definition":` + redDef + `,"limit":1.5}`, map[string]string{"limit": "integer"}},
		{"limit a string", `{"definition":` + redDef + `,"limit":"5"}`, map[string]string{"limit": "integer"}},
		{"limit huge", `{"definition":` + redDef + `,"limit":1e300}`, map[string]string{"limit": "integer"}},
		{"definition null", `{"definition":null,"limit":5}`, map[string]string{"definition": "is required"}},
		{"an unknown key beside definition", `{"definition":` + redDef + `,"logic":"AND"}`, map[string]string{"logic": "not a field of a preview request"}},
		{"wrapped errors are keyed under definition", `{"definition":` + cond("size", "eq", `"M"`) + `}`,
			map[string]string{"definition.conditions[0].field": "not a field"}},
		{"a wrapped definition that is not an object", `{"definition":[1]}`, nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Preview(f.ctx, a, []byte(tc.body))
			if tc.want == nil {
				ve := validation(t, err)
				for k := range ve.Fields {
					if k != "definition" && !strings.HasPrefix(k, "definition.") {
						t.Errorf("field %q of a wrapped definition's error is not under definition", k)
					}
				}
				return
			}
			testenv.WantFieldErrors(t, err, tc.want)
		})
	}
}
