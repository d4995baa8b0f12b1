package ingest_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

type decodeCase struct {
	name  string
	raw   []byte
	code  string // expected rejection code; "" means accepted
	field string // expected Rejection.Field when rejected; "" skips the check
	check func(t *testing.T, ev warehouse.Event)
}

// ev builds a valid event with the given fields overridden (nil removes a field).
func ev(over ...any) []byte {
	fields := []any{"user_id", "u1", "event_type", "page_view"}
	for i := 0; i+1 < len(over); i += 2 {
		replaced := false
		for j := 0; j+1 < len(fields); j += 2 {
			if fields[j] == over[i] {
				fields[j+1] = over[i+1]
				replaced = true
			}
		}
		if !replaced {
			fields = append(fields, over[i], over[i+1])
		}
	}
	var kv []any
	for j := 0; j+1 < len(fields); j += 2 {
		if fields[j+1] == nil {
			continue
		}
		kv = append(kv, fields[j], fields[j+1])
	}
	return eventJSON(kv...)
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func subjectIs(user, anon string) func(t *testing.T, e warehouse.Event) {
	return func(t *testing.T, e warehouse.Event) {
		t.Helper()
		if e.UserID != user || e.AnonymousID != anon {
			t.Errorf("subject = (%q, %q), want (%q, %q)", e.UserID, e.AnonymousID, user, anon)
		}
	}
}

func occurredAt(want time.Time) func(t *testing.T, e warehouse.Event) {
	return func(t *testing.T, e warehouse.Event) {
		t.Helper()
		if !e.OccurredAt.Equal(want) {
			t.Errorf("OccurredAt = %s, want %s", e.OccurredAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
		if e.OccurredAt.Location() != time.UTC {
			t.Errorf("OccurredAt location = %s, want UTC", e.OccurredAt.Location())
		}
	}
}

func payloadIs(want string) func(t *testing.T, e warehouse.Event) {
	return func(t *testing.T, e warehouse.Event) {
		t.Helper()
		if string(e.Payload) != want {
			t.Errorf("Payload = %q, want %q", e.Payload, want)
		}
	}
}

func userIs(want string) func(t *testing.T, e warehouse.Event) {
	return func(t *testing.T, e warehouse.Event) {
		t.Helper()
		if e.UserID != want {
			t.Errorf("UserID = %q, want %q", e.UserID, want)
		}
	}
}

func typeIs(want string) func(t *testing.T, e warehouse.Event) {
	return func(t *testing.T, e warehouse.Event) {
		t.Helper()
		if e.EventType != want {
			t.Errorf("EventType = %q, want %q", e.EventType, want)
		}
	}
}

func eventIDIs(want string) func(t *testing.T, e warehouse.Event) {
	return func(t *testing.T, e warehouse.Event) {
		t.Helper()
		if e.EventID != want {
			t.Errorf("EventID = %q, want %q", e.EventID, want)
		}
	}
}

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func rfc(t time.Time) string { return t.Format(time.RFC3339Nano) }

// sizedEvent returns a valid event of exactly n bytes.
func sizedEvent(t *testing.T, n int) []byte {
	t.Helper()
	base := ev("payload", raw(`{"pad":""}`))
	pad := n - len(base)
	if pad < 0 {
		t.Fatalf("cannot build an event of %d bytes", n)
	}
	out := ev("payload", raw(`{"pad":"`+strings.Repeat("x", pad)+`"}`))
	if len(out) != n {
		t.Fatalf("built %d bytes, want %d", len(out), n)
	}
	return out
}

func TestDecode(t *testing.T) {
	nested := `{"b": {"z": 1, "a": [1, 2.50, {"x": null}]}, "n": 1.50, "u": "\u00e9", "e": "é", "big": 12345678901234567890}`
	cases := []decodeCase{
		// user_id
		{name: "user_id missing", raw: ev("user_id", nil), code: "invalid_user_id", field: "user_id"},
		{name: "user_id empty", raw: ev("user_id", ""), code: "invalid_user_id", field: "user_id"},
		{name: "user_id null", raw: ev("user_id", raw("null")), code: "invalid_user_id", field: "user_id"},
		{name: "anonymous_id only is the subject", raw: ev("user_id", nil, "anonymous_id", "a-1"), check: subjectIs("a-1", "a-1")},
		{name: "both ids kept", raw: ev("anonymous_id", "a-1"), check: subjectIs("u1", "a-1")},
		{name: "neither id names both", raw: ev("user_id", nil, "anonymous_id", ""), code: "invalid_user_id", field: "user_id"},
		{name: "anonymous_id 256 runes", raw: ev("user_id", nil, "anonymous_id", strings.Repeat("a", 256)), code: "invalid_anonymous_id", field: "anonymous_id"},
		{name: "anonymous_id control", raw: ev("anonymous_id", "a\nb"), code: "invalid_anonymous_id", field: "anonymous_id"},
		{name: "anonymous_id number", raw: ev("anonymous_id", 12), code: "invalid_anonymous_id", field: "anonymous_id"},
		{name: "anonymous_id lone surrogate escape", raw: ev("user_id", nil, "anonymous_id", raw(`"a\ud800"`)), code: "invalid_anonymous_id", field: "anonymous_id"},
		{name: "anonymous_id invalid UTF-8", raw: []byte("{\"anonymous_id\":\"a\xffb\",\"event_type\":\"page_view\"}"), code: "invalid_anonymous_id", field: "anonymous_id"},
		{name: "user_id 255 ascii", raw: ev("user_id", strings.Repeat("a", 255)), check: userIs(strings.Repeat("a", 255))},
		{name: "user_id 255 multibyte runes", raw: ev("user_id", strings.Repeat("é", 255)), check: userIs(strings.Repeat("é", 255))},
		{name: "user_id 256 runes", raw: ev("user_id", strings.Repeat("a", 256)), code: "invalid_user_id", field: "user_id"},
		{name: "user_id 256 multibyte runes", raw: ev("user_id", strings.Repeat("é", 256)), code: "invalid_user_id", field: "user_id"},
		{name: "user_id unicode and spaces kept", raw: ev("user_id", " Ana Souza ✓ "), check: userIs(" Ana Souza ✓ ")},
		{name: "user_id tab", raw: ev("user_id", "a\tb"), code: "invalid_user_id", field: "user_id"},
		// A lone surrogate escape decodes to U+FFFD as invalid bytes do: the API's one UTF-8 rule.
		{name: "user_id lone surrogate escape", raw: ev("user_id", raw(`"u\ud800"`)), code: "invalid_user_id", field: "user_id"},
		{name: "user_id lone low surrogate escape", raw: ev("user_id", raw(`"\udc00"`)), code: "invalid_user_id", field: "user_id"},
		{name: "user_id surrogate pair kept", raw: ev("user_id", raw(`"u\ud83d\ude00"`)), check: userIs("u😀")},
		{name: "user_id U+FFFD sent as such kept", raw: ev("user_id", raw(`"u\ufffd"`)), check: userIs("u\ufffd")},
		{name: "message_id lone surrogate escape", raw: ev("message_id", raw(`"m\ud800"`)), code: "invalid_message_id", field: "message_id"},
		{name: "user_id newline", raw: ev("user_id", "a\nb"), code: "invalid_user_id", field: "user_id"},
		{name: "user_id NUL", raw: ev("user_id", "a\x00b"), code: "invalid_user_id", field: "user_id"},
		{name: "user_id DEL", raw: ev("user_id", "a\x7fb"), code: "invalid_user_id", field: "user_id"},
		{name: "user_id C1 control", raw: ev("user_id", "a\u0085b"), code: "invalid_user_id", field: "user_id"},
		{name: "user_id invalid UTF-8", raw: []byte("{\"user_id\":\"a\xffb\",\"event_type\":\"page_view\"}"), code: "invalid_user_id", field: "user_id"},
		{name: "user_id number", raw: ev("user_id", 123), code: "invalid_user_id", field: "user_id"},
		{name: "user_id bool", raw: ev("user_id", true), code: "invalid_user_id", field: "user_id"},
		{name: "user_id object", raw: ev("user_id", raw(`{"id":"u1"}`)), code: "invalid_user_id", field: "user_id"},

		// event_type
		{name: "event_type missing", raw: ev("event_type", nil), code: "invalid_event_type", field: "event_type"},
		{name: "event_type empty", raw: ev("event_type", ""), code: "invalid_event_type", field: "event_type"},
		{name: "event_type single letter", raw: ev("event_type", "a"), check: typeIs("a")},
		{name: "event_type snake case with digits", raw: ev("event_type", "checkout_step_2"), check: typeIs("checkout_step_2")},
		{name: "event_type trailing underscore", raw: ev("event_type", "a_"), check: typeIs("a_")},
		{name: "event_type uppercase", raw: ev("event_type", "Page_view"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type inner uppercase", raw: ev("event_type", "pageView"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type leading digit", raw: ev("event_type", "1st_visit"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type leading underscore", raw: ev("event_type", "_visit"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type dash", raw: ev("event_type", "page-view"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type space", raw: ev("event_type", "page view"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type dot", raw: ev("event_type", "page.view"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type non-ascii", raw: ev("event_type", "café"), code: "invalid_event_type", field: "event_type"},
		{name: "event_type 128 chars", raw: ev("event_type", "e"+strings.Repeat("x", 127)), check: typeIs("e" + strings.Repeat("x", 127))},
		{name: "event_type 129 chars", raw: ev("event_type", "e"+strings.Repeat("x", 128)), code: "invalid_event_type", field: "event_type"},
		{name: "event_type number", raw: ev("event_type", 5), code: "invalid_event_type", field: "event_type"},

		// occurred_at
		{name: "occurred_at default is receipt time", raw: ev(), check: occurredAt(recv)},
		{name: "occurred_at null is receipt time", raw: ev("occurred_at", raw("null")), check: occurredAt(recv)},
		{name: "occurred_at UTC", raw: ev("occurred_at", "2024-05-01T10:00:00Z"), check: occurredAt(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))},
		{name: "occurred_at positive offset normalised", raw: ev("occurred_at", "2024-05-01T12:30:00+02:00"), check: occurredAt(time.Date(2024, 5, 1, 10, 30, 0, 0, time.UTC))},
		{name: "occurred_at negative offset crossing midnight", raw: ev("occurred_at", "2024-04-30T22:15:00-05:00"), check: occurredAt(time.Date(2024, 5, 1, 3, 15, 0, 0, time.UTC))},
		{name: "occurred_at fractional seconds", raw: ev("occurred_at", "2024-05-01T10:00:00.5Z"), check: occurredAt(time.Date(2024, 5, 1, 10, 0, 0, 500_000_000, time.UTC))},
		{name: "occurred_at nanoseconds with offset", raw: ev("occurred_at", "2024-05-01T10:00:00.123456789-03:00"), check: occurredAt(time.Date(2024, 5, 1, 13, 0, 0, 123456789, time.UTC))},
		{name: "occurred_at date only", raw: ev("occurred_at", "2024-01-01"), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at without offset", raw: ev("occurred_at", "2024-05-01T10:00:00"), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at unix seconds number", raw: ev("occurred_at", 1714557600), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at unix millis number", raw: ev("occurred_at", int64(1714557600000)), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at unix seconds string", raw: ev("occurred_at", "1714557600"), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at yesterday", raw: ev("occurred_at", "yesterday"), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at empty string", raw: ev("occurred_at", ""), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at object", raw: ev("occurred_at", raw(`{}`)), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at 23h in the future", raw: ev("occurred_at", rfc(recv.Add(23*time.Hour))), check: occurredAt(recv.Add(23 * time.Hour))},
		{name: "occurred_at exactly 24h in the future", raw: ev("occurred_at", rfc(recv.Add(24*time.Hour))), check: occurredAt(recv.Add(24 * time.Hour))},
		{name: "occurred_at 24h1s in the future", raw: ev("occurred_at", rfc(recv.Add(24*time.Hour+time.Second))), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at 25h in the future with offset", raw: ev("occurred_at", recv.Add(25*time.Hour).In(time.FixedZone("", 9*3600)).Format(time.RFC3339)), code: "invalid_occurred_at", field: "occurred_at"},
		{name: "occurred_at years ago kept", raw: ev("occurred_at", "2019-03-04T05:06:07Z"), check: occurredAt(time.Date(2019, 3, 4, 5, 6, 7, 0, time.UTC))},

		// sent_at
		{name: "sent_at client clock 1h ahead",
			raw:   ev("occurred_at", rfc(recv.Add(time.Hour-10*time.Minute)), "sent_at", rfc(recv.Add(time.Hour))),
			check: occurredAt(recv.Add(-10 * time.Minute))},
		{name: "sent_at client clock 4h behind with offset",
			raw:   ev("occurred_at", "2024-05-01T08:55:00+01:00", "sent_at", "2024-05-01T09:00:00.250+01:00"),
			check: occurredAt(recv.Add(-5*time.Minute - 250*time.Millisecond))},
		{name: "sent_at brings a far-future clock back into range",
			raw:   ev("occurred_at", rfc(recv.Add(48*time.Hour-time.Minute)), "sent_at", rfc(recv.Add(48*time.Hour))),
			check: occurredAt(recv.Add(-time.Minute))},
		{name: "sent_at correction still more than 24h ahead",
			raw:  ev("occurred_at", rfc(recv.Add(30*time.Hour)), "sent_at", rfc(recv)),
			code: "invalid_occurred_at", field: "occurred_at"},
		{name: "sent_at alone keeps receipt time", raw: ev("sent_at", rfc(recv.Add(time.Hour))), check: occurredAt(recv)},
		{name: "sent_at millennia before occurred_at (was stored as 1734-08-16)",
			raw:  ev("occurred_at", "9999-01-01T00:00:00Z", "sent_at", "0001-01-01T00:00:00Z"),
			code: "invalid_sent_at", field: "sent_at"},
		{name: "sent_at millennia after occurred_at",
			raw:  ev("occurred_at", "0001-01-01T00:00:00Z", "sent_at", "9999-01-01T00:00:00Z"),
			code: "invalid_sent_at", field: "sent_at"},
		{name: "sent_at 290 years after occurred_at is still an interval a clock can measure",
			raw:   ev("occurred_at", "1734-05-01T12:00:00Z", "sent_at", "2024-05-01T12:00:00Z"),
			check: occurredAt(recv.Add(-time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).Sub(time.Date(1734, 5, 1, 12, 0, 0, 0, time.UTC))))},
		{name: "sent_at bad with occurred_at", raw: ev("occurred_at", rfc(recv), "sent_at", "yesterday"), code: "invalid_sent_at", field: "sent_at"},
		{name: "sent_at bad alone", raw: ev("sent_at", "2024-05-01"), code: "invalid_sent_at", field: "sent_at"},
		{name: "sent_at number", raw: ev("sent_at", 1714557600), code: "invalid_sent_at", field: "sent_at"},

		// payload
		{name: "payload absent", raw: ev(), check: payloadIs(`{}`)},
		{name: "payload null", raw: ev("payload", raw("null")), check: payloadIs(`{}`)},
		{name: "payload empty object", raw: ev("payload", raw("{}")), check: payloadIs(`{}`)},
		{name: "payload nested kept byte for byte", raw: ev("payload", raw(nested)), check: payloadIs(nested)},
		{name: "payload outer whitespace trimmed", raw: ev("payload", raw(" \n{\"a\": 1}\t ")), check: payloadIs(`{"a": 1}`)},
		{name: "payload array", raw: ev("payload", raw(`[{"a":1}]`)), code: "invalid_payload", field: "payload"},
		{name: "payload string", raw: ev("payload", "{}"), code: "invalid_payload", field: "payload"},
		{name: "payload number", raw: ev("payload", 42), code: "invalid_payload", field: "payload"},
		{name: "payload bool", raw: ev("payload", false), code: "invalid_payload", field: "payload"},
		{name: "payload NUL escape", raw: ev("payload", raw(`{"a":"x\u0000y"}`)), code: "invalid_payload", field: "payload"},
		{name: "payload NUL escape in key", raw: ev("payload", raw(`{"\u0000":1}`)), code: "invalid_payload", field: "payload"},
		{name: "payload NUL escape nested", raw: ev("payload", raw(`{"a":{"b":["\u0000"]}}`)), code: "invalid_payload", field: "payload"},
		// An escaped backslash followed by the text u0000 is not a NUL character.
		{name: "payload escaped backslash before u0000 text", raw: ev("payload", raw(`{"path":"C:\\u0000"}`)), check: payloadIs(`{"path":"C:\\u0000"}`)},
		// Postgres jsonb (the embedded warehouse) cannot store these; an accepted event that can
		// never be stored would be lost in the loader's dead letters, so Decode must refuse it.
		{name: "payload invalid UTF-8", raw: []byte("{\"user_id\":\"u1\",\"event_type\":\"page_view\",\"payload\":{\"a\":\"\xff\"}}"), code: "invalid_payload", field: "payload"},
		{name: "payload lone surrogate escape", raw: ev("payload", raw(`{"a":"\ud800"}`)), code: "invalid_payload", field: "payload"},
		{name: "payload surrogate pair kept", raw: ev("payload", raw(`{"a":"\ud83d\ude00"}`)), check: payloadIs(`{"a":"\ud83d\ude00"}`)},

		{name: "payload lone low surrogate", raw: ev("payload", raw(`{"a":"\udc00"}`)), code: "invalid_payload", field: "payload"},
		{name: "payload lone surrogate in key", raw: ev("payload", raw(`{"\ud800x":1}`)), code: "invalid_payload", field: "payload"},
		{name: "payload number beyond the warehouse", raw: ev("payload", raw(`{"a":1e200000}`)), code: "invalid_payload", field: "payload"},
		{name: "payload largest double kept", raw: ev("payload", raw(`{"a":-1.7976931348623157e308,"b":2.2250738585072014E-308}`)), check: payloadIs(`{"a":-1.7976931348623157e308,"b":2.2250738585072014E-308}`)},
		{name: "payload exponent-like text in strings kept", raw: ev("payload", raw(`{"e99999":"1e99999","true":"\\ud800"}`)), check: payloadIs(`{"e99999":"1e99999","true":"\\ud800"}`)},
		// Valid JSON numbers that fit a double (subnormal; exponent written with leading zeros).
		{name: "payload smallest subnormal double", raw: ev("payload", raw(`{"a":5e-324}`)), check: payloadIs(`{"a":5e-324}`)},
		{name: "payload exponent with leading zeros", raw: ev("payload", raw(`{"a":1e-0300}`)), check: payloadIs(`{"a":1e-0300}`)},

		// message_id
		{name: "message_id used as event id", raw: ev("message_id", "msg-0001"), check: eventIDIs("msg-0001")},
		{name: "message_id 128 chars", raw: ev("message_id", strings.Repeat("m", 128)), check: eventIDIs(strings.Repeat("m", 128))},
		{name: "message_id 129 chars", raw: ev("message_id", strings.Repeat("m", 129)), code: "invalid_message_id", field: "message_id"},
		{name: "message_id control char", raw: ev("message_id", "a\nb"), code: "invalid_message_id", field: "message_id"},
		{name: "message_id number", raw: ev("message_id", 7), code: "invalid_message_id", field: "message_id"},
		{name: "message_id generated when missing", raw: ev(), check: func(t *testing.T, e warehouse.Event) {
			if !generatedID.MatchString(e.EventID) {
				t.Errorf("EventID = %q, want 32 lowercase hex digits", e.EventID)
			}
		}},
		{name: "message_id generated when empty", raw: ev("message_id", ""), check: func(t *testing.T, e warehouse.Event) {
			if !generatedID.MatchString(e.EventID) {
				t.Errorf("EventID = %q, want 32 lowercase hex digits", e.EventID)
			}
		}},

		// size
		{name: "event of exactly 32 KB", raw: sizedEvent(t, ingest.MaxEventBytes)},
		{name: "event over 32 KB", raw: sizedEvent(t, ingest.MaxEventBytes+1), code: "event_too_large", field: "event"},
		{name: "event far over 32 KB", raw: sizedEvent(t, 200<<10), code: "event_too_large", field: "event"},

		// JSON shape
		{name: "trailing whitespace", raw: append(ev(), " \n\t"...), check: userIs("u1")},
		{name: "trailing garbage", raw: append(ev(), " garbage"...), code: "invalid_json", field: "event"},
		{name: "trailing second object", raw: append(ev(), ` {"user_id":"u2"}`...), code: "invalid_json", field: "event"},
		{name: "trailing closing brace", raw: append(ev(), "}"...), code: "invalid_json", field: "event"},
		{name: "trailing closing bracket", raw: append(ev(), "]"...), code: "invalid_json", field: "event"},
		{name: "truncated", raw: []byte(`{"user_id":"u1","event_type":`), code: "invalid_json", field: "event"},
		{name: "empty body", raw: []byte(``), code: "invalid_json", field: "event"},
		{name: "not json", raw: []byte(`user_id=u1`), code: "invalid_json", field: "event"},
		{name: "array event", raw: []byte(`[{"user_id":"u1","event_type":"page_view"}]`), code: "invalid_json", field: "event"},
		{name: "string event", raw: []byte(`"u1"`), code: "invalid_json", field: "event"},
		{name: "number event", raw: []byte(`42`), code: "invalid_json", field: "event"},
		{name: "bool event", raw: []byte(`true`), code: "invalid_json", field: "event"},
		{name: "null event", raw: []byte(`null`), code: "invalid_json", field: "event"},
		{name: "unknown fields ignored", raw: ev("context", raw(`{"ip":"1.2.3.4"}`)), check: userIs("u1")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, rej := ingest.Decode(tc.raw, 42, recv)
			if tc.code != "" {
				if rej == nil {
					t.Fatalf("accepted %+v; want rejection %s", got, tc.code)
				}
				if rej.Code != tc.code {
					t.Errorf("code = %q (%v), want %q", rej.Code, rej, tc.code)
				}
				if tc.field != "" && rej.Field != tc.field {
					t.Errorf("field = %q, want %q", rej.Field, tc.field)
				}
				if rej.Message == "" {
					t.Errorf("empty message")
				}
				return
			}
			if rej != nil {
				t.Fatalf("rejected with %s (%v); want accepted", rej.Code, rej)
			}
			if got.TenantID != 42 {
				t.Errorf("TenantID = %d, want 42", got.TenantID)
			}
			if !got.ReceivedAt.Equal(recv) || got.ReceivedAt.Location() != time.UTC {
				t.Errorf("ReceivedAt = %v, want %v in UTC", got.ReceivedAt, recv)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// Decode normalises the receipt time to UTC whatever zone the caller's clock is in.
func TestDecodeReceivedAtUTC(t *testing.T) {
	local := recv.In(time.FixedZone("BRT", -3*3600))
	got, rej := ingest.Decode(ev(), 1, local)
	if rej != nil {
		t.Fatal(rej)
	}
	if got.ReceivedAt.Location() != time.UTC || !got.ReceivedAt.Equal(recv) {
		t.Errorf("ReceivedAt = %v, want %v", got.ReceivedAt, recv)
	}
	if got.OccurredAt.Location() != time.UTC || !got.OccurredAt.Equal(recv) {
		t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, recv)
	}
}

func TestDecodeGeneratesDistinctIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		got, rej := ingest.Decode(ev(), 1, recv)
		if rej != nil {
			t.Fatal(rej)
		}
		if seen[got.EventID] {
			t.Fatalf("event id %q generated twice", got.EventID)
		}
		seen[got.EventID] = true
	}
}

// The payload is copied: mutating the caller's buffer after Decode does not change the event.
func TestDecodePayloadIsCopied(t *testing.T) {
	buf := ev("payload", raw(`{"a":"b"}`))
	got, rej := ingest.Decode(buf, 1, recv)
	if rej != nil {
		t.Fatal(rej)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	if string(got.Payload) != `{"a":"b"}` {
		t.Errorf("payload changed with the input buffer: %q", got.Payload)
	}
}

// Validate is also called directly (storefront webhooks); it enforces the same rules on values that
// did not go through JSON decoding, where invalid UTF-8 survives.
func TestValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name  string
		in    wire.Input
		code  string
		field string
		check func(t *testing.T, ev warehouse.Event)
	}{
		{name: "minimal", in: wire.Input{UserID: "u", EventType: "x"}, check: payloadIs(`{}`)},
		{name: "invalid UTF-8 user_id", in: wire.Input{UserID: "a\xffb", EventType: "x"}, code: "invalid_user_id", field: "user_id"},
		{name: "truncated rune user_id", in: wire.Input{UserID: "ab\xc3", EventType: "x"}, code: "invalid_user_id", field: "user_id"},
		{name: "control user_id", in: wire.Input{UserID: "a\x1bb", EventType: "x"}, code: "invalid_user_id", field: "user_id"},
		{name: "invalid UTF-8 message_id", in: wire.Input{UserID: "u", EventType: "x", MessageID: "m\xff"}, code: "invalid_message_id", field: "message_id"},
		{name: "bad event type", in: wire.Input{UserID: "u", EventType: "X"}, code: "invalid_event_type", field: "event_type"},
		{name: "occurred_at with offset", in: wire.Input{UserID: "u", EventType: "x", OccurredAt: str("2024-05-01T14:00:00+02:00")}, check: occurredAt(recv)},
		{name: "bad occurred_at", in: wire.Input{UserID: "u", EventType: "x", OccurredAt: str("May 1st")}, code: "invalid_occurred_at", field: "occurred_at"},
		{name: "payload whitespace only", in: wire.Input{UserID: "u", EventType: "x", Payload: raw("  ")}, check: payloadIs(`{}`)},
		{name: "payload array", in: wire.Input{UserID: "u", EventType: "x", Payload: raw("[]")}, code: "invalid_payload", field: "payload"},
		{name: "message_id kept", in: wire.Input{UserID: "u", EventType: "x", MessageID: "shopify:1:0"}, check: eventIDIs("shopify:1:0")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, rej := ingest.Validate(tc.in, 9, recv)
			if tc.code != "" {
				if rej == nil {
					t.Fatalf("accepted %+v; want %s", got, tc.code)
				}
				if rej.Code != tc.code || rej.Field != tc.field {
					t.Errorf("rejection = %s on %q, want %s on %q", rej.Code, rej.Field, tc.code, tc.field)
				}
				return
			}
			if rej != nil {
				t.Fatalf("rejected: %v", rej)
			}
			if got.TenantID != 9 {
				t.Errorf("TenantID = %d", got.TenantID)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

var eventTypeRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,127}$`)

// hasNUL reports whether a decoded JSON value holds a NUL character in a key or string.
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

func FuzzDecode(f *testing.F) {
	seeds := [][]byte{
		ev(),
		ev("payload", raw(`{"plan":"pro","nested":{"a":[1,2,3]}}`)),
		ev("event_type", "context_identified", "payload", raw(`{"email":"a@b.c"}`)),
		ev("occurred_at", "2024-05-01T10:00:00.123+02:00", "sent_at", "2024-05-01T10:00:01+02:00"),
		ev("occurred_at", rfc(recv.Add(23*time.Hour))),
		ev("occurred_at", rfc(recv.Add(25*time.Hour))),
		ev("occurred_at", rfc(recv.Add(48*time.Hour)), "sent_at", rfc(recv.Add(-48*time.Hour))),
		ev("message_id", "m-1"),
		ev("user_id", strings.Repeat("é", 255)),
		ev("user_id", 12),
		ev("event_type", "Bad-Type"),
		ev("payload", raw(`[1]`)),
		ev("payload", raw(`{"a":"\u0000"}`)),
		ev("payload", raw(`null`)),
		ev("occurred_at", "yesterday"),
		ev("sent_at", "nope"),
		[]byte(`{"user_id":"u","event_type":"a"} trailing`),
		[]byte(`{"user_id":"u","event_type":"a"}}`),
		[]byte(`[]`),
		[]byte(`null`),
		[]byte(`"x"`),
		[]byte(``),
		[]byte("{\"user_id\":\"\xff\",\"event_type\":\"a\"}"),
		[]byte(`{"user_id":"u","event_type":"a","payload":{"a":1e999}}`),
		[]byte(`{"user_id":"u","event_type":"a","payload":{"a":"\ud83d\ude00","b":"\\u0000","c":[true,false,1E+5]}}`),
		[]byte(`{"user_id":"u","event_type":"a","payload":{"a":"\ud800\u0041"}}`),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, rej := ingest.Decode(data, 5, recv)
		if rej != nil {
			if rej.Code == "" || rej.Message == "" || rej.Field == "" {
				t.Fatalf("incomplete rejection %+v", rej)
			}
			return
		}
		if !eventTypeRE.MatchString(got.EventType) {
			t.Errorf("accepted event_type %q", got.EventType)
		}
		if got.UserID == "" || utf8.RuneCountInString(got.UserID) > ingest.MaxUserIDLen || !utf8.ValidString(got.UserID) {
			t.Errorf("accepted user_id %q", got.UserID)
		}
		for _, r := range got.UserID {
			if unicode.IsControl(r) {
				t.Errorf("accepted user_id %q with a control character", got.UserID)
			}
		}
		if !json.Valid(got.Payload) || len(got.Payload) == 0 || got.Payload[0] != '{' {
			t.Errorf("accepted payload %q is not a JSON object", got.Payload)
		}
		if !utf8.Valid(got.Payload) {
			t.Errorf("accepted payload %q is not valid UTF-8", got.Payload)
		}
		var v any
		if err := json.Unmarshal(got.Payload, &v); err == nil && hasNUL(v) {
			t.Errorf("accepted payload %q with NUL", got.Payload)
		}
		if got.OccurredAt.After(recv.Add(ingest.MaxFutureSkew)) {
			t.Errorf("accepted occurred_at %s more than 24h after receipt", got.OccurredAt)
		}
		if got.OccurredAt.Location() != time.UTC || got.ReceivedAt.Location() != time.UTC || !got.ReceivedAt.Equal(recv) {
			t.Errorf("times not normalised: occurred %v received %v", got.OccurredAt, got.ReceivedAt)
		}
		if got.EventID == "" || len(got.EventID) > ingest.MaxMessageIDLen {
			t.Errorf("accepted event id %q", got.EventID)
		}
		if got.TenantID != 5 {
			t.Errorf("TenantID = %d", got.TenantID)
		}
	})
}
