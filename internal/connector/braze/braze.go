// Package braze is the Braze activation adapter. Braze has no endpoint that adds users to a
// segment; a Braze segment is built on a custom attribute instead. Membership is therefore the
// boolean custom attribute (default cohort_segment_<segment id>) set through POST /users/track:
// true on enter, false on exit, at most 75 attribute objects per request, "Authorization: Bearer
// <REST API key>". Setting an attribute to the value it has is a no-op, so retries are harmless.
package braze

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cohort-dev/cohort/internal/connector/platform"
)

// TrackSize is the most attribute objects Braze takes per /users/track request.
const TrackSize = 75

// LimitTrack is Braze's /users/track limit (3,000 requests per 3 seconds per workspace), kept
// well below so other senders of the workspace keep room.
var LimitTrack = platform.Limit{Burst: 500, Steady: 30000}

// Config is one connector's Braze settings.
type Config struct {
	RESTEndpoint string // https://rest.iad-01.braze.com
	APIKey       string
	Attribute    string // the boolean custom attribute that carries membership
}

// Adapter pushes one connector's changes to Braze.
type Adapter struct {
	cfg    Config
	caller *platform.Caller
}

// New returns the adapter of cfg.
func New(cfg Config, hc *http.Client, limiter func(group string, l platform.Limit) *platform.Limiter, permanent ...error) *Adapter {
	cfg.RESTEndpoint = strings.TrimRight(cfg.RESTEndpoint, "/")
	return &Adapter{cfg: cfg, caller: platform.NewJSONCaller("braze", hc, limiter("track", LimitTrack),
		"Bearer "+cfg.APIKey, cfg.APIKey, errorMessage, permanent)}
}

// AddChunk and RemoveChunk are one /users/track request.
func (a *Adapter) AddChunk() int    { return TrackSize }
func (a *Adapter) RemoveChunk() int { return TrackSize }

// Add sets the attribute to true for the members.
func (a *Adapter) Add(ctx context.Context, members []platform.Member) (platform.Outcome, error) {
	return a.track(ctx, members, true)
}

// Remove sets the attribute to false for the members.
func (a *Adapter) Remove(ctx context.Context, members []platform.Member) (platform.Outcome, error) {
	return a.track(ctx, members, false)
}

func (a *Adapter) track(ctx context.Context, members []platform.Member, value bool) (platform.Outcome, error) {
	var out platform.Outcome
	if len(members) == 0 {
		return out, nil
	}
	attrs := make([]map[string]any, len(members))
	for i, m := range members {
		attrs[i] = map[string]any{"external_id": m.UserID, a.cfg.Attribute: value}
	}
	body, err := json.Marshal(map[string]any{"attributes": attrs})
	if err != nil {
		return out, err
	}
	_, data, err := a.caller.Do(ctx, "track", http.MethodPost, a.cfg.RESTEndpoint+"/users/track", body, 1<<20)
	if err != nil {
		return out, err
	}
	// 201 with per-object errors: {"message":"success","errors":[{"type":..,"input_array":"attributes","index":3}]}
	var resp struct {
		Errors []struct {
			InputArray string `json:"input_array"`
			Index      *int   `json:"index"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(data, &resp)
	failed := map[int]bool{}
	for _, e := range resp.Errors {
		if e.Index != nil && (e.InputArray == "" || e.InputArray == "attributes") && *e.Index >= 0 && *e.Index < len(members) {
			failed[*e.Index] = true
		}
	}
	for i, m := range members {
		if failed[i] {
			out.Failed++
			out.FailedMembers = append(out.FailedMembers, m)
			continue
		}
		out.Done = append(out.Done, m)
	}
	return out, nil
}

// errorMessage reads Braze's {"message": "..."} (plus the first error's type when present).
func errorMessage(body []byte) string {
	var doc struct {
		Message string `json:"message"`
		Errors  []struct {
			Type string `json:"type"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	msg := doc.Message
	if len(doc.Errors) > 0 && doc.Errors[0].Type != "" {
		if msg != "" {
			msg += ": "
		}
		msg += doc.Errors[0].Type
	}
	return msg
}
