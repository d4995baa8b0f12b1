package shopify

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

var receivedAt = time.Date(2024, 12, 1, 12, 0, 0, 0, time.UTC)

// fixtureTopics maps every testdata file to the topic it is a body of.
var fixtureTopics = map[string]string{
	"orders_create.json":               TopicOrdersCreate,
	"orders_create_guest.json":         TopicOrdersCreate,
	"orders_create_pos_anonymous.json": TopicOrdersCreate,
	"orders_paid.json":                 TopicOrdersPaid,
	"checkouts_create.json":            TopicCheckoutsCreate,
	"customers_create.json":            TopicCustomersCreate,
	"customers_update.json":            TopicCustomersUpdate,
	"carts_create.json":                TopicCartsCreate,
	"carts_update.json":                TopicCartsUpdate,
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// checkEvents compares events field by field, OccurredAt with time.Equal.
func checkEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n got: %s\nwant: %s", len(got), len(want), dump(got), dump(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.UserID != w.UserID || g.EventType != w.EventType || g.Suffix != w.Suffix {
			t.Errorf("event %d = {user %q, type %q, suffix %q}, want {user %q, type %q, suffix %q}",
				i, g.UserID, g.EventType, g.Suffix, w.UserID, w.EventType, w.Suffix)
		}
		if !g.OccurredAt.Equal(w.OccurredAt) {
			t.Errorf("event %d (%s) occurred_at = %v, want %v", i, w.EventType, g.OccurredAt, w.OccurredAt)
		}
		if g.OccurredAt.Location() != time.UTC {
			t.Errorf("event %d (%s) occurred_at is in %v, want UTC", i, w.EventType, g.OccurredAt.Location())
		}
		if !reflect.DeepEqual(g.Payload, w.Payload) {
			t.Errorf("event %d (%s) payload:\n got: %s\nwant: %s", i, w.EventType, dump(g.Payload), dump(w.Payload))
		}
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestMapFixtures(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		topic   string
		want    []Event
	}{
		{
			name:    "orders/create with a customer: order_completed and identify",
			fixture: "orders_create.json",
			topic:   TopicOrdersCreate,
			want: []Event{
				{
					UserID:     "7364982571234",
					EventType:  "order_completed",
					OccurredAt: utc("2024-09-14T10:22:30-04:00"), // processed_at
					Suffix:     "order_completed",
					Payload: map[string]any{
						"order_id":         "5829462016123",
						"order_number":     1042,
						"order_name":       "#1042",
						"total_price":      155.12,
						"subtotal_price":   139.0,
						"total_tax":        11.12,
						"total_discounts":  10.0,
						"currency":         "USD",
						"financial_status": "paid",
						"source_name":      "web",
						"landing_site":     "/products/organic-tee?utm_source=newsletter&utm_medium=email",
						"referring_site":   "https://www.google.com/",
						"line_items": []any{
							map[string]any{"sku": "TEE-ORG-BLK-M", "product_id": "8712345678901", "variant_id": "45123456789012", "title": "Organic Tee", "quantity": 2, "price": 35.0},
							map[string]any{"sku": "CAP-WOOL-NVY", "product_id": "8712345678902", "variant_id": "45123456789013", "title": "Merino Cap", "quantity": 1, "price": 29.0},
							map[string]any{"product_id": "8712345678999", "variant_id": "45123456789099", "title": "Gift Card", "quantity": 1, "price": 50.0},
						},
						"skus":           []any{"TEE-ORG-BLK-M", "CAP-WOOL-NVY"},
						"item_count":     4,
						"discount_codes": []any{"WELCOME10"},
					},
				},
				{
					UserID:     "7364982571234",
					EventType:  "context_identified",
					OccurredAt: utc("2024-09-14T10:22:30-04:00"),
					Suffix:     "identify",
					Payload: map[string]any{
						"email":      "ana.souza@example.com",
						"first_name": "Ana",
						"last_name":  "Souza",
						"phone":      "+12125550187",
					},
				},
			},
		},
		{
			name:    "orders/paid with ids beyond 2^53: order_paid, exact ids, deduplicated skus",
			fixture: "orders_paid.json",
			topic:   TopicOrdersPaid,
			want: []Event{
				{
					UserID:     "115310627314723954",
					EventType:  "order_paid",
					OccurredAt: utc("2024-05-02T09:15:12-04:00"), // updated_at
					Suffix:     "order_paid",
					Payload: map[string]any{
						"order_id":         "820982911946154508",
						"order_number":     1234,
						"order_name":       "#9999",
						"total_price":      674.61,
						"subtotal_price":   597.0,
						"total_tax":        77.61,
						"total_discounts":  0.0,
						"currency":         "CAD",
						"financial_status": "paid",
						"source_name":      "web",
						"line_items": []any{
							map[string]any{"sku": "IPOD2008PINK", "product_id": "632910392", "variant_id": "808950810", "title": "IPod Nano - 8GB", "quantity": 1, "price": 199.0},
							map[string]any{"sku": "IPOD2008PINK", "product_id": "632910392", "variant_id": "808950810", "title": "IPod Nano - 8GB", "quantity": 2, "price": 199.0},
						},
						"skus":           []any{"IPOD2008PINK"},
						"item_count":     3,
						"discount_codes": []any{},
					},
				},
				{
					UserID:     "115310627314723954",
					EventType:  "context_identified",
					OccurredAt: utc("2024-05-02T09:15:12-04:00"),
					Suffix:     "identify",
					Payload: map[string]any{
						"email":      "john@example.com",
						"first_name": "John",
						"last_name":  "Smith",
						"phone":      "+16135550142", // customer.phone is null: the order's phone
					},
				},
			},
		},
		{
			name:    "orders/create by a guest: falls back to the lower-cased e-mail",
			fixture: "orders_create_guest.json",
			topic:   TopicOrdersCreate,
			want: []Event{
				{
					UserID:     "guest.buyer@example.com",
					EventType:  "order_completed",
					OccurredAt: utc("2024-10-01T21:05:44+00:00"), // processed_at is null: created_at
					Suffix:     "order_completed",
					Payload: map[string]any{
						"order_id":         "5829462016999",
						"order_number":     1043,
						"order_name":       "#1043",
						"total_price":      24.9,
						"subtotal_price":   19.9,
						"total_tax":        3.72,
						"total_discounts":  0.0,
						"currency":         "EUR",
						"financial_status": "pending",
						"source_name":      "web",
						"landing_site":     "/",
						"line_items": []any{
							map[string]any{"sku": "TOTE-LIN-NAT", "product_id": "8712345670001", "variant_id": "45123456780001", "title": "Linen Tote", "quantity": 1, "price": 19.9},
						},
						"skus":           []any{"TOTE-LIN-NAT"},
						"item_count":     1,
						"discount_codes": []any{},
					},
				},
				{
					UserID:     "guest.buyer@example.com",
					EventType:  "context_identified",
					OccurredAt: utc("2024-10-01T21:05:44+00:00"),
					Suffix:     "identify",
					Payload:    map[string]any{"email": "guest.buyer@example.com"},
				},
			},
		},
		{
			name:    "anonymous POS order: no identity, no events (staff user_id is not a customer)",
			fixture: "orders_create_pos_anonymous.json",
			topic:   TopicOrdersCreate,
			want:    nil,
		},
		{
			name:    "checkouts/create: checkout_started",
			fixture: "checkouts_create.json",
			topic:   TopicCheckoutsCreate,
			want: []Event{{
				UserID:     "7402117890123",
				EventType:  "checkout_started",
				OccurredAt: utc("2024-09-14T10:15:02-04:00"),
				Suffix:     "checkout_started",
				Payload: map[string]any{
					"token":                  "9f8b1c2d3e4f5a6b7c8d9e0f1a2b3c4d",
					"checkout_id":            "36981245767803",
					"cart_token":             "c1-7a3d5e0b2f4c8e1d9a6b3c7e5f2d8a41",
					"total_price":            84.15,
					"subtotal_price":         84.15,
					"total_tax":              0.0,
					"total_discounts":        14.85,
					"currency":               "USD",
					"abandoned_checkout_url": "https://northwind-outfitters.myshopify.com/61234567890/checkouts/ac/c1-7a3d5e0b2f4c8e1d9a6b3c7e5f2d8a41/recover?key=5e1f0c9d8b7a6f5e4d3c2b1a09f8e7d6",
					"source_name":            "web",
					"landing_site":           "/collections/summer",
					"referring_site":         "https://www.instagram.com/",
					"line_items": []any{
						map[string]any{"sku": "TEE-ORG-BLK-M", "product_id": "8712345678901", "variant_id": "45123456789012", "title": "Organic Tee", "quantity": 2, "price": 35.0},
						map[string]any{"sku": "CAP-WOOL-NVY", "product_id": "8712345678902", "variant_id": "45123456789013", "title": "Merino Cap", "quantity": 1, "price": 29.0},
					},
					"skus":           []any{"TEE-ORG-BLK-M", "CAP-WOOL-NVY"},
					"item_count":     3,
					"discount_codes": []any{"SUMMER15"},
				},
			}},
		},
		{
			name:    "customers/create: identify with traits, then customer_created",
			fixture: "customers_create.json",
			topic:   TopicCustomersCreate,
			want: []Event{
				{
					UserID:     "7402117890123",
					EventType:  "context_identified",
					OccurredAt: utc("2024-09-01T08:12:45-04:00"),
					Suffix:     "identify",
					Payload: map[string]any{
						"email":                   "maya.chen@example.com",
						"first_name":              "Maya",
						"last_name":               "Chen",
						"phone":                   "+14155550123",
						"accepts_marketing":       true,
						"email_marketing_consent": "subscribed",
						"tags":                    []any{"newsletter", "VIP"},
						"orders_count":            0,
						"total_spent":             0.0,
						"state":                   "disabled",
						"currency":                "USD",
						"created_at":              "2024-09-01T12:12:45Z",
					},
				},
				{
					UserID:     "7402117890123",
					EventType:  "customer_created",
					OccurredAt: utc("2024-09-01T08:12:45-04:00"),
					Suffix:     "customer_created",
					Payload: map[string]any{
						"customer_id":       "7402117890123",
						"state":             "disabled",
						"accepts_marketing": true,
						"tags":              []any{"newsletter", "VIP"},
					},
				},
			},
		},
		{
			name:    "customers/update (2025+ shape, no tags or totals): identify only",
			fixture: "customers_update.json",
			topic:   TopicCustomersUpdate,
			want: []Event{{
				UserID:     "7402117890123",
				EventType:  "context_identified",
				OccurredAt: utc("2024-11-20T16:41:09-05:00"), // updated_at
				Suffix:     "identify",
				Payload: map[string]any{
					"email":      "maya.chen@example.com",
					"first_name": "Maya",
					"last_name":  "Chen-Ortiz",
					"state":      "enabled",
					"currency":   "USD",
					"created_at": "2024-09-01T12:12:45Z",
				},
			}},
		},
		{
			name:    "carts/create: anonymous cart keyed by its token",
			fixture: "carts_create.json",
			topic:   TopicCartsCreate,
			want: []Event{{
				UserID:     "cart:Z2NwLXVzLWVhc3QxOjAxSjdXNlFYM0U0UFpGOVhKRTNHWFBaQkQz",
				EventType:  "cart_created",
				OccurredAt: utc("2024-09-14T14:02:11Z"),
				Suffix:     "cart_created",
				Payload: map[string]any{
					"token": "Z2NwLXVzLWVhc3QxOjAxSjdXNlFYM0U0UFpGOVhKRTNHWFBaQkQz",
					"line_items": []any{
						map[string]any{"sku": "TEE-ORG-BLK-M", "product_id": "8712345678901", "variant_id": "45123456789012", "title": "Organic Tee - Black / M", "quantity": 2, "price": 35.0},
					},
					"skus":       []any{"TEE-ORG-BLK-M"},
					"item_count": 2,
					"total":      70.0,
					"currency":   "USD",
				},
			}},
		},
		{
			name:    "carts/update: total sums line prices, a line without SKU stays out of skus",
			fixture: "carts_update.json",
			topic:   TopicCartsUpdate,
			want: []Event{{
				UserID:     "cart:Z2NwLXVzLWVhc3QxOjAxSjdXNlFYM0U0UFpGOVhKRTNHWFBaQkQz",
				EventType:  "cart_updated",
				OccurredAt: utc("2024-09-14T14:09:37.512Z"),
				Suffix:     "cart_updated",
				Payload: map[string]any{
					"token": "Z2NwLXVzLWVhc3QxOjAxSjdXNlFYM0U0UFpGOVhKRTNHWFBaQkQz",
					"line_items": []any{
						map[string]any{"sku": "TEE-ORG-BLK-M", "product_id": "8712345678901", "variant_id": "45123456789012", "title": "Organic Tee - Black / M", "quantity": 3, "price": 19.99},
						map[string]any{"product_id": "8712345670077", "variant_id": "45123456789077", "title": "Gift wrap", "quantity": 1, "price": 4.0},
					},
					"skus":       []any{"TEE-ORG-BLK-M"},
					"item_count": 4,
					"total":      63.97,
					"currency":   "USD",
				},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(tt.topic, fixture(t, tt.fixture), receivedAt)
			if err != nil {
				t.Fatalf("Map = %v", err)
			}
			if tt.want == nil && got != nil {
				t.Fatalf("Map = %s, want nil", dump(got))
			}
			checkEvents(t, got, tt.want)
		})
	}
}

