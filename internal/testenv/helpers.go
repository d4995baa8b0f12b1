package testenv

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Deref is *p, or T's zero value when p is nil.
func Deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// AsJSON encodes v canonically: object keys sorted (JSON numbers go through float64), so two
// encodings of the same document compare equal as strings. A value that cannot be encoded fails
// the test.
func AsJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("marshal %v: %v", v, err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		tb.Fatalf("not JSON: %s: %v", b, err)
	}
	b, _ = json.Marshal(doc)
	return string(b)
}

// WantFieldErrors asserts err is an *errs.ValidationError (so it matches errs.ErrInvalid) naming
// exactly the fields that are want's keys, each field's message containing want's substring (""
// accepts any message: see FieldNames).
func WantFieldErrors(tb testing.TB, err error, want map[string]string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want field errors %v", want)
	}
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, errs.ErrInvalid) {
		tb.Fatalf("error %v (%T), want an errs.ErrInvalid *errs.ValidationError with fields %v", err, err, want)
	}
	if got, w := slices.Sorted(maps.Keys(ve.Fields)), slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
		tb.Fatalf("field errors %v, want fields %v", ve.Fields, w)
	}
	for k, sub := range want {
		if !strings.Contains(ve.Fields[k], sub) {
			tb.Errorf("fields[%q] = %q, want it to contain %q", k, ve.Fields[k], sub)
		}
	}
}

// FieldNames is WantFieldErrors' want for fields whose messages do not matter.
func FieldNames(names ...string) map[string]string {
	want := make(map[string]string, len(names))
	for _, n := range names {
		want[n] = ""
	}
	return want
}

// EnvInt reads a positive integer from the environment variable name, or returns def when it is
// unset or empty; any other value fails the test, so a mistyped setting is not silently ignored.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
