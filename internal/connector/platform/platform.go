// Package platform is what every activation platform adapter (Klaviyo, Braze, Talon.One) shares:
// the adapter interface the sync engine drives, the platform error kinds, per-connector token
// buckets, and an HTTP caller that waits on them, honours 429 answers and never lets a key into
// an error message.
package platform

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Member is one segment member as an adapter sees it.
type Member struct {
	UserID     string
	Email      string // the profile's email trait; "" when it has none
	PlatformID string // the platform's own id when known (Klaviyo profile id); "" otherwise
}

// Outcome is what one Add or Remove call achieved.
type Outcome struct {
	// Done are the members the platform acknowledged, with PlatformID filled in where the call
	// learned it. Only these move the connector's record of what the platform holds.
	Done []Member
	// Skipped counts members not sent: no e-mail where the platform keys on it, or (on remove)
	// not known to the platform at all.
	Skipped int
	// Gone are the skipped members of a remove that the platform does not know at all (a
	// deleted profile): they are not on the audience, so they are recorded as removed without
	// counting as removed.
	Gone []Member
	// Failed counts items the platform rejected one by one while accepting the request.
	Failed int
	// FailedMembers are the rejected members when the platform says which (they stay pending).
	FailedMembers []Member
}

// Platform pushes membership changes to one connector's audience. Every call must be idempotent:
// a retried call after a lost answer must not double-apply.
type Platform interface {
	// AddChunk and RemoveChunk are the most members one Add or Remove call takes.
	AddChunk() int
	RemoveChunk() int
	Add(ctx context.Context, members []Member) (Outcome, error)
	Remove(ctx context.Context, members []Member) (Outcome, error)
}

// Error is a platform call that failed. Message is the platform's own message (scrubbed of
// secrets); Retryable says whether trying again later may succeed (429, 5xx, network).
type Error struct {
	Platform   string
	Status     int // HTTP status; 0 when no answer arrived
	Message    string
	Retryable  bool
	RetryAfter time.Duration // the platform's requested wait, when it gave one
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return e.Platform + ": " + e.Message
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.Platform, e.Status, e.Message)
}

// Scrub replaces every occurrence of each secret in s with "***", so a platform echoing a key
// back (or a URL carrying one) cannot leak it into last_error, logs or workflow histories.
func Scrub(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	return s
}
