package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
	"github.com/cohort-dev/cohort/internal/warehouse"
	"github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// storingPublisher stands in for the bus and the loader: it keeps what was published and writes
// it to the real Postgres warehouse (which stores an event id once), or fails like a bus that is
// down.
type storingPublisher struct {
	w      *postgres.Writer
	mu     sync.Mutex
	events []warehouse.Event
	down   bool
}

func (p *storingPublisher) Publish(ctx context.Context, tenantID int64, events []warehouse.Event) error {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		return errors.Join(errs.ErrUnavailable, errors.New("bus is down"))
	}
	if _, err := p.w.Write(ctx, events); err != nil {
		return err
	}
	p.mu.Lock()
	p.events = append(p.events, events...)
	p.mu.Unlock()
	return nil
}

func (p *storingPublisher) Check(context.Context) error { return nil }

func (p *storingPublisher) take() []warehouse.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.events
	p.events = nil
	return out
}

func (p *storingPublisher) setDown(v bool) {
	p.mu.Lock()
	p.down = v
	p.mu.Unlock()
}

func newSegmentEnv(t testing.TB) (*fixture, *storingPublisher, *ingest.ErrorLog, *Server) {
	t.Helper()
	f := newFixture(t)
	pub := &storingPublisher{w: postgres.New(f.db.Pool)}
	errlog := ingest.NewErrorLog(f.db.Pool, slog.New(slog.DiscardHandler), time.Now)
	t.Cleanup(func() { _ = errlog.Close(context.Background()) })
	svc := ingest.NewService(pub, errlog, time.Now)
	s := f.newServer(t, func(d *Deps) {
		d.Ingest = &IngestionDeps{Service: svc, Segment: segmentcompat.NewService(svc, time.Now)}
	})
	return f, pub, errlog, s
}

func segBasic(key string) http.Header {
	return hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(key+":")))
}

type segmentResult struct {
	Success  bool                `json:"success"`
	Accepted int                 `json:"accepted"`
	Skipped  int                 `json:"skipped"`
	Errors   []ingest.BatchError `json:"errors"`
}

func decodeSegmentResult(t *testing.T, r result) segmentResult {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.Status, r.Body)
	}
	var out segmentResult
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("body %s: %v", r.Body, err)
	}
	if !out.Success || out.Errors == nil {
		t.Fatalf("body %s: want success true and an errors array", r.Body)
	}
	return out
}

func payloadMap(t *testing.T, p json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		t.Fatalf("payload %s: %v", p, err)
	}
	return m
}