// TestMapFixturesAreCovered keeps fixtureTopics (used by the fuzz seeds) in step with testdata.
func TestMapFixturesAreCovered(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := fixtureTopics[filepath.Base(f)]; !ok {
			t.Errorf("testdata/%s has no topic in fixtureTopics", filepath.Base(f))
		}
	}
	if len(files) != len(fixtureTopics) {
		t.Errorf("%d fixtures on disk, %d in fixtureTopics", len(files), len(fixtureTopics))
	}
}

// TestMapIdentity covers the user id rules on small bodies.
func TestMapIdentity(t *testing.T) {
	tests := []struct {
		name     string
		topic    string
		body     string
		wantUser string // "" means no events
	}{
		{name: "order: customer id wins over e-mail", topic: TopicOrdersCreate, body: `{"customer":{"id":42,"email":"a@b.co"},"email":"c@d.co"}`, wantUser: "42"},
		{name: "order: customer without id falls back to its e-mail", topic: TopicOrdersCreate, body: `{"customer":{"id":null,"email":" Buyer@Shop.COM "}}`, wantUser: "buyer@shop.com"},
		{name: "order: no customer, order e-mail", topic: TopicOrdersPaid, body: `{"customer":null,"email":"Buyer@Shop.com"}`, wantUser: "buyer@shop.com"},
		{name: "order: only contact_email", topic: TopicOrdersCreate, body: `{"email":"","contact_email":"Contact@Shop.com"}`, wantUser: "contact@shop.com"},
		{name: "order: customer id as a GraphQL gid", topic: TopicOrdersCreate, body: `{"customer":{"id":"gid://shopify/Customer/7364982571234"}}`, wantUser: "7364982571234"},
		{name: "order: customer id as a digit string", topic: TopicOrdersCreate, body: `{"customer":{"id":"7364982571234"}}`, wantUser: "7364982571234"},
		{name: "order: customer id beyond 2^53 kept exact", topic: TopicOrdersCreate, body: `{"customer":{"id":706405506930370084}}`, wantUser: "706405506930370084"},
		{name: "order: zero, negative and fractional ids are not ids", topic: TopicOrdersCreate, body: `{"customer":{"id":0},"line_items":[{"product_id":-3},{"product_id":1.5}]}`},
		{name: "order: staff user_id is not an identity", topic: TopicOrdersCreate, body: `{"user_id":81234567,"customer":null,"email":null}`},
		{name: "order: a string without @ is not an e-mail", topic: TopicOrdersCreate, body: `{"email":"n/a"}`},
		{name: "order: nothing at all", topic: TopicOrdersPaid, body: `{}`},
		{name: "checkout: customer id", topic: TopicCheckoutsCreate, body: `{"customer":{"id":7402117890123},"email":"x@y.z"}`, wantUser: "7402117890123"},
		{name: "checkout: e-mail only", topic: TopicCheckoutsCreate, body: `{"email":"X@Y.z","cart_token":"c1-abc"}`, wantUser: "x@y.z"},
		{name: "checkout: cart token alone is no identity", topic: TopicCheckoutsCreate, body: `{"token":"t","cart_token":"c1-abc","email":null}`},
		{name: "customer: id", topic: TopicCustomersCreate, body: `{"id":7402117890123,"email":"m@x.io"}`, wantUser: "7402117890123"},
		{name: "customer: e-mail only", topic: TopicCustomersUpdate, body: `{"id":null,"email":"M@X.io"}`, wantUser: "m@x.io"},
		{name: "customer: neither", topic: TopicCustomersCreate, body: `{"id":null,"email":null,"first_name":"Ghost"}`},
		{name: "cart: token", topic: TopicCartsCreate, body: `{"token":"tok123","line_items":[]}`, wantUser: "cart:tok123"},
		{name: "cart: id when token is missing", topic: TopicCartsUpdate, body: `{"id":"tok456","line_items":[]}`, wantUser: "cart:tok456"},
		{name: "cart: secret key part of the token is cut off", topic: TopicCartsCreate, body: `{"token":"c1-abc?key=s3cr3t"}`, wantUser: "cart:c1-abc"},
		{name: "cart: a customer, when present, wins over the token", topic: TopicCartsUpdate, body: `{"token":"tok","customer":{"id":99}}`, wantUser: "99"},
		{name: "cart: customer_id, when present, wins over the token", topic: TopicCartsUpdate, body: `{"token":"tok","customer_id":98}`, wantUser: "98"},
		{name: "cart: e-mail, when present, wins over the token", topic: TopicCartsUpdate, body: `{"token":"tok","email":"Cart@Owner.io"}`, wantUser: "cart@owner.io"},
		{name: "cart: no token, no customer", topic: TopicCartsCreate, body: `{"token":"  ","line_items":[{"sku":"A","quantity":1}]}`},
		{name: "cart: numeric token is not a token", topic: TopicCartsCreate, body: `{"token":12345}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(tt.topic, []byte(tt.body), receivedAt)
			if err != nil {
				t.Fatalf("Map = %v", err)
			}
			if tt.wantUser == "" {
				if got != nil {
					t.Fatalf("Map = %s, want no events", dump(got))
				}
				return
			}
			if len(got) == 0 {
				t.Fatalf("Map = no events, want user %q", tt.wantUser)
			}
			for _, e := range got {
				if e.UserID != tt.wantUser {
					t.Errorf("%s user = %q, want %q", e.EventType, e.UserID, tt.wantUser)
				}
			}
		})
	}
}

// TestMapIdentifyFromOrder: the second event appears only when the order names its buyer.
func TestMapIdentifyFromOrder(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantTraits map[string]any // nil: no context_identified
	}{
		{name: "customer id only: no identify", body: `{"customer":{"id":5,"email":null,"phone":"+15550001"}}`},
		{name: "name without e-mail", body: `{"customer":{"id":5,"first_name":"Ana","last_name":null}}`, wantTraits: map[string]any{"first_name": "Ana"}},
		{name: "e-mail from the order when the customer has none", body: `{"customer":{"id":5},"email":"Ana@X.io","phone":"+15550002"}`, wantTraits: map[string]any{"email": "ana@x.io", "phone": "+15550002"}},
		{name: "customer phone wins over order phone", body: `{"customer":{"id":5,"email":"a@x.io","phone":"+15550001"},"phone":"+15550002"}`, wantTraits: map[string]any{"email": "a@x.io", "phone": "+15550001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(TopicOrdersCreate, []byte(tt.body), receivedAt)
			if err != nil {
				t.Fatal(err)
			}
			var identify *Event
			for i := range got {
				if got[i].EventType == EventContextIdentified {
					identify = &got[i]
				}
			}
			if tt.wantTraits == nil {
				if identify != nil {
					t.Fatalf("unexpected identify %s", dump(identify.Payload))
				}
				return
			}
			if identify == nil {
				t.Fatalf("no identify in %s", dump(got))
			}
			if identify.Suffix != SuffixIdentify || identify.UserID != "5" {
				t.Errorf("identify = user %q suffix %q", identify.UserID, identify.Suffix)
			}
			if !reflect.DeepEqual(identify.Payload, tt.wantTraits) {
				t.Errorf("traits = %s, want %s", dump(identify.Payload), dump(tt.wantTraits))
			}
		})
	}
}

// TestMapNumbers: money strings become float64, counts int; malformed values are omitted.
func TestMapNumbers(t *testing.T) {
	tests := []struct {
		name      string
		value     string // JSON value of total_price and of the line item price
		wantMoney any    // nil: omitted
	}{
		{name: "decimal string", value: `"199.00"`, wantMoney: 199.0},
		{name: "cents", value: `"0.99"`, wantMoney: 0.99},
		{name: "padded string", value: `" 12.50 "`, wantMoney: 12.5},
		{name: "JSON number", value: `12.5`, wantMoney: 12.5},
		{name: "big JSON integer", value: `120000000`, wantMoney: 120000000.0},
		{name: "negative", value: `"-5.00"`, wantMoney: -5.0},
		{name: "negative zero", value: `"-0.00"`, wantMoney: 0.0},
		{name: "exponent", value: `"1.5e2"`, wantMoney: 150.0},
		{name: "empty string", value: `""`},
		{name: "word", value: `"abc"`},
		{name: "NaN", value: `"NaN"`},
		{name: "infinity", value: `"Infinity"`},
		{name: "inf", value: `"-inf"`},
		{name: "overflow", value: `"1e999"`},
		{name: "hex float", value: `"0x1p-2"`},
		{name: "underscores", value: `"1_000.00"`},
		{name: "thousands separator", value: `"1,000.00"`},
		{name: "currency sign", value: `"$10.00"`},
		{name: "lone point", value: `"."`},
		{name: "dangling exponent", value: `"1e"`},
		{name: "boolean", value: `true`},
		{name: "object", value: `{"amount":"1.00"}`},
		{name: "null", value: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"customer":{"id":1},"total_price":` + tt.value + `,"line_items":[{"sku":"A","quantity":1,"price":` + tt.value + `}]}`
			got, err := Map(TopicOrdersCreate, []byte(body), receivedAt)
			if err != nil {
				t.Fatalf("Map = %v, want nil (a malformed number is not an error)", err)
			}
			if len(got) != 1 {
				t.Fatalf("got %s", dump(got))
			}
			p := got[0].Payload
			item := p["line_items"].([]any)[0].(map[string]any)
			for label, m := range map[string]map[string]any{"total_price": p, "line item price": item} {
				key := "total_price"
				if label != "total_price" {
					key = "price"
				}
				v, ok := m[key]
				if tt.wantMoney == nil {
					if ok {
						t.Errorf("%s = %#v, want omitted", label, v)
					}
					continue
				}
				if !ok || v != tt.wantMoney {
					t.Errorf("%s = %#v, want %#v", label, v, tt.wantMoney)
				}
				if _, isFloat := v.(float64); !isFloat {
					t.Errorf("%s is %T, want float64", label, v)
				}
			}
			if _, err := json.Marshal(got[0].Payload); err != nil {
				t.Errorf("payload does not marshal: %v", err)
			}
		})
	}
}

