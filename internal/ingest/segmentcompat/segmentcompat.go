// Package segmentcompat accepts Segment's HTTP tracking API (batch, track, identify, page, screen,
// group, alias) and maps its messages onto Cohort's native events, so that Segment SDKs can send
// to Cohort by changing the host. Mapping (Segment spec -> Cohort event):
//
//   - track: event_type = the event name in snake_case (EventType), payload = properties;
//   - identify: event_type context_identified, payload = traits; with both userId and
//     anonymousId it links the anonymous id to the user (identity graph);
//   - page: event_type page_viewed, payload = properties plus name and category when given
//     (the message's name and category win over properties of the same key);
//   - screen: event_type screen_viewed, payload as for page;
//   - group: event_type group_identified, payload = traits plus group_id (groupId, required);
//   - alias: event_type context_aliased, user_id = userId, anonymous_id = previousId (both
//     required), payload {}: it links the previous id to the user (identity graph, source alias);
//   - user_id = userId, anonymous_id = anonymousId (numbers are taken as their decimal text); at
//     least one is required, and the event's subject is the user id, else the anonymous id;
//   - message_id = messageId (the warehouse stores an id once: retries deduplicate);
//   - occurred_at = timestamp, else originalTimestamp, else the time of receipt;
//   - sent_at = the message's sentAt, else the batch's: with occurred_at, it corrects the
//     client's clock exactly as on the native endpoints;
//   - context, integrations and other fields are not stored.
//
// Each mapped event then goes through ingest.Validate, so limits and validation are the native
// endpoints' own; rejections name Segment's fields (userId, event, timestamp, properties ...).
package segmentcompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Message types.
const (
	TypeTrack    = "track"
	TypeIdentify = "identify"
	TypePage     = "page"
	TypeScreen   = "screen"
	TypeGroup    = "group"
	TypeAlias    = "alias"
	PageViewed   = "page_viewed"
	ScreenViewed = "screen_viewed"
	// GroupIdentified is a group message's event_type.
	GroupIdentified = "group_identified"
)

// ID is a Segment user or anonymous id: a string, or a number taken as its text.
type ID string

// UnmarshalJSON accepts a string, a number or null.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*id = ""
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = ID(s)
	case b[0] == '-' || (b[0] >= '0' && b[0] <= '9'):
		*id = ID(b)
	default:
		return &json.UnmarshalTypeError{Value: "non-string", Type: reflect.TypeFor[string]()}
	}
	return nil
}

// Message is the part of a Segment message that Cohort reads.
type Message struct {
	Type              string          `json:"type"`
	Event             string          `json:"event"`
	Name              string          `json:"name"`
	Category          string          `json:"category"`
	UserID            ID              `json:"userId"`
	AnonymousID       ID              `json:"anonymousId"`
	MessageID         string          `json:"messageId"`
	Timestamp         *string         `json:"timestamp"`
	OriginalTimestamp *string         `json:"originalTimestamp"`
	SentAt            *string         `json:"sentAt"`
	Properties        json.RawMessage `json:"properties"`
	Traits            json.RawMessage `json:"traits"`
	PreviousID        ID              `json:"previousId"` // alias
	GroupID           ID              `json:"groupId"`    // group
}

// Rejection says why one message was not accepted; Field is Segment's name of the field.
type Rejection struct {
	Code    string
	Field   string
	Message string
}

func (r *Rejection) Error() string { return r.Field + ": " + r.Message }

func reject(code, field, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// EventType turns a Segment event name into an event_type: trimmed, lower-cased, every run of
// characters other than ASCII letters and digits made one "_", and "_" trimmed from both ends
// ("Order Completed" -> "order_completed"). The result may still be invalid (empty, too long, or
// starting with a digit): Map rejects it.
func EventType(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	sep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
			fallthrough
		case (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteByte(c)
		default:
			sep = true
		}
	}
	return b.String()
}

func validEventType(s string) bool {
	return len(s) > 0 && len(s) <= 128 && s[0] >= 'a' && s[0] <= 'z'
}

