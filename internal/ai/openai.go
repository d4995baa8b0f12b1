package ai

import (
	"context"
	"errors"
	"fmt"
	"github.com/cohort-dev/cohort/internal/breaker"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// OpenAI talks to any OpenAI-compatible HTTP API (OpenAI, Azure-style proxies, vLLM, Ollama ...)
// through github.com/sashabaranov/go-openai.
type OpenAI struct {
	client         *openai.Client
	apiKey         string // only used to redact error messages
	chatModel      string
	embeddingModel string
	dimensions     int // configured; 0 means the model's native size
	learnedDims    atomic.Int64
	batchSize      int
	timeout        time.Duration
	metrics        *Metrics // nil: none
	chatBreaker    *breaker.Breaker
}

var _ Provider = (*OpenAI)(nil)

// knownEmbeddingDims are the native output sizes of OpenAI's embedding models, used by
// Dimensions when Config.Dimensions is 0.
var knownEmbeddingDims = map[string]int{
	"text-embedding-3-small": 1536,
	"text-embedding-3-large": 3072,
	"text-embedding-ada-002": 1536,
}

// NewOpenAI returns an OpenAI-compatible provider. An empty APIKey is allowed (local
// OpenAI-compatible servers often need none); the server's 401 then surfaces as ErrUnauthorized.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai base url %q: want an absolute http(s) url", base)
	}
	if cfg.Dimensions < 0 || cfg.Dimensions > maxDimensions {
		return nil, fmt.Errorf("openai dimensions %d: want 0..%d", cfg.Dimensions, maxDimensions)
	}
	if cfg.EmbedBatchSize < 0 {
		return nil, fmt.Errorf("openai embed batch size %d: must not be negative", cfg.EmbedBatchSize)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("openai timeout %s: must not be negative", cfg.Timeout)
	}
	p := &OpenAI{
		apiKey:         cfg.APIKey,
		chatModel:      orDefault(cfg.ChatModel, DefaultOpenAIChatModel),
		embeddingModel: orDefault(cfg.EmbeddingModel, DefaultOpenAIEmbeddingModel),
		dimensions:     cfg.Dimensions,
		batchSize:      cfg.EmbedBatchSize,
		timeout:        cfg.Timeout,
		metrics:        cfg.Metrics,
	}
	if p.batchSize == 0 {
		p.batchSize = DefaultEmbedBatchSize
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if cfg.BreakerFailures < 0 || cfg.BreakerCooldown < 0 {
		return nil, fmt.Errorf("openai chat breaker: failures %d and cooldown %s must not be negative", cfg.BreakerFailures, cfg.BreakerCooldown)
	}
	failures, cooldown := cfg.BreakerFailures, cfg.BreakerCooldown
	if failures == 0 {
		failures = DefaultBreakerFailures
	}
	if cooldown == 0 {
		cooldown = DefaultBreakerCooldown
	}
	p.chatBreaker = breaker.New(cfg.Now, failures, cooldown)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	occ := openai.DefaultConfig(cfg.APIKey)
	occ.BaseURL = base
	occ.HTTPClient = metaDoer{client: hc}
	p.client = openai.NewClientWithConfig(occ)
	return p, nil
}

func orDefault(s, def string) string {
	if s = strings.TrimSpace(s); s != "" {
		return s
	}
	return def
}

func (p *OpenAI) Name() string           { return ProviderOpenAI }
func (p *OpenAI) ChatModel() string      { return p.chatModel }
func (p *OpenAI) EmbeddingModel() string { return p.embeddingModel }

// Dimensions returns the configured size, else the size the server returned in the last
// successful Embed, else the model's known native size (0 for an unknown model before any call).
func (p *OpenAI) Dimensions() int {
	if p.dimensions > 0 {
		return p.dimensions
	}
	if d := p.learnedDims.Load(); d > 0 {
		return int(d)
	}
	return knownEmbeddingDims[p.embeddingModel]
}

// Embed embeds texts in batches of at most EmbedBatchSize per HTTP call. Empty (whitespace-only)
// texts are not sent (the API rejects them) and come back as zero vectors.
func (p *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, _, err := p.EmbedUsage(ctx, texts)
	return vecs, err
}

