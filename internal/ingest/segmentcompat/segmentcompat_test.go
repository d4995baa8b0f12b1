package segmentcompat

import (
	"encoding/json"
	"fmt"
	"github.com/cohort-dev/cohort/internal/warehouse"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/ingest"
)

func TestEventType(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"title case", "Order Completed", "order_completed"},
		{"already snake", "order_completed", "order_completed"},
		{"trimmed", "  Signed Up  ", "signed_up"},
		{"punctuation runs collapse", "Checkout -- Step 2!!", "checkout_step_2"},
		{"leading and trailing separators", "__Added: to cart__", "added_to_cart"},
		{"upper", "LOGIN", "login"},
		{"camel case is lower-cased, not split", "orderCompleted", "ordercompleted"},
		{"dots and slashes", "api.v2/call", "api_v2_call"},
		{"non-ASCII letters are separators", "Añadir al carrito", "a_adir_al_carrito"},
		{"emoji only", "🎉", ""},
		{"empty", "", ""},
		{"digits first", "404 Page", "404_page"},
		{"tabs and newlines", "a\tb\nc", "a_b_c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EventType(tc.in); got != tc.want {
				t.Errorf("EventType(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestMap(t *testing.T) {
	batchSent := new("2024-05-01T12:00:10Z")
	for _, tc := range []struct {
		name      string
		m         Message
		force     string
		wantType  string
		wantUser  string
		wantAnon  string
		wantOcc   *string
		wantSent  *string
		wantCode  string
		wantField string
	}{
		{name: "track", m: Message{Type: "track", Event: "Order Completed", UserID: "u"}, wantType: "order_completed", wantUser: "u", wantSent: batchSent},
		{name: "type is case-insensitive", m: Message{Type: " Track ", Event: "E", UserID: "u"}, wantType: "e", wantUser: "u", wantSent: batchSent},
		{name: "identify keeps both ids", m: Message{Type: "identify", UserID: "u", AnonymousID: "a"}, wantType: ingest.ContextIdentified, wantUser: "u", wantAnon: "a", wantSent: batchSent},
		{name: "anonymousId", m: Message{Type: "page", AnonymousID: "a"}, wantType: PageViewed, wantAnon: "a", wantSent: batchSent},
		{name: "timestamp over originalTimestamp", m: Message{Type: "track", Event: "E", UserID: "u", Timestamp: new("t1"), OriginalTimestamp: new("t2")}, wantType: "e", wantUser: "u", wantOcc: new("t1"), wantSent: batchSent},
		{name: "originalTimestamp", m: Message{Type: "track", Event: "E", UserID: "u", OriginalTimestamp: new("t2")}, wantType: "e", wantUser: "u", wantOcc: new("t2"), wantSent: batchSent},
		{name: "message sentAt over the batch's", m: Message{Type: "track", Event: "E", UserID: "u", SentAt: new("s")}, wantType: "e", wantUser: "u", wantSent: new("s")},
		{name: "forced type", m: Message{Type: "identify", Event: "E", UserID: "u"}, force: TypeTrack, wantType: "e", wantUser: "u", wantSent: batchSent},
		{name: "no user", m: Message{Type: "track", Event: "E"}, wantCode: "invalid_user_id", wantField: "userId"},
		{name: "no event", m: Message{Type: "track", UserID: "u"}, wantCode: "invalid_event", wantField: "event"},
		{name: "event maps to nothing", m: Message{Type: "track", Event: "???", UserID: "u"}, wantCode: "invalid_event", wantField: "event"},
		{name: "event maps to a digit first", m: Message{Type: "track", Event: "1st", UserID: "u"}, wantCode: "invalid_event", wantField: "event"},
		{name: "screen", m: Message{Type: "screen", AnonymousID: "a"}, wantType: ScreenViewed, wantAnon: "a", wantSent: batchSent},
		{name: "group", m: Message{Type: "group", UserID: "u", GroupID: "g"}, wantType: GroupIdentified, wantUser: "u", wantSent: batchSent},
		{name: "group without groupId", m: Message{Type: "group", UserID: "u"}, wantCode: "invalid_group_id", wantField: "groupId"},
		{name: "alias links previousId", m: Message{Type: "alias", UserID: "u", PreviousID: "a"}, wantType: ingest.ContextAliased, wantUser: "u", wantAnon: "a", wantSent: batchSent},
		{name: "alias ignores anonymousId", m: Message{Type: "alias", UserID: "u", PreviousID: "p", AnonymousID: "a"}, wantType: ingest.ContextAliased, wantUser: "u", wantAnon: "p", wantSent: batchSent},
		{name: "alias without previousId", m: Message{Type: "alias", UserID: "u"}, wantCode: "invalid_previous_id", wantField: "previousId"},
		{name: "alias without userId", m: Message{Type: "alias", PreviousID: "a"}, wantCode: "invalid_user_id", wantField: "userId"},
		{name: "unknown type", m: Message{Type: "x", UserID: "u"}, wantCode: "invalid_type", wantField: "type"},
		{name: "no type", m: Message{UserID: "u"}, wantCode: "invalid_type", wantField: "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, r := Map(&tc.m, tc.force, batchSent)
			if tc.wantCode != "" {
				if r == nil || r.Code != tc.wantCode || r.Field != tc.wantField {
					t.Fatalf("rejection %+v, want %s on %s", r, tc.wantCode, tc.wantField)
				}
				return
			}
			if r != nil {
				t.Fatalf("rejected: %v", r)
			}
			if in.EventType != tc.wantType || in.UserID != tc.wantUser || in.AnonymousID != tc.wantAnon {
				t.Errorf("got %s by (%q, %q), want %s by (%q, %q)", in.EventType, in.UserID, in.AnonymousID, tc.wantType, tc.wantUser, tc.wantAnon)
			}
			if (in.OccurredAt == nil) != (tc.wantOcc == nil) || (in.OccurredAt != nil && *in.OccurredAt != *tc.wantOcc) {
				t.Errorf("occurred_at %v, want %v", in.OccurredAt, tc.wantOcc)
			}
			if (in.SentAt == nil) != (tc.wantSent == nil) || (in.SentAt != nil && *in.SentAt != *tc.wantSent) {
				t.Errorf("sent_at %v, want %v", in.SentAt, tc.wantSent)
			}
		})
	}
}