// Map turns one message into the native event input. forceType, when set, is the type of the
// endpoint the message was sent to (/v1/track ...) and overrides the message's own; batchSentAt
// is the batch's sentAt, used when the message has none.
func Map(m *Message, forceType string, batchSentAt *string) (wire.Input, *Rejection) {
	typ := forceType
	if typ == "" {
		typ = strings.ToLower(strings.TrimSpace(m.Type))
	}
	in := wire.Input{MessageID: m.MessageID}
	switch typ {
	case TypeTrack:
		if strings.TrimSpace(m.Event) == "" {
			return in, reject("invalid_event", "event", "is required for a track message")
		}
		in.EventType = EventType(m.Event)
		if !validEventType(in.EventType) {
			return in, reject("invalid_event", "event", "%q maps to the event_type %q, which is not valid: it must start with a letter and be at most 128 characters", truncate(m.Event, 140), truncate(in.EventType, 140))
		}
		in.Payload = m.Properties
	case TypeIdentify:
		in.EventType = ingest.ContextIdentified
		in.Payload = m.Traits
	case TypePage, TypeScreen:
		in.EventType = PageViewed
		if typ == TypeScreen {
			in.EventType = ScreenViewed
		}
		p, r := pagePayload(m, "properties", m.Properties)
		if r != nil {
			return in, r
		}
		in.Payload = p
	case TypeGroup:
		if m.GroupID == "" {
			return in, reject("invalid_group_id", "groupId", "is required for a group message")
		}
		in.EventType = GroupIdentified
		p, r := withFields(m.Traits, "traits", map[string]string{"group_id": string(m.GroupID)})
		if r != nil {
			return in, r
		}
		in.Payload = p
	case TypeAlias:
		if m.UserID == "" {
			return in, reject("invalid_user_id", "userId", "is required for an alias message")
		}
		if m.PreviousID == "" {
			return in, reject("invalid_previous_id", "previousId", "is required for an alias message")
		}
		in.EventType = ingest.ContextAliased
		in.UserID, in.AnonymousID = string(m.UserID), string(m.PreviousID)
	case "":
		return in, reject("invalid_type", "type", "is required: track, identify, page, screen, group or alias")
	default:
		return in, reject("invalid_type", "type", "%q is not a Segment message type; send track, identify, page, screen, group or alias", truncate(typ, 40))
	}
	if typ != TypeAlias {
		if m.UserID == "" && m.AnonymousID == "" {
			return in, reject("invalid_user_id", "userId", "userId or anonymousId is required")
		}
		in.UserID, in.AnonymousID = string(m.UserID), string(m.AnonymousID)
	}
	in.OccurredAt = m.Timestamp
	if in.OccurredAt == nil {
		in.OccurredAt = m.OriginalTimestamp
	}
	in.SentAt = m.SentAt
	if in.SentAt == nil {
		in.SentAt = batchSentAt
	}
	return in, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// pagePayload is a page's (or screen's) properties with its name and category added.
func pagePayload(m *Message, field string, props json.RawMessage) (json.RawMessage, *Rejection) {
	add := map[string]string{}
	if m.Name != "" {
		add["name"] = m.Name
	}
	if m.Category != "" {
		add["category"] = m.Category
	}
	return withFields(props, field, add)
}

// withFields is the object obj (Segment's field) with the string members add set, which win
// over members of the same key.
func withFields(obj json.RawMessage, field string, add map[string]string) (json.RawMessage, *Rejection) {
	if len(add) == 0 {
		return obj, nil
	}
	props := map[string]json.RawMessage{}
	p := bytes.TrimSpace(obj)
	if len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if p[0] != '{' {
			return nil, reject("invalid_payload", field, "must be an object")
		}
		if err := json.Unmarshal(p, &props); err != nil {
			return nil, reject("invalid_payload", field, "must be an object")
		}
	}
	for k, v := range add {
		props[k], _ = json.Marshal(v)
	}
	out, err := json.Marshal(props)
	if err != nil {
		return nil, reject("invalid_payload", field, "%s", err.Error())
	}
	return out, nil
}

// segmentField is Segment's name for a native field named in a rejection.
func segmentField(native string, m *Message, typ string) string {
	switch native {
	case "user_id":
		if m.UserID == "" {
			return "anonymousId"
		}
		return "userId"
	case "anonymous_id":
		if typ == TypeAlias {
			return "previousId"
		}
		return "anonymousId"
	case "event_type":
		return "event"
	case "occurred_at":
		if m.Timestamp == nil {
			return "originalTimestamp"
		}
		return "timestamp"
	case "sent_at":
		return "sentAt"
	case "message_id":
		return "messageId"
	case "payload":
		if typ == TypeIdentify || typ == TypeGroup {
			return "traits"
		}
		return "properties"
	}
	return native
}