// TestSegmentBatchMapping: track, identify and page messages of one batch map as documented and
// are stored in the warehouse under the key's tenant.
func TestSegmentBatchMapping(t *testing.T) {
	f, pub, _, s := newSegmentEnv(t)
	ts := serve(t, s)
	body := `{
	  "sentAt": "2024-05-01T12:00:10Z",
	  "context": {"library": {"name": "analytics-node"}},
	  "batch": [
	    {"type": "track", "event": "  Order Completed!! ", "userId": "u1", "anonymousId": "anon-1", "messageId": "m-track",
	     "timestamp": "2024-05-01T12:00:00Z", "properties": {"revenue": 12.5, "currency": "EUR"}, "context": {"ip": "1.2.3.4"}},
	    {"type": "identify", "anonymousId": "anon-2", "messageId": "m-identify", "traits": {"email": "a@example.com", "plan": "pro"},
	     "originalTimestamp": "2024-05-01T12:00:05Z", "sentAt": "2024-05-01T12:00:05Z"},
	    {"type": "page", "userId": 42, "messageId": "m-page", "name": "Home", "category": "Docs",
	     "properties": {"url": "https://example.com/", "name": "ignored"}},
	    {"type": "track", "event": "Signed Up", "userId": "u3"}
	  ]}`
	before := time.Now().UTC()
	res := decodeSegmentResult(t, send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), strings.NewReader(body)))
	if res.Accepted != 4 || res.Skipped != 0 || len(res.Errors) != 0 {
		t.Fatalf("result %+v, want 4 accepted", res)
	}
	events := pub.take()
	if len(events) != 4 {
		t.Fatalf("published %d events, want 4", len(events))
	}
	byID := map[string]warehouse.Event{}
	for _, e := range events {
		if e.TenantID != f.A.T.ID {
			t.Errorf("event %s of tenant %d, want %d", e.EventID, e.TenantID, f.A.T.ID)
		}
		byID[e.EventID] = e
	}
	tr := byID["m-track"]
	if tr.EventType != "order_completed" || tr.UserID != "u1" {
		t.Errorf("track: %+v, want order_completed by u1", tr)
	}
	if p := payloadMap(t, tr.Payload); p["revenue"] != 12.5 || p["currency"] != "EUR" || p["context"] != nil {
		t.Errorf("track payload %s, want the properties only", tr.Payload)
	}
	// timestamp 10 s before the batch's sentAt: anchored 10 s before receipt.
	if d := tr.ReceivedAt.Sub(tr.OccurredAt); d != 10*time.Second {
		t.Errorf("track occurred %s before receipt, want 10s (timestamp corrected by the batch's sentAt)", d)
	}
	if tr.AnonymousID != "anon-1" {
		t.Errorf("track anonymous_id %q, want anon-1", tr.AnonymousID)
	}
	id := byID["m-identify"]
	if id.EventType != ingest.ContextIdentified || id.UserID != "anon-2" || id.AnonymousID != "anon-2" {
		t.Errorf("identify: %+v, want context_identified by anon-2", id)
	}
	if p := payloadMap(t, id.Payload); p["email"] != "a@example.com" || p["plan"] != "pro" || len(p) != 2 {
		t.Errorf("identify payload %s, want the traits", id.Payload)
	}
	if !id.OccurredAt.Equal(id.ReceivedAt) {
		t.Errorf("identify: originalTimestamp equal to its own sentAt should occur at receipt, got %s vs %s", id.OccurredAt, id.ReceivedAt)
	}
	pg := byID["m-page"]
	if pg.EventType != "page_viewed" || pg.UserID != "42" {
		t.Errorf("page: %+v, want page_viewed by 42", pg)
	}
	if p := payloadMap(t, pg.Payload); p["name"] != "Home" || p["category"] != "Docs" || p["url"] != "https://example.com/" {
		t.Errorf("page payload %s, want name, category and the properties", pg.Payload)
	}
	var signed warehouse.Event
	for _, e := range events {
		if e.EventType == "signed_up" {
			signed = e
		}
	}
	if signed.EventID == "" || signed.OccurredAt.Before(before) {
		t.Errorf("track without messageId or timestamp: %+v, want a generated id and occurred_at = receipt", signed)
	}
	var stored int
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, f.A.T.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 4 {
		t.Errorf("warehouse holds %d events of tenant A, want 4", stored)
	}
}