func TestMapMoneyFallsBackToShopMoney(t *testing.T) {
	body := `{"customer":{"id":1},"total_price":null,"total_price_set":{"shop_money":{"amount":"42.10","currency_code":"USD"},"presentment_money":{"amount":"38.00","currency_code":"EUR"}},
		"line_items":[{"sku":"A","quantity":2,"price_set":{"shop_money":{"amount":"21.05","currency_code":"USD"}}}]}`
	got, err := Map(TopicOrdersCreate, []byte(body), receivedAt)
	if err != nil {
		t.Fatal(err)
	}
	p := got[0].Payload
	if p["total_price"] != 42.10 {
		t.Errorf("total_price = %#v, want 42.10 from total_price_set.shop_money", p["total_price"])
	}
	if item := p["line_items"].([]any)[0].(map[string]any); item["price"] != 21.05 {
		t.Errorf("line price = %#v, want 21.05 from price_set.shop_money", item["price"])
	}
}

func TestMapQuantities(t *testing.T) {
	tests := []struct {
		name      string
		value     string
		wantQty   any // nil: omitted
		wantCount int
	}{
		{name: "integer", value: `3`, wantQty: 3, wantCount: 3},
		{name: "zero", value: `0`, wantQty: 0, wantCount: 0},
		{name: "digit string", value: `"2"`, wantQty: 2, wantCount: 2},
		{name: "whole float", value: `3.0`, wantQty: 3, wantCount: 3},
		{name: "fraction", value: `2.5`},
		{name: "negative", value: `-1`},
		{name: "absurd", value: `99999999999999999999999`},
		{name: "word", value: `"two"`},
		{name: "null", value: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"token":"t","line_items":[{"sku":"A","price":"2.00","quantity":` + tt.value + `}]}`
			got, err := Map(TopicCartsUpdate, []byte(body), receivedAt)
			if err != nil {
				t.Fatal(err)
			}
			p := got[0].Payload
			item := p["line_items"].([]any)[0].(map[string]any)
			q, ok := item["quantity"]
			if tt.wantQty == nil {
				if ok {
					t.Errorf("quantity = %#v, want omitted", q)
				}
				if _, ok := p["total"]; ok {
					t.Errorf("total = %#v, want omitted when a line has no computable total", p["total"])
				}
			} else if q != tt.wantQty {
				t.Errorf("quantity = %#v (%T), want %#v (int)", q, q, tt.wantQty)
			}
			if p["item_count"] != tt.wantCount {
				t.Errorf("item_count = %#v, want %d", p["item_count"], tt.wantCount)
			}
		})
	}
}

func TestMapCartTotalWithoutLinePrice(t *testing.T) {
	body := `{"token":"t","line_items":[{"sku":"A","quantity":3,"price":"19.99"},{"sku":"B","quantity":1,"price":"0.01","line_price":"0.01"}]}`
	got, err := Map(TopicCartsCreate, []byte(body), receivedAt)
	if err != nil {
		t.Fatal(err)
	}
	if total := got[0].Payload["total"]; total != 59.98 {
		t.Errorf("total = %#v, want 59.98 (19.99 x 3 + 0.01, float noise trimmed)", total)
	}
	empty, err := Map(TopicCartsUpdate, []byte(`{"token":"t","line_items":[]}`), receivedAt)
	if err != nil {
		t.Fatal(err)
	}
	if p := empty[0].Payload; p["total"] != 0.0 || p["item_count"] != 0 || !reflect.DeepEqual(p["skus"], []any{}) || !reflect.DeepEqual(p["line_items"], []any{}) {
		t.Errorf("emptied cart payload = %s, want total 0, item_count 0, empty arrays", dump(p))
	}
}

func TestMapCustomerTraits(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		check map[string]any // trait -> want; nil want means absent
	}{
		{name: "legacy accepts_marketing wins", body: `{"id":1,"accepts_marketing":false,"email_marketing_consent":{"state":"subscribed"}}`,
			check: map[string]any{"accepts_marketing": false, "email_marketing_consent": "subscribed"}},
		{name: "consent state not_subscribed", body: `{"id":1,"email_marketing_consent":{"state":"not_subscribed","opt_in_level":null}}`,
			check: map[string]any{"accepts_marketing": false, "email_marketing_consent": "not_subscribed"}},
		{name: "consent null", body: `{"id":1,"email":"a@b.co","email_marketing_consent":null}`,
			check: map[string]any{"accepts_marketing": nil, "email_marketing_consent": nil}},
		{name: "empty tags clear the list", body: `{"id":1,"tags":""}`, check: map[string]any{"tags": []any{}}},
		{name: "tags trimmed and split", body: `{"id":1,"tags":" wholesale ,VIP,, b2b "}`, check: map[string]any{"tags": []any{"wholesale", "VIP", "b2b"}}},
		{name: "null tags left alone", body: `{"id":1,"email":"a@b.co","tags":null}`, check: map[string]any{"tags": nil}},
		{name: "malformed total_spent omitted", body: `{"id":1,"email":"a@b.co","total_spent":"lots","orders_count":"x"}`, check: map[string]any{"total_spent": nil, "orders_count": nil}},
		{name: "total_spent and orders_count", body: `{"id":1,"total_spent":"1234.50","orders_count":7}`, check: map[string]any{"total_spent": 1234.5, "orders_count": 7}},
		{name: "invalid created_at omitted", body: `{"id":1,"email":"a@b.co","created_at":"yesterday"}`, check: map[string]any{"created_at": nil}},
		{name: "null phone omitted", body: `{"id":1,"email":"a@b.co","phone":null}`, check: map[string]any{"phone": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(TopicCustomersUpdate, []byte(tt.body), receivedAt)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].EventType != EventContextIdentified {
				t.Fatalf("got %s, want one context_identified", dump(got))
			}
			traits := got[0].Payload
			for k, want := range tt.check {
				v, ok := traits[k]
				if want == nil {
					if ok {
						t.Errorf("%s = %#v, want absent", k, v)
					}
					continue
				}
				if !reflect.DeepEqual(v, want) {
					t.Errorf("%s = %#v, want %#v", k, v, want)
				}
			}
		})
	}
}

func TestMapCustomerWithoutTraits(t *testing.T) {
	// customers/update with only an id carries nothing to learn.
	got, err := Map(TopicCustomersUpdate, []byte(`{"id":1}`), receivedAt)
	if err != nil || got != nil {
		t.Fatalf("Map = %s, %v; want nil, nil", dump(got), err)
	}
	// customers/create still records the creation.
	got, err = Map(TopicCustomersCreate, []byte(`{"id":1}`), receivedAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].EventType != EventCustomerCreated || !reflect.DeepEqual(got[0].Payload, map[string]any{"customer_id": "1"}) {
		t.Fatalf("Map = %s, want one customer_created", dump(got))
	}
}

func TestMapOccurredAt(t *testing.T) {
	tests := []struct {
		name  string
		topic string
		body  string
		want  time.Time
	}{
		{name: "order: processed_at first", topic: TopicOrdersCreate, body: `{"email":"a@b.co","created_at":"2024-01-02T00:00:00Z","processed_at":"2023-12-31T23:00:00-05:00","updated_at":"2024-01-03T00:00:00Z"}`, want: utc("2024-01-01T04:00:00Z")},
		{name: "order: created_at when processed_at is null", topic: TopicOrdersCreate, body: `{"email":"a@b.co","processed_at":null,"created_at":"2024-01-02T00:00:00Z"}`, want: utc("2024-01-02T00:00:00Z")},
		{name: "paid: updated_at first", topic: TopicOrdersPaid, body: `{"email":"a@b.co","created_at":"2024-01-02T00:00:00Z","processed_at":"2024-01-02T00:00:00Z","updated_at":"2024-01-02T00:05:00+01:00"}`, want: utc("2024-01-01T23:05:00Z")},
		{name: "fractional seconds", topic: TopicCartsUpdate, body: `{"token":"t","updated_at":"2022-01-01T00:00:00.123Z"}`, want: utc("2022-01-01T00:00:00.123Z")},
		{name: "customer update: updated_at", topic: TopicCustomersUpdate, body: `{"id":1,"email":"a@b.co","created_at":"2020-01-01T00:00:00Z","updated_at":"2024-06-01T00:00:00Z"}`, want: utc("2024-06-01T00:00:00Z")},
		{name: "customer create: created_at", topic: TopicCustomersCreate, body: `{"id":1,"email":"a@b.co","created_at":"2020-01-01T00:00:00Z","updated_at":"2024-06-01T00:00:00Z"}`, want: utc("2020-01-01T00:00:00Z")},
		{name: "all null: receivedAt", topic: TopicCheckoutsCreate, body: `{"email":"a@b.co","created_at":null,"updated_at":null}`, want: receivedAt},
		{name: "unparseable: receivedAt", topic: TopicCartsCreate, body: `{"token":"t","created_at":"01/02/2024","updated_at":12345}`, want: receivedAt},
		{name: "date only: receivedAt", topic: TopicCustomersUpdate, body: `{"id":1,"email":"a@b.co","updated_at":"2024-01-02","created_at":""}`, want: receivedAt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(tt.topic, []byte(tt.body), receivedAt)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatal("no events")
			}
			for _, e := range got {
				if !e.OccurredAt.Equal(tt.want) || e.OccurredAt.Location() != time.UTC {
					t.Errorf("%s occurred_at = %v, want %v UTC", e.EventType, e.OccurredAt, tt.want)
				}
			}
		})
	}
	// A receivedAt in another zone comes back in UTC.
	local := time.Date(2024, 3, 1, 9, 0, 0, 0, time.FixedZone("X", 3600))
	got, err := Map(TopicCartsCreate, []byte(`{"token":"t"}`), local)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].OccurredAt.Equal(local) || got[0].OccurredAt.Location() != time.UTC {
		t.Errorf("occurred_at = %v, want %v in UTC", got[0].OccurredAt, local)
	}
}

func TestMapUnknownTopics(t *testing.T) {
	for _, topic := range []string{"", "orders/updated", "orders/cancelled", "products/create", "app/uninstalled", "customers/redact", "checkouts/update", "carts", "orders/create/extra"} {
		for _, body := range []string{`{"customer":{"id":1}}`, `not json at all`, ``} {
			t.Run(topic+"|"+body, func(t *testing.T) {
				got, err := Map(topic, []byte(body), receivedAt)
				if got != nil || err != nil {
					t.Fatalf("Map(%q) = %s, %v; want nil, nil", topic, dump(got), err)
				}
			})
		}
	}
}

func TestMapTopicIsNormalised(t *testing.T) {
	got, err := Map(" Orders/Create ", fixture(t, "orders_create.json"), receivedAt)
	if err != nil || len(got) != 2 || got[0].EventType != EventOrderCompleted {
		t.Fatalf("Map(\" Orders/Create \") = %s, %v", dump(got), err)
	}
}

func TestMapBadPayload(t *testing.T) {
	bodies := []struct {
		name string
		body string
	}{
		{name: "empty", body: ``},
		{name: "whitespace", body: " \n\t"},
		{name: "not JSON", body: `order=1042&total=155.12`},
		{name: "truncated", body: `{"id": 5829462016123, "customer": {"id": 7364982571234`},
		{name: "array", body: `[{"id":1}]`},
		{name: "null", body: `null`},
		{name: "string", body: `"{\"id\":1}"`},
		{name: "number", body: `42`},
		{name: "boolean", body: `true`},
		{name: "two objects", body: `{"id":1}{"id":2}`},
		{name: "trailing garbage", body: `{"id":1} x`},
		{name: "trailing brace", body: `{"id":1}}`},
		{name: "XML body", body: `<?xml version="1.0"?><order><id>1</id></order>`},
		{name: "byte order mark", body: "\ufeff{\"id\":1}"},
		{name: "single quotes", body: `{'id': 1}`},
	}
	for _, topic := range SupportedTopics() {
		for _, b := range bodies {
			t.Run(topic+"/"+b.name, func(t *testing.T) {
				got, err := Map(topic, []byte(b.body), receivedAt)
				if got != nil {
					t.Errorf("events = %s, want nil", dump(got))
				}
				if !errors.Is(err, ErrBadPayload) {
					t.Fatalf("Map = %v, want ErrBadPayload", err)
				}
				if !errors.Is(err, errs.ErrInvalid) {
					t.Errorf("error %v does not match errs.ErrInvalid (400)", err)
				}
				if !strings.Contains(err.Error(), topic) {
					t.Errorf("error %q does not name the topic", err)
				}
			})
		}
	}
}

// TestMapToleratesWrongTypes: a well-formed object with odd field types is mapped, not rejected.
func TestMapToleratesWrongTypes(t *testing.T) {
	body := `{"id":"not-a-number","customer":"oops","email":"A@B.co","line_items":{"sku":"X"},"discount_codes":[1,null,{"code":7},{"code":"OK"}],
		"total_price":true,"currency":5,"name":["#1"],"order_number":"#1001","created_at":false}`
	for _, topic := range []string{TopicOrdersCreate, TopicOrdersPaid, TopicCheckoutsCreate} {
		t.Run(topic, func(t *testing.T) {
			got, err := Map(topic, []byte(body), receivedAt)
			if err != nil {
				t.Fatalf("Map = %v", err)
			}
			if len(got) == 0 || got[0].UserID != "a@b.co" {
				t.Fatalf("Map = %s", dump(got))
			}
			p := got[0].Payload
			for _, k := range []string{"order_id", "total_price", "currency", "order_name", "order_number"} {
				if v, ok := p[k]; ok {
					t.Errorf("%s = %#v, want omitted", k, v)
				}
			}
			if !reflect.DeepEqual(p["discount_codes"], []any{"OK"}) || !reflect.DeepEqual(p["line_items"], []any{}) {
				t.Errorf("payload = %s", dump(p))
			}
			if !got[0].OccurredAt.Equal(receivedAt) {
				t.Errorf("occurred_at = %v, want receivedAt", got[0].OccurredAt)
			}
		})
	}
	got, err := Map(TopicCartsUpdate, []byte(`{"token":"t","line_items":[null,7,"x",[],{"sku":{"a":1},"quantity":{},"price":[]}]}`), receivedAt)
	if err != nil || len(got) != 1 {
		t.Fatalf("Map(cart with junk lines) = %s, %v", dump(got), err)
	}
	if p := got[0].Payload; !reflect.DeepEqual(p["line_items"], []any{map[string]any{}}) || p["item_count"] != 0 {
		t.Errorf("payload = %s", dump(p))
	}
}

func TestSupportedTopics(t *testing.T) {
	topics := SupportedTopics()
	want := []string{"carts/create", "carts/update", "checkouts/create", "customers/create", "customers/update", "orders/create", "orders/paid"}
	if !slices.Equal(topics, want) {
		t.Fatalf("SupportedTopics = %v, want %v", topics, want)
	}
	topics[0] = "mutated"
	if SupportedTopics()[0] != "carts/create" {
		t.Fatal("SupportedTopics shares its slice with callers")
	}
	// Every supported topic is backed by a fixture that maps to at least one event.
	mapped := map[string]bool{}
	for file, topic := range fixtureTopics {
		if got, err := Map(topic, fixture(t, file), receivedAt); err == nil && len(got) > 0 {
			mapped[topic] = true
		}
	}
	for _, topic := range want {
		if !mapped[topic] {
			t.Errorf("no fixture maps %s to events", topic)
		}
	}
}

// TestMapEventInvariants checks, over every fixture, what the caller relies on: distinct
// suffixes, snake_case types, non-empty user ids, JSON-marshalable payloads.
func TestMapEventInvariants(t *testing.T) {
	for file, topic := range fixtureTopics {
		t.Run(file, func(t *testing.T) {
			got, err := Map(topic, fixture(t, file), receivedAt)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, got)
		})
	}
}

func checkInvariants(t testing.TB, events []Event) {
	t.Helper()
	suffixes := map[string]bool{}
	for _, e := range events {
		if e.UserID == "" || strings.TrimSpace(e.UserID) != e.UserID {
			t.Errorf("bad user id %q", e.UserID)
		}
		if !isSnake(e.EventType) {
			t.Errorf("event type %q is not snake_case", e.EventType)
		}
		if e.Suffix == "" || suffixes[e.Suffix] {
			t.Errorf("suffix %q empty or repeated", e.Suffix)
		}
		suffixes[e.Suffix] = true
		if e.Payload == nil {
			t.Errorf("%s has a nil payload", e.EventType)
		}
		if e.OccurredAt.IsZero() {
			t.Errorf("%s has a zero occurred_at", e.EventType)
		}
		if _, err := json.Marshal(e.Payload); err != nil {
			t.Errorf("%s payload does not marshal: %v", e.EventType, err)
		}
	}
}

func isSnake(s string) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
