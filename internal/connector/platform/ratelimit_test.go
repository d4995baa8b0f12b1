package platform_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector/braze"
	"github.com/cohort-dev/cohort/internal/connector/klaviyo"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/talonone"
)

// TestMaxPerMinute checks the minute bound analytically: whatever the timing, the buckets let
// through at most MaxPerMinute requests in any minute, and that is under the platform's Steady
// budget (with the documented 15% margin when the budget is large enough for it to matter).
func TestMaxPerMinute(t *testing.T) {
	cases := []struct {
		name  string
		limit platform.Limit
		want  float64
	}{
		// per-second bucket 5 + 4.5/s; per-minute bucket min(15, 10) + 150*0.85/60 per second
		{"klaviyo 10/s 150/min", platform.Limit{Burst: 10, Steady: 150}, 10 + 127.5},
		{"75/s 700/min", platform.Limit{Burst: 75, Steady: 700}, 70 + 595},
		{"500/s 30000/min: the per-second bucket is the tighter", platform.Limit{Burst: 500, Steady: 30000}, 250 + 225*60},
		{"20/s 600/min", platform.Limit{Burst: 20, Steady: 600}, 20 + 510},
		{"burst only", platform.Limit{Burst: 10}, 5 + 270},
		{"steady only", platform.Limit{Steady: 60}, 6 + 51},
		{"no limit", platform.Limit{}, math.Inf(1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := platform.NewLimiter(tc.limit).MaxPerMinute()
			if math.Abs(got-tc.want) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
				t.Errorf("MaxPerMinute %v, want %v", got, tc.want)
			}
			if tc.limit.Steady > 0 && got > 0.95*float64(tc.limit.Steady)+1e-6 {
				t.Errorf("MaxPerMinute %v exceeds 95%% of the steady budget %d", got, tc.limit.Steady)
			}
			if tc.limit.Steady == 0 && tc.limit.Burst > 0 && got > 60*float64(tc.limit.Burst) {
				t.Errorf("MaxPerMinute %v exceeds 60 bursts", got)
			}
		})
	}
	// The adapters' own limits stay under their minute budgets.
	for name, l := range map[string]platform.Limit{
		"klaviyo import jobs": klaviyo.LimitImportJobs, "klaviyo lists": klaviyo.LimitLists, "klaviyo profiles": klaviyo.LimitProfiles,
		"braze track": braze.LimitTrack, "talon.one audiences": talonone.LimitAudiences,
	} {
		if got := platform.NewLimiter(l).MaxPerMinute(); l.Steady > 0 && got > 0.95*float64(l.Steady)+1e-6 {
			t.Errorf("%s %+v: %v per minute, over 95%% of its steady budget", name, l, got)
		}
	}
}

