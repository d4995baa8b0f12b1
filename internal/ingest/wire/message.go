package wire

import "github.com/cohort-dev/cohort/internal/warehouse"

// Message is what one bus message carries: the accepted events of one request. One message per
// request keeps publish cost flat in the batch size; a request whose message would exceed the
// bus's limit is split into several.
type Message struct {
	V        int               `json:"v"`
	TenantID int64             `json:"tenant_id"`
	Events   []warehouse.Event `json:"events"`
}

// MessageVersion is the current Message format.
const MessageVersion = 1
