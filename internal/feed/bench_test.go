package feed

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// merchantFeed writes a Google Merchant RSS 2.0 feed of n items as it goes (never the whole
// document in memory).
func merchantFeed(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
		bw := bufio.NewWriterSize(w, 64<<10)
		defer bw.Flush()
		fmt.Fprint(bw, `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:g="http://base.google.com/ns/1.0"><channel><title>Bench Outfitters</title><link>https://bench.example</link><description>bench</description>
`)
		colours := []string{"Forest Green", "Navy", "Sand", "Charcoal", "Rust"}
		kinds := []string{"Parka", "Trail Boot", "Merino Beanie", "Rain Shell", "Fleece Vest"}
		avail := []string{"in stock", "out of stock", "preorder"}
		for i := range n {
			c, k := colours[i%len(colours)], kinds[(i/5)%len(kinds)]
			fmt.Fprintf(bw, `<item><g:id>BN-%07d</g:id><g:title>%s %s %d</g:title>
<g:description>Recycled %s %s with taped seams, size run %d, made for cold and wet trail days.</g:description>
<g:link>https://bench.example/p/%d</g:link><g:image_link>https://cdn.bench.example/img/%d.jpg</g:image_link>
<g:availability>%s</g:availability><g:price>%d.%02d USD</g:price><g:brand>Bench &amp; Co</g:brand><g:condition>new</g:condition>
<g:gtin>%013d</g:gtin></item>
`, i, k, c, i, c, k, i%7, i, i, avail[i%len(avail)], 20+i%300, i%100, 840000000000+i)
		}
		fmt.Fprint(bw, "</channel></rss>\n")
	}
}

// BenchmarkFeedSync100k syncs a 100k-item Google Merchant XML feed, generated on the fly by a
// loopback server, into a fresh tenant's catalogue through Service.Sync (the code path of the
// FeedSync workflow's activity): every item is created and its embedding queued. It reports
// items/s and the peak Go heap and process RSS. COHORT_BENCH_FEED_ITEMS sets the item count:
//
//	go test ./internal/feed -run '^$' -bench BenchmarkFeedSync100k -benchtime 1x
//	COHORT_BENCH_FEED_ITEMS=20000 go test ./internal/feed -run '^$' -bench BenchmarkFeedSync100k -benchtime 1x
func BenchmarkFeedSync100k(b *testing.B) {
	n := 100_000
	if v := os.Getenv("COHORT_BENCH_FEED_ITEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("COHORT_BENCH_FEED_ITEMS=%q", v)
		}
	}
	db := testenv.OpenDB(b)
	ctx := context.Background()
	cat := catalog.NewService(db.Pool, time.Now)
	svc := NewService(db.Pool, cat, nil, time.Now, Options{AllowPrivate: true})
	srv := httptest.NewServer(merchantFeed(n))
	defer srv.Close()
	schema := catalog.Schema{Fields: []catalog.Field{
		{Name: "description", Type: catalog.TypeText, Searchable: true},
		{Name: "link", Type: catalog.TypeURL}, {Name: "image_link", Type: catalog.TypeImage},
		{Name: "availability", Type: catalog.TypeString, Facet: true}, {Name: "price", Type: catalog.TypePrice},
		{Name: "brand", Type: catalog.TypeString, Facet: true, Searchable: true}, {Name: "condition", Type: catalog.TypeString},
		{Name: "gtin", Type: catalog.TypeString},
	}}
	fieldMap := map[string]string{"g:id": "sku", "g:title": "name", "g:description": "description", "g:link": "link",
		"g:image_link": "image_link", "g:availability": "availability", "g:price": "price", "g:brand": "brand",
		"g:condition": "condition", "g:gtin": "gtin"}

	var peakHeap uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peakHeap = max(peakHeap, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		tenant := testenv.Tenant(b, db, fmt.Sprintf("bench-feed-%d-%d", i, time.Now().UnixNano()))
		if _, err := cat.PutSchema(ctx, tenant, schema); err != nil {
			b.Fatal(err)
		}
		f, err := svc.Create(ctx, tenant, Input{Name: "bench", URL: srv.URL + "/google.xml", Format: FormatXML, FieldMap: fieldMap})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		res, err := svc.Sync(ctx, tenant, f.ID, nil)
		total += time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if res.Created != n || res.Failed != 0 {
			b.Fatalf("sync %+v, want %d created (%v)", res.Counts, n, res.FailedItems)
		}
		if q := testenv.Count(b, db, `SELECT count(*) FROM product_embedding_queue WHERE tenant_id = $1`, tenant); q != int64(n) {
			b.Fatalf("%d embeddings queued, want %d", q, n)
		}
	}
	close(stop)
	<-sampled
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "items/s")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MiB") // Linux: KiB
	b.ReportMetric(0, "ns/op")
}
