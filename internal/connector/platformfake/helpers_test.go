package platformfake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// newClock is a settable clock shared by a fake and its test.
func newClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the answer body into a generic map.
func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", a.status, err, a.body)
	}
	return m
}

// send makes one request with the headers given as "Name: value" pairs.
func send(t *testing.T, method, url string, body []byte, headers ...string) answer {
	t.Helper()
	a, err := trySend(method, url, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// trySend is send for goroutines other than the test's.
func trySend(method, url string, body []byte, headers ...string) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{}, err
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// path walks a decoded JSON document: keys for objects, ints for arrays.
func path(t *testing.T, v any, steps ...any) any {
	t.Helper()
	for _, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: not an object: %v", k, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: not an array of that length: %v", k, v)
			}
			v = a[k]
		}
	}
	return v
}

// expectViolations checks that exactly n new violations appeared since before (and returns the
// new count), each containing want when want is not "".
func expectViolations(t *testing.T, all []string, before, n int, want string) {
	t.Helper()
	got := all[before:]
	if len(got) != n {
		t.Fatalf("want %d new violation(s), got %d: %q", n, len(got), got)
	}
	for _, v := range got {
		if want != "" && !strings.Contains(v, want) {
			t.Errorf("violation %q does not mention %q", v, want)
		}
	}
}
