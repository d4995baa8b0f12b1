package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

// TestMapErrorStatuses: what a handler's error becomes. A cancelled request (the client went away
// mid-call) is 499, not a 500 that would count as a server failure.
func TestMapErrorStatuses(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"client went away", fmt.Errorf("load page: %w", context.Canceled), statusClientClosedRequest, "client_closed_request"},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "unavailable"},
		{"not found", fmt.Errorf("page 3: %w", errs.ErrNotFound), http.StatusNotFound, "not_found"},
		{"unknown", fmt.Errorf("boom"), http.StatusInternalServerError, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := mapError(tt.err)
			if status != tt.status || body.Code != tt.code {
				t.Fatalf("mapError(%v) = %d %q, want %d %q", tt.err, status, body.Code, tt.status, tt.code)
			}
		})
	}
}