// TestSegmentSingleEndpoints: /v1/track, /v1/identify and /v1/page take one message each; the
// path decides the type.
func TestSegmentSingleEndpoints(t *testing.T) {
	f, pub, _, s := newSegmentEnv(t)
	ts := serve(t, s)
	for _, tc := range []struct {
		path, body, wantType, wantKey string
	}{
		{"/v1/track", `{"event":"Product Viewed","userId":"u1","properties":{"sku":"A1"}}`, "product_viewed", "sku"},
		{"/v1/track", `{"type":"identify","event":"Cart Viewed","userId":"u1","properties":{"n":1}}`, "cart_viewed", "n"},
		{"/v1/identify", `{"userId":"u1","traits":{"email":"x@example.com"}}`, ingest.ContextIdentified, "email"},
		{"/v1/page", `{"anonymousId":"a1","name":"Pricing","properties":{"path":"/pricing"}}`, "page_viewed", "path"},
		{"/v1/screen", `{"anonymousId":"a1","name":"Home","properties":{"tab":"1"}}`, "screen_viewed", "tab"},
		{"/v1/group", `{"userId":"u1","groupId":"g1","traits":{"plan":"pro"}}`, "group_identified", "group_id"},
	} {
		t.Run(tc.path+" "+tc.wantType, func(t *testing.T) {
			res := decodeSegmentResult(t, send(t, ts, http.MethodPost, tc.path, segBasic(f.A.SK), strings.NewReader(tc.body)))
			if res.Accepted != 1 || res.Skipped != 0 {
				t.Fatalf("result %+v", res)
			}
			evs := pub.take()
			if len(evs) != 1 || evs[0].EventType != tc.wantType {
				t.Fatalf("published %+v, want one %s", evs, tc.wantType)
			}
			if _, ok := payloadMap(t, evs[0].Payload)[tc.wantKey]; !ok {
				t.Errorf("payload %s lacks %q", evs[0].Payload, tc.wantKey)
			}
		})
	}
	t.Run("rejected message is a 400 naming the field", func(t *testing.T) {
		r := send(t, ts, http.MethodPost, "/v1/track", segBasic(f.A.SK), strings.NewReader(`{"event":"Clicked"}`))
		if r.Status != http.StatusBadRequest {
			t.Fatalf("status %d, body %s", r.Status, r.Body)
		}
		if e := errorBody(t, r); e.Code != "invalid_user_id" || e.Fields["userId"] == "" {
			t.Errorf("error %+v, want invalid_user_id on userId", e)
		}
		if len(pub.take()) != 0 {
			t.Error("a rejected message was published")
		}
	})
	t.Run("message over 32 KB is a 413", func(t *testing.T) {
		big := `{"event":"E","userId":"u","properties":{"x":"` + strings.Repeat("a", ingest.MaxEventBytes) + `"}}`
		r := send(t, ts, http.MethodPost, "/v1/track", segBasic(f.A.SK), strings.NewReader(big))
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, body %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})
}

// TestSegmentAuth: the write key as Basic username (or ApiKey) of an sk_ key; 401 and 403 as
// documented, in the one error shape.
func TestSegmentAuth(t *testing.T) {
	f, _, _, s := newSegmentEnv(t)
	ts := serve(t, s)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name   string
		h      http.Header
		status int
		code   string
	}{
		{"basic sk, empty password", segBasic(f.A.SK), http.StatusOK, ""},
		{"basic sk, password ignored", hdr("Authorization", "Basic "+b64(f.A.SK+":whatever")), http.StatusOK, ""},
		{"basic sk, no colon", hdr("Authorization", "basic "+b64(f.A.SK)), http.StatusOK, ""},
		{"ApiKey sk", hdr("Authorization", "ApiKey "+f.A.SK), http.StatusOK, ""},
		{"none", nil, http.StatusUnauthorized, "unauthenticated"},
		{"basic unknown key", segBasic("sk_live_nope_nope"), http.StatusUnauthorized, "unauthenticated"},
		{"basic wrong secret of a real key id", segBasic(f.A.SK + "x"), http.StatusUnauthorized, "unauthenticated"},
		{"basic not base64", hdr("Authorization", "Basic %%%"), http.StatusUnauthorized, "unauthenticated"},
		{"basic empty username", hdr("Authorization", "Basic "+b64(":"+f.A.SK)), http.StatusUnauthorized, "unauthenticated"},
		{"basic pk", segBasic(f.A.PK), http.StatusForbidden, "forbidden"},
		{"ApiKey pk", hdr("Authorization", "ApiKey "+f.A.PK), http.StatusForbidden, "forbidden"},
		{"Bearer token", hdr("Authorization", "Bearer "+f.A.Bearer), http.StatusForbidden, "forbidden"},
		{"session token", hdr("Authorization", "Bearer "+f.A.Session), http.StatusForbidden, "forbidden"},
		{"X-API-Key only", hdr("X-API-Key", f.A.SK), http.StatusUnauthorized, "unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/batch", "/v1/track"} {
				body := `{"batch":[{"type":"track","event":"E","userId":"u"}]}`
				if path == "/v1/track" {
					body = `{"event":"E","userId":"u"}`
				}
				r := send(t, ts, http.MethodPost, path, tc.h, strings.NewReader(body))
				if r.Status != tc.status {
					t.Fatalf("%s: status %d, want %d; body %s", path, r.Status, tc.status, r.Body)
				}
				if tc.code != "" {
					if e := errorBody(t, r); e.Code != tc.code {
						t.Errorf("%s: code %q, want %q", path, e.Code, tc.code)
					}
				}
			}
		})
	}
}