// EmbedUsage is Embed that also returns the tokens the server reported (usage.prompt_tokens,
// summed over the batches), including those of batches made before a failing one.
func (p *OpenAI) EmbedUsage(ctx context.Context, texts []string) ([][]float32, Usage, error) {
	out := make([][]float32, len(texts))
	var usage Usage
	if len(texts) == 0 {
		return out, usage, nil
	}
	var (
		batch    []string
		batchIdx []int
		dims     int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		vecs, tokens, err := p.embedBatch(ctx, batch)
		usage.PromptTokens += tokens
		if err != nil {
			return err
		}
		for i, v := range vecs {
			if dims == 0 {
				dims = len(v)
			} else if len(v) != dims {
				return &ProviderError{Provider: ProviderOpenAI, Op: "embed", Kind: ErrUnavailable,
					Message: fmt.Sprintf("malformed response: vectors of %d and %d dimensions", dims, len(v))}
			}
			out[batchIdx[i]] = v
		}
		batch, batchIdx = batch[:0], batchIdx[:0]
		return nil
	}
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			continue
		}
		batch = append(batch, t)
		batchIdx = append(batchIdx, i)
		if len(batch) == p.batchSize {
			if err := flush(); err != nil {
				return nil, usage, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, usage, err
	}
	if dims > 0 {
		if p.dimensions > 0 && dims != p.dimensions {
			return nil, usage, fmt.Errorf("openai embed: model %s returned %d dimensions, configured %d (does the server support the dimensions parameter?)",
				p.embeddingModel, dims, p.dimensions)
		}
		p.learnedDims.Store(int64(dims))
	} else {
		dims = p.Dimensions()
	}
	for i := range out {
		if out[i] == nil {
			out[i] = make([]float32, dims)
		}
	}
	return out, usage, nil
}

// embedBatch makes one embeddings call; tokens is the server's usage.prompt_tokens (also when the
// answer is malformed: it was paid for).
func (p *OpenAI) embedBatch(parent context.Context, batch []string) (_ [][]float32, tokens int, err error) {
	defer func(start time.Time) { p.metrics.observe(ProviderOpenAI, OpEmbed, start, err) }(time.Now())
	ctx, cancel := context.WithTimeout(parent, p.timeout)
	defer cancel()
	meta := &respMeta{}
	ctx = context.WithValue(ctx, respMetaKey{}, meta)
	// EmbeddingRequest (unlike EmbeddingRequestStrings) omits the empty "user" field; the encoding
	// format is left to the server's default (float) for compatibility with non-OpenAI servers.
	resp, err := p.client.CreateEmbeddings(ctx, openai.EmbeddingRequest{
		Input:      batch,
		Model:      openai.EmbeddingModel(p.embeddingModel),
		Dimensions: p.dimensions,
	})
	if err != nil {
		return nil, 0, p.mapErr(parent, "embed", err, meta)
	}
	tokens = resp.Usage.PromptTokens
	if len(resp.Data) != len(batch) {
		return nil, tokens, &ProviderError{Provider: ProviderOpenAI, Op: "embed", Kind: ErrUnavailable,
			Message: fmt.Sprintf("malformed response: %d embeddings for %d inputs", len(resp.Data), len(batch))}
	}
	vecs := make([][]float32, len(batch))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(batch) || vecs[d.Index] != nil {
			return nil, tokens, &ProviderError{Provider: ProviderOpenAI, Op: "embed", Kind: ErrUnavailable,
				Message: fmt.Sprintf("malformed response: bad or duplicate embedding index %d", d.Index)}
		}
		if len(d.Embedding) == 0 {
			return nil, tokens, &ProviderError{Provider: ProviderOpenAI, Op: "embed", Kind: ErrUnavailable,
				Message: fmt.Sprintf("malformed response: empty embedding at index %d", d.Index)}
		}
		vecs[d.Index] = normalize(d.Embedding)
	}
	return vecs, tokens, nil
}

// errBreakerOpen is the answer of a chat call while the breaker is open.
func (p *OpenAI) errBreakerOpen(op string) error {
	return &ProviderError{Provider: ProviderOpenAI, Op: op, Kind: ErrUnavailable,
		Message: fmt.Sprintf("circuit open after %d consecutive failures; the next call is tried within %s", p.chatBreaker.Threshold(), p.chatBreaker.Cooldown())}
}

