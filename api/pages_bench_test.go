package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// Settings of BenchmarkPublicPage's load generator (environment variables of the benchmark run;
// the target is set by the benchmark for the process it starts).
const (
	envLoadTarget  = "COHORT_BENCH_PAGES_TARGET"  // URL to read (set by the benchmark)
	envLoadConns   = "COHORT_BENCH_PAGES_CONNS"   // keep-alive connections
	envLoadSeconds = "COHORT_BENCH_PAGES_SECONDS" // how long one load run lasts
	loadMarker     = "PAGES_LOAD_RESULT "
)

type pagesLoadResult struct {
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Seconds  float64 `json:"seconds"`
}

// TestPagesLoadGenerator is BenchmarkPublicPage's second process: the benchmark runs this test
// binary again with envLoadTarget set, and this test reads the target over envLoadConns
// keep-alive connections for envLoadSeconds, then prints the count of successful reads as JSON
// after loadMarker. Without envLoadTarget it does nothing.
func TestPagesLoadGenerator(t *testing.T) {
	target := os.Getenv(envLoadTarget)
	if target == "" {
		t.Skip("the load generator of BenchmarkPublicPage; runs only in the process the benchmark starts")
	}
	conns := testenv.EnvInt(t, envLoadConns, 16)
	dur := time.Duration(testenv.EnvInt(t, envLoadSeconds, 3)) * time.Second
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var requests, failures atomic.Int64
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				resp, err := client.Get(target)
				if err != nil {
					failures.Add(1)
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					failures.Add(1)
					continue
				}
				requests.Add(1)
			}
		}()
	}
	wg.Wait()
	out, _ := json.Marshal(pagesLoadResult{Requests: requests.Load(), Errors: failures.Load(), Seconds: time.Since(start).Seconds()})
	fmt.Println(loadMarker + string(out))
}

// runPagesLoad starts the load generator process against target and returns what it measured.
func runPagesLoad(b *testing.B, target string) pagesLoadResult {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPagesLoadGenerator$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envLoadTarget+"="+target)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("load generator: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), loadMarker); ok {
			var r pagesLoadResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				b.Fatalf("load generator result %q: %v", line, err)
			}
			return r
		}
	}
	b.Fatalf("load generator printed no result:\n%s", out)
	return pagesLoadResult{}
}

// BenchmarkPublicPage: public page reads (GET /api/ai-pages/public/pages/{tenant}/{page}/) through
// the real router on a loopback listener, the load from a second process (this test binary run
// again as TestPagesLoadGenerator: COHORT_BENCH_PAGES_CONNS keep-alive connections for
// COHORT_BENCH_PAGES_SECONDS per iteration). counting=off serves the same route with view
// counting disabled; counting=on also reports its throughput as a fraction of counting=off's
// (x_of_off) when both ran, and checks that view_count grew by exactly the reads served.
func BenchmarkPublicPage(b *testing.B) {
	f := newFixture(b)
	slug := benchPublishedPage(b, f)
	path := "/api/ai-pages/public/pages/" + f.A.T.Slug + "/" + slug + "/"

	ctx := context.Background()
	rates := map[string]float64{}
	for _, counting := range []bool{false, true} {
		name := map[bool]string{false: "counting=off", true: "counting=on"}[counting]
		b.Run(name, func(b *testing.B) {
			svc := page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{DisableViewCounting: !counting})
			rctx, stopCounter := context.WithCancel(ctx)
			counterDone := make(chan error, 1)
			go func() { counterDone <- svc.Run(rctx) }()
			srv := &http.Server{Handler: New(Deps{Auth: f.authenticator(nil, 0), Pages: &PagesDeps{Service: svc}}).Handler()}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			target := "http://" + ln.Addr().String() + path
			viewsBefore := testenv.Count(b, f.db, `SELECT view_count FROM generated_pages WHERE tenant_id = $1 AND slug = $2`, f.A.T.ID, slug)

			var total pagesLoadResult
			b.ResetTimer()
			for range b.N {
				r := runPagesLoad(b, target)
				total.Requests += r.Requests
				total.Errors += r.Errors
				total.Seconds += r.Seconds
			}
			b.StopTimer()
			_ = srv.Shutdown(ctx)
			stopCounter()
			if err := <-counterDone; err != nil {
				b.Fatal(err)
			}
			if total.Errors > 0 {
				b.Errorf("%d reads failed", total.Errors)
			}
			rate := float64(total.Requests) / total.Seconds
			rates[name] = rate
			b.ReportMetric(rate, "req/s")
			b.ReportMetric(0, "ns/op")
			if counting {
				views := testenv.Count(b, f.db, `SELECT view_count FROM generated_pages WHERE tenant_id = $1 AND slug = $2`, f.A.T.ID, slug)
				if views-viewsBefore != total.Requests {
					b.Errorf("view_count grew by %d for %d reads", views-viewsBefore, total.Requests)
				}
				if off, ok := rates["counting=off"]; ok && off > 0 {
					b.ReportMetric(rate/off, "x_of_off")
				}
			}
		})
	}
}
