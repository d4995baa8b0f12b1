package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestStopUnderLoadKeepsPageViews: a real cohort dev process serves public page reads from
// concurrent clients and gets SIGTERM while they run; it stops taking requests, finishes those
// in flight, writes the last batch of view counts and exits, and the stored view_count equals
// the number of reads that were answered 200: none lost, none counted twice.
func TestStopUnderLoadKeepsPageViews(t *testing.T) {
	p := newDevProcess(t)
	p.start(t)
	tenantID, _ := p.createTenant(t)
	pool, err := pgxpool.New(context.Background(), p.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var pageID int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO generated_pages (tenant_id, slug, title, published, status)
		VALUES ($1, 'under-load', 'Under load', true, 'ready') RETURNING id`, tenantID).Scan(&pageID); err != nil {
		t.Fatal(err)
	}
	url := "http://" + p.addr + "/api/ai-pages/public/pages/shop/under-load/"

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	var ok, failed atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if i%2 == 0 {
					req.Header.Set("User-Agent", "GPTBot/1.1")
				}
				resp, err := client.Do(req)
				if err != nil { // the server stopped taking requests
					failed.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					return
				}
				if ok.Add(1) == 2000 {
					once.Do(func() { close(enough) })
				}
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(time.Minute):
		t.Fatalf("only %d reads answered within a minute", ok.Load())
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("cohort dev exited with %v after SIGTERM", err)
		}
		t.Logf("cohort dev stopped %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("cohort dev still running 30s after SIGTERM")
	}
	wg.Wait()
	var views, crawls int64
	if err := pool.QueryRow(context.Background(), `SELECT g.view_count, coalesce((SELECT sum(count) FROM page_ai_crawls WHERE page_id = g.id), 0)
		FROM generated_pages g WHERE g.id = $1`, pageID).Scan(&views, &crawls); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads answered 200 (%d clients stopped by the shutdown), view_count %d, GPTBot crawls %d", ok.Load(), failed.Load(), views, crawls)
	if views != ok.Load() {
		t.Fatalf("view_count %d, want %d (the reads answered 200)", views, ok.Load())
	}
	if crawls == 0 || crawls >= views {
		t.Fatalf("GPTBot crawls %d of %d views", crawls, views)
	}
}