func TestDecodePage(t *testing.T) {
	for _, tc := range []struct{ name, raw, want string }{
		{"name and category win over properties", `{"type":"page","userId":"u","name":"Home","category":"Docs","properties":{"name":"x","url":"/"}}`, `{"category":"Docs","name":"Home","url":"/"}`},
		{"properties only", `{"type":"page","userId":"u","properties":{"url":"/"}}`, `{"url":"/"}`},
		{"name without properties", `{"type":"page","userId":"u","name":"Home"}`, `{"name":"Home"}`},
		{"nothing", `{"type":"page","userId":"u"}`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, r := Decode([]byte(tc.raw), "", nil, 1, time.Now())
			if r != nil {
				t.Fatal(r)
			}
			if string(ev.Payload) != tc.want {
				t.Errorf("payload %s, want %s", ev.Payload, tc.want)
			}
		})
	}
}

// FuzzDecode: no message panics, and an accepted one is a valid native event.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"track","event":"Order Completed","userId":"u","properties":{"a":1}}`,
		`{"type":"page","name":"P","anonymousId":7,"properties":{"name":"x"},"timestamp":"2024-01-01T00:00:00Z","sentAt":"2024-01-01T00:00:01Z"}`,
		`{"type":"identify","userId":"u","traits":{"email":"e"}}`,
		`{"type":"screen"}`, `[]`, `null`, `{"userId":{}}`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), TypeTrack)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, raw []byte, force string) {
		switch force {
		case "", TypeTrack, TypeIdentify, TypePage:
		default:
			force = ""
		}
		ev, r := Decode(raw, force, nil, 1, now)
		if r != nil {
			if r.Code == "" || r.Field == "" || r.Message == "" {
				t.Fatalf("rejection without code, field or message: %+v", r)
			}
			return
		}
		if ev.EventType == "" || ev.UserID == "" || ev.EventID == "" || !json.Valid(ev.Payload) || !strings.HasPrefix(string(ev.Payload), "{") {
			t.Fatalf("accepted an invalid event: %+v", ev)
		}
	})
}

