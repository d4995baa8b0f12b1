package activities

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/aispend"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// fakeEmbeddings is a loopback OpenAI embeddings endpoint that reports 7 prompt tokens a text
// and keeps the sum it reported.
type fakeEmbeddings struct {
	mu       sync.Mutex
	reported int
}

func (f *fakeEmbeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Input []string `json:"input"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	data := make([]map[string]any, len(body.Input))
	for i := range body.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float32{1, float32(i), 0.5}}
	}
	f.mu.Lock()
	f.reported += 7 * len(body.Input)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "text-embedding-3-small",
		"usage": map[string]any{"prompt_tokens": 7 * len(body.Input), "total_tokens": 7 * len(body.Input)}})
}

// TestEmbedPendingMetersTheTenant: the product embeddings the worker makes are metered to the
// tenant as product_embed, with the tokens the provider reported.
func TestEmbedPendingMetersTheTenant(t *testing.T) {
	db := testenv.OpenDB(t)
	tenant := testenv.Tenant(t, db, "embed-meter")
	ctx := context.Background()
	fake := &fakeEmbeddings{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	provider, err := ai.NewOpenAI(ai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", HTTPClient: srv.Client(), EmbedBatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	spend, err := aispend.New(db.Pool, time.Now, nil, nil, aispend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(db.Pool, time.Now)
	if sum, err := cat.Bulk(ctx, tenant, []map[string]any{
		{"sku": "A", "name": "Linen dress"}, {"sku": "B", "name": "Wool coat"}, {"sku": "C", "name": "Rain jacket"},
	}); err != nil || sum.Failed > 0 {
		t.Fatalf("bulk: %v %+v", err, sum)
	}
	a := &ProductEmbeddings{Catalog: cat, AI: ai.NewMetered(provider, spend)}
	if _, err := a.EmbedPending(ctx, EmbedPendingInput{TenantID: tenant}); err != nil {
		t.Fatal(err)
	}
	rep, err := spend.Usage(ctx, tenant, "24h")
	if err != nil {
		t.Fatal(err)
	}
	if fake.reported == 0 || len(rep.Usage) != 1 || rep.Usage[0].Operation != ai.OpProductEmbed ||
		rep.Usage[0].PromptTokens != int64(fake.reported) || rep.Usage[0].Model != "text-embedding-3-small" {
		t.Fatalf("usage %+v, want product_embed with the %d tokens the provider reported", rep.Usage, fake.reported)
	}
}
