package aispend

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// BenchmarkAllow is the limiter's own cost, the one round trip an endpoint makes before it
// starts: a tenant with a budget (so its month's usage is summed, over a month of hourly rows)
// and the default rate of 60 a window. It reports the median and p99.
func BenchmarkAllow(b *testing.B) {
	db := testenv.OpenDB(b)
	tenant := testenv.Tenant(b, db, "bench")
	ctx := context.Background()
	// A month of usage: 30 days x 24 hours x 3 operations.
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: start}
	s, err := New(db.Pool, c.now, nil, nil, Config{RateLimit: 60, RateWindow: time.Microsecond})
	if err != nil {
		b.Fatal(err)
	}
	for h := range 30 * 24 {
		c.t = start.Add(time.Duration(h) * time.Hour)
		for _, op := range []string{ai.OpBuild, ai.OpPageCopy, ai.OpProductEmbed} {
			s.Record(ctx, ai.Call{Spend: ai.Spend{TenantID: tenant, Operation: op}, Model: "m", PromptTokens: 100, CompletionTokens: 10})
		}
	}
	s.now = time.Now
	for _, budget := range []*int64{nil, new(int64(1) << 40)} {
		name := "budget=none"
		if budget != nil {
			name = "budget=set"
		}
		b.Run(name, func(b *testing.B) {
			if err := s.SetBudget(ctx, "bench", budget); err != nil {
				b.Fatal(err)
			}
			benchAllow(b, s, tenant)
		})
	}
}

func benchAllow(b *testing.B, s *Service, tenant int64) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := s.Allow(ctx, tenant); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-µs")
}
