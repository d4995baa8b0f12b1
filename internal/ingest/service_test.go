package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// fakePublisher records Publish calls; err, when set, fails every call.
type fakePublisher struct {
	mu    sync.Mutex
	calls []publishCall
	err   error
}

type publishCall struct {
	tenant int64
	events []warehouse.Event
}

func (p *fakePublisher) Publish(_ context.Context, tenantID int64, events []warehouse.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.calls = append(p.calls, publishCall{tenantID, append([]warehouse.Event(nil), events...)})
	return nil
}

func (p *fakePublisher) Check(context.Context) error { return p.err }

func (p *fakePublisher) Calls() []publishCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]publishCall(nil), p.calls...)
}

func batchBody(events ...[]byte) []byte {
	raws := make([]json.RawMessage, len(events))
	for i, e := range events {
		raws[i] = e
	}
	b, err := json.Marshal(map[string]any{"events": raws})
	if err != nil {
		panic(err)
	}
	return b
}

func validEvents(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = ev("user_id", fmt.Sprintf("user-%d", i%7), "message_id", fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func TestTrackBatch(t *testing.T) {
	pool := openPool(t)
	unavailable := fmt.Errorf("publish to pubsub: %w", errors.Join(errs.ErrUnavailable, errors.New("deadline exceeded")))
	cases := []struct {
		name        string
		caller      ingest.Caller
		body        []byte
		pubErr      error
		wantErrIs   error  // expected error kind; nil means success
		wantErrCode string // ValidationError.Code when the error is a validation error
		wantField   string // a key of ValidationError.Fields
		queued      int
		skipped     int
		errors      []ingest.BatchError // index and code only
		published   []string            // event ids of the one Publish call; nil means no call
	}{
		{
			name: "mixed valid and invalid",
			body: batchBody(
				ev("message_id", "a"),
				ev("user_id", "", "message_id", "b"),
				ev("message_id", "c", "event_type", "signup"),
				ev("event_type", "Bad-Type", "message_id", "d"),
				[]byte(`"not an object"`),
				ev("payload", raw(`[1]`), "message_id", "f"),
				ev("message_id", "g", "occurred_at", "2024-05-01T11:00:00Z"),
			),
			queued: 3, skipped: 4,
			errors: []ingest.BatchError{
				{Index: 1, Code: "invalid_user_id"}, {Index: 3, Code: "invalid_event_type"},
				{Index: 4, Code: "invalid_json"}, {Index: 5, Code: "invalid_payload"},
			},
			published: []string{"a", "c", "g"},
		},
		{
			name:   "all invalid publishes nothing",
			body:   batchBody(ev("user_id", 1), ev("event_type", "")),
			queued: 0, skipped: 2,
			errors: []ingest.BatchError{{Index: 0, Code: "invalid_user_id"}, {Index: 1, Code: "invalid_event_type"}},
		},
		{name: "empty batch", body: []byte(`{"events":[]}`), errors: []ingest.BatchError{}},
		{
			name:      "500 events accepted",
			body:      batchBody(validEvents("b500", 500)...),
			queued:    500,
			errors:    []ingest.BatchError{},
			published: fmtIDs("b500", 500),
		},
		{
			name:   "oversized event skipped, others queued",
			body:   batchBody(ev("message_id", "small"), sizedEvent(t, ingest.MaxEventBytes+1)),
			queued: 1, skipped: 1,
			errors:    []ingest.BatchError{{Index: 1, Code: "event_too_large"}},
			published: []string{"small"},
		},
		{name: "501 events", body: batchBody(validEvents("b501", 501)...), wantErrIs: errs.ErrInvalid, wantErrCode: "batch_too_large", wantField: "events"},
		{name: "missing events", body: []byte(`{"event":[]}`), wantErrIs: errs.ErrInvalid, wantField: "events"},
		{name: "null events", body: []byte(`{"events":null}`), wantErrIs: errs.ErrInvalid, wantField: "events"},
		{name: "events not an array", body: []byte(`{"events":{"user_id":"u1"}}`), wantErrIs: errs.ErrInvalid, wantErrCode: "invalid_json"},
		{name: "body not JSON", body: []byte(`events=1`), wantErrIs: errs.ErrInvalid, wantErrCode: "invalid_json"},
		{name: "body is an array", body: []byte(`[{"user_id":"u1","event_type":"x"}]`), wantErrIs: errs.ErrInvalid, wantErrCode: "invalid_json"},
		{name: "publisher unavailable", body: batchBody(ev("message_id", "x")), pubErr: unavailable, wantErrIs: errs.ErrUnavailable},
		{
			name:   "session bound user",
			caller: ingest.Caller{BoundUser: "alice"},
			body: batchBody(
				ev("user_id", "alice", "message_id", "1"),
				ev("user_id", "bob", "message_id", "2"),
				ev("user_id", "Alice", "message_id", "3"),
				ev("user_id", "alice", "message_id", "4"),
			),
			queued: 2, skipped: 2,
			errors:    []ingest.BatchError{{Index: 1, Code: "user_mismatch"}, {Index: 2, Code: "user_mismatch"}},
			published: []string{"1", "4"},
		},
		{
			name:   "anonymous session",
			caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true},
			body: batchBody(
				ev("user_id", nil, "anonymous_id", "anon-1", "message_id", "1"),
				ev("user_id", "u1", "anonymous_id", "anon-1", "event_type", "context_identified", "payload", raw(`{}`), "message_id", "2"),
				ev("user_id", nil, "anonymous_id", "anon-2", "message_id", "3"),
				ev("user_id", "u1", "message_id", "4"),
				ev("user_id", nil, "anonymous_id", "anon-1", "event_type", "context_identified", "payload", raw(`{}`), "message_id", "5"),
			),
			queued: 2, skipped: 3,
			errors:    []ingest.BatchError{{Index: 1, Code: "user_mismatch"}, {Index: 2, Code: "user_mismatch"}, {Index: 3, Code: "user_mismatch"}},
			published: []string{"1", "5"},
		},
		{
			name:    "session bound user: validation comes first",
			caller:  ingest.Caller{BoundUser: "alice"},
			body:    batchBody(ev("user_id", "", "message_id", "1")),
			skipped: 1,
			errors:  []ingest.BatchError{{Index: 0, Code: "invalid_user_id"}},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePublisher{err: tc.pubErr}
			svc := ingest.NewService(pub, newErrorLog(t, pool, time.Now), func() time.Time { return recv })
			caller := tc.caller
			caller.TenantID = int64(100 + i)
			res, err := svc.TrackBatch(context.Background(), caller, tc.body)
			if tc.wantErrIs != nil {
				if !errors.Is(err, tc.wantErrIs) {
					t.Fatalf("err = %v, want %v", err, tc.wantErrIs)
				}
				if res.Queued != 0 {
					t.Errorf("Queued = %d on error, want 0", res.Queued)
				}
				var ve *errs.ValidationError
				if tc.wantErrCode != "" || tc.wantField != "" {
					if !errors.As(err, &ve) {
						t.Fatalf("err %T is not a *errs.ValidationError", err)
					}
					if tc.wantErrCode != "" && ve.Code != tc.wantErrCode {
						t.Errorf("code = %q, want %q", ve.Code, tc.wantErrCode)
					}
					if _, ok := ve.Fields[tc.wantField]; tc.wantField != "" && !ok {
						t.Errorf("fields %v do not name %q", ve.Fields, tc.wantField)
					}
				}
				if !errors.Is(tc.wantErrIs, errs.ErrUnavailable) && len(pub.Calls()) != 0 {
					t.Errorf("published %d times on a rejected batch", len(pub.Calls()))
				}
				return
			}
			if err != nil {
				t.Fatalf("TrackBatch: %v", err)
			}
			if res.Queued != tc.queued || res.Skipped != tc.skipped {
				t.Errorf("queued/skipped = %d/%d, want %d/%d", res.Queued, res.Skipped, tc.queued, tc.skipped)
			}
			if res.Errors == nil {
				t.Errorf("Errors is nil; want an array (JSON [])")
			}
			if len(res.Errors) != len(tc.errors) {
				t.Fatalf("errors = %+v, want %+v", res.Errors, tc.errors)
			}
			for j, e := range res.Errors {
				if e.Index != tc.errors[j].Index || e.Code != tc.errors[j].Code || e.Message == "" {
					t.Errorf("errors[%d] = %+v, want index %d code %s", j, e, tc.errors[j].Index, tc.errors[j].Code)
				}
			}
			calls := pub.Calls()
			if tc.published == nil {
				if len(calls) != 0 {
					t.Errorf("published %d times, want none", len(calls))
				}
				return
			}
			if len(calls) != 1 {
				t.Fatalf("published %d times, want once", len(calls))
			}
			if calls[0].tenant != caller.TenantID {
				t.Errorf("published for tenant %d, want %d", calls[0].tenant, caller.TenantID)
			}
			if got := strings.Join(ids(calls[0].events), ","); got != strings.Join(tc.published, ",") {
				t.Errorf("published ids %s, want %s", got, strings.Join(tc.published, ","))
			}
			for _, e := range calls[0].events {
				if e.TenantID != caller.TenantID || !e.ReceivedAt.Equal(recv) {
					t.Errorf("published event %+v: tenant or receipt time wrong", e)
				}
			}
		})
	}
}