// Decode parses, maps and validates one raw message for the tenant, received at received.
func Decode(raw []byte, forceType string, batchSentAt *string, tenantID int64, received time.Time) (warehouse.Event, *Rejection) {
	ev, r, _ := decode(raw, forceType, batchSentAt, tenantID, received, false)
	return ev, r
}

// decode is Decode. With fast, raw is known to be valid UTF-8 and is read by the fast path where
// it can; false then means raw is not valid JSON (or was too odd to tell), and the caller must
// take encoding/json's path for the whole body, which alone decides what an invalid body gets.
func decode(raw []byte, forceType string, batchSentAt *string, tenantID int64, received time.Time, fast bool) (warehouse.Event, *Rejection, bool) {
	if len(raw) > ingest.MaxEventBytes {
		if fast && !json.Valid(raw) {
			return warehouse.Event{}, nil, false
		}
		return warehouse.Event{}, reject("event_too_large", "message", "message is %d bytes; the limit is %d", len(raw), ingest.MaxEventBytes), true
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		if fast && !json.Valid(raw) {
			return warehouse.Event{}, nil, false
		}
		return warehouse.Event{}, reject("invalid_json", "message", "a message must be a JSON object"), true
	}
	if !fast && !utf8.Valid(raw) {
		return warehouse.Event{}, reject("invalid_json", "message", "must be valid UTF-8"), true
	}
	var m Message
	switch {
	case fast && decodeMessageFast(raw, &m):
	case fast && !json.Valid(raw):
		return warehouse.Event{}, nil, false
	default:
		m = Message{}
		if err := json.Unmarshal(raw, &m); err != nil {
			return warehouse.Event{}, unmarshalRejection(err), true
		}
	}
	typ := forceType
	if typ == "" {
		typ = strings.ToLower(strings.TrimSpace(m.Type))
	}
	in, r := Map(&m, forceType, batchSentAt)
	if r != nil {
		return warehouse.Event{}, r, true
	}
	ev, nr := ingest.Validate(in, tenantID, received)
	if nr != nil {
		field := segmentField(nr.Field, &m, typ)
		msg := nr.Message
		if nr.Code == "invalid_event_type" {
			msg = fmt.Sprintf("%q maps to the event_type %q, which is not valid", truncate(m.Event, 140), truncate(in.EventType, 140))
		}
		return warehouse.Event{}, &Rejection{Code: nr.Code, Field: field, Message: msg}, true
	}
	return ev, nil, true
}