// TestSegmentPerEventErrors: invalid messages are skipped and reported by index, naming
// Segment's fields; the valid ones are accepted; rejections go to the error log.
func TestSegmentPerEventErrors(t *testing.T) {
	f, pub, errlog, s := newSegmentEnv(t)
	ts := serve(t, s)
	msgs := []string{
		`{"type":"track","event":"Ok","userId":"u"}`,                                               // 0 ok
		`{"type":"track","event":"Ok"}`,                                                            // 1 no user
		`{"type":"screen","name":"Home","userId":"u"}`,                                             // 2 ok
		`{"type":"group","userId":"u"}`,                                                            // 3 no groupId
		`{"type":"alias","userId":"u"}`,                                                            // 4 no previousId
		`{"type":"track","event":"!!!","userId":"u"}`,                                              // 5 maps to ""
		`{"type":"track","event":"123 go","userId":"u"}`,                                           // 6 starts with a digit
		`{"type":"track","userId":"u"}`,                                                            // 7 no event
		`{"type":"track","event":"E","userId":"u","timestamp":"yesterday"}`,                        // 8 bad timestamp
		`{"type":"track","event":"E","userId":"u","properties":[1]}`,                               // 9 properties not an object
		`"just a string"`,                                                                          // 10 not an object
		`{"type":"teleport","userId":"u"}`,                                                         // 11 unknown type
		`{"userId":"u","event":"E"}`,                                                               // 12 no type
		`{"type":"track","event":"E","userId":"u","messageId":"` + strings.Repeat("m", 200) + `"}`, // 13
		`{"type":"track","event":"E","userId":{"id":1}}`,                                           // 14 userId wrong type
		`{"type":"track","event":"E","userId":"u","properties":{"x":"` + strings.Repeat("a", ingest.MaxEventBytes) + `"}}`, // 15 too large
		`{"type":"identify","userId":"u","traits":{"a":1}}`,                                                                // 16 ok
		`{"type":"track","event":"` + strings.Repeat("e", 129) + `","userId":"u"}`,                                         // 17 event_type too long
	}
	want := map[int]string{1: "invalid_user_id", 3: "invalid_group_id", 4: "invalid_previous_id",
		5: "invalid_event", 6: "invalid_event", 7: "invalid_event", 8: "invalid_occurred_at", 9: "invalid_payload",
		10: "invalid_json", 11: "invalid_type", 12: "invalid_type", 13: "invalid_message_id", 14: "invalid_user_id",
		15: "event_too_large", 17: "invalid_event"}
	body := `{"batch":[` + strings.Join(msgs, ",") + `]}`
	res := decodeSegmentResult(t, send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), strings.NewReader(body)))
	if res.Accepted != 3 || res.Skipped != len(want) {
		t.Errorf("accepted %d skipped %d, want 3 and %d: %+v", res.Accepted, res.Skipped, len(want), res.Errors)
	}
	got := map[int]ingest.BatchError{}
	for _, e := range res.Errors {
		got[e.Index] = e
	}
	for i, code := range want {
		if got[i].Code != code {
			t.Errorf("message %d: code %q (%s), want %q", i, got[i].Code, got[i].Message, code)
		}
	}
	for i, field := range map[int]string{1: "userId", 3: "groupId", 4: "previousId", 8: "timestamp", 9: "properties", 13: "messageId", 5: "event"} {
		if !strings.HasPrefix(got[i].Message, field+": ") {
			t.Errorf("message %d: %q should name Segment's field %s", i, got[i].Message, field)
		}
	}
	if n := len(pub.take()); n != 3 {
		t.Errorf("published %d, want 3", n)
	}
	if err := errlog.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := errlog.List(context.Background(), f.A.T.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if wantLogged := len(want); len(recs) != wantLogged {
		t.Errorf("error log has %d records, want %d: %+v", len(recs), wantLogged, recs)
	}
}

