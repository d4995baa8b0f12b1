// Package talonone is the Talon.One activation adapter: POST {base_url}/v2/customer_audiences
// (Integration API, "Update multiple customer profiles' audiences") with up to 1,000 items
// {action: add|delete, profileIntegrationId: <user id>, audienceId}, "Authorization: ApiKey-v1
// <key>". Adding a profile that is in the audience, or deleting one that is not, changes nothing,
// so retries are harmless.
package talonone

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cohort-dev/cohort/internal/connector/platform"
)

// BatchSize is the most items Talon.One takes per request.
const BatchSize = 1000

// LimitAudiences keeps a connector at a modest pace; Talon.One publishes no fixed limit and
// answers 429 with Retry-After when a deployment is busy.
var LimitAudiences = platform.Limit{Burst: 50, Steady: 3000}

// Config is one connector's Talon.One settings.
type Config struct {
	BaseURL    string // https://yourbaseurl.talon.one
	APIKey     string
	AudienceID int64
}

// Adapter pushes one connector's changes to Talon.One.
type Adapter struct {
	cfg    Config
	caller *platform.Caller
}

// New returns the adapter of cfg.
func New(cfg Config, hc *http.Client, limiter func(group string, l platform.Limit) *platform.Limiter, permanent ...error) *Adapter {
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Adapter{cfg: cfg, caller: platform.NewJSONCaller("talon_one", hc, limiter("audiences", LimitAudiences),
		"ApiKey-v1 "+cfg.APIKey, cfg.APIKey, errorMessage, permanent)}
}

// AddChunk and RemoveChunk are one request.
func (a *Adapter) AddChunk() int    { return BatchSize }
func (a *Adapter) RemoveChunk() int { return BatchSize }

// Add adds the members' profiles to the audience.
func (a *Adapter) Add(ctx context.Context, members []platform.Member) (platform.Outcome, error) {
	return a.send(ctx, members, "add")
}

// Remove deletes the members' profiles from the audience.
func (a *Adapter) Remove(ctx context.Context, members []platform.Member) (platform.Outcome, error) {
	return a.send(ctx, members, "delete")
}

type item struct {
	Action               string `json:"action"`
	ProfileIntegrationID string `json:"profileIntegrationId"`
	AudienceID           int64  `json:"audienceId"`
}

func (a *Adapter) send(ctx context.Context, members []platform.Member, action string) (platform.Outcome, error) {
	if len(members) == 0 {
		return platform.Outcome{}, nil
	}
	items := make([]item, len(members))
	for i, m := range members {
		items[i] = item{Action: action, ProfileIntegrationID: m.UserID, AudienceID: a.cfg.AudienceID}
	}
	body, err := json.Marshal(map[string]any{"data": items})
	if err != nil {
		return platform.Outcome{}, err
	}
	if _, _, err := a.caller.Do(ctx, "audiences", http.MethodPost, a.cfg.BaseURL+"/v2/customer_audiences", body, 1<<16); err != nil {
		return platform.Outcome{}, err
	}
	return platform.Outcome{Done: members}, nil
}

// errorMessage reads Talon.One's {"message": "...", "errors": [{"title", "details"}]}.
func errorMessage(body []byte) string {
	var doc struct {
		Message string `json:"message"`
		Errors  []struct {
			Title   string `json:"title"`
			Details string `json:"details"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	msg := doc.Message
	if len(doc.Errors) > 0 {
		d := doc.Errors[0].Details
		if d == "" {
			d = doc.Errors[0].Title
		}
		if d != "" && d != msg {
			if msg != "" {
				msg += ": "
			}
			msg += d
		}
	}
	return msg
}
