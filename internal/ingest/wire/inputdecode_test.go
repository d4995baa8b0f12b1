package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// checkInputFast checks DecodeInputFast's contract on p: when it decodes p, json.Unmarshal
// accepts p and decodes the same Input.
func checkInputFast(t *testing.T, p []byte) bool {
	t.Helper()
	var got Input
	if !DecodeInputFast(p, &got) {
		return false
	}
	var want Input
	if err := json.Unmarshal(p, &want); err != nil {
		t.Fatalf("DecodeInputFast took %q, which json.Unmarshal refuses: %v", p, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeInputFast(%q) =\n%#v\njson.Unmarshal:\n%#v", p, got, want)
	}
	return true
}

func TestDecodeInputFast(t *testing.T) {
	cases := []struct {
		in   string
		fast bool
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"user_id":"u1","event_type":"page_viewed"}`, true},
		{`{"user_id":"u1","event_type":"order_completed","occurred_at":"2024-05-01T10:00:00Z","sent_at":"2024-05-01T10:00:01Z","message_id":"m-1","payload":{"amount":12.5,"items":[{"sku":"A"}],"note":"é \"q\" \u0000"}}`, true},
		{"{\n\t\"payload\" : { \"a\" : [ 1 , 2 ] } ,\r\n \"user_id\" : \"u\" }", true},
		{`{"user_id":"u1","user_id":"u2"}`, false}, // encoding/json keeps the last: left to it
		{`{"User_ID":"u1"}`, false},                // matched case-insensitively by encoding/json
		{`{"userid":"u1"}`, false},
		{`{"extra":1}`, false},
		{`{"user_id":null}`, false},
		{`{"occurred_at":null}`, false},
		{`{"user_id":1}`, false},
		{`{"user_id":"a\"b"}`, true}, // escapes and non-ASCII: decoded by encoding/json itself
		{`{"user_id":"é"}`, true},
		{"{\"user_id\":\"bad \xff utf-8\"}", true},
		{`{"user\u005fid":"u"}`, true},
		{"{\"user_id\":\"a\tb\"}", false}, // a raw control character: not JSON
		{`{"user_id":"\ud800"}`, true},
		{`{"payload":null}`, false},
		{`{"payload":[1]}`, false},
		{`{"payload":"x"}`, false},
		{`{"payload":{"a":}}`, false},
		{`{"payload":{"a":1]}`, false},
		{`{"payload":{"a":1}`, false},
		{`{"user_id":"u"} x`, false},
		{`{"user_id":"u",}`, false},
		{`{,"user_id":"u"}`, false},
		{`{"user_id" "u"}`, false},
		{`{"user_id":"u" "event_type":"t"}`, false},
		{`{"user_id":"u`, false},
		{`[]`, false},
		{``, false},
	}
	for _, tc := range cases {
		if fast := checkInputFast(t, []byte(tc.in)); fast != tc.fast {
			t.Errorf("%s: fast %v, want %v", tc.in, fast, tc.fast)
		}
	}
}

func FuzzDecodeInputFast(f *testing.F) {
	for _, s := range []string{
		`{"user_id":"u1","event_type":"page_viewed","payload":{"a":[1,"]}"]}}`,
		`{"occurred_at":"2024-05-01T10:00:00Z","sent_at":"x","message_id":"m"}`,
		` { "payload" : { "b" : { } } } `,
		`{"user_id":"u","user_id":"v"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) { checkInputFast(t, p) })
}
