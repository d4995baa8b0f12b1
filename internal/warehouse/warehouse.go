// Package warehouse stores events for analytics and segment queries: BigQuery in production, a
// Postgres schema "warehouse" with the same columns as the embedded default. Both are written by
// the event loader in batches and idempotently on (tenant_id, event_id).
package warehouse

import (
	"context"
	"encoding/json"
	"time"
)

// Event is one stored event: the columns of the warehouse table.
type Event struct {
	TenantID   int64           `json:"tenant_id"`
	EventID    string          `json:"event_id"` // the client's message_id, or one generated at receipt
	UserID     string          `json:"user_id"`
	EventType  string          `json:"event_type"`
	OccurredAt time.Time       `json:"occurred_at"`
	ReceivedAt time.Time       `json:"received_at"`
	Payload    json.RawMessage `json:"payload"` // a JSON object, "{}" when empty
	// AnonymousID is the anonymous id the event carried ("" for none). UserID is the subject the
	// event was sent as: the user id when one was given, otherwise this anonymous id.
	AnonymousID string `json:"anonymous_id,omitempty"`
	// LinkAuth is how far the sender vouched for UserID, for the identity graph's signed-link
	// rule; not a warehouse column. "" is a server key (sk_, webhooks: trusted), LinkSession a
	// browser session whose signature did not prove UserID, LinkVerified one whose did.
	LinkAuth string `json:"link_auth,omitempty"`
}

// LinkAuth values.
const (
	LinkSession  = "session"
	LinkVerified = "verified"
)

// Writer is a warehouse the loader writes to.
type Writer interface {
	// Name is the technology: "postgres" or "bigquery" (the key of the ingestion health check).
	Name() string
	// Write stores events; an event whose (TenantID, EventID) is already stored is skipped, so a
	// redelivered batch is stored once. It returns how many events were new.
	Write(ctx context.Context, events []Event) (int, error)
	// Check reports whether the warehouse is reachable.
	Check(ctx context.Context) error
}
