package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/testenv"
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

// TestEmbedPendingHeartbeats: the drain heartbeats once it holds its rows (and at each renewal of
// their lease), so the server notices a drain whose worker died within the heartbeat timeout.
func TestEmbedPendingHeartbeats(t *testing.T) {
	db := testenv.OpenDB(t)
	tenant := testenv.Tenant(t, db, "embed-heartbeat")
	ctx := context.Background()
	cat := catalog.NewService(db.Pool, time.Now, catalog.WithEmbeddingLeaseRenewal(time.Millisecond))
	if sum, err := cat.Bulk(ctx, tenant, []map[string]any{{"sku": "A", "name": "Linen dress"}, {"sku": "B", "name": "Wool coat"}}); err != nil || sum.Failed > 0 {
		t.Fatalf("bulk: %v %+v", err, sum)
	}
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acts := &ProductEmbeddings{Catalog: cat, AI: slowEmbedder{Local: local, delay: 50 * time.Millisecond}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	var mu sync.Mutex
	beats := 0
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	env.RegisterActivity(acts)
	v, err := env.ExecuteActivity(acts.EmbedPending, EmbedPendingInput{TenantID: tenant})
	if err != nil {
		t.Fatal(err)
	}
	var res EmbedPendingResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	if want := (EmbedPendingResult{Read: 2, Embedded: 2}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	mu.Lock()
	defer mu.Unlock()
	// One when the rows are held; the renewals' heartbeats within the SDK's throttle interval
	// are batched into it (catalog's TestDrainRenewsItsLease counts one per renewal).
	if beats < 1 {
		t.Errorf("%d heartbeats, want one when the rows are held", beats)
	}
}

// slowEmbedder is the local provider taking delay per call.
type slowEmbedder struct {
	*ai.Local
	delay time.Duration
}

func (e slowEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	time.Sleep(e.delay)
	return e.Local.Embed(ctx, texts)
}