// maxInWindow is the most of the sorted times that fall in any window [t, t+w).
func maxInWindow(times []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range times {
		for times[i].Sub(times[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// TestLimiterPerSecondBound measures the per-second bound: requests sent as fast as the limiter
// allows, from one caller and from several at once, never exceed Burst in any second.
func TestLimiterPerSecondBound(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	cases := []struct {
		name    string
		callers int
		run     time.Duration
	}{
		{"one caller", 1, 1500 * time.Millisecond},
		{"eight callers", 8, 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := platform.NewLimiter(platform.Limit{Burst: 10, Steady: 150})
			ctx, cancel := context.WithTimeout(context.Background(), tc.run)
			defer cancel()
			start := time.Now()
			var mu sync.Mutex
			var times []time.Time
			var wg sync.WaitGroup
			for range tc.callers {
				wg.Go(func() {
					for lim.Wait(ctx) == nil {
						mu.Lock()
						times = append(times, time.Now())
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
			if n := maxInWindow(times, time.Second); n > 10 {
				t.Errorf("%d requests in one second, want at most 10 (times %v)", n, offsets(start, times))
			}
			// The limiter does let the burst through at once, and keeps going.
			if len(times) < 5 || times[4].Sub(start) > 100*time.Millisecond {
				t.Errorf("the first 5 requests took %v, want them at once (times %v)", offsets(start, times), offsets(start, times))
			}
			// From a full start, at most min(5 + 4.5 t, 10 + 2.125 t) requests by t.
			if bound := int(math.Min(5+4.5*tc.run.Seconds(), 10+2.125*tc.run.Seconds())); len(times) > bound {
				t.Errorf("%d requests in %v, want at most %d", len(times), tc.run, bound)
			}
		})
	}
}

func offsets(start time.Time, times []time.Time) []string {
	out := make([]string, len(times))
	for i, t := range times {
		out[i] = fmt.Sprintf("%dms", t.Sub(start).Milliseconds())
	}
	return out
}

func TestLimiterWait(t *testing.T) {
	t.Run("zero limit never waits", func(t *testing.T) {
		lim := platform.NewLimiter(platform.Limit{})
		start := time.Now()
		for range 1000 {
			if err := lim.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("1000 waits took %v", d)
		}
	})
	t.Run("nil limiter never waits", func(t *testing.T) {
		var lim *platform.Limiter
		if err := lim.Wait(context.Background()); err != nil {
			t.Errorf("nil limiter: %v", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		lim := platform.NewLimiter(platform.Limit{Burst: 2, Steady: 60})
		ctx, cancel := context.WithCancel(context.Background())
		if err := lim.Wait(ctx); err != nil { // the one token of the burst
			t.Fatal(err)
		}
		cancel()
		if err := lim.Wait(ctx); err == nil {
			t.Errorf("Wait with a cancelled context and an empty bucket returned nil")
		}
	})
	t.Run("deadline shorter than the wait", func(t *testing.T) {
		lim := platform.NewLimiter(platform.Limit{Burst: 2, Steady: 60})
		_ = lim.Wait(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := lim.Wait(ctx); err == nil {
			t.Errorf("Wait returned nil though the next token is over a second away")
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Wait took %v to give up", d)
		}
	})
}

func TestLimitersGet(t *testing.T) {
	r := platform.NewLimiters()
	a := r.Get("klaviyo:1:lists", platform.Limit{Burst: 10, Steady: 150})
	cases := []struct {
		name  string
		key   string
		limit platform.Limit
		same  bool
	}{
		{"same key", "klaviyo:1:lists", platform.Limit{Burst: 10, Steady: 150}, true},
		{"same key, other limit: the first one stays", "klaviyo:1:lists", platform.Limit{Burst: 1}, true},
		{"other group", "klaviyo:1:profiles", platform.Limit{Burst: 10, Steady: 150}, false},
		{"other connector", "klaviyo:2:lists", platform.Limit{Burst: 10, Steady: 150}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Get(tc.key, tc.limit); (got == a) != tc.same || got == nil {
				t.Errorf("Get(%q) same=%v, want %v", tc.key, got == a, tc.same)
			}
		})
	}
	if got := r.Get("klaviyo:1:lists", platform.Limit{Burst: 1}).MaxPerMinute(); got != 137.5 {
		t.Errorf("the limiter of the key has %v per minute, want the first Limit's 137.5", got)
	}

	t.Run("concurrent first use makes one limiter", func(t *testing.T) {
		r := platform.NewLimiters()
		got := make([]*platform.Limiter, 32)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() { got[i] = r.Get("braze:7:track", braze.LimitTrack) })
		}
		wg.Wait()
		for i, l := range got {
			if l == nil || l != got[0] {
				t.Fatalf("goroutine %d got another limiter", i)
			}
		}
	})
	t.Run("nil registry gives fresh limiters", func(t *testing.T) {
		var r *platform.Limiters
		a, b := r.Get("k", platform.Limit{Burst: 4}), r.Get("k", platform.Limit{Burst: 4})
		if a == nil || b == nil || a == b {
			t.Errorf("nil registry: %p %p, want two distinct limiters", a, b)
		}
	})
	t.Run("shared limiter: two adapters of one connector share the budget", func(t *testing.T) {
		r := platform.NewLimiters()
		l1 := r.Get("talon_one:3:audiences", platform.Limit{Burst: 2, Steady: 60})
		l2 := r.Get("talon_one:3:audiences", platform.Limit{Burst: 2, Steady: 60})
		// Burst 2 holds one token: the first Wait takes it, the second must wait ~1.1s.
		if err := l1.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := l2.Wait(ctx); err == nil {
			t.Errorf("the second user of the key got a token at once (%v): the bucket is not shared", err)
		}
	})
}