// Chat runs one non-streaming chat completion within Config.Timeout, through the chat breaker.
func (p *OpenAI) Chat(parent context.Context, req ChatRequest) (_ ChatResponse, err error) {
	creq, err := p.chatRequest(req)
	if err != nil {
		return ChatResponse{}, err
	}
	defer func(start time.Time) { p.metrics.observe(ProviderOpenAI, OpChat, start, err) }(time.Now())
	if !p.chatBreaker.Allow() {
		return ChatResponse{}, p.errBreakerOpen("chat")
	}
	defer func() { settle(p.chatBreaker, err) }()
	ctx, cancel := context.WithTimeout(parent, p.timeout)
	defer cancel()
	meta := &respMeta{}
	ctx = context.WithValue(ctx, respMetaKey{}, meta)
	resp, err := p.client.CreateChatCompletion(ctx, creq)
	if err != nil {
		return ChatResponse{}, p.mapErr(parent, "chat", err, meta)
	}
	if len(resp.Choices) == 0 {
		return ChatResponse{}, &ProviderError{Provider: ProviderOpenAI, Op: "chat", Kind: ErrUnavailable,
			Message: "malformed response: no choices"}
	}
	choice := resp.Choices[0]
	for _, c := range resp.Choices {
		if c.Index == 0 {
			choice = c
			break
		}
	}
	out := ChatResponse{
		Content:      choice.Message.Content,
		FinishReason: string(choice.FinishReason),
		Usage:        Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens},
	}
	for i, tc := range choice.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{
			ID:        orDefault(tc.ID, fmt.Sprintf("call_%d", i)),
			Name:      tc.Function.Name,
			Arguments: orDefault(tc.Function.Arguments, "{}"),
		})
	}
	return out, nil
}

// errStreamIdle is the cause of a stream's context when it stayed silent for Config.Timeout.
// It matches context.DeadlineExceeded, as the deadline of a non-streamed call does.
var errStreamIdle = fmt.Errorf("stream idle: %w", context.DeadlineExceeded)

// ChatStream runs one streaming chat completion. Content deltas are passed to fn as they arrive;
// tool calls, whose arguments arrive in fragments, are assembled by index and passed to fn once
// complete (when the choice finishes). Config.Timeout bounds the wait for the answer to start and
// then each silence between chunks, not the whole stream: a long answer that keeps coming is
// never cut. Calls go through the chat breaker.
func (p *OpenAI) ChatStream(parent context.Context, req ChatRequest, fn func(StreamEvent) error) (_ ChatResponse, err error) {
	creq, err := p.chatRequest(req)
	if err != nil {
		return ChatResponse{}, err
	}
	defer func(start time.Time) { p.metrics.observe(ProviderOpenAI, OpChatStream, start, err) }(time.Now())
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	if fn == nil {
		fn = func(StreamEvent) error { return nil }
	}
	if !p.chatBreaker.Allow() {
		return ChatResponse{}, p.errBreakerOpen("chat stream")
	}
	defer func() { settle(p.chatBreaker, err) }()

	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	idle := time.AfterFunc(p.timeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()
	meta := &respMeta{}
	ctx = context.WithValue(ctx, respMetaKey{}, meta)
	stream, err := p.client.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return ChatResponse{}, p.mapStreamErr(parent, ctx, err, meta)
	}
	defer stream.Close()

	var (
		out     ChatResponse
		content strings.Builder
		calls   = map[int]*ToolCall{} // by stream index
		order   []int
		emitted bool
	)
	flushCalls := func() error {
		if emitted {
			return nil
		}
		emitted = true
		sort.Ints(order)
		for i, idx := range order {
			tc := calls[idx]
			tc.ID = orDefault(tc.ID, fmt.Sprintf("call_%d", i))
			tc.Arguments = orDefault(tc.Arguments, "{}")
			out.ToolCalls = append(out.ToolCalls, *tc)
			ev := *tc
			if err := fn(StreamEvent{ToolCall: &ev}); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ChatResponse{}, p.mapStreamErr(parent, ctx, err, meta)
		}
		if !idle.Stop() {
			// The deadline fired while the chunk arrived: the context is cancelled.
			return ChatResponse{}, p.mapStreamErr(parent, ctx, context.Cause(ctx), meta)
		}
		idle.Reset(p.timeout)
		if chunk.Usage != nil {
			out.Usage = Usage{PromptTokens: chunk.Usage.PromptTokens, CompletionTokens: chunk.Usage.CompletionTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				content.WriteString(d)
				if err := fn(StreamEvent{ContentDelta: d}); err != nil {
					return ChatResponse{}, fmt.Errorf("openai chat stream: %w", err)
				}
			}
			for pos, frag := range ch.Delta.ToolCalls {
				idx := pos
				if frag.Index != nil {
					idx = *frag.Index
				}
				tc, ok := calls[idx]
				if !ok {
					tc = &ToolCall{}
					calls[idx] = tc
					order = append(order, idx)
				}
				if frag.ID != "" {
					tc.ID = frag.ID
				}
				if frag.Function.Name != "" {
					tc.Name = frag.Function.Name
				}
				tc.Arguments += frag.Function.Arguments
			}
			if ch.FinishReason != "" && ch.FinishReason != openai.FinishReasonNull {
				out.FinishReason = string(ch.FinishReason)
				if err := flushCalls(); err != nil {
					return ChatResponse{}, fmt.Errorf("openai chat stream: %w", err)
				}
			}
		}
	}
	if err := flushCalls(); err != nil {
		return ChatResponse{}, fmt.Errorf("openai chat stream: %w", err)
	}
	out.Content = content.String()
	return out, nil
}

