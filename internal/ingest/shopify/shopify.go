// Package shopify verifies Shopify (storefront) webhooks and maps their bodies to Cohort events.
//
// The package is pure: no HTTP, no clock, no I/O. The API layer reads the raw body and the
// X-Shopify-Hmac-SHA256, X-Shopify-Topic and X-Shopify-Webhook-Id headers, calls Verify with the
// tenant's webhook secret, then Map, and builds each event id as "<X-Shopify-Webhook-Id>:<Suffix>".
// Suffixes are fixed per event role, so a redelivery of the same webhook (same webhook id) yields
// the same event ids and is deduplicated downstream.
//
// Bodies are decoded generically (numbers kept as json.Number), so Shopify's large integer ids
// survive exactly and a field of an unexpected type is skipped instead of failing the webhook:
// only a body that is not one JSON object is an error.
package shopify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Header names Shopify sets on every webhook delivery.
const (
	HeaderHMAC       = "X-Shopify-Hmac-SHA256"
	HeaderTopic      = "X-Shopify-Topic"
	HeaderWebhookID  = "X-Shopify-Webhook-Id"
	HeaderShopDomain = "X-Shopify-Shop-Domain"
	HeaderAPIVersion = "X-Shopify-API-Version"
)

// Topics this package maps. Any other topic is acknowledged and ignored.
const (
	TopicOrdersCreate    = "orders/create"
	TopicOrdersPaid      = "orders/paid"
	TopicCheckoutsCreate = "checkouts/create"
	TopicCustomersCreate = "customers/create"
	TopicCustomersUpdate = "customers/update"
	TopicCartsCreate     = "carts/create"
	TopicCartsUpdate     = "carts/update"
)

// Event types produced by Map.
const (
	EventOrderCompleted    = "order_completed"
	EventOrderPaid         = "order_paid"
	EventCheckoutStarted   = "checkout_started"
	EventContextIdentified = "context_identified"
	EventCustomerCreated   = "customer_created"
	EventCartCreated       = "cart_created"
	EventCartUpdated       = "cart_updated"
)

// SuffixIdentify is the Suffix of every context_identified event. Other events use their event
// type as Suffix.
const SuffixIdentify = "identify"

// Errors returned by Verify and Map; match with errors.Is. Both are errs.CodedError values, so
// api/errors.go answers 401 bad_signature and 400 bad_payload without special cases.
var (
	// ErrBadSignature: the X-Shopify-Hmac-SHA256 header is missing, malformed or does not match
	// the body, or no secret is configured.
	ErrBadSignature error = &errs.CodedError{Kind: errs.ErrUnauthenticated, Code: "bad_signature", Msg: "shopify webhook signature is missing or invalid"}
	// ErrBadPayload: the body of a supported topic is not a single JSON object.
	ErrBadPayload error = &errs.CodedError{Kind: errs.ErrInvalid, Code: "bad_payload", Msg: "shopify webhook payload is malformed"}
)

// Event is one mapped event.
type Event struct {
	UserID     string
	EventType  string         // snake_case
	OccurredAt time.Time      // from the resource (created_at / updated_at / processed_at), else receivedAt; UTC
	Payload    map[string]any // JSON-shaped: string, float64, int, bool, []any, map[string]any
	Suffix     string         // distinguishes several events of one webhook; event id = "<X-Shopify-Webhook-Id>:<Suffix>"
}

// Verify checks X-Shopify-Hmac-SHA256: base64(HMAC-SHA256(secret, rawBody)), compared in
// constant time on the decoded bytes. It returns ErrBadSignature (wrapped with the reason) for an
// empty secret and for a missing, malformed or mismatching header. rawBody must be the exact bytes
// received, before any parsing.
func Verify(secret []byte, rawBody []byte, header string) error {
	if len(secret) == 0 {
		// An empty key is a key anyone can use: refuse rather than accept forgeries.
		return fmt.Errorf("%w: no webhook secret configured", ErrBadSignature)
	}
	header = strings.TrimSpace(header)
	if header == "" {
		return fmt.Errorf("%w: missing %s header", ErrBadSignature, HeaderHMAC)
	}
	got, err := base64.StdEncoding.Strict().DecodeString(header)
	if err != nil {
		return fmt.Errorf("%w: header is not base64", ErrBadSignature)
	}
	if len(got) != sha256.Size {
		return fmt.Errorf("%w: header decodes to %d bytes, want %d", ErrBadSignature, len(got), sha256.Size)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(rawBody)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: signature does not match the body", ErrBadSignature)
	}
	return nil
}

// SupportedTopics lists the topics Map turns into events, sorted. The slice is the caller's.
func SupportedTopics() []string {
	return []string{
		TopicCartsCreate,
		TopicCartsUpdate,
		TopicCheckoutsCreate,
		TopicCustomersCreate,
		TopicCustomersUpdate,
		TopicOrdersCreate,
		TopicOrdersPaid,
	}
}

// Map maps one webhook. Unknown topics return (nil, nil) so the caller answers 200 and ignores
// them. A body of a known topic that is not one JSON object returns ErrBadPayload wrapped with the
// reason. A webhook without any identity (no customer id, no e-mail, and for carts no token)
// returns (nil, nil) as well: no user id is invented. Malformed fields never fail the webhook;
// they are omitted from the payload.
func Map(topic string, body []byte, receivedAt time.Time) ([]Event, error) {
	topic = strings.ToLower(strings.TrimSpace(topic))
	var mapper func(map[string]any, time.Time) []Event
	switch topic {
	case TopicOrdersCreate:
		mapper = func(o map[string]any, at time.Time) []Event { return mapOrder(o, at, EventOrderCompleted) }
	case TopicOrdersPaid:
		mapper = func(o map[string]any, at time.Time) []Event { return mapOrder(o, at, EventOrderPaid) }
	case TopicCheckoutsCreate:
		mapper = mapCheckout
	case TopicCustomersCreate:
		mapper = func(c map[string]any, at time.Time) []Event { return mapCustomer(c, at, true) }
	case TopicCustomersUpdate:
		mapper = func(c map[string]any, at time.Time) []Event { return mapCustomer(c, at, false) }
	case TopicCartsCreate:
		mapper = func(c map[string]any, at time.Time) []Event { return mapCart(c, at, EventCartCreated) }
	case TopicCartsUpdate:
		mapper = func(c map[string]any, at time.Time) []Event { return mapCart(c, at, EventCartUpdated) }
	default:
		return nil, nil
	}
	obj, err := decodeObject(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadPayload, topic, err)
	}
	events := mapper(obj, receivedAt.UTC())
	if len(events) == 0 {
		return nil, nil
	}
	return events, nil
}

// decodeObject decodes body as exactly one JSON object, keeping numbers as json.Number.
func decodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty body")
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("body is %s, not a JSON object", jsonKind(v))
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "not an object"
}
