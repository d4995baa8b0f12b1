package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Caller is who sends events: the tenant, and for session tokens proven by a signature, the user
// every event must be about. BoundAnonymous is the anonymous id of an anonymous session (a tenant
// that requires signed user ids): its events name that id as their subject and carry no user id.
// Browser is a session of a browser key (pk_): the identity graph's signed-link rule applies to
// its identifies.
type Caller struct {
	TenantID       int64
	BoundUser      string
	BoundAnonymous string
	Browser        bool
}

// Service accepts events over HTTP.
type Service struct {
	pub     Publisher
	errlog  *ErrorLog
	now     func() time.Time
	metrics *metrics.Metrics // events skipped, by code
}

// NewService accepts events through pub; WithMetrics counts the events it refuses by code.
func NewService(pub Publisher, errlog *ErrorLog, now func() time.Time, opts ...Option) *Service {
	return &Service{pub: pub, errlog: errlog, now: now, metrics: apply(opts).metrics}
}

// ErrorLog exposes the error log for the errors endpoint.
func (s *Service) ErrorLog() *ErrorLog { return s.errlog }

// decodeFor decodes one event for the caller: a session bound to a user sends only its events.
func decodeFor(c Caller, raw []byte, received time.Time) (warehouse.Event, *Rejection) {
	ev, r := Decode(raw, c.TenantID, received)
	if r == nil && c.BoundUser != "" && ev.UserID != c.BoundUser {
		r = reject("user_mismatch", "user_id", "this session is bound to another user")
	}
	if r == nil && c.BoundAnonymous != "" {
		// Decode makes the anonymous id the subject when no user id is given: any other subject
		// means the event carried a user id.
		switch {
		case ev.AnonymousID == "" || ev.UserID != ev.AnonymousID:
			r = reject("user_mismatch", "user_id", "a user id needs a session whose user_id is signed")
		case ev.AnonymousID != c.BoundAnonymous:
			r = reject("user_mismatch", "anonymous_id", "this session is bound to another anonymous id")
		}
	}
	if r == nil && c.Browser && ev.AnonymousID != "" && ev.EventType == ContextIdentified {
		// An identify that links ids: the loader needs to know whether a signature proved the user.
		ev.LinkAuth = warehouse.LinkSession
		if c.BoundUser != "" && ev.UserID == c.BoundUser {
			ev.LinkAuth = warehouse.LinkVerified
		}
	}
	return ev, r
}

// Track accepts one event: a rejection is a 400 naming the field, and is recorded in the error log.
func (s *Service) Track(ctx context.Context, c Caller, raw []byte) error {
	ev, r := decodeFor(c, raw, s.now())
	if r != nil {
		s.metrics.EventSkipped(r.Code)
		s.errlog.Record(c.TenantID, errorTypeOf(r.Code), r.Code+": "+r.Error())
		return &errs.ValidationError{Code: r.Code, Msg: "event rejected", Fields: map[string]string{r.Field: r.Message}}
	}
	return s.pub.Publish(ctx, c.TenantID, []warehouse.Event{ev})
}

// BatchError is one skipped event of a batch.
type BatchError struct {
	Index   int    `json:"index"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// BatchResult is the answer of the batch endpoint.
type BatchResult struct {
	Queued  int          `json:"queued"`
	Skipped int          `json:"skipped"`
	Errors  []BatchError `json:"errors"`
}

type batchBody struct {
	Events []json.RawMessage `json:"events"`
}

// TrackBatch accepts up to MaxBatchEvents events; invalid ones are skipped and reported, the rest
// are published as one message.
func (s *Service) TrackBatch(ctx context.Context, c Caller, body []byte) (BatchResult, error) {
	events, rejected, err := DecodeBatch(body, c, s.now())
	if err != nil {
		return BatchResult{}, err
	}
	for _, e := range rejected {
		s.metrics.EventSkipped(e.Code)
		s.errlog.Record(c.TenantID, errorTypeOf(e.Code), "events["+strconv.Itoa(e.Index)+"] "+e.Code+": "+e.Message)
	}
	if len(events) > 0 {
		if err := s.pub.Publish(ctx, c.TenantID, events); err != nil {
			return BatchResult{}, err
		}
	}
	return BatchResult{Queued: len(events), Skipped: len(rejected), Errors: rejected}, nil
}

// DecodeBatch decodes and validates the body of a batch for the caller, received at received:
// the accepted events, and the rejected ones by index. An error is about the body as a whole (a
// ValidationError: not JSON, no events array, too many events).
func DecodeBatch(body []byte, c Caller, received time.Time) ([]warehouse.Event, []BatchError, error) {
	// The fast path splits the body into its events in place and decodes each; it stands only if
	// the body is then known to be what json.Unmarshal would read the same way (see wire.SplitBatch).
	// Anything else (bad JSON, an odd layout, too many events) takes encoding/json's path, which
	// decides the answer.
	if raws, ok := wire.SplitBatch(body, MaxBatchEvents); ok {
		if events, rejected, ok := decodeBatch(c, raws, received, true); ok {
			return events, rejected, nil
		}
	}
	var in batchBody
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, &errs.ValidationError{Code: "invalid_json", Msg: "body must be {\"events\": [...]}: " + err.Error()}
	}
	if in.Events == nil {
		return nil, nil, &errs.ValidationError{Code: "validation_failed", Msg: "events is required", Fields: map[string]string{"events": "required: an array of events"}}
	}
	if len(in.Events) > MaxBatchEvents {
		return nil, nil, &errs.ValidationError{Code: "batch_too_large",
			Msg: fmt.Sprintf("a batch holds at most %d events; got %d", MaxBatchEvents, len(in.Events)), Fields: map[string]string{"events": fmt.Sprintf("at most %d events", MaxBatchEvents)}}
	}
	events, rejected, _ := decodeBatch(c, in.Events, received, false)
	return events, rejected, nil
}

// decodeBatch decodes and validates the events of a batch. With strict (the fast path), it gives
// up (false) at the first event that is not valid JSON or was not parsed at all (too large): only
// encoding/json can then tell whether the body itself is valid JSON.
func decodeBatch(c Caller, raws []json.RawMessage, received time.Time, strict bool) ([]warehouse.Event, []BatchError, bool) {
	events := make([]warehouse.Event, 0, len(raws))
	rejected := []BatchError{}
	for i, raw := range raws {
		ev, r := decodeFor(c, raw, received)
		if r != nil {
			if strict && (r.Code == "invalid_json" || r.Code == "event_too_large") {
				return nil, nil, false
			}
			rejected = append(rejected, BatchError{Index: i, Code: r.Code, Message: r.Error()})
			continue
		}
		events = append(events, ev)
	}
	return events, rejected, true
}

// PublishEvents publishes already-built events (storefront webhooks). Their payloads must be
// JSON objects, as Publisher requires: an event that breaks this is a programming error, refused
// here rather than published in a message the loader could not read.
func (s *Service) PublishEvents(ctx context.Context, tenantID int64, events []warehouse.Event) error {
	if len(events) == 0 {
		return nil
	}
	for i, e := range events {
		if len(e.Payload) == 0 || e.Payload[0] != '{' || !json.Valid(e.Payload) {
			return fmt.Errorf("event %d (%s): payload is not a JSON object", i, e.EventType)
		}
	}
	return s.pub.Publish(ctx, tenantID, events)
}
