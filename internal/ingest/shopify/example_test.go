package shopify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ingest/shopify"
)

// Example shows the calls the API layer makes for one delivery: verify the raw body, map it, and
// build each event id from the X-Shopify-Webhook-Id header and the event's Suffix.
func Example() {
	secret := []byte("tenant-webhook-secret")
	body := []byte(`{"id":5829462016123,"order_number":1042,"email":"Ana@Example.com","total_price":"155.12","currency":"USD",` +
		`"processed_at":"2024-09-14T10:22:30-04:00","customer":{"id":7364982571234,"first_name":"Ana"},` +
		`"line_items":[{"sku":"TEE-ORG-BLK-M","quantity":2,"price":"35.00"}],"discount_codes":[]}`)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	header := base64.StdEncoding.EncodeToString(mac.Sum(nil)) // what Shopify sends in X-Shopify-Hmac-SHA256
	webhookID := "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"       // X-Shopify-Webhook-Id

	if err := shopify.Verify(secret, body, header); err != nil {
		fmt.Println("reject:", err)
		return
	}
	events, err := shopify.Map("orders/create", body, time.Date(2024, 9, 14, 14, 22, 35, 0, time.UTC))
	if err != nil {
		fmt.Println("reject:", err)
		return
	}
	for _, e := range events {
		fmt.Println(webhookID+":"+e.Suffix, e.UserID, e.EventType, e.OccurredAt.Format(time.RFC3339))
	}
	fmt.Println(events[0].Payload["total_price"], events[0].Payload["skus"], events[1].Payload["email"])
	// Output:
	// b54557e4-bdd9-4b37-8a5f-bf7d70bcd043:order_completed 7364982571234 order_completed 2024-09-14T14:22:30Z
	// b54557e4-bdd9-4b37-8a5f-bf7d70bcd043:identify 7364982571234 context_identified 2024-09-14T14:22:30Z
	// 155.12 [TEE-ORG-BLK-M] ana@example.com
}

func BenchmarkMapOrder(b *testing.B) {
	body, err := os.ReadFile("testdata/orders_create.json")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2024, 12, 1, 12, 0, 0, 0, time.UTC)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := shopify.Map(shopify.TopicOrdersCreate, body, at); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	body, err := os.ReadFile("testdata/orders_create.json")
	if err != nil {
		b.Fatal(err)
	}
	secret := []byte("tenant-webhook-secret")
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	header := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := shopify.Verify(secret, body, header); err != nil {
			b.Fatal(err)
		}
	}
}
