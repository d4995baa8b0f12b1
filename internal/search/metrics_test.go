package search

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestIndexCollector: the gauges read what the index holds: vectors, heap bytes within the
// budget, file bytes and the budget.
func TestIndexCollector(t *testing.T) {
	ix := NewEmbedded(nil, nil, time.Now, IndexConfig{MaxBytes: 1 << 20})
	rng := rand.New(rand.NewPCG(1, 2))
	v := newVectors(384, 100)
	for i := range 100 {
		if err := v.upsert(int64(i+1), randomUnit(rng, 384)); err != nil {
			t.Fatal(err)
		}
	}
	s := &tenantSet{key: setKey{1, model, 384}, v: v}
	ix.sets[s.key] = s
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewIndexCollector(ix))
	for name, want := range map[string]float64{
		"cohort_search_index_vectors":           100,
		"cohort_search_index_bytes":             float64(v.bytes()),
		"cohort_search_index_file_bytes":        100 * 384 * 4,
		"cohort_search_index_budget_bytes":      1 << 20,
		"cohort_search_index_sets":              1,
		"cohort_search_index_loads_in_progress": 0,
		"cohort_search_index_loads_total":       0,
	} {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fams {
			if f.GetName() == name {
				found = true
				m := f.GetMetric()[0]
				got := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				if got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
		}
		if !found {
			t.Errorf("%s not exported", name)
		}
	}
	if fams, err := reg.Gather(); err != nil || len(fams) != 9 {
		t.Errorf("%d families (%v), want 9", len(fams), err)
	}
	s.drop()
	if st := ix.Stats(); st.Sets != 0 || st.FileBytes != 0 {
		t.Errorf("stats %+v after the drop", st)
	}
}