// unmarshalRejection names the field of a decoding error.
func unmarshalRejection(err error) *Rejection {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field := strings.SplitN(te.Field, ".", 2)[0]
		code := field
		switch field {
		case "userId":
			code = "user_id"
		case "anonymousId":
			code = "anonymous_id"
		case "previousId":
			code = "previous_id"
		case "groupId":
			code = "group_id"
		case "messageId":
			code = "message_id"
		case "timestamp", "originalTimestamp":
			code = "occurred_at"
		case "sentAt":
			code = "sent_at"
		case "properties", "traits":
			code = "payload"
		}
		return reject("invalid_"+code, field, "has the wrong type")
	}
	return reject("invalid_json", "message", "not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// Result is the answer of every Segment-compatible endpoint: success is true whenever the request
// was taken (Segment SDKs read it); accepted events are published, skipped ones are listed by
// their index in the batch.
type Result struct {
	Success  bool                `json:"success"`
	Accepted int                 `json:"accepted"`
	Skipped  int                 `json:"skipped"`
	Errors   []ingest.BatchError `json:"errors"`
}

// Service accepts Segment messages through the native ingestion service.
type Service struct {
	in  *ingest.Service
	now func() time.Time
}

// NewService maps Segment messages and hands them to in.
func NewService(in *ingest.Service, now func() time.Time) *Service {
	return &Service{in: in, now: now}
}

type batchBody struct {
	Batch  []json.RawMessage `json:"batch"`
	SentAt *string           `json:"sentAt"`
}

// Batch accepts a Segment batch {batch: [...], sentAt?, context?} of at most
// ingest.MaxBatchEvents messages: invalid ones are skipped and reported, the rest are published as
// one message. An error is about the body as a whole (a ValidationError) or the bus (unavailable).
func (s *Service) Batch(ctx context.Context, tenantID int64, body []byte) (Result, error) {
	events, rejected, err := decodeBatch(body, tenantID, s.now())
	if err != nil {
		return Result{}, err
	}
	res := Result{Success: true, Errors: []ingest.BatchError{}}
	for _, r := range rejected {
		s.skip(tenantID, &res, r.index, r.Rejection)
	}
	if err := s.in.PublishEvents(ctx, tenantID, events); err != nil {
		return Result{}, err
	}
	res.Accepted = len(events)
	return res, nil
}

// indexed is a rejection of the message at index in the batch.
type indexed struct {
	index int
	*Rejection
}

// decodeBatch decodes, maps and validates a batch body: the fast path when it can vouch for the
// body, else encoding/json's.
func decodeBatch(body []byte, tenantID int64, received time.Time) ([]warehouse.Event, []indexed, error) {
	if utf8.Valid(body) {
		var in batchBody
		if splitBatchFast(body, &in) && in.Batch != nil && len(in.Batch) <= ingest.MaxBatchEvents {
			if events, rejected, ok := decodeMessages(in, tenantID, received, true); ok {
				return events, rejected, nil
			}
		}
	}
	return decodeBatchSlow(body, tenantID, received)
}

func decodeBatchSlow(body []byte, tenantID int64, received time.Time) ([]warehouse.Event, []indexed, error) {
	var in batchBody
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, &errs.ValidationError{Code: "invalid_json", Msg: "body must be {\"batch\": [...]}: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if in.Batch == nil {
		return nil, nil, &errs.ValidationError{Code: "validation_failed", Msg: "batch is required", Fields: map[string]string{"batch": "required: an array of messages"}}
	}
	if len(in.Batch) > ingest.MaxBatchEvents {
		return nil, nil, &errs.ValidationError{Code: "batch_too_large",
			Msg: fmt.Sprintf("a batch holds at most %d messages; got %d", ingest.MaxBatchEvents, len(in.Batch)), Fields: map[string]string{"batch": fmt.Sprintf("at most %d messages", ingest.MaxBatchEvents)}}
	}
	events, rejected, _ := decodeMessages(in, tenantID, received, false)
	return events, rejected, nil
}

// decodeMessages decodes the messages of a batch; with fast, false as soon as one of them shows
// the body is not valid JSON.
func decodeMessages(in batchBody, tenantID int64, received time.Time, fast bool) ([]warehouse.Event, []indexed, bool) {
	events := make([]warehouse.Event, 0, len(in.Batch))
	var rejected []indexed
	for i, raw := range in.Batch {
		ev, r, ok := decode(raw, "", in.SentAt, tenantID, received, fast)
		if !ok {
			return nil, nil, false
		}
		if r != nil {
			rejected = append(rejected, indexed{i, r})
			continue
		}
		events = append(events, ev)
	}
	return events, rejected, true
}

func (s *Service) skip(tenantID int64, res *Result, i int, r *Rejection) {
	s.in.ErrorLog().Record(tenantID, ingest.ErrorValidation, "segment batch["+strconv.Itoa(i)+"] "+r.Code+": "+r.Error())
	res.Skipped++
	res.Errors = append(res.Errors, ingest.BatchError{Index: i, Code: r.Code, Message: r.Error()})
}

// One accepts a single message sent to the endpoint of typ (track, identify, page, screen, group
// or alias). A message
// that is rejected is a ValidationError naming the field, as on the native single-event endpoint.
func (s *Service) One(ctx context.Context, tenantID int64, typ string, body []byte) (Result, error) {
	received := s.now()
	ev, r, ok := decode(body, typ, nil, tenantID, received, utf8.Valid(body))
	if !ok {
		ev, r, _ = decode(body, typ, nil, tenantID, received, false)
	}
	if r != nil {
		s.in.ErrorLog().Record(tenantID, ingest.ErrorValidation, "segment "+typ+" "+r.Code+": "+r.Error())
		return Result{}, &errs.ValidationError{Code: r.Code, Msg: "message rejected", Fields: map[string]string{r.Field: r.Message}}
	}
	if err := s.in.PublishEvents(ctx, tenantID, []warehouse.Event{ev}); err != nil {
		return Result{}, err
	}
	return Result{Success: true, Accepted: 1, Errors: []ingest.BatchError{}}, nil
}
