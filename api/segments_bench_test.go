package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/segment"
)

// BenchmarkMembershipLookup: GET /api/segments/membership/ through the real router, auth and the
// in-process cache, against a bare net/http handler answering static JSON, both over loopback
// HTTP/1.1 keep-alive connections from 8 concurrent clients. Reports req/s and p99.
func BenchmarkMembershipLookup(b *testing.B) {
	const users = 100_000
	f := newFixture(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := segment.NewService(f.db.Gorm, f.db.Pool, time.Now)
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at)
		SELECT $1, s, 'u' || g, now() FROM generate_series(1, $2::int) g, generate_series(1, 1 + g % 3) s`, f.A.T.ID, users); err != nil {
		b.Fatal(err)
	}
	cache := segment.NewMembershipCache(svc, f.db.Pool, slog.New(slog.DiscardHandler), segment.CacheOptions{})
	go func() { _ = cache.Run(ctx) }()
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
	const working = 10_000
	time.Sleep(200 * time.Millisecond)
	for i := range working {
		if err := get(fmt.Sprintf("%s/api/segments/membership/?user_id=u%d", apiTS.URL, i*7), authz); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, url func(i int64) string, authz string) {
		const clients = 8
		var next atomic.Int64
		lat := make([][]time.Duration, clients)
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						return
					}
					t0 := time.Now()
					if err := get(url(i), authz); err != nil {
						b.Error(err)
						return
					}
					lat[c] = append(lat[c], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		if len(all) > 0 {
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		}
	}
	b.Run("bare-static-json", func(b *testing.B) {
		run(b, func(int64) string { return bareTS.URL + "/" }, "")
	})
	b.Run("api-membership-cached", func(b *testing.B) {
		run(b, func(i int64) string {
			return fmt.Sprintf("%s/api/segments/membership/?user_id=u%d", apiTS.URL, (i%working)*7)
		}, authz)
	})
}
