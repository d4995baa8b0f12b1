package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/ai/aitest"
	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagebuild"
)

// BenchmarkBuildFirstEvent measures the time from sending POST .../build/ to reading its first
// event, without the AI spend limiter and with it (rate limit and a budget, so both checks run,
// and the provider metered). It reports the median and p99 of that latency; the limiter's cost
// is the difference between the two.
func BenchmarkBuildFirstEvent(b *testing.B) {
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limiter=%v", limited), func(b *testing.B) {
			f := newFixture(b)
			model := aitest.New()
			model.After = &aitest.Step{Response: ai.ChatResponse{Content: "Nothing to change.", Usage: ai.Usage{PromptTokens: 900, CompletionTokens: 5}}}
			var provider ai.Provider = model
			var spend *aispend.Service
			if limited {
				var err error
				// 60 a window as by default, with a window short enough never to refuse here.
				if spend, err = aispend.New(f.db.Pool, time.Now, nil, nil, aispend.Config{RateLimit: 60, RateWindow: time.Microsecond}); err != nil {
					b.Fatal(err)
				}
				if err := spend.SetBudget(context.Background(), f.A.T.Slug, new(int64(1)<<40)); err != nil {
					b.Fatal(err)
				}
				provider = ai.NewMetered(model, spend)
			}
			svc := page.NewService(f.db.Pool, &fakePageGenerator{}, time.Now, nil, page.Options{PublicCacheTTL: -1})
			bs := pagebuild.NewService(f.db.Pool, svc, nil, provider, time.Now, nil, pagebuild.Options{})
			ts := serve(b, f.newServer(b, func(d *Deps) {
				d.Pages = &PagesDeps{Service: svc, Builder: bs}
				if spend != nil {
					d.Spend = spend
				}
			}))
			e := &buildEnv{pagesEnv: &pagesEnv{f: f, ts: ts, svc: svc}, builder: bs}
			p := e.builtPage(b, f.A, "bench")
			url := fmt.Sprintf("%s/api/ai-pages/pages/%d/build/", ts.URL, p.ID)
			client := ts.Client()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"message":"anything to change?"}`))
				req.Header = bearer(f.A)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					body, _ := io.ReadAll(resp.Body)
					b.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				rd := bufio.NewReader(resp.Body)
				for {
					line, err := rd.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.HasPrefix(line, "data: ") {
						break
					}
				}
				lat = append(lat, time.Since(start))
				_, _ = io.Copy(io.Discard, rd) // to done: the build's slot is free for the next
				resp.Body.Close()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-µs")
		})
	}
}
