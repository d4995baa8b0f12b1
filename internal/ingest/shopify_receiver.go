package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest/shopify"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// WebhookSecrets finds a tenant's storefront webhook secret by slug (errs.ErrNotFound if none).
type WebhookSecrets func(ctx context.Context, slug string) (tenantID int64, secret []byte, err error)

// ShopifyReceiver verifies storefront webhooks and queues the events they map to.
type ShopifyReceiver struct {
	secrets WebhookSecrets
	svc     *Service
	now     func() time.Time
}

func NewShopifyReceiver(secrets WebhookSecrets, svc *Service, now func() time.Time) *ShopifyReceiver {
	return &ShopifyReceiver{secrets: secrets, svc: svc, now: now}
}

// ShopifyDelivery is one webhook request.
type ShopifyDelivery struct {
	TenantSlug, Topic, WebhookID, HMAC string
	Body                               []byte
}

// Receive verifies the HMAC over the raw body, maps the topic to events and publishes them. Event
// ids are "shopify:<webhook id>:<n>", so a redelivered webhook is stored once. It returns how many
// events were queued (0 for topics that map to nothing).
func (r *ShopifyReceiver) Receive(ctx context.Context, d ShopifyDelivery) (int, error) {
	tenantID, secret, err := r.secrets(ctx, d.TenantSlug)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return 0, errs.Coded(errs.ErrNotFound, "not_found", "no tenant %q", d.TenantSlug)
		}
		return 0, err
	}
	if err := shopify.Verify(secret, d.Body, d.HMAC); err != nil {
		r.svc.errlog.Record(tenantID, ErrorWebhookHMAC, "shopify "+d.Topic+": signature mismatch")
		return 0, errs.Coded(errs.ErrUnauthenticated, "bad_signature", "X-Shopify-Hmac-SHA256 does not match the body")
	}
	if d.WebhookID == "" {
		return 0, errs.Invalid("X-Shopify-Webhook-Id", "header is required")
	}
	received := r.now().UTC()
	mapped, err := shopify.Map(d.Topic, d.Body, received)
	if err != nil {
		r.svc.errlog.Record(tenantID, ErrorWebhook, "shopify "+d.Topic+": "+err.Error())
		return 0, &errs.ValidationError{Code: "invalid_payload", Msg: err.Error()}
	}
	events := make([]warehouse.Event, 0, len(mapped))
	for _, m := range mapped {
		in := wire.Input{UserID: m.UserID, EventType: m.EventType, MessageID: fmt.Sprintf("shopify:%s:%s", d.WebhookID, m.Suffix)}
		occurred := m.OccurredAt.UTC().Format(time.RFC3339Nano)
		in.OccurredAt = &occurred
		payload, err := marshalPayload(m.Payload)
		if err != nil {
			return 0, err
		}
		in.Payload = payload
		ev, rej := Validate(in, tenantID, received)
		if rej != nil {
			r.svc.errlog.Record(tenantID, ErrorWebhook, "shopify "+d.Topic+": "+rej.Code+": "+rej.Error())
			continue
		}
		events = append(events, ev)
	}
	if err := r.svc.PublishEvents(ctx, tenantID, events); err != nil {
		return 0, err
	}
	return len(events), nil
}
