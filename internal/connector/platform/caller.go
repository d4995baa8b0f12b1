package platform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/safehttp"
)

// Caller makes one adapter's HTTP calls: it waits on the connector's token bucket before every
// request, waits out 429 answers (Retry-After or X-RateLimit-Reset) a few times in place, and
// turns every other failure into an *Error: 5xx, 408 and network errors retryable (the activity
// retries them with backoff), 4xx permanent with the platform's own message, and so are the
// outbound client's refusals (safehttp.Permanent: a blocked destination, a bad URL, a redirect
// loop), which retrying cannot change.
type Caller struct {
	Platform string // "klaviyo", used in messages
	HTTP     *http.Client
	// Limiter returns the bucket of an endpoint group ("" for the default group).
	Limiter func(group string) *Limiter
	// Header sets the authentication and protocol headers of every request.
	Header func(h http.Header)
	// Message extracts the platform's error message from an error body ("" when none).
	Message func(body []byte) string
	// Secrets are scrubbed from every message.
	Secrets []string
	// Max429Waits is how many 429 answers one call waits out in place (default 5), each for at
	// most MaxWait (default 60s); beyond that the call fails retryable with RetryAfter set.
	Max429Waits int
	MaxWait     time.Duration
	// Sleep waits d or until ctx ends (tests shorten it); nil is a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for X-RateLimit-Reset; nil is time.Now.
	Now func() time.Time
	// PermanentNetworkErrors are further failures retrying cannot fix, besides safehttp's
	// refusals: they fail the call non-retryable.
	PermanentNetworkErrors []error
}

// maxErrorBody bounds how much of an error answer is read for its message.
const maxErrorBody = 64 << 10

// Do sends method url with body (nil: none) in group's bucket and returns the status and the
// body of a 2xx answer (at most maxBody bytes). Any other outcome is an *Error.
func (c *Caller) Do(ctx context.Context, group, method, url string, body []byte, maxBody int64) (int, []byte, error) {
	waits := 0
	maxWaits := c.Max429Waits
	if maxWaits <= 0 {
		maxWaits = 5
	}
	for {
		if c.Limiter != nil {
			if err := c.Limiter(group).Wait(ctx); err != nil {
				return 0, nil, c.networkError(err)
			}
		}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, rd)
		if err != nil {
			return 0, nil, &Error{Platform: c.Platform, Message: "bad request url: " + c.scrub(err.Error())}
		}
		if c.Header != nil {
			c.Header(req.Header)
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return 0, nil, c.networkError(err)
		}
		status := resp.StatusCode
		if status >= 200 && status < 300 {
			data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
			resp.Body.Close()
			if err != nil {
				return status, nil, c.networkError(err)
			}
			if int64(len(data)) > maxBody {
				return status, nil, &Error{Platform: c.Platform, Status: status, Message: fmt.Sprintf("answer larger than %d bytes", maxBody)}
			}
			return status, data, nil
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		msg := ""
		if c.Message != nil {
			msg = c.scrub(c.Message(data))
		}
		if msg == "" {
			// Scrub before cutting, so a key straddling the cut cannot leave a prefix behind.
			msg = c.scrub(strings.TrimSpace(string(data)))
			if len(msg) > 300 {
				msg = strings.ToValidUTF8(msg[:300], "") + "..."
			}
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		e := &Error{Platform: c.Platform, Status: status, Message: msg}
		switch {
		case status == http.StatusTooManyRequests:
			e.Retryable = true
			e.RetryAfter = c.retryAfter(resp.Header)
			if waits < maxWaits && e.RetryAfter <= c.maxWait() {
				waits++
				if err := c.sleep(ctx, max(e.RetryAfter, 100*time.Millisecond)); err != nil {
					return status, nil, c.networkError(err)
				}
				continue
			}
		case status >= 500, status == http.StatusRequestTimeout:
			e.Retryable = true
		}
		return status, nil, e
	}
}

func (c *Caller) maxWait() time.Duration {
	if c.MaxWait > 0 {
		return c.MaxWait
	}
	return time.Minute
}

func (c *Caller) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter reads how long a 429 asks to wait: Retry-After (seconds or an HTTP date), else
// X-RateLimit-Reset (Braze: the epoch second the window resets), else one second.
func (c *Caller) retryAfter(h http.Header) time.Duration {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
			// Clamped: a absurd value must not overflow into a negative wait.
			return time.Duration(min(secs, float64(24*time.Hour/time.Second)) * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(0, t.Sub(now()))
		}
	}
	if v := strings.TrimSpace(h.Get("X-RateLimit-Reset")); v != "" {
		if epoch, err := strconv.ParseInt(v, 10, 64); err == nil {
			return min(max(0, time.Unix(epoch, 0).Sub(now())), 24*time.Hour)
		}
	}
	return time.Second
}

// blockedMessage is what a tenant reads when the outbound client refuses the destination: no
// address and no URL (safehttp logs what the host resolved to for the operator).
const blockedMessage = "destination not allowed: the platform URL must reach a public address"

func (c *Caller) networkError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := c.scrub(err.Error())
	if errors.Is(err, safehttp.ErrBlockedAddress) {
		msg = blockedMessage
	}
	return &Error{Platform: c.Platform, Message: msg, Retryable: !c.isPermanent(err)}
}

func (c *Caller) scrub(s string) string { return Scrub(s, c.Secrets...) }

func (c *Caller) isPermanent(err error) bool {
	if safehttp.Permanent(err) {
		return true
	}
	for _, pe := range c.PermanentNetworkErrors {
		if errors.Is(err, pe) {
			return true
		}
	}
	return false
}

// NewJSONCaller is the Caller of a plain JSON API authenticated by one Authorization value
// ("Bearer <key>", "ApiKey-v1 <key>"), all of whose requests share one bucket.
func NewJSONCaller(name string, hc *http.Client, bucket *Limiter, authorization, secret string, message func([]byte) string, permanent []error) *Caller {
	return &Caller{
		Platform: name,
		HTTP:     hc,
		Limiter:  func(string) *Limiter { return bucket },
		Header: func(h http.Header) {
			h.Set("Authorization", authorization)
			h.Set("Content-Type", "application/json")
			h.Set("Accept", "application/json")
		},
		Message:                message,
		Secrets:                []string{secret},
		PermanentNetworkErrors: permanent,
	}
}