// mapStreamErr is mapErr for a stream, whose silence beyond Config.Timeout is said as such.
func (p *OpenAI) mapStreamErr(parent, ctx context.Context, err error, meta *respMeta) error {
	if parent.Err() == nil && errors.Is(context.Cause(ctx), errStreamIdle) {
		return &ProviderError{Provider: ProviderOpenAI, Op: "chat stream", Kind: ErrUnavailable,
			Message: fmt.Sprintf("the stream was silent for %s", p.timeout), cause: errStreamIdle}
	}
	return p.mapErr(parent, "chat stream", err, meta)
}

// reasoningModel reports whether model belongs to a family that takes max_completion_tokens and
// rejects a custom temperature.
func reasoningModel(model string) bool {
	for _, prefix := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, prefix) {
			return true
		}
	}
	return false
}

func (p *OpenAI) chatRequest(req ChatRequest) (openai.ChatCompletionRequest, error) {
	if err := validateChatRequest(req); err != nil {
		return openai.ChatCompletionRequest{}, err
	}
	creq := openai.ChatCompletionRequest{Model: p.chatModel}
	if reasoningModel(p.chatModel) {
		creq.MaxCompletionTokens = req.MaxTokens
	} else {
		creq.MaxTokens = req.MaxTokens
		creq.Temperature = req.Temperature
	}
	mentionsJSON := false
	for _, m := range req.Messages {
		if strings.Contains(strings.ToLower(m.Content), "json") {
			mentionsJSON = true
		}
		cm := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		if len(m.ImageURLs) > 0 && m.Role == RoleUser {
			cm.Content = "" // go-openai refuses Content beside MultiContent
			cm.MultiContent = []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: m.Content}}
			for _, u := range m.ImageURLs {
				cm.MultiContent = append(cm.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
					ImageURL: &openai.ChatMessageImageURL{URL: u, Detail: openai.ImageURLDetailLow}})
			}
		}
		if m.Role != RoleTool { // the tool role takes no name
			cm.Name = m.Name
		} else if m.Content == "" {
			cm.Content = "(no output)" // go-openai omits empty content, which the API rejects for tool messages
		}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID:       tc.ID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: orDefault(tc.Arguments, "{}")},
			})
		}
		creq.Messages = append(creq.Messages, cm)
	}
	if req.JSONMode {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		if !mentionsJSON {
			// OpenAI rejects json_object mode unless a message mentions JSON.
			creq.Messages = append([]openai.ChatCompletionMessage{{
				Role:    openai.ChatMessageRoleSystem,
				Content: "Respond with a single valid JSON object.",
			}}, creq.Messages...)
		}
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		creq.Tools = append(creq.Tools, openai.Tool{
			Type:     openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	return creq, nil
}

// respMetaKey carries a *respMeta in a request context so metaDoer can record the response status
// and headers (Retry-After) that go-openai's error types do not keep.
type respMetaKey struct{}

type respMeta struct {
	status int
	header http.Header
}

type metaDoer struct{ client *http.Client }

func (d metaDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.client.Do(req)
	if resp != nil {
		if m, ok := req.Context().Value(respMetaKey{}).(*respMeta); ok {
			m.status = resp.StatusCode
			m.header = resp.Header.Clone()
		}
	}
	return resp, err
}

// clientSideErrors are go-openai's own request validation errors.
var clientSideErrors = []error{
	openai.ErrChatCompletionInvalidModel,
	openai.ErrChatCompletionStreamNotSupported,
	openai.ErrContentFieldsMisused,
	openai.ErrReasoningModelMaxTokensDeprecated,
	openai.ErrReasoningModelLimitationsLogprobs,
	openai.ErrReasoningModelLimitationsOther,
	openai.ErrReasoningEffortUnsupported,
	openai.ErrReasoningToolsRequireResponses,
	openai.ErrReasoningSamplingUnsupported,
}

// mapErr turns a go-openai or transport error into a ProviderError of the right kind. parent is
// the caller's context: when it is done, its error is returned as is (the caller gave up; the
// provider is not at fault).
func (p *OpenAI) mapErr(parent context.Context, op string, err error, meta *respMeta) error {
	pe := &ProviderError{Provider: ProviderOpenAI, Op: op, cause: err}
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
	)
	switch {
	case errors.As(err, &reqErr):
		pe.StatusCode = reqErr.HTTPStatusCode
		if errors.As(reqErr.Err, &apiErr) && apiErr.Message != "" {
			pe.Message = apiErr.Message
		} else {
			pe.Message = strings.TrimSpace(string(reqErr.Body))
		}
		if len(pe.Message) > 512 {
			pe.Message = pe.Message[:512] + "..."
		}
		if pe.Message == "" {
			pe.Message = http.StatusText(reqErr.HTTPStatusCode)
		}
	case errors.As(err, &apiErr):
		pe.StatusCode = apiErr.HTTPStatusCode
		pe.Message = apiErr.Message
		if pe.StatusCode == 0 { // an error event inside a stream: classify by type/code
			pe.Kind = kindFromErrorType(apiErr.Type, fmt.Sprint(apiErr.Code))
		}
	default:
		for _, e := range clientSideErrors {
			if errors.Is(err, e) {
				pe.Kind = ErrInvalidRequest
				pe.Message = err.Error()
			}
		}
		if pe.Kind == nil {
			if perr := parent.Err(); perr != nil {
				return fmt.Errorf("openai %s: %w", op, perr)
			}
			pe.Kind = ErrUnavailable
			if errors.Is(err, context.DeadlineExceeded) {
				pe.Message = fmt.Sprintf("no answer within %s", p.timeout)
			} else {
				pe.Message = err.Error()
			}
		}
	}
	if pe.Kind == nil {
		pe.Kind = kindFromStatus(pe.StatusCode)
	}
	if pe.Kind == ErrRateLimited && meta != nil && meta.header != nil {
		pe.RetryAfter = retryAfter(meta.header)
	}
	if p.apiKey != "" {
		pe.Message = strings.ReplaceAll(pe.Message, p.apiKey, "[redacted]")
	}
	return pe
}

func kindFromStatus(status int) error {
	switch {
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrUnauthorized
	case status == http.StatusRequestTimeout:
		return ErrUnavailable
	case status >= 400 && status < 500:
		return ErrInvalidRequest
	default: // 5xx and anything unexpected
		return ErrUnavailable
	}
}

func kindFromErrorType(typ, code string) error {
	s := strings.ToLower(typ + " " + code)
	switch {
	case strings.Contains(s, "rate_limit") || strings.Contains(s, "quota"):
		return ErrRateLimited
	case strings.Contains(s, "authentication") || strings.Contains(s, "permission") || strings.Contains(s, "api_key"):
		return ErrUnauthorized
	case strings.Contains(s, "invalid_request") || strings.Contains(s, "not_found") || strings.Contains(s, "context_length"):
		return ErrInvalidRequest
	default:
		return ErrUnavailable
	}
}

// retryAfter reads Retry-After (delta-seconds) or OpenAI's retry-after-ms header.
func retryAfter(h http.Header) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			return time.Duration(s * float64(time.Second))
		}
	}
	return 0
}
