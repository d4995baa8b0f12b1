package ai

import (
	"context"
	"errors"
)

// Operations name what a model call was for, in usage records and metrics (a fixed set, so the
// metric labels stay bounded). A call made without an operation in its context counts as
// OpOther and is attributed to no tenant.
const (
	OpBuild         = "build"          // the page builder agent (POST .../pages/{id}/build/)
	OpDesignExtract = "design_extract" // font suggestion of a design-system extraction
	OpPageCopy      = "page_copy"      // copy of a generated page (create, regenerate, bulk)
	OpPageSearch    = "page_search"    // the query embedding of a page generation
	OpSegmentDraft  = "segment_draft"  // a segment definition drafted from a description
	OpProductEmbed  = "product_embed"  // product embeddings of the catalogue
	OpSearch        = "search"         // the query embedding of GET /api/ai-pages/query
	OpOther         = "other"
)

// Operations lists every operation label value.
var Operations = []string{OpBuild, OpDesignExtract, OpPageCopy, OpPageSearch, OpSegmentDraft, OpProductEmbed, OpSearch, OpOther}

// Call kinds.
const (
	KindChat  = "chat"
	KindEmbed = "embed"
)

// Spend names who a model call is spent for: the tenant (0: nobody) and the operation.
type Spend struct {
	TenantID  int64
	Operation string
}

type spendKey struct{}

// WithSpend returns ctx whose model calls are metered to the tenant and operation (the
// innermost WithSpend wins).
func WithSpend(ctx context.Context, tenantID int64, op string) context.Context {
	return context.WithValue(ctx, spendKey{}, Spend{TenantID: tenantID, Operation: op})
}

// SpendOf returns the tenant and operation ctx's model calls are metered to.
func SpendOf(ctx context.Context) (Spend, bool) {
	s, ok := ctx.Value(spendKey{}).(Spend)
	return s, ok
}

// Call is one model call as metered: the tokens are the provider's own usage fields.
type Call struct {
	Spend
	Kind             string // chat or embed
	Model            string
	PromptTokens     int
	CompletionTokens int
	Err              error // the call failed (its tokens, if any were spent, are not reported)
}

// Meter records model calls. Record must not block long: it runs after each call.
type Meter interface {
	Record(ctx context.Context, c Call)
}

// UsageEmbedder is a provider that reports the tokens of its embeddings.
type UsageEmbedder interface {
	EmbedUsage(ctx context.Context, texts []string) ([][]float32, Usage, error)
}

// Metered is a Provider that reports every call and its usage to a Meter, attributed to the
// Spend in the call's context (WithSpend).
type Metered struct {
	Provider
	meter Meter
}

// NewMetered wraps p so that its calls are metered by m.
func NewMetered(p Provider, m Meter) *Metered { return &Metered{Provider: p, meter: m} }

func (m *Metered) record(ctx context.Context, kind, model string, u Usage, err error) {
	s, ok := SpendOf(ctx)
	if !ok || s.Operation == "" {
		s = Spend{Operation: OpOther}
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil // the caller gave up: not a provider failure, and nothing reported
		if u == (Usage{}) {
			return
		}
	}
	m.meter.Record(ctx, Call{Spend: s, Kind: kind, Model: model, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, Err: err})
}

// Embed embeds through the wrapped provider and meters the tokens it reports.
func (m *Metered) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if ue, ok := m.Provider.(UsageEmbedder); ok {
		vecs, u, err := ue.EmbedUsage(ctx, texts)
		m.record(ctx, KindEmbed, m.Provider.EmbeddingModel(), u, err)
		return vecs, err
	}
	vecs, err := m.Provider.Embed(ctx, texts)
	m.record(ctx, KindEmbed, m.Provider.EmbeddingModel(), Usage{}, err)
	return vecs, err
}

// Chat runs the wrapped provider's Chat and meters its usage.
func (m *Metered) Chat(ctx context.Context, req ChatRequest) (ChatResponse, error) {
	resp, err := m.Provider.Chat(ctx, req)
	m.record(ctx, KindChat, m.Provider.ChatModel(), resp.Usage, err)
	return resp, err
}

// ChatStream runs the wrapped provider's ChatStream and meters its usage.
func (m *Metered) ChatStream(ctx context.Context, req ChatRequest, fn func(StreamEvent) error) (ChatResponse, error) {
	resp, err := m.Provider.ChatStream(ctx, req, fn)
	m.record(ctx, KindChat, m.Provider.ChatModel(), resp.Usage, err)
	return resp, err
}
