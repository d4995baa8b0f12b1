package wire

import (
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// maxName is the longest property name the tests' scans report (the loader passes the segment
// language's).
const maxName = 128

// reference: what decoding the whole payload finds (the last value of a repeated key wins).
func referenceNumeric(p []byte) map[string]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(p, &m) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if t, ok := warehouse.JNum(v); ok && len(k) <= maxName {
			out[k] = t
		}
	}
	return out
}

// scanned applies the scanner's reports as the loader does: a repeat replaces, "" drops.
func scanned(p []byte) map[string]string {
	out := map[string]string{}
	NumericProperties(p, maxName, func(name, num string) {
		if num == "" {
			delete(out, name)
			return
		}
		out[name] = num
	})
	return out
}

func TestNumericProperties(t *testing.T) {
	cases := []struct {
		name, payload string
		want          map[string]string
	}{
		{"numbers and numeric strings", `{"amount": 12.5, "qty":3, "price":"9.99", "name":"x", "ok":true, "n":null}`, map[string]string{"amount": "12.5", "qty": "3", "price": "9.99"}},
		{"nested values are skipped", `{"a":{"b":1,"c":[1,2,{"d":"}"}]},"e":[1,"2"],"f":-4e2}`, map[string]string{"f": "-4e2"}},
		{"escaped keys and braces in strings", `{"a\"b":1,"s":"{[\"]}","u\u00e9":" 7 "}`, map[string]string{`a"b`: "1", "ué": " 7 "}},
		{"repeated key: last wins", `{"a":1,"a":"x","b":2,"b":3,"c":"y","c":4}`, map[string]string{"b": "3", "c": "4"}},
		{"whitespace everywhere", " {\n\t\"a\" :\r 1 , \"b\":\"2\"\n} ", map[string]string{"a": "1", "b": "2"}},
		{"not numeric strings", `{"a":"12abc","b":"","c":"1e5000","d":"0x10"}`, map[string]string{}},
		{"empty object", `{}`, map[string]string{}},
		{"not an object", `[1,2]`, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := scanned([]byte(c.payload))
			if !maps.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if ref := referenceNumeric([]byte(c.payload)); ref != nil && !maps.Equal(got, ref) {
				t.Fatalf("scanner %v differs from decoding %v", got, ref)
			}
		})
	}
}

func FuzzNumericProperties(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":{"b":[1,"}"]},"c":"2.5"}`, `{"a\\"":1e3}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var m map[string]json.RawMessage
		// The API stores only valid UTF-8 payloads (storableJSON).
		if !utf8.Valid(p) || json.Unmarshal(p, &m) != nil {
			NumericProperties(p, maxName, func(string, string) {}) // must not panic on anything
			return
		}
		if got, ref := scanned(p), referenceNumeric(p); !maps.Equal(got, ref) {
			t.Fatalf("scanner %v differs from decoding %v for %q", got, ref, p)
		}
	})
}
