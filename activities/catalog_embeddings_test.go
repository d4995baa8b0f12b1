package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/ai"
)

func TestEmbedPendingWithoutProvider(t *testing.T) {
	_, err := (&ProductEmbeddings{}).EmbedPending(context.Background(), EmbedPendingInput{TenantID: 1})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeNoEmbeddingProvider || !app.NonRetryable() {
		t.Fatalf("error %v, want a non-retryable %s", err, ErrTypeNoEmbeddingProvider)
	}
}

func TestEmbedError(t *testing.T) {
	limited := &ai.ProviderError{Provider: "openai", Op: "embed", Kind: ai.ErrRateLimited, StatusCode: 429, RetryAfter: 7 * time.Second}
	err := embedError(fmt.Errorf("embed 3 product texts: %w", limited))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeEmbeddingRateLimited || app.NonRetryable() || app.NextRetryDelay() != 7*time.Second {
		t.Fatalf("rate limited: %v, want a retryable %s after 7s", err, ErrTypeEmbeddingRateLimited)
	}
	for _, cause := range []error{
		&ai.ProviderError{Provider: "openai", Op: "embed", Kind: ai.ErrRateLimited, StatusCode: 429},
		&ai.ProviderError{Provider: "openai", Op: "embed", Kind: ai.ErrUnavailable, StatusCode: 503},
		&ai.ProviderError{Provider: "openai", Op: "embed", Kind: ai.ErrUnauthorized, StatusCode: 401},
		errors.New("read embedding queue: connection reset"),
	} {
		if got := embedError(cause); got != cause {
			t.Errorf("%v became %v, want it returned as is (retried)", cause, got)
		}
	}
}
