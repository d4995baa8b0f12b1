package connector

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cohort-dev/cohort/internal/connector/braze"
	"github.com/cohort-dev/cohort/internal/connector/klaviyo"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/talonone"
	"github.com/cohort-dev/cohort/internal/errs"
)

// Platforms builds the platform adapter of a connector: the factory of the one adapter
// interface.
type Platforms struct {
	// HTTP is the outbound client (safehttp: no private or loopback addresses unless
	// COHORT_ALLOW_PRIVATE_NETWORKS).
	HTTP *http.Client
	// KlaviyoBaseURL is COHORT_KLAVIYO_API_URL ("" = https://a.klaviyo.com).
	KlaviyoBaseURL string
	// Limiters holds each connector's token buckets for the life of the process.
	Limiters *platform.Limiters
	Klaviyo  klaviyo.Options
	// Permanent are network errors not worth retrying besides safehttp's refusals (a blocked
	// destination, a bad URL, a redirect loop), which every adapter's caller already treats so.
	Permanent []error
}

// New returns the adapter of the connector whose credentials are c.
func (p *Platforms) New(c *Credentials) (platform.Platform, error) {
	limiter := func(group string, l platform.Limit) *platform.Limiter {
		return p.Limiters.Get(fmt.Sprintf("%s:%d:%s", c.Kind, c.ConnectorID, group), l)
	}
	str := func(k string) string { s, _ := c.Config[k].(string); return s }
	key := c.Secrets["api_key"]
	if key == "" {
		return nil, fmt.Errorf("connector %d has no api_key: %w", c.ConnectorID, errs.ErrInvalid)
	}
	switch c.Kind {
	case KindKlaviyo:
		base := p.KlaviyoBaseURL
		if base == "" {
			base = klaviyo.DefaultBaseURL
		}
		return klaviyo.New(klaviyo.Config{BaseURL: base, ListID: str("list_id"), APIKey: key}, p.HTTP, limiter, p.Klaviyo, p.Permanent...), nil
	case KindBraze:
		attr := str("attribute")
		if attr == "" {
			attr = DefaultBrazeAttribute(c.SegmentID)
		}
		return braze.New(braze.Config{RESTEndpoint: str("rest_endpoint"), APIKey: key, Attribute: attr}, p.HTTP, limiter, p.Permanent...), nil
	case KindTalonOne:
		var audience int64
		switch v := c.Config["audience_id"].(type) {
		case json.Number:
			audience, _ = v.Int64()
		case float64:
			audience = int64(v)
		}
		if audience <= 0 {
			return nil, fmt.Errorf("connector %d has no audience_id: %w", c.ConnectorID, errs.ErrInvalid)
		}
		return talonone.New(talonone.Config{BaseURL: str("base_url"), APIKey: key, AudienceID: audience}, p.HTTP, limiter, p.Permanent...), nil
	}
	return nil, fmt.Errorf("connector %d: unknown kind %q: %w", c.ConnectorID, c.Kind, errs.ErrInvalid)
}