// The batch errors are also written to the tenant's error log, one record per skipped event,
// newest first; a session user mismatch has its own type.
func TestTrackBatchRecordsErrors(t *testing.T) {
	pool := openPool(t)
	type rec struct{ typ, prefix string }
	cases := []struct {
		name   string
		caller ingest.Caller
		body   []byte
		want   []rec
	}{
		{
			name: "validation failures",
			body: batchBody(ev(), ev("user_id", ""), ev(), ev("occurred_at", "yesterday")),
			want: []rec{{ingest.ErrorValidation, "events[3] invalid_occurred_at: occurred_at"}, {ingest.ErrorValidation, "events[1] invalid_user_id: user_id"}},
		},
		{
			name:   "session user mismatch",
			caller: ingest.Caller{BoundUser: "u1"},
			body:   batchBody(ev(), ev("user_id", "u2"), ev("event_type", "X")),
			want:   []rec{{ingest.ErrorValidation, "events[2] invalid_event_type"}, {ingest.ErrorSessionUser, "events[1] user_mismatch: user_id"}},
		},
		{name: "all valid", body: batchBody(ev(), ev()), want: []rec{}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			elog := ingest.NewErrorLog(pool, discard(), (&stepClock{t: recv, step: time.Millisecond}).Now)
			svc := ingest.NewService(&fakePublisher{}, elog, func() time.Time { return recv })
			caller := tc.caller
			caller.TenantID = int64(50 + i)
			if _, err := svc.TrackBatch(context.Background(), caller, tc.body); err != nil {
				t.Fatal(err)
			}
			if err := elog.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			recs, err := elog.List(context.Background(), caller.TenantID, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(tc.want) {
				t.Fatalf("records = %+v, want %d", recs, len(tc.want))
			}
			for j, w := range tc.want {
				if recs[j].ErrorType != w.typ || !strings.HasPrefix(recs[j].Detail, w.prefix) {
					t.Errorf("record %d = %+v, want type %s, detail starting %q", j, recs[j], w.typ, w.prefix)
				}
			}
		})
	}
}