// TestSegmentBatchLimits: the native limits (500 messages, 4 MB after gzip decoding) and gzip.
func TestSegmentBatchLimits(t *testing.T) {
	f, pub, _, s := newSegmentEnv(t)
	ts := serve(t, s)
	batchOf := func(n int) string {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = fmt.Sprintf(`{"type":"track","event":"E","userId":"u%d"}`, i)
		}
		return `{"batch":[` + strings.Join(msgs, ",") + `]}`
	}
	t.Run("500 accepted", func(t *testing.T) {
		res := decodeSegmentResult(t, send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), strings.NewReader(batchOf(500))))
		if res.Accepted != 500 {
			t.Errorf("accepted %d", res.Accepted)
		}
		pub.take()
	})
	t.Run("501 is a 400", func(t *testing.T) {
		r := send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), strings.NewReader(batchOf(501)))
		if r.Status != http.StatusBadRequest {
			t.Fatalf("status %d body %s", r.Status, r.Body)
		}
		if e := errorBody(t, r); e.Code != "batch_too_large" || e.Fields["batch"] == "" {
			t.Errorf("error %+v", e)
		}
	})
	t.Run("gzip", func(t *testing.T) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(batchOf(3)))
		_ = zw.Close()
		h := segBasic(f.A.SK)
		h.Set("Content-Encoding", "gzip")
		res := decodeSegmentResult(t, send(t, ts, http.MethodPost, "/v1/batch", h, &buf))
		if res.Accepted != 3 {
			t.Errorf("accepted %d", res.Accepted)
		}
		pub.take()
	})
	t.Run("over 4 MB after gzip decoding is a 413", func(t *testing.T) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(`{"batch":[{"type":"track","event":"E","userId":"u","properties":{"x":"`))
		_, _ = zw.Write(bytes.Repeat([]byte("a"), ingest.MaxBatchBytes))
		_, _ = zw.Write([]byte(`"}}]}`))
		_ = zw.Close()
		h := segBasic(f.A.SK)
		h.Set("Content-Encoding", "gzip")
		r := send(t, ts, http.MethodPost, "/v1/batch", h, &buf)
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d body %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})
	t.Run("over 4 MB raw is a 413", func(t *testing.T) {
		r := send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), bytes.NewReader(make([]byte, ingest.MaxBatchBytes+1)))
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d body %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})
	t.Run("bus down is a 503", func(t *testing.T) {
		pub.setDown(true)
		defer pub.setDown(false)
		for _, path := range []string{"/v1/batch", "/v1/identify"} {
			body := batchOf(2)
			if path != "/v1/batch" {
				body = `{"userId":"u","traits":{}}`
			}
			r := send(t, ts, http.MethodPost, path, segBasic(f.A.SK), strings.NewReader(body))
			if r.Status != http.StatusServiceUnavailable {
				t.Fatalf("%s: status %d body %s", path, r.Status, r.Body)
			}
			errorBody(t, r)
		}
	})
}

// TestSegmentDedupeByMessageID: a retried batch (same messageIds) is stored once.
func TestSegmentDedupeByMessageID(t *testing.T) {
	f, pub, _, s := newSegmentEnv(t)
	ts := serve(t, s)
	body := `{"batch":[{"type":"track","event":"Order Completed","userId":"u","messageId":"retry-1"},
	  {"type":"identify","userId":"u","messageId":"retry-2","traits":{"a":1}}]}`
	for range 3 {
		decodeSegmentResult(t, send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), strings.NewReader(body)))
	}
	decodeSegmentResult(t, send(t, ts, http.MethodPost, "/v1/track", segBasic(f.A.SK), strings.NewReader(`{"event":"Order Completed","userId":"u","messageId":"retry-1"}`)))
	for _, e := range pub.take() {
		if e.EventID != "retry-1" && e.EventID != "retry-2" {
			t.Errorf("event id %q, want the messageId", e.EventID)
		}
	}
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, f.A.T.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("warehouse holds %d events, want 2", n)
	}
}

