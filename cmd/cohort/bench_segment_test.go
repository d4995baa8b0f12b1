package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// segmentBatchBody is batchBody's 500 events as a Segment batch: the same users, event types
// (as Segment event names that map back to them), timestamps and properties.
func segmentBatchBody() []byte {
	msgs := make([]map[string]any, 500)
	now := time.Now().UTC()
	for i := range msgs {
		msgs[i] = map[string]any{
			"type":       "track",
			"userId":     "user-" + strconv.Itoa(i*7919%100000),
			"event":      []string{"Page Viewed", "Order Completed", "Add To Cart"}[i%3],
			"timestamp":  now.Add(-time.Duration(i) * time.Second).Format(time.RFC3339Nano),
			"properties": map[string]any{"amount": 12.5 + float64(i), "currency": "EUR", "sku": "SKU-" + strconv.Itoa(i), "path": "/products/" + strconv.Itoa(i)},
		}
	}
	b, _ := json.Marshal(map[string]any{"batch": msgs})
	return b
}

// BenchmarkSegmentBatch compares, in one run on one server and bus (pstest), POST /v1/batch with
// the native POST /api/ingestion/track/batch/ for the same 500 events, with 2 and 8 concurrent
// clients over loopback HTTP. Metric: events/s; the issue asks /v1/batch for at least 0.7x native.
func BenchmarkSegmentBatch(b *testing.B) {
	h, key := ingestServer(b, "pubsub")
	for _, tc := range []struct {
		name, path, auth string
		body             []byte
		status           int
	}{
		{"native", "/api/ingestion/track/batch/", "ApiKey " + key, batchBody(), http.StatusAccepted},
		{"segment", "/v1/batch", "Basic " + base64.StdEncoding.EncodeToString([]byte(key+":")), segmentBatchBody(), http.StatusOK},
	} {
		for _, par := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/clients=%d", tc.name, 2*par), func(b *testing.B) {
				srv := httptest.NewServer(h)
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, bytes.NewReader(tc.body))
						req.Header.Set("Authorization", tc.auth)
						req.Header.Set("Content-Type", "application/json")
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						out, _ := io.ReadAll(resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != tc.status || !bytes.Contains(out, []byte(`"skipped":0`)) {
							b.Errorf("status %d: %s", resp.StatusCode, out)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