func TestTrack(t *testing.T) {
	pool := openPool(t)
	cases := []struct {
		name      string
		caller    ingest.Caller
		raw       []byte
		pubErr    error
		wantIs    error
		wantCode  string
		wantField string
		wantMsg   string // in the field's message, when set
	}{
		{name: "valid", raw: ev("message_id", "one")},
		{name: "missing user_id", raw: ev("user_id", nil), wantIs: errs.ErrInvalid, wantCode: "invalid_user_id", wantField: "user_id"},
		{name: "bad event_type", raw: ev("event_type", "Signup"), wantIs: errs.ErrInvalid, wantCode: "invalid_event_type", wantField: "event_type"},
		{name: "bad occurred_at", raw: ev("occurred_at", "2024-01-01"), wantIs: errs.ErrInvalid, wantCode: "invalid_occurred_at", wantField: "occurred_at"},
		{name: "bad sent_at", raw: ev("occurred_at", rfc(recv), "sent_at", "later"), wantIs: errs.ErrInvalid, wantCode: "invalid_sent_at", wantField: "sent_at"},
		{name: "payload array", raw: ev("payload", raw(`[]`)), wantIs: errs.ErrInvalid, wantCode: "invalid_payload", wantField: "payload"},
		{name: "long message_id", raw: ev("message_id", strings.Repeat("m", 129)), wantIs: errs.ErrInvalid, wantCode: "invalid_message_id", wantField: "message_id"},
		{name: "too large", raw: sizedEvent(t, ingest.MaxEventBytes+1), wantIs: errs.ErrInvalid, wantCode: "event_too_large", wantField: "event"},
		{name: "not an object", raw: []byte(`[]`), wantIs: errs.ErrInvalid, wantCode: "invalid_json", wantField: "event"},
		{name: "bound user mismatch", caller: ingest.Caller{BoundUser: "alice"}, raw: ev("user_id", "bob"), wantIs: errs.ErrInvalid, wantCode: "user_mismatch", wantField: "user_id"},
		{name: "bound user match", caller: ingest.Caller{BoundUser: "alice"}, raw: ev("user_id", "alice")},
		{name: "anonymous session: its anonymous id", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", nil, "anonymous_id", "anon-1")},
		{name: "anonymous session: identify with its anonymous id only", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", nil, "anonymous_id", "anon-1", "event_type", "context_identified", "payload", raw(`{"plan":"free"}`))},
		{name: "anonymous session: a user id only", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", "u1"), wantIs: errs.ErrInvalid, wantCode: "user_mismatch", wantField: "user_id", wantMsg: "a user id needs a session whose user_id is signed"},
		{name: "anonymous session: its anonymous id sent as user id", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", "anon-1"), wantIs: errs.ErrInvalid, wantCode: "user_mismatch", wantField: "user_id", wantMsg: "signed"},
		{name: "anonymous session: identify with both ids", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", "u1", "anonymous_id", "anon-1", "event_type", "context_identified", "payload", raw(`{}`)), wantIs: errs.ErrInvalid, wantCode: "user_mismatch", wantField: "user_id", wantMsg: "signed"},
		{name: "anonymous session: another anonymous id", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", nil, "anonymous_id", "anon-2"), wantIs: errs.ErrInvalid, wantCode: "user_mismatch", wantField: "anonymous_id", wantMsg: "another anonymous id"},
		{name: "anonymous session: a user id and another anonymous id", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", "u1", "anonymous_id", "anon-2"), wantIs: errs.ErrInvalid, wantCode: "user_mismatch", wantField: "user_id"},
		{name: "anonymous session: validation comes first", caller: ingest.Caller{BoundAnonymous: "anon-1", Browser: true}, raw: ev("user_id", nil, "anonymous_id", "anon-1", "event_type", "Signup"), wantIs: errs.ErrInvalid, wantCode: "invalid_event_type", wantField: "event_type"},
		{name: "publisher unavailable", raw: ev(), pubErr: errors.Join(errs.ErrUnavailable, errors.New("publish timeout")), wantIs: errs.ErrUnavailable},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePublisher{err: tc.pubErr}
			elog := newErrorLog(t, pool, time.Now)
			svc := ingest.NewService(pub, elog, func() time.Time { return recv })
			caller := tc.caller
			caller.TenantID = int64(200 + i)
			err := svc.Track(context.Background(), caller, tc.raw)
			if tc.wantIs == nil {
				if err != nil {
					t.Fatalf("Track: %v", err)
				}
				calls := pub.Calls()
				if len(calls) != 1 || len(calls[0].events) != 1 || calls[0].tenant != caller.TenantID {
					t.Fatalf("publish calls = %+v, want one call with one event", calls)
				}
				return
			}
			if !errors.Is(err, tc.wantIs) {
				t.Fatalf("err = %v, want %v", err, tc.wantIs)
			}
			if tc.wantCode == "" {
				return
			}
			var ve *errs.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err %T is not a *errs.ValidationError", err)
			}
			if ve.Code != tc.wantCode {
				t.Errorf("code = %q, want %q", ve.Code, tc.wantCode)
			}
			if ve.Fields[tc.wantField] == "" {
				t.Errorf("fields = %v, want a message for %q", ve.Fields, tc.wantField)
			}
			if !strings.Contains(ve.Fields[tc.wantField], tc.wantMsg) {
				t.Errorf("fields.%s = %q, want it to say %q", tc.wantField, ve.Fields[tc.wantField], tc.wantMsg)
			}
			if len(pub.Calls()) != 0 {
				t.Errorf("a rejected event was published")
			}
			// The rejection is in the tenant's error log.
			if err := elog.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "the error record", func() (bool, string) {
				recs, err := elog.List(context.Background(), caller.TenantID, 100)
				if err != nil {
					return false, err.Error()
				}
				wantType := ingest.ErrorValidation
				if tc.wantCode == "user_mismatch" {
					wantType = ingest.ErrorSessionUser
				}
				return len(recs) == 1 && recs[0].ErrorType == wantType &&
					strings.HasPrefix(recs[0].Detail, tc.wantCode+": "+tc.wantField), fmt.Sprintf("%+v", recs)
			})
		})
	}
}

// Rejections of one tenant are listed newest first.
func TestTrackErrorsNewestFirst(t *testing.T) {
	pool := openPool(t)
	elog := ingest.NewErrorLog(pool, discard(), (&stepClock{t: recv, step: time.Second}).Now)
	svc := ingest.NewService(&fakePublisher{}, elog, func() time.Time { return recv })
	bad := [][]byte{ev("user_id", ""), ev("event_type", "X"), ev("occurred_at", "now")}
	for _, raw := range bad {
		if err := svc.Track(context.Background(), ingest.Caller{TenantID: 1}, raw); err == nil {
			t.Fatalf("accepted %s", raw)
		}
	}
	if err := elog.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := elog.List(context.Background(), 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"invalid_occurred_at", "invalid_event_type", "invalid_user_id"}
	if len(recs) != len(want) {
		t.Fatalf("records = %+v", recs)
	}
	for i, code := range want {
		if !strings.HasPrefix(recs[i].Detail, code) || recs[i].ErrorType != ingest.ErrorValidation {
			t.Errorf("record %d = %+v, want %s", i, recs[i], code)
		}
		if i > 0 && !recs[i].TS.Before(recs[i-1].TS) {
			t.Errorf("record %d ts %v not before record %d ts %v", i, recs[i].TS, i-1, recs[i-1].TS)
		}
		if recs[i].TS.Location() != time.UTC {
			t.Errorf("ts %v not UTC", recs[i].TS)
		}
	}
}

func TestPublishEvents(t *testing.T) {
	pool := openPool(t)
	pub := &fakePublisher{}
	svc := ingest.NewService(pub, newErrorLog(t, pool, time.Now), time.Now)
	if err := svc.PublishEvents(context.Background(), 4, nil); err != nil {
		t.Fatal(err)
	}
	if len(pub.Calls()) != 0 {
		t.Fatalf("published an empty batch")
	}
	evs := []warehouse.Event{whEvent(4, "a", "u", "x", recv, recv, "")}
	if err := svc.PublishEvents(context.Background(), 4, evs); err != nil {
		t.Fatal(err)
	}
	if c := pub.Calls(); len(c) != 1 || c[0].tenant != 4 || len(c[0].events) != 1 {
		t.Fatalf("calls = %+v", c)
	}
}

// The publisher copies payloads into the message unchecked: PublishEvents refuses one that is
// not a JSON object, and publishes none of the events.
func TestPublishEventsRefusesInvalidPayloads(t *testing.T) {
	pool := openPool(t)
	for _, payload := range []string{`{"a":`, `[1]`, `"x"`, `{"a":1}}`} {
		pub := &fakePublisher{}
		svc := ingest.NewService(pub, newErrorLog(t, pool, time.Now), time.Now)
		evs := []warehouse.Event{whEvent(4, "a", "u", "x", recv, recv, ""), whEvent(4, "b", "u", "x", recv, recv, payload)}
		if err := svc.PublishEvents(context.Background(), 4, evs); err == nil {
			t.Errorf("payload %s: published", payload)
		}
		if c := pub.Calls(); len(c) != 0 {
			t.Errorf("payload %s: calls = %+v", payload, c)
		}
	}
	nilPayload := whEvent(4, "c", "u", "x", recv, recv, "")
	nilPayload.Payload = nil
	if err := ingest.NewService(&fakePublisher{}, newErrorLog(t, pool, time.Now), time.Now).PublishEvents(context.Background(), 4, []warehouse.Event{nilPayload}); err == nil {
		t.Errorf("nil payload: published")
	}
}
