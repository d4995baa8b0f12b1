package testenv

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

// recorder is a testing.TB that records failures; Fatalf ends the goroutine like testing's does.
type recorder struct {
	testing.TB
	failed, fatal bool
	msgs          []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine (so Fatalf can end it) and returns the recorder.
func run(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestDeref(t *testing.T) {
	if got := Deref(new("x")); got != "x" {
		t.Errorf("Deref(new(%q)) = %q", "x", got)
	}
	if got := Deref[string](nil); got != "" {
		t.Errorf("Deref(nil *string) = %q, want empty", got)
	}
	if got := Deref[int64](nil); got != 0 {
		t.Errorf("Deref(nil *int64) = %d, want 0", got)
	}
}

func TestAsJSONSortsKeys(t *testing.T) {
	type doc struct {
		B int            `json:"b"`
		A map[string]any `json:"a"`
	}
	if got, want := AsJSON(t, doc{B: 2, A: map[string]any{"z": 1.5, "y": []int{}}}), `{"a":{"y":[],"z":1.5},"b":2}`; got != want {
		t.Errorf("AsJSON = %s, want %s", got, want)
	}
	if r := run(t, func(tb testing.TB) { AsJSON(tb, func() {}) }); !r.fatal {
		t.Errorf("AsJSON of a func did not fail the test")
	}
}

func TestWantFieldErrors(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &errs.ValidationError{Fields: map[string]string{"name": "is required", "size": "must be positive"}})
	tests := []struct {
		name      string
		err       error
		want      map[string]string
		wantFatal bool
		wantFail  bool
	}{
		{name: "fields and substrings", err: err, want: map[string]string{"name": "required", "size": "positive"}},
		{name: "field names only", err: err, want: FieldNames("size", "name")},
		{name: "no error", err: nil, want: FieldNames("name"), wantFatal: true},
		{name: "not a validation error", err: errs.ErrNotFound, want: FieldNames("name"), wantFatal: true},
		{name: "missing field", err: err, want: FieldNames("name"), wantFatal: true},
		{name: "extra field", err: err, want: FieldNames("name", "size", "tags"), wantFatal: true},
		{name: "wrong message", err: err, want: map[string]string{"name": "too long", "size": ""}, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, func(tb testing.TB) { WantFieldErrors(tb, tt.err, tt.want) })
			if r.fatal != tt.wantFatal || r.failed != (tt.wantFatal || tt.wantFail) {
				t.Errorf("fatal %v failed %v (%q), want fatal %v failed %v", r.fatal, r.failed, r.msgs, tt.wantFatal, tt.wantFatal || tt.wantFail)
			}
		})
	}
}

func TestEnvInt(t *testing.T) {
	const name = "COHORT_TESTENV_ENVINT"
	tests := []struct {
		value     string
		want      int
		wantFatal bool
	}{
		{value: "", want: 7},
		{value: "42", want: 42},
		{value: "0", wantFatal: true},
		{value: "-3", wantFatal: true},
		{value: "ten", wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Setenv(name, tt.value)
			var got int
			r := run(t, func(tb testing.TB) { got = EnvInt(tb, name, 7) })
			if r.fatal != tt.wantFatal || (!tt.wantFatal && got != tt.want) {
				t.Errorf("EnvInt with %s=%q = %d (fatal %v), want %d (fatal %v)", name, tt.value, got, r.fatal, tt.want, tt.wantFatal)
			}
		})
	}
}

func TestClockSetAndAdvance(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	c.Advance(time.Minute)
	if got := c.Now(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("after Advance: %v", got)
	}
	c.Set(t0.Add(-time.Hour))
	if got := c.Now(); !got.Equal(t0.Add(-time.Hour)) {
		t.Errorf("after Set: %v", got)
	}
}