// segmentBadBodies are bodies that must be answered with a 4xx (or a 200 with per-message
// errors), never a 500.
var segmentBadBodies = []struct{ name, body string }{
	{"empty", ``},
	{"whitespace", "  \n"},
	{"null", `null`},
	{"array", `[]`},
	{"string", `"x"`},
	{"number", `1`},
	{"truncated", `{"batch":[`},
	{"batch null", `{"batch":null}`},
	{"batch object", `{"batch":{}}`},
	{"batch string", `{"batch":"x"}`},
	{"batch of nulls", `{"batch":[null,1,"x",[],{}]}`},
	{"sentAt number", `{"batch":[],"sentAt":1}`},
	{"sentAt garbage", `{"batch":[{"type":"track","event":"E","userId":"u","timestamp":"2024-01-01T00:00:00Z"}],"sentAt":"soon"}`},
	{"trailing data", `{"batch":[]} x`},
	{"invalid utf8", "{\"batch\":[{\"type\":\"track\",\"event\":\"E\xff\",\"userId\":\"u\"}]}"},
	{"NUL in properties", `{"batch":[{"type":"track","event":"E","userId":"u","properties":{"x":"\u0000"}}]}`},
	{"lone surrogate", `{"batch":[{"type":"track","event":"E","userId":"u","properties":{"x":"\ud800"}}]}`},
	{"huge number", `{"batch":[{"type":"track","event":"E","userId":"u","properties":{"x":1e999}}]}`},
	{"deep nesting", `{"batch":[{"type":"track","event":"E","userId":"u","properties":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5000) + `}]}`},
	{"page properties not object", `{"batch":[{"type":"page","name":"P","userId":"u","properties":"x"}]}`},
	{"page name not string", `{"batch":[{"type":"page","name":1,"userId":"u"}]}`},
	{"timestamp far future", `{"batch":[{"type":"track","event":"E","userId":"u","timestamp":"9999-01-01T00:00:00Z"}]}`},
	{"sentAt far from timestamp", `{"batch":[{"type":"track","event":"E","userId":"u","timestamp":"0001-01-01T00:00:00Z","sentAt":"9999-01-01T00:00:00Z"}]}`},
	{"userId control chars", `{"batch":[{"type":"track","event":"E","userId":"a\u0001b"}]}`},
	{"userId too long", `{"batch":[{"type":"track","event":"E","userId":"` + strings.Repeat("u", 1000) + `"}]}`},
}

// TestSegmentBadBodies: no bad body is a 500, on every endpoint; errors are in the one shape.
func TestSegmentBadBodies(t *testing.T) {
	f, _, _, s := newSegmentEnv(t)
	ts := serve(t, s)
	for _, path := range []string{"/v1/batch", "/v1/track", "/v1/identify", "/v1/page"} {
		for _, tc := range segmentBadBodies {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				r := send(t, ts, http.MethodPost, path, segBasic(f.A.SK), strings.NewReader(tc.body))
				switch {
				case r.Status >= 500:
					t.Fatalf("status %d body %s", r.Status, r.Body)
				case r.Status >= 400:
					errorBody(t, r)
				case r.Status != http.StatusOK:
					t.Fatalf("status %d body %s", r.Status, r.Body)
				}
			})
		}
	}
	t.Run("malformed bodies are 400", func(t *testing.T) {
		for _, b := range []string{``, `null`, `[]`, `{"batch":[`, `{"batch":null}`, `{"batch":"x"}`, `{"batch":[]} x`} {
			r := send(t, ts, http.MethodPost, "/v1/batch", segBasic(f.A.SK), strings.NewReader(b))
			if r.Status != http.StatusBadRequest {
				t.Errorf("%q: status %d, want 400; body %s", b, r.Status, r.Body)
			}
		}
	})
}

// FuzzSegmentBatch: no body sent to /v1/batch is answered with a 5xx.
func FuzzSegmentBatch(f *testing.F) {
	fx, _, _, s := newSegmentEnv(f)
	ts := serve(f, s)
	for _, tc := range segmentBadBodies {
		f.Add([]byte(tc.body))
	}
	f.Add([]byte(`{"batch":[{"type":"track","event":"Order Completed","userId":"u","properties":{"a":1}}]}`))
	f.Add([]byte(`{"batch":[{"type":"page","name":"P","anonymousId":"a","properties":{"name":"x"}}],"sentAt":"2024-01-01T00:00:00Z"}`))
	h := segBasic(fx.A.SK)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := send(t, ts, http.MethodPost, "/v1/batch", h, bytes.NewReader(body))
		if r.Status >= 500 {
			t.Fatalf("status %d for %q: %s", r.Status, body, r.Body)
		}
	})
}
