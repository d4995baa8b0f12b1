package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckAndPath(t *testing.T) {
	tests := []struct {
		name string
		body string
		path string // "" with ok: no problem
		ok   bool
	}{
		{name: "ascii", body: `{"a":"b","c":[1,2,{"d":"e"}]}`, ok: true},
		{name: "valid multibyte", body: `{"a":"héllo ✓ 😀"}`, ok: true},
		{name: "valid escapes", body: `{"a":"\u00e9\ud83d\ude00\\u\"\n"}`, ok: true},
		{name: "escaped backslash before ud800 text", body: `{"a":"\\ud800"}`, ok: true},
		{name: "uppercase pair", body: `{"a":"\uD83D\uDE00"}`, ok: true},
		{name: "invalid byte top level", body: "{\"title\":\"a\xffb\"}", path: "title"},
		{name: "truncated sequence", body: "{\"title\":\"a\xe2\x82\"}", path: "title"},
		{name: "encoded surrogate bytes", body: "{\"t\":\"\xed\xa0\x80\"}", path: "t"},
		{name: "lone high surrogate", body: `{"x":1,"title":"\ud800"}`, path: "title"},
		{name: "lone high surrogate uppercase", body: `{"title":"\uD800x"}`, path: "title"},
		{name: "high then non-low", body: `{"title":"\ud800\u0041"}`, path: "title"},
		{name: "lone low surrogate", body: `{"title":"\udc00"}`, path: "title"},
		{name: "high at end of string", body: `{"title":"\ud83d"}`, path: "title"},
		{name: "nested block prop", body: `{"blocks":[{"type":"hero","props":{"title":"ok"}},{"type":"hero","props":{"title":"\ud800","x":[1]}}]}`, path: "blocks[1].props.title"},
		{name: "array of strings", body: "{\"tags\":[\"a\",\"b\xc3\"]}", path: "tags[1]"},
		{name: "key names the object", body: "{\"props\":{\"ti\xfftle\":\"x\"}}", path: "props"},
		{name: "escaped key", body: `{"a\"b":{"c":"\udfff"}}`, path: `a"b.c`},
		{name: "spaces everywhere", body: " { \"a\" : [ \"ok\" , { \"b\" : \"\xff\" } ] } ", path: "a[1].b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off := Check([]byte(tt.body))
			if tt.ok {
				if off >= 0 {
					t.Fatalf("Check = %d, want -1", off)
				}
				if !json.Valid([]byte(tt.body)) {
					t.Fatalf("test body is not JSON")
				}
				return
			}
			if off < 0 {
				t.Fatalf("Check = -1, want a problem")
			}
			if got := PathAt([]byte(tt.body), off); got != tt.path {
				t.Fatalf("PathAt = %q, want %q", got, tt.path)
			}
		})
	}
}

// What Check refuses is exactly what encoding/json would decode to a U+FFFD the client did not
// send (the seeds run as a test; the input spells no U+FFFD of its own).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud800"`, "\"\xff\"", `"\ud83d\ude00"`, `"\\ud800"`, `"\udc00\ud800"`, "\"\xe2\x82\"", `"\ud800\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var out string
		if strings.Contains(s, "\uFFFD") || strings.Contains(strings.ToLower(s), `\ufffd`) || json.Unmarshal([]byte(s), &out) != nil {
			return
		}
		replaced := strings.ContainsRune(out, utf8.RuneError)
		if off := Check([]byte(s)); (off >= 0) != replaced {
			t.Fatalf("Check(%q) = %d, but decoding replaced characters: %v", s, off, replaced)
		}
	})
}
