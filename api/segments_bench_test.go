package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/segment"
)

// BenchmarkMembershipLookup: GET /api/segments/membership/ through the real router, auth and the
// in-process cache, against a bare net/http handler answering static JSON, both over loopback
// HTTP/1.1 keep-alive connections from a second process. Reports req/s, p50 and p99.
func BenchmarkMembershipLookup(b *testing.B) {
	const users = 100_000
	f := newFixture(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := segment.NewService(f.db.Gorm, f.db.Pool, time.Now, nil) // lookups start no workflows
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at)
		SELECT $1, s, 'u' || g, now() FROM generate_series(1, $2::int) g, generate_series(1, 1 + g % 3) s`, f.A.T.ID, users); err != nil {
		b.Fatal(err)
	}
	cache := segment.NewMembershipCache(svc, f.db.Pool, slog.New(slog.DiscardHandler), segment.CacheOptions{})
	// The listener runs for the benchmark's lifetime; its error fails the benchmark, and it has
	// stopped before the database closes.
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- cache.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-cacheDone; err != nil {
			b.Errorf("membership cache: %v", err)
		}
	}()
	srv := f.newServer(b, func(d *Deps) { d.Segments = &SegmentsDeps{Service: svc, Cache: cache} })
	apiTS := httptest.NewServer(srv.Handler())
	defer apiTS.Close()
	static := []byte(`{"user_id":"u1","segment_ids":[1,2],"cached":true}`)
	bareTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(static)
	}))
	defer bareTS.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	get := func(url, authz string) error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	authz := "ApiKey " + f.A.SK
	// The looked-up working set: 10,000 users, warmed once (fills the cache) after the listener is up.
	const working = 10_000 // users u0, u7, u14, ...: the generator asks for u<7k>
	time.Sleep(200 * time.Millisecond)
	for i := range working {
		if err := get(fmt.Sprintf("%s/api/segments/membership/?user_id=u%d", apiTS.URL, i*7), authz); err != nil {
			b.Fatal(err)
		}
	}
	// The load comes from a second process (this test binary re-run as TestLoadGenerator), as
	// wrk would: 16 keep-alive connections for 5 s per target, as fast as possible or paced.
	run := func(b *testing.B, urlPattern string, keys int, authz string, rate int) {
		for b.Loop() {
			spec, _ := json.Marshal(loadSpec{URL: urlPattern, Keys: keys, Auth: authz, Clients: 16, Duration: 5 * time.Second, Rate: rate})
			cmd := exec.Command(os.Args[0], "-test.run=^TestLoadGenerator$", "-test.count=1")
			cmd.Env = append(os.Environ(), "COHORT_LOADGEN="+string(spec))
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("load generator: %v\n%s", err, out)
			}
			var res loadResult
			for _, line := range strings.Split(string(out), "\n") {
				if rest, ok := strings.CutPrefix(line, "LOADGEN "); ok {
					if err := json.Unmarshal([]byte(rest), &res); err != nil {
						b.Fatal(err)
					}
				}
			}
			if res.Requests == 0 || res.Errors > 0 {
				b.Fatalf("load generator: %+v\n%s", res, out)
			}
			b.ReportMetric(res.RPS, "req/s")
			b.ReportMetric(res.P99ms, "p99-ms")
			b.ReportMetric(res.P50ms, "p50-ms")
		}
	}
	// Saturated (throughput, the ratio to the bare handler), then paced at 12k req/s (latency at
	// the target rate).
	for _, rate := range []int{0, 12_000} {
		name := "max"
		if rate > 0 {
			name = fmt.Sprintf("at-%dk", rate/1000)
		}
		b.Run("bare-static-json/"+name, func(b *testing.B) { run(b, bareTS.URL+"/?k=%d", working, "", rate) })
		b.Run("api-membership-cached/"+name, func(b *testing.B) {
			run(b, apiTS.URL+"/api/segments/membership/?user_id=u%d", working, authz, rate)
		})
	}
}

type loadSpec struct {
	URL      string // with one %d, filled with 7*(i mod Keys)
	Keys     int
	Auth     string
	Clients  int
	Duration time.Duration
	Rate     int // total requests per second, paced evenly over the clients; 0: as fast as possible
}

type loadResult struct {
	Requests, Errors  int
	RPS, P50ms, P99ms float64
}

// TestLoadGenerator is BenchmarkMembershipLookup's load generator, run in a second process.
func TestLoadGenerator(t *testing.T) {
	raw := os.Getenv("COHORT_LOADGEN")
	if raw == "" {
		t.Skip("the load generator of BenchmarkMembershipLookup")
	}
	var spec loadSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: spec.Clients, MaxConnsPerHost: spec.Clients}}
	var next atomic.Int64
	var errCount atomic.Int64
	lat := make([][]time.Duration, spec.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(spec.Duration)
	// Paced: each client's k-th request is due at a fixed moment of the schedule, and its
	// latency counts from that moment, not from when it was sent: a stalled server delays the
	// requests due meanwhile, which shows in p99 (as a closed loop timed from the send would hide).
	var interval time.Duration
	if spec.Rate > 0 {
		interval = time.Duration(spec.Clients) * time.Second / time.Duration(spec.Rate)
	}
	for c := range spec.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				t0 := time.Now()
				if interval > 0 {
					t0 = start.Add(time.Duration(c)*interval/time.Duration(spec.Clients) + time.Duration(k)*interval)
					if t0.Sub(start) >= spec.Duration {
						return
					}
					time.Sleep(time.Until(t0))
				} else if !t0.Before(deadline) {
					return
				}
				i := next.Add(1)
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf(spec.URL, 7*(i%int64(spec.Keys))), nil)
				if spec.Auth != "" {
					req.Header.Set("Authorization", spec.Auth)
				}
				resp, err := client.Do(req)
				if err != nil {
					errCount.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errCount.Add(1)
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	// Throughput is what completed over the time it actually took (the schedule may overrun).
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	res := loadResult{Requests: len(all), Errors: int(errCount.Load()), RPS: float64(len(all)) / elapsed.Seconds()}
	if len(all) > 0 {
		res.P50ms = float64(all[len(all)/2].Microseconds()) / 1000
		res.P99ms = float64(all[len(all)*99/100].Microseconds()) / 1000
	}
	out, _ := json.Marshal(res)
	fmt.Printf("LOADGEN %s\n", out)
}