// FuzzFastPath: where the fast readers answer, they read what encoding/json reads, and a batch
// or a message gets the same answer on both paths.
func FuzzFastPath(f *testing.F) {
	for _, s := range []string{
		`{"type":"track","event":"Order Completed","userId":"u","properties":{"a":1},"context":{"x":[1,2]}}`,
		`{"type":"page","name":"P","anonymousId":7,"properties":{"name":"x"},"timestamp":"2024-01-01T00:00:00Z","sentAt":"2024-01-01T00:00:01Z"}`,
		`{"Type":"track","USERID":"u"}`, `{"userId":null}`, `{"event":"\u00e9v\u00e8nement","userId":"u","userId":"v"}`,
		`{"batch":[{"type":"track"},{}],"sentAt":"x","context":{}}`, `{"batch":[],"Batch":[]}`, `{"sentAt":null,"batch":[1]}`,
		`{"batch":[{"type":"track","event":"E","userId":"u","properties":{"a":tru}}]}`, `{"batch":[{bad}],"batch":[]}`,
		`{"batch":[{"type":"track","event":"E","userId":1e5,"messageId":"m"}]} x`, `{"batch":[,]}`, `{"batch":[1,]}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, raw []byte) {
		if utf8.Valid(raw) {
			var fast, slow Message
			if decodeMessageFast(raw, &fast) {
				if err := json.Unmarshal(raw, &slow); err != nil {
					t.Fatalf("fast read %s, encoding/json refused it: %v", raw, err)
				}
				if !reflect.DeepEqual(normal(fast), normal(slow)) {
					t.Fatalf("%s:\nfast %+v\nslow %+v", raw, fast, slow)
				}
			}
			fe, fr, fok := decode(raw, "", nil, 1, now, true)
			se, sr, _ := decode(raw, "", nil, 1, now, false)
			if fok && (comparable(fe) != comparable(se) || fmt.Sprint(fr) != fmt.Sprint(sr)) {
				t.Fatalf("%s:\nfast %v %v\nslow %v %v", raw, fe, fr, se, sr)
			}
		}
		fe, fr, ferr := decodeBatch(raw, 1, now)
		se, sr, serr := decodeBatchSlow(raw, 1, now)
		if fmt.Sprint(ferr) != fmt.Sprint(serr) || fmt.Sprint(fr) != fmt.Sprint(sr) || len(fe) != len(se) {
			t.Fatalf("%s:\nfast %v %v %v\nslow %v %v %v", raw, fe, fr, ferr, se, sr, serr)
		}
		for i := range fe {
			if comparable(fe[i]) != comparable(se[i]) {
				t.Fatalf("%s: event %d\nfast %v\nslow %v", raw, i, fe[i], se[i])
			}
		}
	})
}

// comparable is an event without its id when the id was generated.
func comparable(e warehouse.Event) string {
	if len(e.EventID) == 32 {
		e.EventID = ""
	}
	return fmt.Sprintf("%d|%s|%s|%s|%s|%s|%s", e.TenantID, e.EventID, e.UserID, e.EventType, e.OccurredAt, e.ReceivedAt, e.Payload)
}

// normal makes empty raw messages comparable.
func normal(m Message) Message {
	if len(m.Properties) == 0 {
		m.Properties = nil
	}
	if len(m.Traits) == 0 {
		m.Traits = nil
	}
	return m
}
