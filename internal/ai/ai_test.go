package ai

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
)

func TestErrorKinds(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		is      []error
		isNot   []error
		wantMsg string
	}{
		{
			name:  "unavailable also matches the project kind",
			err:   &ProviderError{Provider: "openai", Op: "chat", Kind: ErrUnavailable, StatusCode: 502},
			is:    []error{ErrUnavailable, errs.ErrUnavailable},
			isNot: []error{ErrRateLimited, ErrInvalidRequest, ErrUnauthorized, errs.ErrInvalid},
		},
		{
			name:  "invalid request also matches the project kind",
			err:   fmt.Errorf("build page: %w", invalidf("messages: at least one message is required")),
			is:    []error{ErrInvalidRequest, errs.ErrInvalid},
			isNot: []error{ErrUnavailable, errs.ErrUnavailable},
		},
		{
			name:    "unauthorized is neither unavailable nor the caller's authentication",
			err:     &ProviderError{Provider: "openai", Op: "embed", Kind: ErrUnauthorized, StatusCode: 401, Message: "bad key"},
			is:      []error{ErrUnauthorized},
			isNot:   []error{ErrUnavailable, errs.ErrUnavailable, errs.ErrUnauthenticated},
			wantMsg: "openai embed: ai provider rejected credentials (http 401): bad key",
		},
		{
			name:    "rate limited",
			err:     &ProviderError{Provider: "openai", Op: "chat", Kind: ErrRateLimited, StatusCode: 429, Message: "slow down", RetryAfter: time.Second},
			is:      []error{ErrRateLimited},
			isNot:   []error{ErrUnavailable},
			wantMsg: "openai chat: ai provider rate limited (http 429): slow down",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("%v does not match %v", tt.err, target)
				}
			}
			for _, target := range tt.isNot {
				if errors.Is(tt.err, target) {
					t.Errorf("%v matches %v", tt.err, target)
				}
			}
			if tt.wantMsg != "" && tt.err.Error() != tt.wantMsg {
				t.Errorf("message %q, want %q", tt.err.Error(), tt.wantMsg)
			}
		})
	}
}

func TestCosine(t *testing.T) {
	tests := []struct {
		name string
		a, b []float32
		want float32
	}{
		{name: "identical", a: []float32{3, 4}, b: []float32{3, 4}, want: 1},
		{name: "opposite", a: []float32{1, 0}, b: []float32{-2, 0}, want: -1},
		{name: "orthogonal", a: []float32{1, 0}, b: []float32{0, 1}, want: 0},
		{name: "zero vector", a: []float32{0, 0}, b: []float32{1, 0}, want: 0},
		{name: "length mismatch", a: []float32{1}, b: []float32{1, 0}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cosine(tt.a, tt.b); got < tt.want-1e-6 || got > tt.want+1e-6 {
				t.Errorf("Cosine = %v, want %v", got, tt.want)
			}
		})
	}
}
