package jsonenc

import (
	"encoding/json"
	"strings"
	"testing"
)

func checkString(t *testing.T, s string) {
	t.Helper()
	b := AppendString([]byte("x"), s)
	if b[0] != 'x' {
		t.Fatalf("AppendString overwrote dst: %q", b)
	}
	var got string
	if err := json.Unmarshal(b[1:], &got); err != nil {
		t.Fatalf("AppendString(%q) = %s: %v", s, b[1:], err)
	}
	// What encoding/json writes for s reads back the same (every invalid byte a U+FFFD).
	enc, _ := json.Marshal(s)
	var want string
	if err := json.Unmarshal(enc, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("AppendString(%q) reads back as %q, want %q", s, got, want)
	}
	if strings.ContainsAny(string(b[1:]), "\u2028\u2029") {
		t.Fatalf("AppendString(%q) = %s: U+2028/U+2029 not escaped", s, b[1:])
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\`, "<b>&</b>", "\x00\x01\b\f\n\r\t\x1f\x7f", "é日本😀", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82"} {
		checkString(t, s)
	}
	if got := string(AppendString(nil, "a\"\\\n\x01")); got != `"a\"\\\n\u0001"` {
		t.Errorf("escapes: %s", got)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a<b>\u2028\xff")
	f.Fuzz(checkString)
}
