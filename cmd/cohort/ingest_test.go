package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func countRows(t *testing.T, dbURL, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	var n int
	if err := c.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ingest -> Pub/Sub -> loader -> warehouse, profiles, stats and errors, through the real stack.
func TestIngestionEndToEnd(t *testing.T) {
	s := startDev(t)
	sk := "ApiKey " + s.secret
	bearer := "Bearer " + s.token

	now := time.Now().UTC()
	batch := map[string]any{"events": []any{
		map[string]any{"user_id": "u1", "event_type": "order_completed", "occurred_at": now.Add(-time.Hour).Format(time.RFC3339), "payload": map[string]any{"amount": 120.5}, "message_id": "m-1"},
		map[string]any{"user_id": "u2", "event_type": "page_viewed"},
		map[string]any{"user_id": "", "event_type": "page_viewed"}, // invalid user
		map[string]any{"user_id": "u3", "event_type": "Bad-Type"},  // invalid type
		map[string]any{"user_id": "u1", "event_type": "context_identified", "payload": map[string]any{"email": "u1@example.com", "plan": "pro"}},
		map[string]any{"user_id": "u4", "event_type": "page_viewed", "occurred_at": "last tuesday"}, // invalid time
	}}
	body, _ := json.Marshal(batch)
	var res struct {
		Queued  int `json:"queued"`
		Skipped int `json:"skipped"`
		Errors  []struct {
			Index int    `json:"index"`
			Code  string `json:"code"`
		} `json:"errors"`
	}
	if code := s.do(t, http.MethodPost, "/api/ingestion/track/batch/", sk, body, nil, &res); code != http.StatusAccepted {
		t.Fatalf("batch status %d", code)
	}
	if res.Queued != 3 || res.Skipped != 3 || len(res.Errors) != 3 {
		t.Fatalf("batch result %+v", res)
	}
	wantCodes := map[int]string{2: "invalid_user_id", 3: "invalid_event_type", 5: "invalid_occurred_at"}
	for _, e := range res.Errors {
		if wantCodes[e.Index] != e.Code {
			t.Errorf("error at %d: code %q, want %q", e.Index, e.Code, wantCodes[e.Index])
		}
	}

	// The same message_id again, gzip-encoded this time: stored once.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"events":[{"user_id":"u1","event_type":"order_completed","payload":{"amount":120.5},"message_id":"m-1"}]}`))
	_ = zw.Close()
	if code := s.do(t, http.MethodPost, "/api/ingestion/track/batch/", sk, gz.Bytes(), map[string]string{"Content-Encoding": "gzip"}, &res); code != http.StatusAccepted || res.Queued != 1 {
		t.Fatalf("gzip batch: %d %+v", code, res)
	}
	// A single event, and a single invalid one.
	if code := s.do(t, http.MethodPost, "/api/ingestion/track/", sk, []byte(`{"user_id":"u5","event_type":"signup"}`), nil, nil); code != http.StatusAccepted {
		t.Fatalf("track status %d", code)
	}
	var bad struct {
		Error struct {
			Code   string            `json:"code"`
			Fields map[string]string `json:"fields"`
		} `json:"error"`
	}
	if code := s.do(t, http.MethodPost, "/api/ingestion/track/", sk, []byte(`{"user_id":"u5","event_type":"signup","payload":[1]}`), nil, &bad); code != http.StatusBadRequest || bad.Error.Fields["payload"] == "" {
		t.Fatalf("invalid track: %d %+v", code, bad)
	}

	eventually(t, "4 events in the warehouse", func() bool {
		return countRows(t, s.dbURL, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, s.tenantID) == 4
	})
	if n := countRows(t, s.dbURL, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1 AND event_id = 'm-1'`, s.tenantID); n != 1 {
		t.Fatalf("message m-1 stored %d times", n)
	}
	if n := countRows(t, s.dbURL, `SELECT count(*) FROM profiles WHERE tenant_id = $1 AND user_id = 'u1' AND traits->>'email' = 'u1@example.com'`, s.tenantID); n != 1 {
		t.Fatal("context_identified traits not in the profile")
	}

	var stats struct {
		Window      string `json:"window"`
		TotalEvents int    `json:"total_events"`
		UniqueUsers int    `json:"unique_users"`
		Timeseries  []struct {
			EventCount int `json:"event_count"`
		} `json:"timeseries"`
		EventTypes []struct {
			EventType string `json:"event_type"`
			Count     int    `json:"count"`
		} `json:"event_types"`
	}
	if code := s.do(t, http.MethodGet, "/api/ingestion/stats/", bearer, nil, nil, &stats); code != http.StatusOK {
		t.Fatalf("stats %d", code)
	}
	if stats.Window != "24h" || stats.TotalEvents != 4 || stats.UniqueUsers != 3 || len(stats.Timeseries) != 24 {
		t.Fatalf("stats %+v", stats)
	}
	if len(stats.EventTypes) == 0 || stats.EventTypes[0].Count < stats.EventTypes[len(stats.EventTypes)-1].Count {
		t.Fatalf("event types not sorted by count: %+v", stats.EventTypes)
	}
	if code := s.do(t, http.MethodGet, "/api/ingestion/stats/?window=30d", bearer, nil, nil, nil); code != http.StatusBadRequest {
		t.Fatalf("bad window: %d", code)
	}

	var errsList []struct {
		TS        time.Time `json:"ts"`
		ErrorType string    `json:"error_type"`
		Detail    string    `json:"detail"`
	}
	eventually(t, "4 error records", func() bool {
		errsList = nil
		s.do(t, http.MethodGet, "/api/ingestion/errors/?limit=10", bearer, nil, nil, &errsList)
		return len(errsList) == 4
	})
	if errsList[0].ErrorType != "validation" || errsList[0].TS.Before(errsList[3].TS) {
		t.Fatalf("errors not newest first: %+v", errsList)
	}

	var health map[string]string
	eventually(t, "ingestion health ok", func() bool {
		health = nil
		return s.do(t, http.MethodGet, "/api/ingestion/health/", "", nil, nil, &health) == http.StatusOK
	})
	if health["pubsub_topic"] != "ok" || health["worker"] != "ok" || health["postgres"] != "ok" || len(health) != 3 {
		t.Fatalf("health %v", health)
	}
}

func shopifySign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestShopifyWebhookEndToEnd(t *testing.T) {
	s := startDev(t)
	body := []byte(`{"id":820982911946154508,"email":"jon@example.com","created_at":"2024-05-01T10:00:00-04:00",
		"currency":"USD","total_price":"199.00","subtotal_price":"199.00","total_tax":"0.00","total_discounts":"0.00",
		"financial_status":"paid","order_number":1234,
		"customer":{"id":115310627314723954,"email":"jon@example.com","first_name":"Jon","last_name":"Snow"},
		"line_items":[{"id":1,"sku":"SKU-1","title":"Shirt","quantity":2,"price":"99.50","product_id":7,"variant_id":8}]}`)
	path := fmt.Sprintf("/api/ingestion/shopify/%s/", s.slug)
	headers := map[string]string{
		"X-Shopify-Topic":       "orders/create",
		"X-Shopify-Webhook-Id":  "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		"X-Shopify-Hmac-SHA256": shopifySign(s.webhook, body),
		"X-Shopify-Shop-Domain": "shop.myshopify.com",
	}
	for i := 0; i < 2; i++ { // Shopify retries: the second delivery is stored once
		if code := s.do(t, http.MethodPost, path, "", body, headers, nil); code != http.StatusOK {
			t.Fatalf("webhook delivery %d: status %d", i, code)
		}
	}
	eventually(t, "the order in the warehouse", func() bool {
		return countRows(t, s.dbURL, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1 AND event_type = 'order_completed'
			AND user_id = '115310627314723954' AND (payload->>'total_price')::numeric = 199`, s.tenantID) == 1
	})

	bad := maps.Clone(headers)
	bad["X-Shopify-Hmac-SHA256"] = shopifySign("wrong-secret", body)
	if code := s.do(t, http.MethodPost, path, "", body, bad, nil); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d, want 401", code)
	}
	unknown := maps.Clone(headers)
	unknown["X-Shopify-Topic"] = "app/uninstalled"
	if code := s.do(t, http.MethodPost, path, "", body, unknown, nil); code != http.StatusOK {
		t.Fatalf("unknown topic: %d, want 200", code)
	}
	var errsList []struct {
		ErrorType string `json:"error_type"`
	}
	eventually(t, "the signature failure in the error log", func() bool {
		errsList = nil
		s.do(t, http.MethodGet, "/api/ingestion/errors/", "Bearer "+s.token, nil, nil, &errsList)
		return len(errsList) == 1 && errsList[0].ErrorType == "webhook_signature"
	})
}
