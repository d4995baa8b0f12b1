package activities

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

func TestPermanent(t *testing.T) {
	transient := errors.New("connection reset")
	tests := []struct {
		name     string
		err      error
		wantType string // "" means the error is returned as it is (retryable)
	}{
		{"not found", fmt.Errorf("segment 4: %w", errs.ErrNotFound), ErrTypeSegmentGone},
		{"no definition", fmt.Errorf("segment 4: %w", segment.ErrNoDefinition), ErrTypeNoDefinition},
		{"empty seed", fmt.Errorf("seed segment 2: %w", segment.ErrEmptySeed), ErrTypeEmptySeed},
		{"invalid", errs.Invalid("definition", "is required"), ErrTypeInvalidSegment},
		{"transient", transient, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := permanent(tc.err)
			if tc.wantType == "" {
				if got != tc.err {
					t.Fatalf("permanent(%v) = %v, want the error unchanged", tc.err, got)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(got, &app) {
				t.Fatalf("permanent(%v) = %T %v, want an application error", tc.err, got, got)
			}
			if app.Type() != tc.wantType || !app.NonRetryable() || app.Message() != tc.err.Error() {
				t.Errorf("permanent(%v) = type %q non-retryable %v message %q, want non-retryable %q with the error's text",
					tc.err, app.Type(), app.NonRetryable(), app.Message(), tc.wantType)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("permanent(%v) does not wrap the error", tc.err)
			}
		})
	}
	if permanent(nil) != nil {
		t.Error("permanent(nil) is not nil")
	}
}
