// Package errs holds the error kinds that domain code returns and api/errors.go maps to HTTP.
// Domain packages wrap these sentinels with context (fmt.Errorf("segment %d: %w", id, errs.ErrNotFound));
// the API layer never inspects strings.
package errs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

var (
	ErrNotFound        = errors.New("not found")
	ErrConflict        = errors.New("conflict")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	ErrTooLarge        = errors.New("too large")
	ErrUnavailable     = errors.New("dependency unavailable")
	ErrInvalid         = errors.New("invalid input")
)

// ValidationError carries field-level messages, keyed by the path of the offending field
// (for example "conditions[2].value"). It matches ErrInvalid with errors.Is.
type ValidationError struct {
	Code   string // machine code, "validation_failed" when empty
	Fields map[string]string
	Msg    string // optional summary
}

func (e *ValidationError) Error() string {
	if e.Msg != "" && len(e.Fields) == 0 {
		return e.Msg
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+e.Fields[k])
	}
	msg := e.Msg
	if msg == "" {
		msg = "invalid input"
	}
	return msg + ": " + strings.Join(parts, "; ")
}

func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Invalid builds a ValidationError for one field.
func Invalid(field, message string) *ValidationError {
	return &ValidationError{Fields: map[string]string{field: message}}
}

// Fields accumulates field errors; Err returns nil when none were added.
type Fields map[string]string

func (f Fields) Add(field, format string, args ...any) {
	if _, ok := f[field]; !ok {
		f[field] = fmt.Sprintf(format, args...)
	}
}

func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return &ValidationError{Fields: f}
}

// RateLimitedError says the caller must wait RetryAfter before trying again.
type RateLimitedError struct {
	RetryAfter time.Duration
	Msg        string
}

func (e *RateLimitedError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return "rate limit exceeded"
}

// CodedError lets domain code choose the machine-readable code of an error while still matching
// one of the sentinel kinds above (for example code "batch_too_large" of kind ErrInvalid).
type CodedError struct {
	Kind error
	Code string
	Msg  string
	// RetryAfter, when set, is how long the caller should wait before trying again (the
	// Retry-After header of a 503).
	RetryAfter time.Duration
}

func (e *CodedError) Error() string { return e.Msg }
func (e *CodedError) Unwrap() error { return e.Kind }

// Coded returns a CodedError of the given kind.
func Coded(kind error, code, format string, args ...any) error {
	return &CodedError{Kind: kind, Code: code, Msg: fmt.Sprintf(format, args...)}
}
