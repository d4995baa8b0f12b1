package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// batchBody is a realistic 500-event batch (~110 KB).
func batchBody() []byte {
	events := make([]map[string]any, 500)
	now := time.Now().UTC()
	for i := range events {
		events[i] = map[string]any{
			"user_id":     "user-" + strconv.Itoa(i*7919%100000),
			"event_type":  []string{"page_viewed", "order_completed", "add_to_cart"}[i%3],
			"occurred_at": now.Add(-time.Duration(i) * time.Second).Format(time.RFC3339Nano),
			"payload":     map[string]any{"amount": 12.5 + float64(i), "currency": "EUR", "sku": "SKU-" + strconv.Itoa(i), "path": "/products/" + strconv.Itoa(i)},
		}
	}
	b, _ := json.Marshal(map[string]any{"events": events})
	return b
}

// bareHandler is the baseline: read the body, decode and validate its events with the batch
// endpoint's own decoder (ingest.DecodeBatch), answer 202. No router, authentication, error log
// or publish: the ratio of the two is what the endpoint adds to decoding.
func bareHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, ingest.MaxBatchBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	events, rejected, err := ingest.DecodeBatch(body, ingest.Caller{TenantID: 1}, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = fmt.Fprintf(w, `{"queued":%d,"skipped":%d,"errors":[]}`, len(events), len(rejected))
}

// ingestServer is the real API (router, auth, validation, publish) without the loader, as cohort
// serve runs it, on the bus of kind: "pubsub" publishes to pstest, "nats" to NATS JetStream
// embedded in this process with file storage, as cohort dev runs it.
func ingestServer(b *testing.B, kind string) (http.Handler, string) {
	ctx := context.Background()
	env := map[string]string{"DATABASE_URL": testenv.Database(b), "COHORT_SECRET_KEY": testSecret, "COHORT_WAREHOUSE": "postgres", "COHORT_BLOB_STORE": "local", "COHORT_DATA_DIR": b.TempDir(), "COHORT_PUBLIC_URL": "http://127.0.0.1"}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	var emb embeddedBus
	// Nothing pulls here, so what is published piles up: pstest keeps every message (and a copy
	// per subscription) in this process, gigabytes over the whole benchmark, whose garbage
	// collection the later runs' latencies paid for; JetStream would fill its stream on disk.
	// Drop them as they come, on both.
	var drop func()
	switch kind {
	case "pubsub":
		srv, opts, err := bus.StartEmbeddedPubSub()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		emb.pubsub = opts
		cfg.Bus = "pubsub"
		cfg.PubSub = config.PubSubConfig{Project: "bench", Topic: "events", Subscription: "loader"}
		drop = srv.Server().ClearMessages
	case "nats":
		srv, err := bus.StartEmbeddedNATS(bus.EmbeddedNATSOptions{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Shutdown)
		emb.nats = srv
		cfg.Bus = "nats"
		n, err := bus.OpenNATS(ctx, bus.NATSConfig{InProcess: srv}, logger)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = n.Close() })
		drop = func() {
			if err := n.Purge(ctx); err != nil {
				b.Error(err)
			}
		}
	default:
		b.Fatalf("unknown bus %q", kind)
	}
	c, err := openCore(ctx, cfg, logger, coreOptions{blob: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.close)
	in, err := c.openIngestion(ctx, emb)
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				drop()
			}
		}
	}()
	b.Cleanup(func() { close(stop) })
	created, err := c.tenants.Create(ctx, "bench", "")
	if err != nil {
		b.Fatal(err)
	}
	return api.New(c.apiDeps(nil, in, nil, nil)).Handler(), created.SecretKey
}

// BenchmarkIngestBatch compares, in one run, the batch endpoint (publish included) with a bare
// decode+validate handler, both over loopback HTTP with 2 and 8 concurrent clients (in this process, so
// they share the machine's 2 cores with the server). The endpoint runs on each bus: batch_endpoint
// publishes to pstest, batch_endpoint_jetstream to NATS JetStream embedded with file storage (the
// durable bus of cohort dev). Metrics: events/s and the p99 latency of one 500-event request.
func BenchmarkIngestBatch(b *testing.B) {
	body := batchBody()
	onPubSub, key := ingestServer(b, "pubsub")
	onNATS, natsKey := ingestServer(b, "nats")
	for _, tc := range []struct {
		name string
		h    http.Handler
		key  string
	}{{"bare_decode_validate", http.HandlerFunc(bareHandler), key}, {"batch_endpoint", onPubSub, key}, {"batch_endpoint_jetstream", onNATS, natsKey}} {
		key := tc.key
		for _, par := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/clients=%d", tc.name, 2*par), func(b *testing.B) {
				srv := httptest.NewServer(tc.h)
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
				var mu sync.Mutex
				lat := make([]time.Duration, 0, b.N)
				b.SetParallelism(par) // par x GOMAXPROCS(2) clients
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/ingestion/track/batch/", bytes.NewReader(body))
						req.Header.Set("Authorization", "ApiKey "+key)
						req.Header.Set("Content-Type", "application/json")
						start := time.Now()
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						d := time.Since(start)
						if resp.StatusCode != http.StatusAccepted {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
				b.StopTimer()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "events/s")
				if len(lat) > 0 {
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				}
			})
		}
		// Latency under a steady load rather than at saturation (where every closed-loop client
		// waits behind the others and p99 is the queue length, for the bare handler too): 8
		// clients send 500-event batches on a fixed schedule for 5 s at 100k and 150k events/s,
		// and each request's latency counts from its scheduled time, so queueing is included.
		for _, rate := range []int{100_000, 150_000} {
			b.Run(fmt.Sprintf("%s/clients=8/paced=%dk", tc.name, rate/1000), func(b *testing.B) {
				srv := httptest.NewServer(tc.h)
				defer srv.Close()
				for b.Loop() {
					p99, sent, took := pacedLoad(b, srv.URL, key, body, 8, rate/500, 5*time.Second)
					b.ReportMetric(p99, "p99-ms")
					// What was delivered over the time it took, not the schedule: a server that
					// falls behind stretches the run and lowers this.
					b.ReportMetric(float64(500*sent)/took.Seconds(), "events/s")
				}
			})
		}
	}
}

// pacedLoad sends batches from clients goroutines at batchesPerSec in total for d and returns
// the p99 latency (ms, from each request's scheduled start), the number answered 202, and the
// time from the start until the last answer.
func pacedLoad(b *testing.B, base, key string, body []byte, clients, batchesPerSec int, d time.Duration) (float64, int, time.Duration) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	interval := time.Duration(clients) * time.Second / time.Duration(batchesPerSec)
	start := time.Now()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				due := start.Add(time.Duration(c)*interval/time.Duration(clients) + time.Duration(k)*interval)
				if due.Sub(start) >= d {
					return
				}
				time.Sleep(time.Until(due))
				req, _ := http.NewRequest(http.MethodPost, base+"/api/ingestion/track/batch/", bytes.NewReader(body))
				req.Header.Set("Authorization", "ApiKey "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(due))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		return 0, 0, took
	}
	return float64(lat[len(lat)*99/100].Microseconds()) / 1000, len(lat), took
}
